import { timerDelay } from '../clock/clock.js';
import type { SchedulerLike, Subscription } from '../rx/index.js';

/**
 * The client-side rate limiter of API requests: client-go's `flowcontrol.NewTokenBucketRateLimiter`
 * (golang.org/x/time/rate) behind `--kube-api-qps` / `--kube-api-burst`. The bucket starts full with
 * `burst` tokens and refills at `qps` per second. Waiters are served first come, first served by
 * one timer (not one polling loop per waiter). A waiter whose signal aborts leaves the queue.
 *
 * Time comes from the injected scheduler (monotonic ms in production, virtual time in tests).
 */
export class RequestRateLimiter {
  /** Theoretical arrival time of the next token (GCRA): no floating token count to drift. */
  private tat = Number.NEGATIVE_INFINITY;
  private readonly intervalMs: number;
  private readonly waiters: { resolve: () => void; reject: (err: unknown) => void; cleanup: () => void }[] =
    [];
  private timer: Subscription | undefined;

  constructor(
    readonly qps: number,
    readonly burst: number,
    private readonly scheduler: SchedulerLike,
  ) {
    if (!(qps > 0) || !Number.isFinite(qps)) throw new RangeError(`qps must be > 0 (got ${qps})`);
    if (!(burst >= 1)) throw new RangeError(`burst must be >= 1 (got ${burst})`);
    this.intervalMs = 1000 / qps;
    this.burst = Math.floor(burst);
  }

  /** Requests waiting for a token right now. */
  get waiting(): number {
    return this.waiters.length;
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
   * aborts first; no token is spent then.
   */
  acquire(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    if (this.waiters.length === 0 && this.tryTake(this.scheduler.now())) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        const i = this.waiters.indexOf(waiter);
        if (i >= 0) this.waiters.splice(i, 1);
        reject(abortReason(signal!));
        if (this.waiters.length === 0) this.disarm();
      };
      const waiter = {
        resolve,
        reject,
        cleanup: () => signal?.removeEventListener('abort', onAbort),
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(waiter);
      this.arm();
    });
  }

  private disarm(): void {
    this.timer?.unsubscribe();
    this.timer = undefined;
  }

  private arm(): void {
    if (this.timer || this.waiters.length === 0) return;
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
    while (this.waiters.length > 0 && this.tryTake(now)) {
      const w = this.waiters.shift()!;
      w.cleanup();
      w.resolve();
    }
    this.arm();
  }
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? Object.assign(new Error('aborted'), { name: 'AbortError' });
}
