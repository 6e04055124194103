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
