import type { KubeObject, List } from '../kube/types.js';
import { Observable, type Subscriber } from '../rx/index.js';
import type { ListRequest, WatchRequest, WatchTransport } from './types.js';

/**
 * A WatchTransport driven by the test: every list/watch call is recorded as a pending request
 * the test answers (resolve a page, open a stream and push lines, end it, break it).
 * For unit tests of anything that consumes the watch layer.
 */
export class ScriptedTransport implements WatchTransport {
  readonly lists: PendingList[] = [];
  readonly watches: PendingWatch[] = [];

  list(req: ListRequest, signal: AbortSignal): Promise<List<unknown>> {
    return new Promise((resolve, reject) => {
      this.lists.push(new PendingList(req, signal, resolve, reject));
    });
  }

  watch(req: WatchRequest, signal: AbortSignal): Promise<Observable<string>> {
    return new Promise((resolve, reject) => {
      this.watches.push(new PendingWatch(req, signal, resolve, reject));
    });
  }

  lastList(): PendingList {
    const l = this.lists.at(-1);
    if (!l) throw new Error('no list request yet');
    return l;
  }

  lastWatch(): PendingWatch {
    const w = this.watches.at(-1);
    if (!w) throw new Error('no watch request yet');
    return w;
  }
}

export class PendingList {
  readonly req: ListRequest;
  readonly signal: AbortSignal;
  private readonly res: (page: List<unknown>) => void;
  private readonly rej: (err: unknown) => void;
  constructor(
    req: ListRequest,
    signal: AbortSignal,
    resolve: (page: List<unknown>) => void,
    reject: (err: unknown) => void,
  ) {
    this.req = req;
    this.signal = signal;
    this.res = resolve;
    this.rej = reject;
  }
  resolve(page: List<unknown>): void {
    this.res(page);
  }
  reject(err: unknown): void {
    this.rej(err);
  }
}

export class PendingWatch {
  readonly req: WatchRequest;
  readonly signal: AbortSignal;
  /** True once the watcher subscribed to the body. */
  subscribed = false;
  /** True once the watcher unsubscribed from the body (connection released). */
  released = false;
  private readonly res: (body: Observable<string>) => void;
  private readonly rej: (err: unknown) => void;
  private subscriber: Subscriber<string> | undefined;
  private buffered: string[] = [];
  private endState: 'open' | 'ended' | { error: unknown } = 'open';

  constructor(
    req: WatchRequest,
    signal: AbortSignal,
    resolve: (body: Observable<string>) => void,
    reject: (err: unknown) => void,
  ) {
    this.req = req;
    this.signal = signal;
    this.res = resolve;
    this.rej = reject;
  }

  /** The server accepts the watch (response headers). */
  open(): this {
    this.res(
      new Observable<string>((sub) => {
        this.subscribed = true;
        this.subscriber = sub;
        for (const c of this.buffered) sub.next(c);
        this.buffered = [];
        if (this.endState === 'ended') sub.complete();
        else if (this.endState !== 'open') sub.error(this.endState.error);
        return () => {
          this.released = true;
          this.subscriber = undefined;
        };
      }),
    );
    return this;
  }

  /** The server refuses the watch (e.g. a KubeApiError 410 or 429). */
  reject(err: unknown): void {
    this.rej(err);
  }

  /** Raw text, split wherever the test likes. */
  chunk(text: string): this {
    if (this.subscriber) this.subscriber.next(text);
    else this.buffered.push(text);
    return this;
  }

  /** Watch events as one chunk of JSON lines. */
  send(...events: Array<{ type: string; object: unknown }>): this {
    return this.chunk(events.map((e) => `${JSON.stringify(e)}\n`).join(''));
  }

  /** Clean end of the response. */
  end(): void {
    if (this.subscriber) this.subscriber.complete();
    else this.endState = 'ended';
  }

  /** The connection breaks. */
  fail(err: unknown): void {
    if (this.subscriber) this.subscriber.error(err);
    else this.endState = { error: err };
  }
}

/** A list page. */
export function listPage<T>(items: T[], resourceVersion: string, cont?: string): List<T> {
  return { metadata: { resourceVersion, continue: cont }, items };
}

/** A minimal object of any kind. */
export function obj(name: string, resourceVersion: string, namespace?: string): KubeObject {
  return { metadata: { name, namespace, resourceVersion, uid: `uid-${name}` } };
}

export function bookmark(resourceVersion: string): { type: string; object: unknown } {
  return { type: 'BOOKMARK', object: { kind: 'Lease', metadata: { resourceVersion } } };
}
