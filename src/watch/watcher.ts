import { timerDelay } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import { KubeApiError, type KubeStatus, KubeTransportError } from '../kube/client.js';
import type { KubeObject, List } from '../kube/types.js';
import { type Logger, silentLogger } from '../log/logger.js';
import {
  Observable,
  type SchedulerAction,
  type SchedulerLike,
  type Subscriber,
  type Subscription,
} from '../rx/index.js';
import { RetryBackoff, watchTimeoutSeconds } from './backoff.js';
import { HeldObjects } from './held-objects.js';
import { isolateConsumers } from './isolate.js';
import { LineDecoder } from './line-decoder.js';
import { WatchProgress } from './progress.js';
import { ResourceVersionProbe } from './resource-version-probe.js';
import type { ServerRewindSignal } from './rewind.js';
import { WatchStatus } from './status.js';
import {
  type KnownObjects,
  objectKey,
  resolveTuning,
  type StripFn,
  type WatchEvent,
  type WatchTransport,
  type WatchTuning,
  type WatchTuningOverrides,
} from './types.js';

export interface WatchOptions<T extends KubeObject> {
  /** Label for metrics and logs, e.g. `leases`. */
  resource: string;
  transport: WatchTransport;
  /** Time source for backoff, timeouts and health (monotonic ms; a virtual one in tests). */
  scheduler: SchedulerLike;
  /**
   * Turns a wire object into the shape kept and emitted (drop what is not needed), or undefined
   * when unusable (counted as `malformed`, skipped). Default: keep the object as parsed.
   */
  strip?: StripFn<T>;
  /**
   * Turns one watch line into the raw event (a throw counts the line as malformed). Default
   * JSON.parse; parseSkippingManagedFields only with a strip that drops managedFields anyway.
   */
  parse?: (line: string) => unknown;
  /** Default `namespace/name` (or `name`). Must match the `known` collection's keys. */
  keyOf?: (obj: T) => string;
  /**
   * What the consumer already holds (e.g. the Store fed by this stream), used after a relist to
   * find the objects that vanished. Without it the watcher keeps its own key -> object map.
   */
  known?: KnownObjects<T>;
  /** Health and counters of this stream; created when omitted. One subscription per status. */
  status?: WatchStatus;
  logger?: Logger;
  /** Randomness for jitter and watch timeouts (tests pass a constant). */
  random?: () => number;
  tuning?: WatchTuningOverrides;
  /** Shared by the watches of one API server (see ServerRewindSignal). */
  rewind?: ServerRewindSignal;
}

/** A failure the watch layer itself detects. */
export class WatchError extends Error {
  readonly reason: string;
  constructor(reason: string, message: string) {
    super(message);
    this.name = 'WatchError';
    this.reason = reason;
  }
}

/**
 * Reason label for a failure: gone, too_large_resource_version, too_many_requests, http_<status>,
 * network, timeout, ...
 */
export function classifyError(err: unknown): string {
  if (err instanceof KubeApiError) {
    if (err.status === 410) return 'gone';
    if (err.isTooLargeResourceVersion) return TOO_LARGE;
    if (err.status === 429) return 'too_many_requests';
    return `http_${err.status}`;
  }
  if (err instanceof WatchError) return err.reason;
  if (err instanceof KubeTransportError) return err.code === 'TIMEOUT' ? 'timeout' : 'network';
  if (err instanceof Error && typeof (err as NodeJS.ErrnoException).code === 'string') return 'network';
  return 'unknown';
}

function retryAfterMs(err: unknown): number | undefined {
  if (err instanceof KubeApiError && err.status === 429 && err.retryAfterSeconds !== undefined) {
    return err.retryAfterSeconds * 1000;
  }
  return undefined;
}

/** Our resourceVersion is ahead of the server's: its history went back (etcd restored from a backup). */
const TOO_LARGE = 'too_large_resource_version';
/** Another watch of the same server found its history went back: our resourceVersion is from the lost one. */
const REWOUND = 'server_rewound';

const INIT: WatchEvent<never> = Object.freeze({ type: 'Init' });
const INIT_DONE: WatchEvent<never> = Object.freeze({ type: 'InitDone' });

interface RawWatchLine {
  type?: unknown;
  object?: { metadata?: { resourceVersion?: unknown } } & KubeStatus;
}

function defaultStrip<T extends KubeObject>(raw: unknown): T | undefined {
  const meta = (raw as KubeObject | null)?.metadata;
  return meta && typeof meta.name === 'string' ? (raw as T) : undefined;
}

type Phase = 'list' | 'watch';

/**
 * The options of one watch, resolved once per stream: what every run (subscription) of it uses and
 * never changes. What is a subscription's own (its subscriber, the object map kept without `known`)
 * stays with its run.
 */
interface WatchDeps<T extends KubeObject> {
  readonly resource: string;
  readonly transport: WatchTransport;
  readonly scheduler: SchedulerLike;
  readonly strip: StripFn<T>;
  readonly parse: (line: string) => unknown;
  readonly keyOf: (obj: T) => string;
  readonly known: KnownObjects<T> | undefined;
  readonly tuning: WatchTuning;
  readonly random: () => number;
  readonly log: Logger;
  readonly status: WatchStatus;
  readonly rewind: ServerRewindSignal | undefined;
}

function resolveDeps<T extends KubeObject>(
  opts: WatchOptions<T>,
  status: WatchStatus,
  log: Logger,
): WatchDeps<T> {
  return {
    resource: opts.resource,
    transport: opts.transport,
    scheduler: opts.scheduler,
    strip: opts.strip ?? defaultStrip,
    parse: opts.parse ?? JSON.parse,
    keyOf: opts.keyOf ?? objectKey,
    known: opts.known,
    tuning: resolveTuning(opts.tuning),
    random: opts.random ?? Math.random,
    log,
    status,
    rewind: opts.rewind,
  };
}

/**
 * One subscription's list+watch loop: a small state machine driven by transport callbacks and
 * scheduler timers. `epoch` increments whenever the current request is abandoned; every callback
 * checks it, so late answers from a superseded request are ignored.
 */
class WatchRun<T extends KubeObject> {
  private readonly deps: WatchDeps<T>;
  private readonly out: Subscriber<WatchEvent<T>>;
  private readonly held: HeldObjects<T>;
  private readonly retries: RetryBackoff;
  private readonly lines: LineDecoder;
  private readonly progress = new WatchProgress();
  /** The request asking whether the server has reached our resourceVersion. */
  private readonly probe: ResourceVersionProbe;
  private unlistenRewind: (() => void) | undefined;

  private epoch = 0;
  private stopped = false;
  /** Resume point: list resourceVersion, then the last event or bookmark seen. */
  private rv: string | undefined;
  private abort: AbortController | undefined;
  /** The single pending timer: backoff, list deadline or idle check. */
  private timer: Subscription | undefined;
  private chunks: Subscription | undefined;

  constructor(deps: WatchDeps<T>, out: Subscriber<WatchEvent<T>>) {
    this.deps = deps;
    this.out = out;
    const t = deps.tuning;
    this.held = new HeldObjects(deps.keyOf, deps.known);
    this.retries = new RetryBackoff(t.backoff, deps.random);
    this.lines = new LineDecoder(t.maxLineLength);
    this.probe = new ResourceVersionProbe(deps.transport, t.listTimeoutMs);
  }

  start(): void {
    this.unlistenRewind = this.deps.rewind?.listen((from) => this.onRewind(from));
    this.beginList();
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.epoch++;
    this.release();
    this.unlistenRewind?.();
    this.probe.cancel();
    const now = this.now();
    this.deps.status.setListing(false, now);
    this.deps.status.setConnected(false, now);
    this.held.dropList();
  }

  /** Drops the current request, stream and timer. */
  private release(): void {
    const timer = this.timer;
    const chunks = this.chunks;
    const abort = this.abort;
    this.timer = undefined;
    this.chunks = undefined;
    this.abort = undefined;
    this.lines.reset();
    timer?.unsubscribe();
    chunks?.unsubscribe();
    abort?.abort();
  }

  private now(): number {
    return this.deps.scheduler.now();
  }

  private after(delayMs: number, fn: () => void): Subscription {
    return this.deps.scheduler.schedule(fn, timerDelay(delayMs));
  }

  /** Runs `fn`; a bug in the watch layer or a store callback fails the stream instead of escaping. */
  private guarded(fn: () => void, phase: Phase): void {
    try {
      fn();
    } catch (err) {
      this.internalError(err, phase);
    }
  }

  private internalError(err: unknown, phase: Phase): void {
    this.deps.log.error('watch internal error', { err, phase });
    this.fail(new WatchError('internal', err instanceof Error ? err.message : String(err)), phase);
  }

  // ---------------------------------------------------------------- list

  private beginList(): void {
    const now = this.now();
    const status = this.deps.status;
    if (status.synced) status.countRelist(now);
    status.setListing(true, now);
    this.held.beginList();
    this.rv = undefined;
    const epoch = this.epoch;
    this.out.next(INIT);
    if (epoch !== this.epoch) return;
    this.requestPage(undefined);
  }

  private requestPage(cont: string | undefined): void {
    const epoch = ++this.epoch;
    const { listTimeoutMs, pageSize } = this.deps.tuning;
    const ac = new AbortController();
    this.abort = ac;
    this.timer = this.after(listTimeoutMs, () => {
      if (epoch !== this.epoch) return;
      this.timer = undefined;
      this.fail(
        new WatchError('timeout', `list page timed out after ${formatDuration(listTimeoutMs)}`),
        'list',
      );
    });
    let pending: Promise<List<unknown>>;
    try {
      pending = this.deps.transport.list(
        { limit: pageSize, continue: cont, timeoutMs: listTimeoutMs },
        ac.signal,
      );
    } catch (err) {
      pending = Promise.reject(err);
    }
    pending.then(
      (page) => {
        if (epoch === this.epoch) this.guarded(() => this.onPage(page, epoch), 'list');
      },
      (err: unknown) => {
        if (epoch === this.epoch) this.fail(err, 'list');
      },
    );
  }

  private onPage(page: List<unknown>, epoch: number): void {
    this.timer?.unsubscribe();
    this.timer = undefined;
    this.abort = undefined;
    const now = this.now();
    this.markHealthy(now);
    this.deps.status.noteData(now);
    const items = page?.items ?? [];
    if (!Array.isArray(items)) {
      this.fail(new WatchError('malformed', 'list response has no items array'), 'list');
      return;
    }
    let skipped = 0;
    for (let i = 0; i < items.length; i++) {
      const obj = this.stripSafe(items[i]);
      if (obj === undefined) {
        skipped++;
        continue;
      }
      this.held.listed(obj);
      this.out.next({ type: 'InitApply', object: obj });
      if (epoch !== this.epoch) return;
    }
    this.deps.status.listedObjects += items.length - skipped;
    if (skipped > 0) this.malformed('object', skipped, 'list item without metadata.name');
    const cont = page.metadata?.continue;
    if (cont) {
      this.requestPage(cont);
      return;
    }
    const rv = page.metadata?.resourceVersion;
    if (typeof rv !== 'string' || rv === '') {
      this.fail(new WatchError('malformed', 'list response has no resourceVersion'), 'list');
      return;
    }
    this.finishList(rv, epoch);
  }

  private finishList(rv: string, epoch: number): void {
    // Objects we knew that the new list does not have vanished while we were not watching.
    const vanished = this.held.endList();
    for (const obj of vanished) {
      this.held.forget(obj);
      this.out.next({ type: 'Delete', object: obj });
      if (epoch !== this.epoch) return;
    }
    if (vanished.length > 0) this.deps.log.info('relist found deleted objects', { count: vanished.length });
    this.rv = rv;
    const now = this.now();
    this.deps.status.setListing(false, now);
    this.deps.status.setSynced(now);
    this.out.next(INIT_DONE);
    if (epoch !== this.epoch) return;
    this.startWatch(true);
  }

  // ---------------------------------------------------------------- watch

  private startWatch(afterList: boolean): void {
    const epoch = ++this.epoch;
    const now = this.now();
    if (!afterList) this.deps.status.countReconnect(now);
    const ac = new AbortController();
    this.abort = ac;
    this.lines.reset();
    this.progress.requested(now);
    this.armIdle(epoch);
    const req = {
      resourceVersion: this.rv!,
      timeoutSeconds: watchTimeoutSeconds(this.deps.tuning.watchTimeoutSeconds, this.deps.random),
      allowWatchBookmarks: true as const,
    };
    let pending: Promise<Observable<string>>;
    try {
      pending = this.deps.transport.watch(req, ac.signal);
    } catch (err) {
      pending = Promise.reject(err);
    }
    pending.then(
      (stream) => {
        if (epoch === this.epoch) this.guarded(() => this.onOpen(stream, epoch), 'watch');
      },
      (err: unknown) => {
        if (epoch === this.epoch) this.fail(err, 'watch');
      },
    );
  }

  private onOpen(stream: Observable<string>, epoch: number): void {
    const now = this.now();
    this.progress.answered(epoch, now);
    this.deps.status.noteContact(now);
    this.markHealthy(now);
    const sub = stream.subscribe({
      next: (chunk) => {
        if (epoch === this.epoch) this.onChunk(chunk, epoch);
      },
      error: (err: unknown) => {
        if (epoch === this.epoch) this.fail(err, 'watch');
      },
      complete: () => {
        if (epoch === this.epoch) this.guarded(() => this.onWatchEnd(epoch), 'watch');
      },
    });
    if (epoch === this.epoch) this.chunks = sub;
    else sub.unsubscribe();
  }

  /** One timer per idle period: re-armed for the remaining time rather than on every chunk. */
  private armIdle(epoch: number): void {
    const run = this;
    const idleMs = this.deps.tuning.idleTimeoutMs;
    this.timer = this.deps.scheduler.schedule(function (this: SchedulerAction<unknown>) {
      if (epoch !== run.epoch) return;
      const idle = run.progress.idleFor(run.now());
      if (idle >= idleMs) {
        run.timer = undefined;
        if (run.progress.isAnswered(epoch)) run.resumeIdle(epoch, idle);
        else
          run.fail(
            new WatchError('idle_timeout', `watch silent for ${formatDuration(Math.round(idle))}`),
            'watch',
          );
      } else {
        this.schedule(undefined, timerDelay(idleMs - idle));
      }
    }, timerDelay(idleMs));
  }

  private onChunk(chunk: string, epoch: number): void {
    try {
      const now = this.now();
      this.progress.heard(now);
      const lines = this.lines;
      if (lines.push(chunk)) {
        this.deps.status.noteData(now);
        for (let line = lines.next(); line !== undefined; line = lines.next()) {
          this.onLine(line);
          if (epoch !== this.epoch) return;
        }
      }
      if (lines.overLimit()) {
        const max = this.deps.tuning.maxLineLength;
        this.fail(new WatchError('line_too_long', `watch line over ${max} chars`), 'watch');
      }
    } catch (err) {
      if (epoch !== this.epoch) return;
      this.internalError(err, 'watch');
    }
  }

  /** The hot path: one parse, a switch, a strip, one emitted event. */
  private onLine(line: string): void {
    let ev: RawWatchLine;
    try {
      ev = this.deps.parse(line) as RawWatchLine;
    } catch {
      this.malformed('json', 1, line);
      return;
    }
    if (ev === null || typeof ev !== 'object') {
      this.malformed('json', 1, line);
      return;
    }
    const counts = this.deps.status.events;
    switch (ev.type) {
      case 'ADDED':
        counts.ADDED++;
        this.applied(ev.object, line);
        return;
      case 'MODIFIED':
        counts.MODIFIED++;
        this.applied(ev.object, line);
        return;
      case 'DELETED': {
        counts.DELETED++;
        const obj = this.stripSafe(ev.object);
        if (obj === undefined) {
          this.malformed('object', 1, line);
          return;
        }
        this.progress.delivered();
        this.seen(obj.metadata.resourceVersion);
        this.held.forget(obj);
        this.out.next({ type: 'Delete', object: obj });
        return;
      }
      case 'BOOKMARK':
        counts.BOOKMARK++;
        this.progress.delivered();
        this.seen(ev.object?.metadata?.resourceVersion);
        return;
      case 'ERROR': {
        counts.ERROR++;
        const st = ev.object;
        const err =
          st && typeof st.code === 'number'
            ? new KubeApiError(st.code, st, {}, 'watch ERROR event')
            : new WatchError('watch_error', `watch ERROR event: ${line.slice(0, 200)}`);
        this.fail(err, 'watch');
        return;
      }
      default:
        this.malformed('type', 1, line);
    }
  }

  private applied(raw: unknown, line: string): void {
    const obj = this.stripSafe(raw);
    if (obj === undefined) {
      this.malformed('object', 1, line);
      return;
    }
    this.progress.delivered();
    this.seen(obj.metadata.resourceVersion);
    this.held.remember(obj);
    this.out.next({ type: 'Apply', object: obj });
  }

  private seen(rv: unknown): void {
    if (typeof rv === 'string' && rv !== '') this.rv = rv;
  }

  private stripSafe(raw: unknown): T | undefined {
    try {
      return this.deps.strip(raw);
    } catch {
      return undefined;
    }
  }

  /** Counts skipped data; logs once per connection (not per line). */
  private malformed(kind: string, n: number, sample: string): void {
    const errors = this.deps.status.errors;
    errors.set('malformed', (errors.get('malformed') ?? 0) + n);
    if (!this.progress.firstMalformed()) return;
    this.deps.log.warn('skipping malformed watch data', { kind, sample: sample.slice(0, 200) });
  }

  private onWatchEnd(epoch: number): void {
    const rest = this.lines.takeRest();
    if (rest !== undefined) {
      this.onLine(rest);
      if (epoch !== this.epoch) return;
    }
    if (this.progress.closedAtOnce(this.now(), this.deps.tuning.shortWatchMs)) {
      // A server or proxy closing every watch at once must not make us spin.
      this.fail(new WatchError('short_watch', 'watch closed at once without any event'), 'watch');
      return;
    }
    this.deps.log.debug(2, 'watch closed by server, resuming', {
      resourceVersion: this.rv,
      events: this.progress.events,
    });
    this.epoch++;
    this.release();
    this.startWatch(false);
  }

  /**
   * A watch the server answered but that has been quiet for the idle timeout: it may be stalled
   * (a dead connection nobody noticed) or the cluster may just be quiet. Re-open it at once from the
   * last resourceVersion, like a clean close: a live server answers (and replays anything missed),
   * a stalled path does not, and then the unanswered request fails with backoff.
   */
  private resumeIdle(epoch: number, idleMs: number): void {
    if (epoch !== this.epoch) return;
    this.deps.status.countError('idle_timeout');
    this.deps.log.debug(2, 'watch quiet, re-opening it', {
      idle: formatDuration(Math.round(idleMs)),
      resourceVersion: this.rv,
    });
    this.epoch++;
    this.release();
    this.startWatch(false);
    this.probeAhead();
  }

  /**
   * Another watch of this server found the server's history went back. Our resourceVersion comes
   * from the lost history too: even one the new history has passed (no "too large", no 410) would
   * resume a watch that skips what was written since the restore, while the store keeps what the
   * lost history said. Relist, unless a list is already running (it reads the server as it is now).
   */
  private onRewind(from: string): void {
    if (this.stopped || this.rv === undefined) return;
    this.fail(
      new WatchError(REWOUND, `the ${from} watch found the server's history went back (etcd restored?)`),
      'watch',
    );
  }

  /**
   * A watch may be quiet because our resourceVersion is ahead of the server's: after etcd is
   * restored from a backup (and kube-apiserver restarted) the server accepts a watch from a
   * resourceVersion it has not reached and sends nothing, not even bookmarks, until its revision
   * passes ours, which may be never (kubernetes/kubernetes#107457). Ask it: a list of one object
   * with resourceVersionMatch=NotOlderThan, served from its watch cache. "Too large resource
   * version" (after the server waited 3 s for it) relists; any other answer changes nothing (the
   * watch reports its own failures).
   */
  private probeAhead(): void {
    const rv = this.rv;
    if (this.stopped || rv === undefined) return;
    this.probe.ask(rv, (err) => {
      if (this.stopped || this.rv !== rv || classifyError(err) !== TOO_LARGE) return;
      this.fail(
        new WatchError(
          TOO_LARGE,
          `the server has not reached resourceVersion ${rv} (etcd restored from a backup?)`,
        ),
        'watch',
      );
    });
  }

  // ---------------------------------------------------------------- failures

  private markHealthy(now: number): void {
    this.deps.status.setConnected(true, now);
    this.retries.healthy(now);
  }

  private fail(err: unknown, phase: Phase): void {
    if (this.stopped) return;
    const epoch = ++this.epoch;
    this.release();
    const now = this.now();
    const reason = classifyError(err);
    const { status, tuning } = this.deps;
    status.failed(reason, now);
    // The server no longer has our resourceVersion (410), or has not reached it: relist.
    const gone = reason === 'gone' || reason === TOO_LARGE || reason === REWOUND;
    let delay = this.retries.failed(reason, gone, now);
    const retryAfter = retryAfterMs(err);
    if (retryAfter !== undefined) delay = Math.max(delay, Math.min(retryAfter, tuning.maxRetryAfterMs));
    const relist = gone || phase === 'list' || this.rv === undefined;
    if (gone) this.rv = undefined;
    // Every watch of this server holds a resourceVersion of the lost history: they relist too.
    if (reason === TOO_LARGE) this.deps.rewind?.raise(this.deps.resource);
    this.deps.log.warn('watch failed', {
      reason,
      phase,
      err,
      next: relist ? 'list' : 'watch',
      retryIn: formatDuration(Math.round(delay)),
      attempt: this.retries.attempts,
    });
    this.timer = this.after(delay, () => {
      if (epoch !== this.epoch) return;
      this.timer = undefined;
      if (relist) this.beginList();
      else this.startWatch(false);
    });
  }
}

/**
 * A list+watch stream of `opts.resource`, cold: each subscription runs its own loop and
 * unsubscribing aborts the request in flight and clears every timer.
 *
 * List (paginated, consistent read) -> Init, InitApply..., [Delete for vanished], InitDone; then
 * watch from the list's resourceVersion with bookmarks. A clean close resumes at once from the
 * last resourceVersion seen; a network error or idle timeout resumes after backoff; 410 Gone (HTTP
 * or ERROR event) relists; 429 waits at least Retry-After. The Observable never errors or
 * completes by itself. A subscriber that throws is counted (`errors{reason="subscriber"}`) and
 * logged; the stream goes on.
 */
export function watch<T extends KubeObject>(opts: WatchOptions<T>): Observable<WatchEvent<T>> {
  const status = opts.status ?? new WatchStatus(opts.resource, opts.scheduler);
  const log = (opts.logger ?? silentLogger).with({ component: 'watch', resource: opts.resource });
  return isolateConsumers(rawWatch(opts, status, log), consumerErrorReporter(status, log, opts.scheduler));
}

/** The stream without consumer isolation, for in-layer consumers that guard themselves. */
export function rawWatch<T extends KubeObject>(
  opts: WatchOptions<T>,
  status: WatchStatus,
  log: Logger,
): Observable<WatchEvent<T>> {
  const deps = resolveDeps(opts, status, log);
  return new Observable<WatchEvent<T>>((subscriber) => {
    const run = new WatchRun(deps, subscriber);
    run.start();
    return () => run.stop();
  });
}

/** Counts every consumer error, logs at most one line per 10 s (with how many were suppressed). */
export function consumerErrorReporter(
  status: WatchStatus,
  log: Logger,
  scheduler: SchedulerLike,
): (err: unknown) => void {
  let lastLogAt = Number.NEGATIVE_INFINITY;
  let suppressed = 0;
  return (err) => {
    status.countError('subscriber');
    const now = scheduler.now();
    if (now - lastLogAt < 10_000) {
      suppressed++;
      return;
    }
    lastLogAt = now;
    log.error('watch subscriber threw; the stream goes on', { err, suppressed });
    suppressed = 0;
  };
}
