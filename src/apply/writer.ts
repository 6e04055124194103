import { randomBytes } from 'node:crypto';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { type Clock, timerDelay } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import { TokenBucket } from '../clock/token-bucket.js';
import {
  KubeApiError,
  type KubeClient,
  KubeFencedError,
  type KubeRequest,
  KubeTransportError,
  PatchType,
  paths,
} from '../kube/client.js';
import { parseSkippingManagedFields } from '../kube/json.js';
import { DEFAULT_MAX_LOW_WAITING, RateLimiterFullError, type RequestPriority } from '../kube/rate-limit.js';
import type { KubeObject, Node, Pod } from '../kube/types.js';
import type { Logger } from '../log/logger.js';

/** Each write's lane in the client's rate limiter (src/kube/rate-limit.ts, RequestPriority). */
const WRITE_PRIORITY: Record<string, RequestPriority> = {
  'nodes/status': 'critical',
  nodes: 'taint',
  'pods/status': 'pods',
};

/**
 * The only place that writes Nodes, Pods and Events. Every write:
 * - passes the leadership fence right before it leaves the process, after any wait (rate limiter,
 *   retry backoff), and must finish before the fence would close: its timeout, on our side and
 *   the API server's (`?timeout=`), ends at the fence deadline; a write decided in one leadership
 *   term is never sent in the next; the API client asks the fence once more at the last moment
 *   (KubeRequest.fence: after credentials, a 401's new ones, a new connection's set-up), so that
 *   nothing leaves once it closed;
 * - is judged again after every wait: the caller's `stillWanted` says whether what decided it
 *   still holds (a node that renewed while its mark waited for a token is not marked), and a
 *   patch body is recomputed from the object;
 * - is a patch with a resourceVersion precondition (optimistic concurrency), recomputed from a
 *   fresh read on 409 Conflict;
 * - waits out 429 Retry-After and backs off on 5xx / transport errors;
 * - is paced by the client-side rate limiter (--kube-api-qps / --kube-api-burst) that reads share;
 * - in dry-run is computed, logged and counted but never sent.
 */

export type WriteOutcome =
  | { kind: 'applied'; object: KubeObject | undefined; attempts: number }
  | { kind: 'unchanged' }
  | { kind: 'withdrawn'; reason: string }
  | { kind: 'dry-run'; patch: unknown }
  | { kind: 'fenced'; reason: string }
  | { kind: 'gone' }
  | { kind: 'failed'; error: Error };

/** What an eviction came to. */
export type EvictOutcome =
  | { kind: 'applied' }
  | { kind: 'withdrawn'; reason: string }
  | { kind: 'dry-run' }
  | { kind: 'blocked'; reason: string }
  | { kind: 'fenced'; reason: string }
  | { kind: 'gone' }
  | { kind: 'failed'; error: Error };

/** Returns undefined when we may write now, else why not (e.g. "not leader", "lease expired"). */
export type Fence = () => string | undefined;

/**
 * Asked after every wait, right before a write is sent: undefined while what decided the write
 * still holds, else why it no longer does (e.g. "node renewed"): the write is then withdrawn. A
 * patch's is asked after its `mutate` of the same attempt (the first included), so it may depend
 * on what that attempt would write.
 */
export type StillWanted = () => string | undefined;

export interface WriterMetrics {
  writes: Counter<'resource' | 'outcome'>;
  conflicts: Counter<'resource'>;
  queueDepth: Gauge;
  throttleSeconds: Histogram;
}

export function createWriterMetrics(registry: Registry): WriterMetrics {
  const m = buildWriterMetrics(registry);
  // Failures of each resource exist from the start at 0, so that rate() sees the first one.
  for (const resource of ['nodes', 'nodes/status', 'pods/status', 'events']) {
    m.writes.inc({ resource, outcome: 'failed' }, 0);
  }
  return m;
}

function buildWriterMetrics(registry: Registry): WriterMetrics {
  return {
    writes: new Counter({
      name: 'nlc_writes_total',
      help: 'Writes to the API server by resource and outcome (applied, unchanged, withdrawn, dropped, dry-run, fenced, gone, failed).',
      labelNames: ['resource', 'outcome'] as const,
      registers: [registry],
    }),
    conflicts: new Counter({
      name: 'nlc_write_conflicts_total',
      help: 'Writes that hit 409 Conflict and were recomputed from a fresh read.',
      labelNames: ['resource'] as const,
      registers: [registry],
    }),
    queueDepth: new Gauge({
      name: 'nlc_write_queue_depth',
      help: 'Writes waiting for the client-side rate limiter or a Retry-After.',
      registers: [registry],
    }),
    throttleSeconds: new Histogram({
      name: 'nlc_write_throttle_seconds',
      help: 'Time writes waited for the client-side rate limiter.',
      buckets: [0.001, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
      registers: [registry],
    }),
  };
}

export interface WriterDeps {
  client: KubeClient;
  fence: Fence;
  /**
   * The monotonic instant the fence closes unless leadership is renewed (the elector's
   * fenceDeadline()); undefined when it is closed. Every write must be over by then, so its
   * timeout ends there (at most {@link WRITE_TIMEOUT_MS}). Without it (no leader election) writes
   * get WRITE_TIMEOUT_MS.
   */
  fenceDeadline?: () => number | undefined;
  /**
   * The leadership term (it changes each time this replica starts leading): a write decided in
   * one term is fenced if the term changed while it waited. Absent without leader election.
   */
  term?: () => number;
  dryRun: boolean;
  logger: Logger;
  metrics: WriterMetrics;
  clock: Clock;
  qps: number;
  burst: number;
  /**
   * The API client's rate limiter (shared by reads and writes, as in client-go). When set, the
   * writer waits for its token here, before the fence check, and its writes skip the client's own
   * wait; qps/burst are then unused.
   */
  limiter?: { acquire(signal?: AbortSignal, priority?: RequestPriority): Promise<void> };
  /** Component and instance recorded on Events. */
  component: string;
  instance: string;
  sleep?: (ms: number) => Promise<void>;
  maxConflictRetries?: number;
  maxErrorRetries?: number;
}

export interface EventSpec {
  involved: { kind: 'Node' | 'Pod'; name: string; namespace?: string; uid?: string; apiVersion: string };
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

const realSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, timerDelay(ms)));
const EVENT_DEDUPE_MS = 10 * 60_000;
/** Longest a write may take (client- and server-side) when the fence allows more. */
export const WRITE_TIMEOUT_MS = 10_000;
/** A write that would have less than this before the fence closes is not sent. */
export const MIN_WRITE_BUDGET_MS = 100;

export class ApiWriter {
  private readonly bucket: TokenBucket;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly events = new Map<string, { name: string; namespace: string; count: number; at: number }>();
  private waiting = 0;
  /** Events waiting for a token (the writer's own bucket): they go after every other write. */
  private waitingEvents = 0;
  private sending = 0;
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly d: WriterDeps) {
    this.bucket = TokenBucket.full(d.qps, d.burst);
    this.sleep = d.sleep ?? realSleep;
  }

  get dryRun(): boolean {
    return this.d.dryRun;
  }

  /** Writes on the wire right now (sent, not yet answered or timed out). */
  get inFlight(): number {
    return this.sending;
  }

  /** Resolves once no write is on the wire (at once when none is). */
  idle(): Promise<void> {
    if (this.sending === 0) return Promise.resolve();
    return new Promise((r) => this.idleWaiters.push(r));
  }

  /**
   * How long the write about to be sent may take: until the fence deadline, at most
   * WRITE_TIMEOUT_MS. A string (why not) when the fence is closed or about to close.
   */
  private budget(term?: number): number | string {
    const why = this.d.fence();
    if (why) return why;
    if (term !== undefined && this.d.term && this.d.term() !== term) {
      return 'leadership changed since the write was decided';
    }
    if (!this.d.fenceDeadline) return WRITE_TIMEOUT_MS;
    const deadline = this.d.fenceDeadline();
    if (deadline === undefined) return 'leadership fence closed';
    const left = Math.floor(deadline - this.d.clock.scheduler.now());
    if (left < MIN_WRITE_BUDGET_MS) return `leadership fence closes in ${formatDuration(Math.max(0, left))}`;
    return Math.min(WRITE_TIMEOUT_MS, left);
  }

  /**
   * Sends one write with a timeout of `ms` on both sides, counted in inFlight. The fence is asked
   * again at the last moment, right before its bytes leave (the client may still wait for
   * credentials or a connection): closed by then, the write is not sent (KubeFencedError).
   */
  private async send<T>(req: Omit<KubeRequest, 'timeoutMs'>, ms: number, term?: number): Promise<T> {
    this.sending++;
    try {
      return await this.d.client.request<T>({
        ...req,
        fence: () => {
          const budget = this.budget(term);
          return typeof budget === 'string' ? budget : undefined;
        },
        // The API server abandons the request at the same moment (a Go duration, as it parses it).
        query: { ...req.query, timeout: formatDuration(ms) },
        timeoutMs: ms,
        // The answer is the whole object; its managedFields (often half of a Node) are never read.
        parse: parseSkippingManagedFields,
        // The token was taken before the fence check (throttle()): the client must not wait again.
        throttled: this.d.limiter !== undefined,
      });
    } finally {
      this.sending--;
      if (this.sending === 0) for (const w of this.idleWaiters.splice(0)) w();
    }
  }

  /**
   * Waits for a token of the client-side limiter. Events ('low') go after every other write and
   * at most MAX_WAITING_EVENTS of them wait: one more is refused (RateLimiterFullError).
   */
  private async throttle(priority: RequestPriority = 'normal'): Promise<void> {
    const start = this.d.clock.scheduler.now();
    const low = priority === 'low';
    if (low && !this.d.limiter && this.waitingEvents >= DEFAULT_MAX_LOW_WAITING) {
      throw new RateLimiterFullError(DEFAULT_MAX_LOW_WAITING);
    }
    this.waiting++;
    if (low) this.waitingEvents++;
    this.d.metrics.queueDepth.set(this.waiting);
    try {
      if (this.d.limiter) {
        await this.d.limiter.acquire(undefined, priority);
        return;
      }
      for (;;) {
        const now = this.d.clock.scheduler.now();
        const othersWait = low && this.waiting > this.waitingEvents;
        if (!othersWait && this.bucket.tryTake(now)) break;
        const at = this.bucket.nextTokenAt(now) ?? now + 1000;
        await this.sleep(Math.max(1, at - now));
      }
    } finally {
      this.waiting--;
      if (low) this.waitingEvents--;
      this.d.metrics.queueDepth.set(this.waiting);
      this.d.metrics.throttleSeconds.observe((this.d.clock.scheduler.now() - start) / 1000);
    }
  }

  /**
   * Read-modify-write with optimistic concurrency. `mutate` receives the current object (first
   * `initial`, after a conflict a fresh GET) and returns the patch body to send, or undefined when
   * the object already is as it should be. The writer adds metadata.resourceVersion as a
   * precondition.
   */
  async patch<T extends KubeObject>(opts: {
    resource: 'nodes' | 'nodes/status' | 'pods/status';
    path: string;
    getPath: string;
    initial: T | undefined;
    mutate: (current: T) => Record<string, unknown> | undefined;
    stillWanted?: StillWanted | undefined;
    log: Record<string, unknown>;
  }): Promise<WriteOutcome> {
    const outcome = await this.patchInner(opts);
    this.d.metrics.writes.inc({ resource: opts.resource, outcome: outcome.kind });
    if (outcome.kind === 'failed') {
      this.d.logger.error('Write failed', { ...opts.log, resource: opts.resource, err: outcome.error });
    } else if (outcome.kind === 'fenced') {
      this.d.logger.warn('Write refused by the leadership fence', {
        ...opts.log,
        resource: opts.resource,
        reason: outcome.reason,
      });
    } else if (outcome.kind === 'withdrawn') {
      this.d.logger.info('Write withdrawn: what decided it no longer holds', {
        ...opts.log,
        resource: opts.resource,
        reason: outcome.reason,
      });
    }
    return outcome;
  }

  private async patchInner<T extends KubeObject>(opts: {
    resource: string;
    path: string;
    getPath: string;
    initial: T | undefined;
    mutate: (current: T) => Record<string, unknown> | undefined;
    stillWanted?: StillWanted | undefined;
    log: Record<string, unknown>;
  }): Promise<WriteOutcome> {
    const term = this.d.term?.();
    const maxConflicts = this.d.maxConflictRetries ?? 5;
    const maxErrors = this.d.maxErrorRetries ?? 5;
    let current = opts.initial;
    let conflicts = 0;
    let errors = 0;
    // Its lane in the client's limiter: a mark (a node's status) first, then taints, then pods.
    const priority = WRITE_PRIORITY[opts.resource] ?? 'normal';
    for (let attempt = 1; ; attempt++) {
      if (!current) {
        try {
          current = await this.d.client.request<T>({
            method: 'GET',
            path: opts.getPath,
            timeoutMs: 10_000,
            parse: parseSkippingManagedFields,
            priority,
          });
        } catch (err) {
          if (err instanceof KubeApiError && err.isNotFound) return { kind: 'gone' };
          if (++errors > maxErrors) return { kind: 'failed', error: err as Error };
          await this.backoff(err, errors);
          continue;
        }
      }
      // Sent: wait for a token first. Then, after every wait (the limiter, a backoff before this
      // attempt): what is the write now (computed once per attempt, from the object it is
      // conditioned on), is it still wanted (a node may have renewed meanwhile: asked after
      // mutate, so that the question may depend on what this attempt would write, the first
      // included), may we still write, and for how long?
      if (!this.d.dryRun) await this.throttle(priority);
      const body = opts.mutate(current);
      const gone = opts.stillWanted?.();
      if (gone !== undefined) return { kind: 'withdrawn', reason: gone };
      if (body === undefined) return { kind: 'unchanged' };
      if (this.d.dryRun) {
        this.d.logger.info('Dry run: would patch', { ...opts.log, resource: opts.resource, patch: body });
        return { kind: 'dry-run', patch: body };
      }
      const budget = this.budget(term);
      if (typeof budget === 'string') return { kind: 'fenced', reason: budget };
      const rv = current.metadata.resourceVersion;
      const meta = (body.metadata as Record<string, unknown> | undefined) ?? {};
      const withPrecondition = rv ? { ...body, metadata: { ...meta, resourceVersion: rv } } : body;
      try {
        const object = await this.send<KubeObject>(
          { method: 'PATCH', path: opts.path, contentType: PatchType.strategic, body: withPrecondition },
          budget,
          term,
        );
        return { kind: 'applied', object, attempts: attempt };
      } catch (err) {
        if (err instanceof KubeFencedError) return { kind: 'fenced', reason: err.reason };
        if (err instanceof KubeApiError && err.isConflict) {
          this.d.metrics.conflicts.inc({ resource: opts.resource });
          this.d.logger.debug(2, 'Write conflict, re-reading', { ...opts.log, resource: opts.resource });
          if (++conflicts > maxConflicts) return { kind: 'failed', error: err };
          current = undefined;
          continue;
        }
        if (err instanceof KubeApiError && err.isNotFound) return { kind: 'gone' };
        if (err instanceof KubeApiError && !isRetryable(err)) return { kind: 'failed', error: err };
        if (++errors > maxErrors) return { kind: 'failed', error: err as Error };
        await this.backoff(err, errors);
        // The object may have changed while we waited.
        current = undefined;
      }
    }
  }

  private async backoff(err: unknown, n: number): Promise<void> {
    let ms = Math.min(100 * 2 ** (n - 1), 5000) * (1 + Math.random() * 0.2);
    if (err instanceof KubeApiError && err.retryAfterSeconds !== undefined) {
      ms = Math.min(Math.max(err.retryAfterSeconds * 1000, 100), 60_000);
    }
    this.waiting++;
    this.d.metrics.queueDepth.set(this.waiting);
    try {
      await this.sleep(ms);
    } finally {
      this.waiting--;
      this.d.metrics.queueDepth.set(this.waiting);
    }
  }

  patchNode(
    name: string,
    initial: Node | undefined,
    mutate: (n: Node) => Record<string, unknown> | undefined,
    stillWanted?: StillWanted,
  ) {
    return this.patch<Node>({
      resource: 'nodes',
      path: paths.node(name),
      getPath: paths.node(name),
      initial,
      mutate,
      stillWanted,
      log: { node: name },
    });
  }

  patchNodeStatus(
    name: string,
    initial: Node | undefined,
    mutate: (n: Node) => Record<string, unknown> | undefined,
    stillWanted?: StillWanted,
  ) {
    return this.patch<Node>({
      resource: 'nodes/status',
      path: paths.nodeStatus(name),
      getPath: paths.node(name),
      initial,
      mutate,
      stillWanted,
      log: { node: name },
    });
  }

  patchPodStatus(
    ns: string,
    name: string,
    initial: Pod | undefined,
    mutate: (p: Pod) => Record<string, unknown> | undefined,
    stillWanted?: StillWanted,
  ) {
    return this.patch<Pod>({
      resource: 'pods/status',
      path: paths.podStatus(ns, name),
      getPath: paths.pod(ns, name),
      initial,
      mutate,
      stillWanted,
      log: { pod: `${ns}/${name}` },
    });
  }

  /**
   * Evicts a pod through the Eviction API (policy/v1), which honours its PodDisruptionBudgets: a
   * budget that allows no disruption now answers 429 ('blocked', not retried here: the caller
   * looks again later). The pod's uid is a precondition: a pod re-created under the same name is
   * not evicted ('gone'). Fenced, rate limited and dry-run like every write; 5xx and transport
   * errors are retried with backoff.
   */
  async evict(
    ns: string,
    name: string,
    uid: string | undefined,
    stillWanted?: StillWanted,
  ): Promise<EvictOutcome> {
    const outcome = await this.evictInner(ns, name, uid, stillWanted);
    this.d.metrics.writes.inc({ resource: 'pods/eviction', outcome: outcome.kind });
    const log = { pod: `${ns}/${name}`, resource: 'pods/eviction' };
    if (outcome.kind === 'failed') this.d.logger.error('Write failed', { ...log, err: outcome.error });
    else if (outcome.kind === 'fenced') {
      this.d.logger.warn('Write refused by the leadership fence', { ...log, reason: outcome.reason });
    } else if (outcome.kind === 'withdrawn') {
      this.d.logger.info('Write withdrawn: what decided it no longer holds', {
        ...log,
        reason: outcome.reason,
      });
    }
    return outcome;
  }

  private async evictInner(
    ns: string,
    name: string,
    uid: string | undefined,
    stillWanted: StillWanted | undefined,
  ): Promise<EvictOutcome> {
    const term = this.d.term?.();
    let gone = stillWanted?.();
    if (gone !== undefined) return { kind: 'withdrawn', reason: gone };
    if (this.d.dryRun) {
      this.d.logger.info('Dry run: would evict', { pod: `${ns}/${name}` });
      return { kind: 'dry-run' };
    }
    const body = {
      apiVersion: 'policy/v1',
      kind: 'Eviction',
      metadata: { name, namespace: ns },
      ...(uid ? { deleteOptions: { preconditions: { uid } } } : {}),
    };
    const maxErrors = this.d.maxErrorRetries ?? 5;
    for (let errors = 0; ; ) {
      await this.throttle('pods');
      gone = stillWanted?.();
      if (gone !== undefined) return { kind: 'withdrawn', reason: gone };
      const budget = this.budget(term);
      if (typeof budget === 'string') return { kind: 'fenced', reason: budget };
      try {
        await this.send({ method: 'POST', path: paths.podEviction(ns, name), body }, budget, term);
        return { kind: 'applied' };
      } catch (err) {
        if (err instanceof KubeFencedError) return { kind: 'fenced', reason: err.reason };
        if (err instanceof KubeApiError) {
          // 429: a PodDisruptionBudget allows no disruption now. 404, or 409 on the uid
          // precondition: that pod is gone.
          if (err.status === 429) return { kind: 'blocked', reason: err.message };
          if (err.isNotFound || err.isConflict) return { kind: 'gone' };
          if (err.status < 500) return { kind: 'failed', error: err };
        }
        if (++errors > maxErrors) return { kind: 'failed', error: err as Error };
        await this.backoff(err, errors);
      }
    }
  }

  /**
   * Records an Event (core/v1, source component like upstream's recorder). Repeats of the same
   * object+reason+message within 10 minutes bump the count of the existing Event instead of
   * creating a new one. Best effort: failures are logged, never thrown. Not sent in dry-run.
   */
  async event(spec: EventSpec): Promise<void> {
    // Events about cluster-scoped objects (Nodes) go to "default", as client-go's recorder does.
    const namespace = spec.involved.namespace || 'default';
    const key = `${spec.involved.kind}/${namespace}/${spec.involved.name}/${spec.reason}/${spec.message}`;
    const nowWall = new Date(this.d.clock.wall()).toISOString().replace(/\.\d{3}Z$/, 'Z');
    const nowMono = this.d.clock.scheduler.now();
    this.d.logger.debug(2, 'Event', {
      kind: spec.involved.kind,
      object: spec.involved.name,
      reason: spec.reason,
      type: spec.type,
    });
    if (this.d.dryRun) {
      this.d.metrics.writes.inc({ resource: 'events', outcome: 'dry-run' });
      return;
    }
    const prev = this.events.get(key);
    try {
      await this.throttle('low');
      // Fenced after waiting for the token: leadership may have ended meanwhile.
      const budget = this.budget();
      if (typeof budget === 'string') {
        this.d.metrics.writes.inc({ resource: 'events', outcome: 'fenced' });
        return;
      }
      if (prev && nowMono - prev.at < EVENT_DEDUPE_MS) {
        prev.count++;
        prev.at = nowMono;
        await this.send(
          {
            method: 'PATCH',
            path: `${paths.coreEvents(prev.namespace)}/${prev.name}`,
            contentType: PatchType.merge,
            body: { count: prev.count, lastTimestamp: nowWall },
          },
          budget,
        );
      } else {
        const name = `${spec.involved.name}.${randomBytes(8).toString('hex')}`;
        const body = newEvent(spec, { name, namespace }, this.d, nowWall);
        await this.send({ method: 'POST', path: paths.coreEvents(namespace), body }, budget);
        this.events.set(key, { name, namespace, count: 1, at: nowMono });
        if (this.events.size > 10_000) this.pruneEvents(nowMono);
      }
      this.d.metrics.writes.inc({ resource: 'events', outcome: 'applied' });
    } catch (err) {
      if (!(err instanceof RateLimiterFullError) && prev) this.events.delete(key);
      if (err instanceof KubeFencedError) {
        this.d.metrics.writes.inc({ resource: 'events', outcome: 'fenced' });
        return;
      }
      this.eventNotRecorded(spec, err);
    }
  }

  /** Counts and logs an Event that was not recorded (best effort: never thrown). */
  private eventNotRecorded(spec: EventSpec, err: unknown): void {
    if (err instanceof RateLimiterFullError) {
      // Too many Events wait already (a mass failure): this one is dropped, counted, never
      // allowed to hold back a mark.
      this.d.metrics.writes.inc({ resource: 'events', outcome: 'dropped' });
      this.d.logger.debug(2, 'Event dropped: too many waiting for the rate limiter', {
        reason: spec.reason,
        object: spec.involved.name,
      });
      return;
    }
    this.d.metrics.writes.inc({ resource: 'events', outcome: 'failed' });
    this.d.logger.warn('Event not recorded', { reason: spec.reason, object: spec.involved.name, err });
  }

  private pruneEvents(now: number): void {
    for (const [k, v] of this.events) if (now - v.at >= EVENT_DEDUPE_MS) this.events.delete(k);
  }
}

/** A new core/v1 Event (source component like upstream's recorder); a Node's goes to "default". */
function newEvent(
  spec: EventSpec,
  meta: { name: string; namespace: string },
  from: { component: string; instance: string },
  nowWall: string,
): Record<string, unknown> {
  const involved = { ...spec.involved };
  if (!involved.namespace) delete involved.namespace;
  return {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: meta,
    involvedObject: involved,
    reason: spec.reason,
    message: spec.message,
    type: spec.type,
    source: { component: from.component },
    reportingComponent: from.component,
    reportingInstance: from.instance,
    firstTimestamp: nowWall,
    lastTimestamp: nowWall,
    count: 1,
  };
}

function isRetryable(err: KubeApiError | KubeTransportError): boolean {
  if (err instanceof KubeTransportError) return true;
  return err.status === 429 || err.status >= 500;
}
