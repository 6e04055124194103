import { timerDelay } from '../clock/clock.js';
import type { SchedulerLike, Subscription } from '../rx/index.js';

/**
 * The client-side rate limiter of API requests: client-go's `flowcontrol.NewTokenBucketRateLimiter`
 * (golang.org/x/time/rate) behind `--kube-api-qps` / `--kube-api-burst`. The bucket starts full with
 * `burst` tokens and refills at `qps` per second. Waiters are served first come, first served by
 * one timer (not one polling loop per waiter). A waiter whose signal aborts leaves the queue.
 *
 * Waiters queue in priority lanes ({@link RequestPriority}): a token goes to the first waiter of
 * the first lane that has one, so that during a mass failure the `Unknown` marks and their lease
 * re-reads (and the leader's lock) go first, then taints, then everything else, then pod reads and
 * writes. No lane starves: once a waiter of the middle lanes has waited {@link AGING_MS}, every
 * other token goes to the oldest such waiter (aged waiters in the order they came), the rest still
 * in lane order: under a sustained overload the marks keep half the tokens and the others get
 * the rest, so none waits longer than AGING_MS plus twice the aged waiters ahead of it.
 *
 * The second half of the burst is the marks' ({@link RequestRateLimiter.reserve}): a request of
 * another lane takes a token only while more than `floor(burst / 2)` remain (an aged one takes any),
 * so that the taint, pod and Event requests of the nodes marked first, which come while the marks
 * of the others still arrive, cannot spend the burst those marks need. They lose no throughput
 * (the bucket refills at `qps` whoever takes it), only that half of the burst, and wait at most
 * `(reserve + 1) / qps` for it while no mark waits.
 *
 * Low-priority waiters (Events) are served only when no other request waits, and at most
 * `maxLowWaiting` of them queue: one more is refused at once ({@link RateLimiterFullError}), as
 * client-go's event broadcaster drops Events when its queue is full. Events never hold back a
 * lease re-read or a mark, however many a mass failure records.
 *
 * Time comes from the injected scheduler (monotonic ms in production, virtual time in tests).
 */
/**
 * A request's lane in the client's rate limiter, first served first: 'critical' (a mark's status
 * write and its lease re-read, the leader-election lock), 'taint' (taint writes), 'normal' (the
 * rest: lists, identity leases), 'pods' (pod lists, pod status writes, evictions), 'low' (Events:
 * only when nothing else waits, and refused when too many wait).
 */
export type RequestPriority = 'critical' | 'taint' | 'normal' | 'pods' | 'low';

const LANES: readonly RequestPriority[] = ['critical', 'taint', 'normal', 'pods', 'low'];

/**
 * A waiter of the 'taint', 'normal' or 'pods' lane waiting this long gets every other token until
 * served. One renew interval (10 s): the deadlines of nodes lost at once fall within one renew
 * interval, so the marks of a mass failure get every token while they come, and the other lanes
 * are served once they are done (after 5 s, 300 of 1,000 lost at the defaults were marked up to
 * 8 s late instead of 3).
 */
export const AGING_MS = 10_000;

export class RequestRateLimiter {
  /** Theoretical arrival time of the next token (GCRA): no floating token count to drift. */
  private tat = Number.NEGATIVE_INFINITY;
  private readonly intervalMs: number;
  /** One queue per lane, in LANES' order. */
  private readonly lanes: Waiter[][] = LANES.map(() => []);
  private count = 0;
  /** Tokens given in lane order since an aged waiter was last served (while one waited). */
  private sinceAged = 0;
  private timer: Subscription | undefined;
  /** When the armed timer fires (scheduler ms). */
  private timerAt = Number.NaN;
  /** Tokens of the burst only 'critical' requests and aged waiters may take. */
  readonly reserve: number;

  constructor(
    readonly qps: number,
    readonly burst: number,
    private readonly scheduler: SchedulerLike,
    /** Low-priority requests that may wait at once; more are refused (RateLimiterFullError). */
    readonly maxLowWaiting = DEFAULT_MAX_LOW_WAITING,
  ) {
    if (!(qps > 0) || !Number.isFinite(qps)) throw new RangeError(`qps must be > 0 (got ${qps})`);
    if (!(burst >= 1)) throw new RangeError(`burst must be >= 1 (got ${burst})`);
    this.intervalMs = 1000 / qps;
    this.burst = Math.floor(burst);
    this.reserve = Math.floor(this.burst / 2);
  }

  /** Requests waiting for a token right now. */
  get waiting(): number {
    return this.count;
  }

  /** Requests of one lane waiting right now. */
  waitingIn(priority: RequestPriority): number {
    return this.lanes[LANES.indexOf(priority)]!.length;
  }

  /** When a token can be taken that leaves `keep` in the bucket. */
  private nextAt(now: number, keep: number): number {
    return Math.max(now, this.tat - (this.burst - 1 - keep) * this.intervalMs);
  }

  private tryTake(now: number, keep: number): boolean {
    if (now < this.nextAt(now, keep)) return false;
    this.tat = Math.max(this.tat, now) + this.intervalMs;
    return true;
  }

  /** What a request of this lane, arriving now, leaves in the bucket. */
  private keepFor(priority: RequestPriority): number {
    return priority === 'critical' ? 0 : this.reserve;
  }

  /**
   * Resolves when a token is taken. Rejects with `signal.reason` (or an AbortError) if the signal
   * aborts first; no token is spent then. `priority: 'low'` waits behind every other request and
   * is refused at once (RateLimiterFullError) when maxLowWaiting low ones already wait; the other
   * lanes go in their order (see the class).
   */
  acquire(signal?: AbortSignal, priority: RequestPriority = 'normal'): Promise<void> {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    const queue = this.lanes[LANES.indexOf(priority)] ?? this.lanes[2]!;
    if (this.count === 0 && this.tryTake(this.scheduler.now(), this.keepFor(priority)))
      return Promise.resolve();
    if (priority === 'low' && queue.length >= this.maxLowWaiting) {
      return Promise.reject(new RateLimiterFullError(this.maxLowWaiting));
    }
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const i = queue.indexOf(waiter);
        if (i >= 0) {
          queue.splice(i, 1);
          this.count--;
        }
        reject(abortReason(signal!));
        this.arm();
      };
      const waiter: Waiter = {
        since: this.scheduler.now(),
        resolve,
        reject,
        cleanup: () => signal?.removeEventListener('abort', onAbort),
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      queue.push(waiter);
      this.count++;
      // Others may wait for more than the reserve while this one (a mark) may take a token now:
      // arm() moves the timer to the new head's time.
      this.arm();
    });
  }

  private disarm(): void {
    this.timer?.unsubscribe();
    this.timer = undefined;
    this.timerAt = Number.NaN;
  }

  /** One timer, at the time the next waiter (as `pick` chooses it now) can take its token. */
  private arm(): void {
    if (this.count === 0) {
      this.disarm();
      return;
    }
    const now = this.scheduler.now();
    const p = this.pick(now);
    let at = this.nextAt(now, p.keep);
    // A head held back by the reserve takes any token once it has aged: wake then too.
    if (p.keep > 0) at = Math.min(at, Math.max(now, p.queue[0]!.since + AGING_MS));
    if (this.timer && this.timerAt === at) return;
    this.disarm();
    this.timerAt = at;
    this.timer = this.scheduler.schedule(
      () => {
        this.timer = undefined;
        this.timerAt = Number.NaN;
        this.drain();
      },
      timerDelay(at - now),
    );
  }

  private drain(): void {
    const now = this.scheduler.now();
    while (this.count > 0) {
      const p = this.pick(now);
      if (!this.tryTake(now, p.keep)) break;
      if (p.turn === 'lane') this.sinceAged++;
      else this.sinceAged = 0;
      const w = p.queue.shift()!;
      this.count--;
      w.cleanup();
      w.resolve();
    }
    this.arm();
  }

  /**
   * The waiter the next token goes to (one waits), how that was chosen ('lane': in lane order
   * while an aged waiter waits, which counts towards its turn; 'aged': its turn; 'only': no other
   * choice), and what taking it must leave in the bucket (the reserve, unless it is a mark or aged).
   */
  private pick(now: number): { queue: Waiter[]; turn: 'lane' | 'aged' | 'only'; keep: number } {
    // The oldest head of the middle lanes that has waited AGING_MS: every other token is its.
    let aged: Waiter[] | undefined;
    for (let i = 1; i <= 3; i++) {
      const head = this.lanes[i]![0];
      if (head && now - head.since >= AGING_MS && (!aged || head.since < aged[0]!.since))
        aged = this.lanes[i];
    }
    const first = this.lanes.find((q) => q.length > 0)!;
    const keep = (q: Waiter[]) => (q === this.lanes[0] || now - q[0]!.since >= AGING_MS ? 0 : this.reserve);
    if (!aged || aged === first) return { queue: first, turn: 'only', keep: keep(first) };
    if (this.sinceAged >= 1) return { queue: aged, turn: 'aged', keep: 0 };
    return { queue: first, turn: 'lane', keep: keep(first) };
  }
}

interface Waiter {
  /** When it started waiting (scheduler ms). */
  since: number;
  resolve: () => void;
  reject: (err: unknown) => void;
  cleanup: () => void;
}

/** Low-priority requests (Events) that may wait for a token at once, by default. */
export const DEFAULT_MAX_LOW_WAITING = 100;

/** A low-priority request refused because too many wait already (an Event dropped). */
export class RateLimiterFullError extends Error {
  constructor(readonly maxWaiting: number) {
    super(`client-side rate limiter: ${maxWaiting} low-priority requests already waiting`);
    this.name = 'RateLimiterFullError';
  }
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? Object.assign(new Error('aborted'), { name: 'AbortError' });
}
