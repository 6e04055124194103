import type { KubeObject } from '../kube/types.js';

/**
 * The objects our own writes returned, laid over the watch cache until the cache catches up: a
 * reconcile that runs right after a write must not judge from the copy the write replaced. (The
 * cache shows our write once the watch delivers its echo, which can lag: a busy API server, a
 * loaded process, or watches read on a cadence, --watch-read-interval.) Judging from the older copy
 * can undo decisions; seen: an admitted NoExecute taint dropped because the cache still showed the
 * node Ready, and its zone's rate-limit token spent for nothing.
 *
 * Like client-go's integer resource-version mutation cache: resourceVersions of one object are
 * compared as integers (etcd's revisions); one that is not a whole number never overrides the
 * cache. An entry goes when the cache holds the same or a newer version, when the object is gone
 * from the cache, or after `ttlMs`.
 */
export class RecentWrites<T extends KubeObject> {
  private readonly written = new Map<string, { object: T; rv: bigint; at: number }>();

  constructor(private readonly ttlMs: number) {}

  get size(): number {
    return this.written.size;
  }

  /** Remembers what a write returned (the API server's copy after it). */
  remember(name: string, object: T | undefined, now: number): void {
    const rv = revision(object);
    if (!object || rv === undefined) return;
    const had = this.written.get(name);
    if (had && had.rv >= rv) return;
    this.written.set(name, { object, rv, at: now });
  }

  /** The newer of the cached copy and the one our last write returned. */
  current(name: string, cached: T | undefined, now: number): T | undefined {
    const w = this.written.get(name);
    if (!w) return cached;
    const rv = revision(cached);
    if (!cached || rv === undefined || rv >= w.rv || now - w.at > this.ttlMs) {
      this.written.delete(name);
      return cached;
    }
    return w.object;
  }

  forget(name: string): void {
    this.written.delete(name);
  }
}

function revision(o: KubeObject | undefined): bigint | undefined {
  const rv = o?.metadata.resourceVersion;
  return rv && /^\d{1,30}$/.test(rv) ? BigInt(rv) : undefined;
}
