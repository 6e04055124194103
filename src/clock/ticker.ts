/**
 * A periodic tick the process already has (src/metrics/event-loop.ts, EventLoopSampler: the
 * process's one periodic timer). Work that must run on a cadence rides on it instead of arming a
 * timer of its own: on an idle controller each timer is a wake-up of its own, and a wake-up costs
 * more than the work (docs/benchmarks.md, "watch reads on a cadence").
 */
export interface Ticker {
  /** Milliseconds between two ticks. */
  readonly intervalMs: number;
  /** Runs `fn` on every tick from now on; the function returned stops that. */
  onTick(fn: () => void): () => void;
}

/**
 * Runs `fn` about every `periodMs` on `ticker`'s ticks: on the first tick at least
 * `periodMs - intervalMs / 2` (monotonic, `now`) after the previous run or after this call, so that
 * the period stays `periodMs` on average when it is a whole number of ticks and a tick that comes a
 * little early still counts. With ticks coarser than the period there is nothing to ride on: throws.
 */
export function everyOnTicks(
  ticker: Ticker,
  now: () => number,
  periodMs: number,
  fn: () => void,
): () => void {
  if (!(ticker.intervalMs > 0 && ticker.intervalMs <= periodMs)) {
    throw new RangeError(`a ${periodMs} ms period cannot ride on ${ticker.intervalMs} ms ticks`);
  }
  const due = periodMs - ticker.intervalMs / 2;
  let last = now();
  return ticker.onTick(() => {
    const t = now();
    if (t - last < due) return;
    last = t;
    fn();
  });
}
