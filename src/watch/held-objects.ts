import type { KubeObject } from '../kube/types.js';
import type { KnownObjects } from './types.js';

/**
 * The objects the consumer holds, as a relist needs them: the consumer's own collection (`known`,
 * e.g. the Store fed by the stream) or, without one, a key -> object map kept here from what the
 * stream emits. A list records the keys it returns; when it ends, the held objects it did not
 * return vanished while nobody was watching.
 */
export class HeldObjects<T extends KubeObject> {
  private readonly keyOf: (obj: T) => string;
  private readonly known: KnownObjects<T>;
  /** Our own memory of objects when no `known` collection is given. */
  private readonly own: Map<string, T> | undefined;
  /** Keys of the list in progress. */
  private listing: Set<string> | undefined;

  constructor(keyOf: (obj: T) => string, known: KnownObjects<T> | undefined) {
    this.keyOf = keyOf;
    this.own = known ? undefined : new Map();
    this.known = known ?? this.own!;
  }

  beginList(): void {
    this.listing = new Set();
  }

  /** An object of the list in progress. */
  listed(obj: T): void {
    const key = this.keyOf(obj);
    this.listing!.add(key);
    this.own?.set(key, obj);
  }

  /** Ends the list in progress: the held objects it did not return. */
  endList(): T[] {
    const listed = this.listing!;
    this.listing = undefined;
    const vanished: T[] = [];
    this.known.forEach((obj, key) => {
      if (!listed.has(key)) vanished.push(obj);
    });
    return vanished;
  }

  /** Drops the list in progress, if any (the stream stopped). */
  dropList(): void {
    this.listing = undefined;
  }

  /** An object the stream emitted as added or changed. */
  remember(obj: T): void {
    this.own?.set(this.keyOf(obj), obj);
  }

  /** An object the stream emitted as deleted. */
  forget(obj: T): void {
    this.own?.delete(this.keyOf(obj));
  }
}
