import { timerDelay } from '../clock/clock.js';
import type { SchedulerLike, Subscription } from '../rx/index.js';

/**
 * The client-side rate limiter of API requests: client-go's `flowcontrol.NewTokenBucketRateLimiter`
 * (golang.org/x/time/rate) behind `--kube-api-qps` / `--kube-api-burst`. The bucket starts full with
 * `burst` tokens and refills at `qps` per second. Waiters are served first come, first served by
 * one timer (not one polling loop per waiter). A waiter whose signal aborts leaves the queue.
 *
 * Low-priority waiters (Events) are served only when no other request waits, and at most
 * `maxLowWaiting` of them queue: one more is refused at once ({@link RateLimiterFullError}), as
 * client-go's event broadcaster drops Events when its queue is full. Events never hold back a
 * lease re-read or a mark, however many a mass failure records.
 *
 * Time comes from the injected scheduler (monotonic ms in production, virtual time in tests).
 */
export class RequestRateLimiter {
  /** Theoretical arrival time of the next token (GCRA): no floating token count to drift. */
  private tat = Number.NEGATIVE_INFINITY;
  private readonly intervalMs: number;
  private readonly waiters: Waiter[] = [];
  private readonly lowWaiters: Waiter[] = [];
  private timer: Subscription | undefined;

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
  }

  /** Requests waiting for a token right now. */
  get waiting(): number {
    return this.waiters.length + this.lowWaiters.length;
  }

  private nextAt(now: number): number {
    return Math.max(now, this.tat - (this.burst - 1) * this.intervalMs);
  }

  private tryTake(now: number): boolean {
    if (now < this.nextAt(now)) return false;
    this.tat = Math.max(this.tat, now) + this.intervalMs;
    return true;
  }

  /**
   * Resolves when a token is taken. Rejects with `signal.reason` (or an AbortError) if the signal
   * aborts first; no token is spent then. `priority: 'low'` waits behind every other request and
   * is refused at once (RateLimiterFullError) when maxLowWaiting low ones already wait.
   */
  acquire(signal?: AbortSignal, priority: 'normal' | 'low' = 'normal'): Promise<void> {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    const queue = priority === 'low' ? this.lowWaiters : this.waiters;
    if (this.waiting === 0 && this.tryTake(this.scheduler.now())) return Promise.resolve();
    if (priority === 'low' && queue.length >= this.maxLowWaiting) {
      return Promise.reject(new RateLimiterFullError(this.maxLowWaiting));
    }
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const i = queue.indexOf(waiter);
        if (i >= 0) queue.splice(i, 1);
        reject(abortReason(signal!));
        if (this.waiting === 0) this.disarm();
      };
      const waiter = {
        resolve,
        reject,
        cleanup: () => signal?.removeEventListener('abort', onAbort),
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      queue.push(waiter);
      this.arm();
    });
  }

  private disarm(): void {
    this.timer?.unsubscribe();
    this.timer = undefined;
  }

  private arm(): void {
    if (this.timer || this.waiting === 0) return;
    const now = this.scheduler.now();
    this.timer = this.scheduler.schedule(
      () => {
        this.timer = undefined;
        this.drain();
      },
      timerDelay(this.nextAt(now) - now),
    );
  }

  private drain(): void {
    const now = this.scheduler.now();
    while (this.waiting > 0 && this.tryTake(now)) {
      const w = (this.waiters.length > 0 ? this.waiters : this.lowWaiters).shift()!;
      w.cleanup();
      w.resolve();
    }
    this.arm();
  }
}

interface Waiter {
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
