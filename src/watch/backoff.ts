import type { BackoffOptions } from './types.js';

/**
 * Delay before retry number `attempt` (0-based): initial * factor^attempt capped at maxMs, with
 * relative jitter drawn from `random` (0.5 gives the nominal delay), never above maxMs.
 */
export function backoffDelay(attempt: number, o: BackoffOptions, random: () => number): number {
  const nominal = Math.min(o.maxMs, o.initialMs * o.factor ** Math.max(0, attempt));
  const jittered = nominal * (1 + o.jitter * (2 * random() - 1));
  return Math.round(Math.min(o.maxMs, Math.max(0, jittered)));
}

/** The server-side watch timeout: uniform in [min, max] seconds, like client-go's 5-10 min. */
export function watchTimeoutSeconds(range: { min: number; max: number }, random: () => number): number {
  const lo = Math.max(1, Math.floor(range.min));
  const hi = Math.max(lo, Math.floor(range.max));
  return Math.min(hi, lo + Math.floor(random() * (hi - lo + 1)));
}

/**
 * Retry bookkeeping of one stream: failures in a row (the backoff's exponent), the reason of the
 * last one, and since when the stream has been healthy: a healthy spell of `resetAfterMs` starts
 * the delays again from `initialMs`.
 */
export class RetryBackoff {
  private readonly options: BackoffOptions;
  private readonly random: () => number;
  private failures = 0;
  private lastReason: string | undefined;
  private healthySince: number | undefined;

  constructor(options: BackoffOptions, random: () => number) {
    this.options = options;
    this.random = random;
  }

  /** Failures in a row, the last one counted. */
  get attempts(): number {
    return this.failures;
  }

  /** The stream works (a list page came, a watch opened); the first call of a spell starts it. */
  healthy(now: number): void {
    if (this.healthySince === undefined) this.healthySince = now;
  }

  /**
   * Counts a failure and gives the delay before the retry. `atOnceIfNew`: the failure's retry
   * needs no wait of its own (a relist because our resourceVersion is no good): the first of these
   * after any other failure retries at once; repeated ones back off.
   */
  failed(reason: string, atOnceIfNew: boolean, now: number): number {
    const o = this.options;
    if (this.healthySince !== undefined && now - this.healthySince >= o.resetAfterMs) this.failures = 0;
    this.healthySince = undefined;
    const delay = atOnceIfNew && this.lastReason !== reason ? 0 : backoffDelay(this.failures, o, this.random);
    this.failures++;
    this.lastReason = reason;
    return delay;
  }
}
