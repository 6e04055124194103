/**
 * The simulator's API server: an in-memory kube-apiserver + etcd in virtual time, serving every
 * request the controller's replicas send (through {@link SimServer.clientFor}, a KubeClient of
 * their own) and the simulated kubelets' writes. It keeps one resourceVersion sequence and a
 * history of changes (compacted after `historyMs`, so an old resume point answers 410), serves
 * list (selectors, pages), watch (resume, bookmarks, server-side timeout), get, create, update,
 * merge and strategic-merge patch, delete with preconditions, and pod evictions.
 *
 * Faults, each switched on and off by the fault schedule: the server down (refuses everyone) or
 * hung (answers nobody); its storage down (writes and quorum reads wait, or fail 500) or slow; 429s
 * with Retry-After for a share of the controllers' requests; per replica, its network path
 * refusing or hanging, its watches cut, stalled or late; per kubelet, its own path cut.
 *
 * Every write that lands is reported to `onLanded` (who, what, the object before and after) for
 * the invariant checker; nothing in here judges the controller.
 */
import { EventEmitter } from 'node:events';
import { parseDuration } from '../../src/clock/duration.js';
import {
  KubeApiError,
  KubeFencedError,
  type KubeRequest,
  type KubeResponse,
  KubeTransportError,
} from '../../src/kube/client.js';
import { RateLimiterFullError, type RequestRateLimiter } from '../../src/kube/rate-limit.js';
import type { Prng } from './prng.js';

// ------------------------------------------------------------------------------------------------
// Objects and routes

export interface Obj {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    creationTimestamp?: string;
    deletionTimestamp?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
    [k: string]: unknown;
  };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
  [k: string]: unknown;
}

interface Route {
  /** The collection: 'nodes', 'leases/<ns>', 'pods/<ns>', 'events/<ns>', 'volumeattachments'; 'pods/*' = every namespace. */
  coll: string;
  kind: string;
  apiVersion: string;
  name?: string;
  sub?: 'status' | 'eviction';
}

const NS = '([a-z0-9.-]+)';
const NAME = '([^/]+)';
const ROUTES: Array<{ re: RegExp; make: (m: RegExpExecArray) => Route }> = [
  {
    re: new RegExp(`^/api/v1/nodes(?:/${NAME}(?:/(status))?)?$`),
    make: (m) => ({ coll: 'nodes', kind: 'Node', apiVersion: 'v1', name: dec(m[1]), sub: m[2] as 'status' }),
  },
  { re: /^\/api\/v1\/pods$/, make: () => ({ coll: 'pods/*', kind: 'Pod', apiVersion: 'v1' }) },
  {
    re: new RegExp(`^/api/v1/namespaces/${NS}/pods(?:/${NAME}(?:/(status|eviction))?)?$`),
    make: (m) => ({
      coll: `pods/${m[1]}`,
      kind: 'Pod',
      apiVersion: 'v1',
      name: dec(m[2]),
      sub: m[3] as 'status' | 'eviction',
    }),
  },
  {
    re: new RegExp(`^/api/v1/namespaces/${NS}/events(?:/${NAME})?$`),
    make: (m) => ({ coll: `events/${m[1]}`, kind: 'Event', apiVersion: 'v1', name: dec(m[2]) }),
  },
  {
    re: new RegExp(`^/apis/coordination\\.k8s\\.io/v1/namespaces/${NS}/leases(?:/${NAME})?$`),
    make: (m) => ({
      coll: `leases/${m[1]}`,
      kind: 'Lease',
      apiVersion: 'coordination.k8s.io/v1',
      name: dec(m[2]),
    }),
  },
  {
    re: /^\/apis\/storage\.k8s\.io\/v1\/volumeattachments$/,
    make: () => ({ coll: 'volumeattachments', kind: 'VolumeAttachment', apiVersion: 'storage.k8s.io/v1' }),
  },
];

function dec(s: string | undefined): string | undefined {
  return s === undefined ? undefined : decodeURIComponent(s);
}

function routeOf(path: string): Route | undefined {
  for (const r of ROUTES) {
    const m = r.re.exec(path);
    if (m) return r.make(m);
  }
  return undefined;
}

export function clone<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

/** A `k=v,k2!=v2` selector over the values `get` reads from an object. */
function selector(raw: unknown, get: (o: Obj, key: string) => unknown): ((o: Obj) => boolean) | undefined {
  if (typeof raw !== 'string' || raw === '') return undefined;
  const terms = raw.split(',').map((t) => {
    const neg = t.includes('!=');
    const [k, v] = t.split(/!=|==|=/) as [string, string | undefined];
    return { k: k.trim(), v: (v ?? '').trim(), neg };
  });
  return (o) => terms.every((t) => (String(get(o, t.k) ?? '') === t.v) !== t.neg);
}

function fieldOf(o: Obj, key: string): unknown {
  let v: unknown = o;
  for (const part of key.split('.')) v = (v as Record<string, unknown> | undefined)?.[part];
  return v;
}

function matcher(query: KubeRequest['query']): (o: Obj) => boolean {
  const f = selector(query?.fieldSelector, fieldOf);
  const l = selector(query?.labelSelector, (o, k) => o.metadata.labels?.[k]);
  return (o) => (!f || f(o)) && (!l || l(o));
}

export function apiError(status: number, reason: string, what: string, retryAfterS?: number): KubeApiError {
  const headers = retryAfterS === undefined ? {} : { 'retry-after': String(retryAfterS) };
  return new KubeApiError(status, { kind: 'Status', status: 'Failure', reason, code: status }, headers, what);
}

// ------------------------------------------------------------------------------------------------
// Patches

/** RFC 7386 merge patch: objects merged recursively, null deletes, anything else replaces. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> =
    target && typeof target === 'object' && !Array.isArray(target) ? { ...(target as object) } : {};
  for (const [k, v] of Object.entries(patch as Record<string, unknown>)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/**
 * Strategic merge patch for the fields this project writes: `conditions` lists merge by `type`
 * ({type, $patch: delete} removes one), every other list (spec.taints has no merge key) replaces.
 */
function strategicPatch(target: unknown, patch: unknown, key?: string): unknown {
  if (Array.isArray(patch) && key === 'conditions' && Array.isArray(target)) {
    const out = [...(target as Array<Record<string, unknown>>)];
    for (const c of patch as Array<Record<string, unknown>>) {
      const i = out.findIndex((x) => x.type === c.type);
      if (c.$patch === 'delete') {
        if (i >= 0) out.splice(i, 1);
      } else if (i >= 0) out[i] = strategicPatch(out[i], c) as Record<string, unknown>;
      else out.push(c);
    }
    return out;
  }
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> =
    target && typeof target === 'object' && !Array.isArray(target) ? { ...(target as object) } : {};
  for (const [k, v] of Object.entries(patch as Record<string, unknown>)) {
    if (k === '$patch') continue;
    if (v === null) delete out[k];
    else out[k] = strategicPatch(out[k], v, k);
  }
  return out;
}

// ------------------------------------------------------------------------------------------------
// Watch responses

/**
 * What a watch response looks like to src/watch/transport.ts (responseChunks). Like a paused
 * IncomingMessage, it holds what it is given (data, its end, a broken connection) until someone
 * listens for data: nothing is lost between the response and the subscription.
 */
export class SimResponse extends EventEmitter {
  statusCode = 200;
  headers: Record<string, string> = {};
  destroyed = false;
  readonly socket = undefined;
  private held: Array<[string, unknown?]> | undefined = [];
  constructor(private readonly onDestroy: () => void) {
    super();
    this.on('newListener', (event: string) => {
      if (event !== 'data' || !this.held) return;
      const held = this.held;
      this.held = undefined;
      queueMicrotask(() => {
        for (const [e, v] of held) this.emit(e, v);
      });
    });
  }
  /** Emits now if someone listens for data, else once someone does. */
  deliver(event: 'data' | 'end' | 'error' | 'close', value?: unknown): void {
    if (this.held) this.held.push([event, value]);
    else this.emit(event, value);
  }
  setEncoding(): this {
    return this;
  }
  destroy(): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    this.onDestroy();
    queueMicrotask(() => this.emit('close'));
    return this;
  }
}

interface Stream {
  client: string;
  coll: string;
  match: (o: Obj) => boolean;
  res: SimResponse;
  /** Lines not yet delivered, with the time each may be (in order), and the object each carries. */
  queue: Array<{ due: number; line: string; obj?: Obj | undefined; coll?: string | undefined }>;
  flushTimer: ReturnType<typeof setTimeout> | undefined;
  flushQueued: boolean;
  timers: Array<ReturnType<typeof setTimeout> | ReturnType<typeof setInterval>>;
  lastRv: number;
}

interface Change {
  rv: number;
  at: number;
  coll: string;
  obj: Obj;
  line: string;
}

// ------------------------------------------------------------------------------------------------
// Faults and reports

export type PathState = 'up' | 'refuse' | 'hang';

/** Why a request could not be served, or how late. */
export interface ServerFaults {
  /** Refuses every connection, kubelets' included; open watches break. */
  down: boolean;
  /** Answers nobody (kubelets included); open watches deliver nothing until it recovers. */
  hung: boolean;
  /** Its storage: writes and quorum reads wait ('wait') or fail 500 at once ('error'). */
  storage: 'up' | 'wait' | 'error';
  /** Extra latency of every write and quorum read (ms). */
  slowMs: number;
  /** Share of the controllers' requests answered 429 (Retry-After `retryAfterS`). */
  throttleShare: number;
  retryAfterS: number;
}

export interface Landed {
  at: number;
  /** When the request left its client (its last look before sending came before this). */
  sentAt: number;
  /** The replica's identity, `kubelet/<node>`, or `sim` (the scenario itself). */
  by: string;
  method: KubeRequest['method'];
  coll: string;
  name: string;
  sub?: string | undefined;
  before: Obj | undefined;
  after: Obj | undefined;
  body: unknown;
}

interface Ctx {
  what: string;
  /** When the request left the client (after its rate-limiter wait). */
  sentAt: number;
  /** The client gives up then (its timeoutMs). */
  deadlineAt: number;
  signal: AbortSignal | undefined;
}

let dateAt = Number.NaN;
let dateHeader = '';
/** The Date header (one string per second of virtual time). */
const RESPONSE_HEADERS = (wall: number) => {
  const sec = Math.floor(wall / 1000);
  if (sec !== dateAt) {
    dateAt = sec;
    dateHeader = new Date(sec * 1000).toUTCString();
  }
  return { date: dateHeader };
};

export interface SimClient {
  request<T = unknown>(req: KubeRequest): Promise<T>;
  raw<T = unknown>(req: KubeRequest): Promise<KubeResponse<T>>;
  stream(req: Omit<KubeRequest, 'method' | 'body'> & { connectTimeoutMs?: number }): Promise<SimResponse>;
  close(): void;
}

export class SimServer {
  private readonly colls = new Map<string, Map<string, Obj>>();
  private readonly history: Change[] = [];
  private historyStart = 0;
  private compactedRv = 0;
  private rv = 1;
  private readonly streams = new Set<Stream>();
  readonly faults: ServerFaults = {
    down: false,
    hung: false,
    storage: 'up',
    slowMs: 0,
    throttleShare: 0,
    retryAfterS: 1,
  };
  private readonly paths = new Map<string, PathState>();
  /** Per replica: collections whose watches deliver nothing (held) while set. */
  private readonly stalls = new Map<string, Set<string>>();
  /** Per replica and collection: how late watch events arrive (ms). */
  private readonly lags = new Map<string, number>();
  /** Kubelets whose own path to the server is cut. */
  readonly cutKubelets = new Set<string>();
  /** Waiters for a fault to clear: called on every change of faults or paths. */
  private waiters: Array<() => void> = [];
  private readonly deadClients = new Set<string>();
  onLanded: ((w: Landed) => void) | undefined;
  /** Every object a replica was given (a watch event, a list item, a GET's answer), as it is given. */
  onDelivered: ((client: string, coll: string, obj: Obj, via: 'watch' | 'list' | 'get') => void) | undefined;
  /** A replica's watch of `coll`: opened, delivered something (events, bookmarks), or ended. */
  onContact:
    | ((client: string, coll: string, what: 'open' | 'list' | 'data' | 'end' | 'error') => void)
    | undefined;
  /** Every request a replica sends (it may fail or never land), as it leaves the client. */
  onAttempt: ((client: string, req: KubeRequest, sentAt: number) => void) | undefined;
  /** Requests answered, for the run's figures. */
  requests = 0;
  /**
   * A trap (the fault injector's): asked about every request of a replica as the server takes it,
   * answers the error to send instead (one request failing at a chosen moment), or nothing.
   */
  trap: ((client: string, req: KubeRequest) => KubeApiError | undefined) | undefined;

  constructor(
    private readonly clock: { now(): number; wall(): number },
    private readonly rng: Prng,
    private readonly o: { historyMs: number; bookmarkMs: number },
  ) {}

  // ---------------------------------------------------------------- store

  get(coll: string, name: string): Obj | undefined {
    return this.colls.get(coll)?.get(name);
  }

  list(coll: string): Obj[] {
    if (coll === 'pods/*') {
      const all: Obj[] = [];
      for (const [k, m] of this.colls) if (k.startsWith('pods/')) all.push(...m.values());
      return all;
    }
    return [...(this.colls.get(coll)?.values() ?? [])];
  }

  get resourceVersion(): number {
    return this.rv;
  }

  /** Stores `obj` (a new version, or a deletion), records the change and tells the watches. */
  private store(coll: string, type: 'ADDED' | 'MODIFIED' | 'DELETED', obj: Obj): Obj {
    const rv = ++this.rv;
    const stored: Obj = { ...obj, metadata: { ...obj.metadata, resourceVersion: String(rv) } };
    let m = this.colls.get(coll);
    if (!m) {
      m = new Map();
      this.colls.set(coll, m);
    }
    if (type === 'DELETED') m.delete(stored.metadata.name);
    else m.set(stored.metadata.name, stored);
    const line = `${JSON.stringify({ type, object: stored })}\n`;
    const change: Change = { rv, at: this.clock.now(), coll, obj: stored, line };
    this.history.push(change);
    this.compact();
    for (const s of this.streams) {
      if (s.coll === coll || (s.coll === 'pods/*' && coll.startsWith('pods/'))) {
        if (s.match(stored)) this.enqueue(s, line, rv, stored, coll);
      }
    }
    return stored;
  }

  private compact(): void {
    const horizon = this.clock.now() - this.o.historyMs;
    while (this.historyStart < this.history.length && this.history[this.historyStart]!.at < horizon) {
      this.compactedRv = this.history[this.historyStart]!.rv;
      this.historyStart++;
    }
    if (this.historyStart > 4096) {
      this.history.splice(0, this.historyStart);
      this.historyStart = 0;
    }
  }

  /** Forgets all history (an API server restart with etcd compacted): every resume answers 410. */
  compactAll(): void {
    this.compactedRv = this.rv;
    this.history.splice(0);
    this.historyStart = 0;
  }

  /** A write by the scenario itself (not through any client): creating nodes, pods, annotations. */
  put(coll: string, obj: Obj): Obj {
    const before = this.get(coll, obj.metadata.name);
    const after = this.store(coll, before ? 'MODIFIED' : 'ADDED', obj);
    this.report(
      this.clock.now(),
      'sim',
      before ? 'PUT' : 'POST',
      coll,
      obj.metadata.name,
      undefined,
      before,
      after,
      obj,
    );
    return after;
  }

  remove(coll: string, name: string): void {
    const before = this.get(coll, name);
    if (!before) return;
    this.store(coll, 'DELETED', before);
    this.report(this.clock.now(), 'sim', 'DELETE', coll, name, undefined, before, undefined, undefined);
  }

  private report(
    sentAt: number,
    by: string,
    method: KubeRequest['method'],
    coll: string,
    name: string,
    sub: string | undefined,
    before: Obj | undefined,
    after: Obj | undefined,
    body: unknown,
  ): void {
    this.onLanded?.({ at: this.clock.now(), sentAt, by, method, coll, name, sub, before, after, body });
  }

  // ---------------------------------------------------------------- faults

  setFaults(change: Partial<ServerFaults>): void {
    const wasDown = this.faults.down;
    Object.assign(this.faults, change);
    if (this.faults.down && !wasDown) {
      for (const s of [...this.streams]) this.breakStream(s, 'ECONNREFUSED');
    }
    this.changed();
  }

  setPath(client: string, state: PathState): void {
    this.paths.set(client, state);
    if (state === 'refuse') {
      for (const s of [...this.streams]) if (s.client === client) this.breakStream(s, 'ECONNRESET');
    }
    this.changed();
  }

  /** Every open watch of `client` breaks (a proxy or load balancer reset the connections). */
  cutWatches(client: string): void {
    for (const s of [...this.streams]) if (s.client === client) this.breakStream(s, 'ECONNRESET');
  }

  /** Every open watch breaks (an API server restart). */
  cutAllWatches(): void {
    for (const s of [...this.streams]) this.breakStream(s, 'ECONNRESET');
  }

  stallWatch(client: string, coll: string, on: boolean): void {
    let set = this.stalls.get(client);
    if (!set) {
      set = new Set();
      this.stalls.set(client, set);
    }
    if (on) set.add(coll);
    else set.delete(coll);
    this.changed();
  }

  lagWatch(client: string, coll: string, ms: number): void {
    if (ms > 0) this.lags.set(`${client} ${coll}`, ms);
    else this.lags.delete(`${client} ${coll}`);
  }

  /** The replica is gone (its process crashed): nothing it sends lands, its watches end. */
  kill(client: string): void {
    this.deadClients.add(client);
    for (const s of [...this.streams]) if (s.client === client) this.breakStream(s, 'ECONNRESET');
  }

  /** A new process with the same identity (a restarted pod). */
  revive(client: string): void {
    this.deadClients.delete(client);
  }

  private changed(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
    for (const s of this.streams) this.flush(s);
  }

  private pathOf(client: string): PathState {
    if (this.faults.down) return 'refuse';
    if (this.faults.hung) return 'hang';
    return this.paths.get(client) ?? 'up';
  }

  /** Waits until `client` may reach the server (throws as the network would). */
  private async reach(client: string, ctx: Ctx): Promise<void> {
    for (;;) {
      this.check(ctx);
      const p = this.pathOf(client);
      if (p === 'up') return;
      if (p === 'refuse') throw new KubeTransportError(`${ctx.what}: connection refused`, 'ECONNREFUSED');
      await this.block(ctx);
    }
  }

  /** Waits until the storage answers (or throws 500, or 504 at the server's own deadline), then its latency. */
  private async storage(ctx: Ctx, serverDeadline: number | undefined): Promise<void> {
    for (;;) {
      this.check(ctx);
      if (this.faults.storage === 'up') break;
      if (this.faults.storage === 'error')
        throw apiError(500, 'InternalError', `${ctx.what}: etcdserver: request timed out`);
      if (serverDeadline !== undefined && this.clock.now() >= serverDeadline) {
        throw apiError(
          504,
          'Timeout',
          `${ctx.what}: the server was unable to return a response in the time allotted`,
        );
      }
      await this.block(ctx, serverDeadline);
    }
    if (this.faults.slowMs > 0) {
      await sleep(this.faults.slowMs);
      this.check(ctx);
    }
  }

  // ---------------------------------------------------------------- clients

  /**
   * A KubeClient for one replica (its identity names its network path): its own client-side rate
   * limiter (as src/kube/client.ts: waits for a token unless the caller took one), deadlines
   * (timeoutMs; the server's own ?timeout=), 429s, and watches as streams.
   */
  clientFor(id: string, limiter: RequestRateLimiter | undefined): SimClient {
    const raw = async <T>(req: KubeRequest): Promise<KubeResponse<T>> => {
      if (this.deadClients.has(id))
        throw new KubeTransportError(`${req.method} ${req.path}: dead`, 'ECONNREFUSED');
      if (limiter && !req.throttled) {
        try {
          await limiter.acquire(req.signal, req.priority);
        } catch (err) {
          if (err instanceof RateLimiterFullError) throw err;
          throw new KubeTransportError(`${req.method} ${req.path}: aborted`, 'ABORTED');
        }
      }
      // As the real client: the caller's fence is asked right before the request leaves.
      const refused = req.fence?.();
      if (refused !== undefined) throw new KubeFencedError(`${req.method} ${req.path}`, refused);
      req.onSend?.();
      this.onAttempt?.(id, req, this.clock.now());
      return this.serve<T>(id, req, this.ctx(req, req.timeoutMs ?? 30_000));
    };
    return {
      raw,
      request: async <T>(req: KubeRequest): Promise<T> => {
        const res = await raw<T>(req);
        if (res.status < 200 || res.status >= 300) {
          throw new KubeApiError(res.status, res.body, res.headers as never, `${req.method} ${req.path}`);
        }
        return res.body;
      },
      stream: (req) => {
        if (this.deadClients.has(id))
          return Promise.reject(new KubeTransportError('watch: dead', 'ECONNREFUSED'));
        const full = { ...req, method: 'GET' as const };
        return this.openWatch(id, full, this.ctx(full, req.connectTimeoutMs ?? 30_000));
      },
      close: () => undefined,
    };
  }

  private ctx(req: KubeRequest, timeoutMs: number): Ctx {
    const now = this.clock.now();
    return {
      what: `${req.method} ${req.path}`,
      sentAt: now,
      deadlineAt: now + timeoutMs,
      signal: req.signal,
    };
  }

  /** Throws as the client would once it gave up (its deadline passed, or it aborted). */
  private check(ctx: Ctx): void {
    if (ctx.signal?.aborted) throw new KubeTransportError(`${ctx.what}: aborted`, 'ABORTED');
    if (this.clock.now() >= ctx.deadlineAt) throw new KubeTransportError(`${ctx.what}: timed out`, 'TIMEOUT');
  }

  /**
   * Waits for the next change of faults, or until `until` (resolves), or until the client gives up
   * (throws). Only a request that must wait arms a timer.
   */
  private async block(ctx: Ctx, until = Number.POSITIVE_INFINITY): Promise<void> {
    const end = Math.min(until, ctx.deadlineAt);
    let timer: ReturnType<typeof setTimeout> | undefined;
    let onAbort: (() => void) | undefined;
    try {
      await new Promise<void>((resolve, reject) => {
        this.waiters.push(resolve);
        timer = setTimeout(resolve, Math.max(0, end - this.clock.now()));
        onAbort = () => reject(new KubeTransportError(`${ctx.what}: aborted`, 'ABORTED'));
        ctx.signal?.addEventListener('abort', onAbort, { once: true });
      });
    } finally {
      clearTimeout(timer);
      if (onAbort) ctx.signal?.removeEventListener('abort', onAbort);
    }
    this.check(ctx);
  }

  /** Latency timers by the time they end: requests that end in the same millisecond share one. */
  private readonly latencyAt = new Map<number, Array<() => void>>();

  /** A little network latency (1-3 ms), different for each request. */
  private latency(): Promise<void> {
    const at = this.clock.now() + 1 + Math.floor(this.rng.next() * 3);
    return new Promise((resolve) => {
      const waiting = this.latencyAt.get(at);
      if (waiting) {
        waiting.push(resolve);
        return;
      }
      this.latencyAt.set(at, [resolve]);
      setTimeout(() => {
        const all = this.latencyAt.get(at) ?? [];
        this.latencyAt.delete(at);
        for (const r of all) r();
      }, at - this.clock.now());
    });
  }

  private async serve<T>(id: string, req: KubeRequest, ctx: Ctx): Promise<KubeResponse<T>> {
    await this.latency();
    this.check(ctx);
    await this.reach(id, ctx);
    this.requests++;
    if (this.faults.throttleShare > 0 && this.rng.chance(this.faults.throttleShare)) {
      return this.answer(apiError(429, 'TooManyRequests', ctx.what, this.faults.retryAfterS));
    }
    const trapped = this.trap?.(id, req);
    if (trapped) return this.answer(trapped);
    const route = routeOf(req.path);
    if (!route) return this.answer(apiError(404, 'NotFound', ctx.what));
    const quorum = !(
      req.method === 'GET' &&
      (req.query?.resourceVersion === '0' || req.query?.resourceVersionMatch)
    );
    const serverTimeout =
      typeof req.query?.timeout === 'string' ? parseDuration(req.query.timeout) : undefined;
    try {
      if (quorum)
        await this.storage(ctx, serverTimeout === undefined ? undefined : this.clock.now() + serverTimeout);
    } catch (err) {
      if (err instanceof KubeApiError) return this.answer(err);
      throw err;
    }
    // The request is served now (it may land), unless the caller gave up meanwhile.
    this.check(ctx);
    let body: unknown;
    try {
      body = this.apply(id, req, route, ctx);
    } catch (err) {
      if (err instanceof KubeApiError) return this.answer(err);
      throw err;
    }
    // A connection the server's down or a path's refuse broke after the write: the write stays.
    if (this.pathOf(id) === 'refuse')
      throw new KubeTransportError(`${ctx.what}: connection reset`, 'ECONNRESET');
    return { status: 200, body: body as T, headers: RESPONSE_HEADERS(this.clock.wall()) } as KubeResponse<T>;
  }

  private answer<T>(err: KubeApiError): KubeResponse<T> {
    const headers: Record<string, string> = { ...RESPONSE_HEADERS(this.clock.wall()) };
    if (err.retryAfterSeconds !== undefined) headers['retry-after'] = String(err.retryAfterSeconds);
    const body = {
      kind: 'Status',
      status: 'Failure',
      reason: err.reason,
      code: err.status,
      message: err.message,
    };
    return { status: err.status, body: body as T, headers } as KubeResponse<T>;
  }

  // ---------------------------------------------------------------- request handling

  private apply(by: string, req: KubeRequest, r: Route, ctx: Ctx): unknown {
    const { method } = req;
    const { what, sentAt } = ctx;
    if (r.name === undefined) {
      if (method === 'GET') return this.listResponse(by, r, req.query);
      if (method === 'POST') return this.create(sentAt, by, r, req.body as Obj, what);
      throw apiError(405, 'MethodNotAllowed', what);
    }
    const current = this.get(r.coll, r.name);
    if (r.sub === 'eviction') {
      if (method !== 'POST') throw apiError(405, 'MethodNotAllowed', what);
      return this.evict(sentAt, by, r, current, req.body, what);
    }
    if (method === 'POST' && r.coll.startsWith('events/'))
      return this.create(sentAt, by, r, req.body as Obj, what);
    if (!current) throw apiError(404, 'NotFound', what);
    if (method === 'GET') {
      this.onDelivered?.(by, r.coll, current, 'get');
      return { kind: r.kind, apiVersion: r.apiVersion, ...clone(current) };
    }
    if (method === 'DELETE') {
      const pre = (req.body as { preconditions?: { resourceVersion?: string; uid?: string } } | undefined)
        ?.preconditions;
      if (pre?.resourceVersion !== undefined && pre.resourceVersion !== current.metadata.resourceVersion)
        throw apiError(409, 'Conflict', what);
      if (pre?.uid !== undefined && pre.uid !== current.metadata.uid) throw apiError(409, 'Conflict', what);
      this.store(r.coll, 'DELETED', current);
      this.report(sentAt, by, 'DELETE', r.coll, r.name, r.sub, current, undefined, req.body);
      return { kind: 'Status', status: 'Success' };
    }
    let next: Obj;
    if (method === 'PUT') {
      const body = req.body as Obj;
      const rv = body.metadata?.resourceVersion;
      if (rv !== undefined && rv !== '' && rv !== current.metadata.resourceVersion)
        throw apiError(409, 'Conflict', what);
      next = { ...clone(body), metadata: { ...clone(body.metadata), uid: current.metadata.uid } };
    } else if (method === 'PATCH') {
      const body = req.body as { metadata?: { resourceVersion?: string } };
      const rv = body?.metadata?.resourceVersion;
      if (rv !== undefined && rv !== current.metadata.resourceVersion) throw apiError(409, 'Conflict', what);
      const patch = clone(body) as Record<string, unknown>;
      const meta = patch.metadata as Record<string, unknown> | undefined;
      if (meta) delete meta.resourceVersion;
      const merged =
        req.contentType === 'application/merge-patch+json'
          ? mergePatch(current, patch)
          : strategicPatch(current, patch);
      next = merged as Obj;
      // A status patch changes status only; a patch of the object itself leaves status alone.
      if (r.sub === 'status') next = { ...current, status: next.status };
      else if (r.coll === 'nodes' || r.coll.startsWith('pods/')) next = { ...next, status: current.status };
    } else throw apiError(405, 'MethodNotAllowed', what);
    const after = this.store(r.coll, 'MODIFIED', next);
    this.report(sentAt, by, method, r.coll, r.name, r.sub, current, after, req.body);
    return { kind: r.kind, apiVersion: r.apiVersion, ...clone(after) };
  }

  private create(sentAt: number, by: string, r: Route, body: Obj, what: string): unknown {
    const name = body?.metadata?.name ?? `${body?.metadata?.generateName ?? 'x-'}${this.rv + 1}`;
    if (this.get(r.coll, name)) throw apiError(409, 'AlreadyExists', what);
    const obj: Obj = {
      ...clone(body),
      metadata: {
        ...clone(body.metadata),
        name,
        uid: `uid-${r.coll}-${name}-${this.rv + 1}`,
        creationTimestamp: new Date(this.clock.wall()).toISOString(),
      },
    };
    // Events are not kept (nothing reads them back); they are reported as writes all the same.
    const after = r.coll.startsWith('events/') ? { ...obj } : this.store(r.coll, 'ADDED', obj);
    this.report(sentAt, by, 'POST', r.coll, name, r.sub, undefined, after, body);
    return { kind: r.kind, apiVersion: r.apiVersion, ...clone(after) };
  }

  /** A graceful delete of the pod (it stays Terminating: its node does not answer). */
  private evict(
    sentAt: number,
    by: string,
    r: Route,
    current: Obj | undefined,
    body: unknown,
    what: string,
  ): unknown {
    if (!current) throw apiError(404, 'NotFound', what);
    const uid = (body as { deleteOptions?: { preconditions?: { uid?: string } } }).deleteOptions
      ?.preconditions?.uid;
    if (uid !== undefined && uid !== current.metadata.uid) throw apiError(409, 'Conflict', what);
    const after = this.store(r.coll, 'MODIFIED', {
      ...current,
      metadata: {
        ...current.metadata,
        deletionTimestamp: current.metadata.deletionTimestamp ?? new Date(this.clock.wall()).toISOString(),
      },
    });
    this.report(sentAt, by, 'POST', r.coll, r.name!, 'eviction', current, after, body);
    return { kind: 'Status', status: 'Success' };
  }

  private listResponse(by: string, r: Route, query: KubeRequest['query']): unknown {
    const match = matcher(query);
    const all = this.list(r.coll)
      .filter(match)
      .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0));
    const limit = Number(query?.limit) > 0 ? Number(query?.limit) : all.length;
    const from = query?.continue ? Number(query.continue) : 0;
    const page = all.slice(from, from + limit);
    const more = from + limit < all.length;
    if (this.onDelivered) for (const o of page) this.onDelivered(by, r.coll, o, 'list');
    this.onContact?.(by, r.coll, 'list');
    return {
      kind: `${r.kind}List`,
      apiVersion: r.apiVersion,
      metadata: { resourceVersion: String(this.rv), ...(more ? { continue: String(from + limit) } : {}) },
      items: clone(page),
    };
  }

  // ---------------------------------------------------------------- watches

  private async openWatch(id: string, req: KubeRequest, ctx: Ctx): Promise<SimResponse> {
    await this.latency();
    await this.reach(id, ctx);
    const route = routeOf(req.path);
    if (!route || route.name !== undefined) throw apiError(404, 'NotFound', ctx.what);
    // Served from the watch cache: the storage being down does not refuse it.
    const from = Number(req.query?.resourceVersion ?? 0);
    if (from > 0 && from < this.compactedRv) {
      throw apiError(410, 'Expired', `${ctx.what}: too old resource version: ${from} (${this.compactedRv})`);
    }
    // A stalled watch of this collection is not answered until the stall ends.
    while (this.stalls.get(id)?.has(route.coll)) await this.block(ctx);
    this.check(ctx);
    const match = matcher(req.query);
    const stream: Stream = {
      client: id,
      coll: route.coll,
      match,
      res: new SimResponse(() => this.closeStream(stream)),
      queue: [],
      flushTimer: undefined,
      flushQueued: false,
      timers: [],
      lastRv: from,
    };
    this.streams.add(stream);
    this.onContact?.(id, route.coll, 'open');
    for (let i = this.historyStart; i < this.history.length; i++) {
      const c = this.history[i]!;
      if (c.rv <= from) continue;
      if ((c.coll === route.coll || (route.coll === 'pods/*' && c.coll.startsWith('pods/'))) && match(c.obj))
        this.enqueue(stream, c.line, c.rv, c.obj, c.coll);
    }
    const timeoutS = Number(req.query?.timeoutSeconds ?? 0);
    if (timeoutS > 0) {
      stream.timers.push(setTimeout(() => this.endStream(stream), timeoutS * 1000));
    }
    if (req.query?.allowWatchBookmarks) {
      stream.timers.push(
        setInterval(() => {
          const line = `${JSON.stringify({
            type: 'BOOKMARK',
            object: {
              kind: route.kind,
              apiVersion: route.apiVersion,
              metadata: { resourceVersion: String(this.rv) },
            },
          })}\n`;
          this.enqueue(stream, line, this.rv);
        }, this.o.bookmarkMs),
      );
    }
    return stream.res;
  }

  private stalled(s: Stream): boolean {
    return this.pathOf(s.client) === 'hang' || (this.stalls.get(s.client)?.has(s.coll) ?? false);
  }

  private enqueue(s: Stream, line: string, rv: number, obj?: Obj, coll?: string): void {
    s.lastRv = Math.max(s.lastRv, rv);
    const lag = this.lags.get(`${s.client} ${s.coll}`) ?? 0;
    const now = this.clock.now();
    const last = s.queue[s.queue.length - 1]?.due ?? now;
    s.queue.push({ due: Math.max(now + lag, last), line, obj, coll });
    this.flush(s);
  }

  /** Delivers what is due (in order), unless the stream is stalled; arms a timer for the rest. */
  private flush(s: Stream): void {
    if (s.res.destroyed || this.stalled(s) || s.queue.length === 0) return;
    const head = s.queue[0]!;
    const now = this.clock.now();
    if (head.due > now) {
      if (!s.flushTimer) {
        s.flushTimer = setTimeout(() => {
          s.flushTimer = undefined;
          this.flush(s);
        }, head.due - now);
      }
      return;
    }
    if (s.flushQueued) return;
    s.flushQueued = true;
    queueMicrotask(() => {
      s.flushQueued = false;
      if (s.res.destroyed || this.stalled(s)) return;
      const t = this.clock.now();
      let chunk = '';
      while (s.queue.length > 0 && s.queue[0]!.due <= t) {
        const q = s.queue.shift()!;
        chunk += q.line;
        if (q.obj && this.onDelivered) this.onDelivered(s.client, q.coll!, q.obj, 'watch');
      }
      if (chunk) {
        s.res.deliver('data', chunk);
        this.onContact?.(s.client, s.coll, 'data');
      }
      if (s.queue.length > 0) this.flush(s);
    });
  }

  private breakStream(s: Stream, code: string): void {
    if (this.streams.has(s)) this.onContact?.(s.client, s.coll, 'error');
    this.streams.delete(s);
    this.clearStream(s);
    if (s.res.destroyed) return;
    s.res.destroyed = true;
    const res = s.res;
    queueMicrotask(() => {
      res.deliver('error', new KubeTransportError(`watch: ${code}`, code));
      res.deliver('close');
    });
  }

  private endStream(s: Stream): void {
    if (this.stalled(s)) return; // a hung server does not end its responses either
    if (this.streams.has(s)) this.onContact?.(s.client, s.coll, 'end');
    this.streams.delete(s);
    this.clearStream(s);
    if (s.res.destroyed) return;
    s.res.destroyed = true;
    const res = s.res;
    // What is still queued goes first, then the clean end.
    const rest = s.queue;
    s.queue = [];
    queueMicrotask(() => {
      if (rest.length > 0) {
        for (const q of rest)
          if (q.obj && this.onDelivered) this.onDelivered(s.client, q.coll!, q.obj, 'watch');
        res.deliver('data', rest.map((q) => q.line).join(''));
      }
      res.deliver('end');
      res.deliver('close');
    });
  }

  private closeStream(s: Stream): void {
    // The client let go of it (it re-opens a quiet watch, or stops): not a broken connection; its
    // silence goes on until its next stream delivers.
    if (this.streams.has(s)) this.onContact?.(s.client, s.coll, 'end');
    this.streams.delete(s);
    this.clearStream(s);
  }

  private clearStream(s: Stream): void {
    if (s.flushTimer) clearTimeout(s.flushTimer);
    s.flushTimer = undefined;
    for (const t of s.timers) clearTimeout(t as ReturnType<typeof setTimeout>);
    s.timers = [];
  }

  get openWatches(): number {
    return this.streams.size;
  }

  // ---------------------------------------------------------------- kubelets

  /**
   * One write by a kubelet (its lease, its node status, its pods), as its own client would send it:
   * it fails at once when the server refuses, after `timeoutMs` when the server or the kubelet's
   * path hangs, with 500 (or after the timeout) when the storage is down; it lands otherwise.
   */
  async kubeletWrite(node: string, timeoutMs: number, write: () => void): Promise<boolean> {
    const now = this.clock.now();
    const ctx: Ctx = { what: `kubelet ${node}`, sentAt: now, deadlineAt: now + timeoutMs, signal: undefined };
    try {
      await Promise.resolve();
      for (;;) {
        this.check(ctx);
        if (this.faults.down || this.cutKubelets.has(node) || this.faults.storage === 'error') return false;
        if (!this.faults.hung && this.faults.storage === 'up') break;
        await this.block(ctx);
      }
      if (this.faults.slowMs > 0) {
        await sleep(this.faults.slowMs);
        this.check(ctx);
        if (
          this.faults.down ||
          this.faults.hung ||
          this.faults.storage !== 'up' ||
          this.cutKubelets.has(node)
        )
          return false;
      }
    } catch {
      return false;
    }
    write();
    return true;
  }

  /** A write the kubelet's client sends, stored and reported as the kubelet's. */
  kubeletStore(node: string, coll: string, next: Obj, sub?: string): Obj {
    const before = this.get(coll, next.metadata.name);
    const after = this.store(coll, before ? 'MODIFIED' : 'ADDED', next);
    this.report(
      this.clock.now(),
      `kubelet/${node}`,
      before ? 'PATCH' : 'POST',
      coll,
      next.metadata.name,
      sub,
      before,
      after,
      undefined,
    );
    return after;
  }

  kubeletRemove(node: string, coll: string, name: string): void {
    const before = this.get(coll, name);
    if (!before) return;
    this.store(coll, 'DELETED', before);
    this.report(
      this.clock.now(),
      `kubelet/${node}`,
      'DELETE',
      coll,
      name,
      undefined,
      before,
      undefined,
      undefined,
    );
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
