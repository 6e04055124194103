/**
 * A token bucket in virtual time (monotonic ms passed in), with the semantics of client-go's
 * `flowcontrol.NewTokenBucketRateLimiter` (golang.org/x/time/rate): it starts full with `burst`
 * tokens, refills continuously at `rate` tokens per second and never holds more than `burst`.
 * A rate <= 0 is upstream's "never" limiter: it admits nothing, ever.
 *
 * Stored as a theoretical arrival time (GCRA), so there is no floating token count to drift:
 * a token is available at `now` iff `now >= tat - (burst - 1) * interval`.
 */
export class TokenBucket {
  private tat = Number.NEGATIVE_INFINITY;

  private constructor(
    readonly rate: number,
    readonly burst: number,
  ) {}

  /** A full bucket. */
  static full(rate: number, burst = 1): TokenBucket {
    return new TokenBucket(rate, Math.max(1, Math.floor(burst)));
  }

  /** Milliseconds between tokens. */
  get intervalMs(): number {
    return 1000 / this.rate;
  }

  get never(): boolean {
    return !(this.rate > 0) || !Number.isFinite(this.intervalMs);
  }

  /** Whether a token is available at `now` (does not take it). */
  available(now: number): boolean {
    if (this.never) return false;
    return now >= this.tat - (this.burst - 1) * this.intervalMs;
  }

  /** Takes a token if one is available (upstream's TryAccept). */
  tryTake(now: number): boolean {
    if (!this.available(now)) return false;
    this.tat = Math.max(this.tat, now) + this.intervalMs;
    return true;
  }

  /** When the next token is available (>= now), or undefined for a never limiter. */
  nextTokenAt(now: number): number | undefined {
    if (this.never) return undefined;
    return Math.max(now, this.tat - (this.burst - 1) * this.intervalMs);
  }

  /**
   * As if a token had been taken at `at` (a time already past): none is taken now, but the bucket
   * holds no more than it would hold had that token been taken then from a full bucket. A token
   * taken since (or at the same time) already says as much: nothing changes. A never limiter stays
   * one (it admits nothing anyway).
   */
  takenAt(at: number): void {
    this.tat = Math.max(this.tat, at + this.intervalMs);
  }

  /**
   * Upstream's RateLimitedTimedQueue.SwapLimiter: same rate -> keep this bucket as it is; a rate
   * <= 0 -> a never limiter; otherwise a new full bucket, except that when this bucket has no
   * token available right now the new one starts drained (one token taken at `now`). Swapping
   * away from a never limiter therefore always starts drained.
   */
  swapped(rate: number, now: number): TokenBucket {
    const same = rate === this.rate || (!(rate > 0) && this.never);
    if (same) return this;
    const next = TokenBucket.full(rate, this.burst);
    if (next.never) return next;
    if (!this.tryTake(now)) next.tryTake(now);
    return next;
  }
}
