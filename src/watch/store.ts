import type { KubeObject } from '../kube/types.js';
import { AsyncSubject, type Observable } from '../rx/index.js';
import { type KnownObjects, objectKey, type WatchEvent } from './types.js';

/** Index values of an object (e.g. a pod's spec.nodeName); undefined or [] when none. */
export type IndexFunc<T> = (obj: T) => string | readonly string[] | undefined;

export interface StoreOptions<T> {
  /** Default `namespace/name` (or `name`); must match the watcher's keyOf. */
  keyOf?: (obj: T) => string;
  /** Secondary indexes by name, e.g. `{ nodeName: (p) => p.spec?.nodeName }`. */
  indexers?: Record<string, IndexFunc<T>>;
}

interface Index<T> {
  fn: IndexFunc<T>;
  /** index value -> (key -> object) */
  byValue: Map<string, Map<string, T>>;
}

const EMPTY: readonly never[] = Object.freeze([]);

/**
 * The cache fed by a watch stream (a reflector's store): O(1) lookups by key, optional secondary
 * indexes, and a `synced` gate that opens at the first InitDone.
 *
 * Events are applied in place: a relist's InitApply overwrites, the watcher's Delete events for
 * vanished objects remove them, so after InitDone the store equals the list. Readers between pages
 * of a relist see each object either at its old or at its new version, never a mix within one.
 */
export class Store<T extends KubeObject> implements KnownObjects<T> {
  readonly keyOf: (obj: T) => string;
  private readonly items = new Map<string, T>();
  private readonly indexes = new Map<string, Index<T>>();
  private readonly indexList: Index<T>[] = [];
  private syncedFlag = false;
  private readonly syncedSubject = new AsyncSubject<true>();
  private syncedPromise: Promise<void> | undefined;

  /** Emits `true` once, at the first InitDone, then completes (late subscribers get it too). */
  readonly synced$: Observable<true> = this.syncedSubject.asObservable();

  constructor(opts: StoreOptions<T> = {}) {
    this.keyOf = opts.keyOf ?? objectKey;
    for (const [name, fn] of Object.entries(opts.indexers ?? {})) {
      const idx: Index<T> = { fn, byValue: new Map() };
      this.indexes.set(name, idx);
      this.indexList.push(idx);
    }
  }

  get isSynced(): boolean {
    return this.syncedFlag;
  }

  /** Resolves at the first InitDone (the cache-synced gate). */
  whenSynced(): Promise<void> {
    this.syncedPromise ??= new Promise<void>((resolve) => {
      this.syncedSubject.subscribe({ complete: () => resolve() });
    });
    return this.syncedPromise;
  }

  get size(): number {
    return this.items.size;
  }

  get(key: string): T | undefined {
    return this.items.get(key);
  }

  /** Lookup by name (and namespace for namespaced kinds), with the default key function. */
  getByName(name: string, namespace?: string): T | undefined {
    return this.items.get(namespace ? `${namespace}/${name}` : name);
  }

  has(key: string): boolean {
    return this.items.has(key);
  }

  keys(): IterableIterator<string> {
    return this.items.keys();
  }

  values(): IterableIterator<T> {
    return this.items.values();
  }

  forEach(fn: (obj: T, key: string) => void): void {
    this.items.forEach(fn);
  }

  /** A new array of every object (allocates; prefer values() or get() in hot code). */
  list(): T[] {
    return [...this.items.values()];
  }

  /** Objects whose index `name` has `value`, e.g. byIndex('nodeName', 'node-1'). */
  byIndex(name: string, value: string): T[] {
    const m = this.index(name).byValue.get(value);
    return m ? [...m.values()] : [];
  }

  /** How many objects have that index value (no allocation). */
  countByIndex(name: string, value: string): number {
    return this.index(name).byValue.get(value)?.size ?? 0;
  }

  /** The distinct values of an index. */
  indexValues(name: string): string[] {
    return [...this.index(name).byValue.keys()];
  }

  private index(name: string): Index<T> {
    const idx = this.indexes.get(name);
    if (!idx) throw new Error(`store has no index named ${name}`);
    return idx;
  }

  /** The writer side: applies one watch event. */
  apply(ev: WatchEvent<T>): void {
    switch (ev.type) {
      case 'Apply':
      case 'InitApply':
        this.upsert(ev.object);
        return;
      case 'Delete':
        this.remove(ev.object);
        return;
      case 'InitDone':
        if (!this.syncedFlag) {
          this.syncedFlag = true;
          this.syncedSubject.next(true);
          this.syncedSubject.complete();
        }
        return;
      case 'Init':
        return;
    }
  }

  upsert(obj: T): void {
    const key = this.keyOf(obj);
    if (this.indexList.length > 0) {
      const old = this.items.get(key);
      for (const idx of this.indexList) this.reindex(idx, key, old, obj);
    }
    this.items.set(key, obj);
  }

  remove(obj: T): void {
    const key = this.keyOf(obj);
    const old = this.items.get(key);
    if (old === undefined) return;
    for (const idx of this.indexList) this.reindex(idx, key, old, undefined);
    this.items.delete(key);
  }

  private reindex(idx: Index<T>, key: string, old: T | undefined, next: T | undefined): void {
    const before = old === undefined ? undefined : idx.fn(old);
    const after = next === undefined ? undefined : idx.fn(next);
    // Common case: one value that did not change (a pod stays on its node) -> swap the object.
    if (typeof before === 'string' && before === after) {
      idx.byValue.get(before)?.set(key, next!);
      return;
    }
    for (const v of values(before)) {
      if (typeof after === 'string' ? after === v : after?.includes(v)) continue;
      const m = idx.byValue.get(v);
      if (m) {
        m.delete(key);
        if (m.size === 0) idx.byValue.delete(v);
      }
    }
    if (next === undefined) return;
    for (const v of values(after)) {
      let m = idx.byValue.get(v);
      if (!m) {
        m = new Map();
        idx.byValue.set(v, m);
      }
      m.set(key, next);
    }
  }
}

function values(v: string | readonly string[] | undefined): readonly string[] {
  if (v === undefined || v === '') return EMPTY;
  return typeof v === 'string' ? [v] : v;
}
