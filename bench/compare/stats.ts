/** Small statistics helpers for the side-by-side benchmark. */

export interface Summary {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  min: number;
  mean: number;
}

/** Nearest-rank percentile (p in 0..1) of an ascending array; NaN when empty. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.max(1, Math.ceil(p * sorted.length));
  return sorted[Math.min(sorted.length, rank) - 1]!;
}

export function summarize(values: readonly number[]): Summary {
  const s = [...values].sort((a, b) => a - b);
  const sum = s.reduce((a, b) => a + b, 0);
  return {
    n: s.length,
    p50: percentile(s, 0.5),
    p90: percentile(s, 0.9),
    p99: percentile(s, 0.99),
    max: s.length ? s[s.length - 1]! : Number.NaN,
    min: s.length ? s[0]! : Number.NaN,
    mean: s.length ? sum / s.length : Number.NaN,
  };
}

/** Median of several numbers (for repeated runs); NaN when empty. */
export function median(values: readonly number[]): number {
  return percentile(
    [...values].filter((v) => Number.isFinite(v)).sort((a, b) => a - b),
    0.5,
  );
}

export function round(v: number, digits = 0): number {
  if (!Number.isFinite(v)) return v;
  const f = 10 ** digits;
  return Math.round(v * f) / f;
}

/** Parses "20s", "1m", "1500ms", "2m30s" or a bare number of seconds into ms. */
export function parseDurationMs(text: string): number {
  const bare = Number(text);
  if (Number.isFinite(bare)) return bare * 1000;
  let total = 0;
  let rest = text.trim();
  const re = /^(\d+(?:\.\d+)?)(ms|s|m|h)/;
  if (!re.test(rest)) throw new Error(`bad duration "${text}" (examples: 20s, 1m, 1500ms)`);
  while (rest.length > 0) {
    const m = re.exec(rest);
    if (!m) throw new Error(`bad duration "${text}" (examples: 20s, 1m, 1500ms)`);
    const v = Number(m[1]);
    const unit = m[2];
    total += unit === 'ms' ? v : unit === 's' ? v * 1000 : unit === 'm' ? v * 60_000 : v * 3_600_000;
    rest = rest.slice(m[0].length);
  }
  return total;
}
