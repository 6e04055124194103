/**
 * Go-style durations (`time.ParseDuration` / `Duration.String`), in milliseconds.
 *
 * Accepted: an optional sign, then one or more `<number><unit>` parts with no spaces, e.g.
 * `300ms`, `1.5h`, `1h2m3.5s`, `-2m`, `.5s`; the bare string `0` (and `+0`, `-0`). Units: `ns`,
 * `us`, `µs` (U+00B5), `μs` (U+03BC), `ms`, `s`, `m`, `h`. Like Go, there is no `d` unit and a
 * number without a unit is rejected. Sub-nanosecond fractions are truncated like Go does.
 *
 * Results are milliseconds as a JS number (fractional for `ns`/`us` values). The range is Go's:
 * at most 2^63-1 nanoseconds (about 292 years) either way.
 */

const NS_PER_UNIT: ReadonlyMap<string, bigint> = new Map([
  ['ns', 1n],
  ['us', 1_000n],
  ['\u00b5s', 1_000n],
  ['\u03bcs', 1_000n],
  ['ms', 1_000_000n],
  ['s', 1_000_000_000n],
  ['m', 60_000_000_000n],
  ['h', 3_600_000_000_000n],
]);

/** Go's limit: the largest int64 nanosecond count. */
const MAX_NS = 9_223_372_036_854_775_807n;

/** What the parser accepts, for error messages shown to people. */
export const DURATION_SYNTAX_HELP =
  'a Go duration such as "45s", "5m", "1h2m3.5s" or "300ms" (units ns, us, ms, s, m, h)';

export type DurationResult = { ok: true; ms: number } | { ok: false; error: string };

export class DurationParseError extends Error {
  constructor(
    message: string,
    readonly input: string,
  ) {
    super(message);
    this.name = 'DurationParseError';
  }
}

const isDigit = (c: string | undefined): boolean => c !== undefined && c >= '0' && c <= '9';

/** Parses a Go duration without throwing. */
export function tryParseDuration(input: string): DurationResult {
  if (typeof input !== 'string') return { ok: false, error: `invalid duration ${JSON.stringify(input)}` };
  const quoted = JSON.stringify(input);
  const invalid = (): DurationResult => ({ ok: false, error: `invalid duration ${quoted}` });
  let s = input;
  let negative = false;
  if (s.startsWith('-') || s.startsWith('+')) {
    negative = s[0] === '-';
    s = s.slice(1);
  }
  if (s === '0') return { ok: true, ms: 0 };
  if (s === '') return invalid();

  // Exact integer nanoseconds, like Go's int64 arithmetic.
  let totalNs = 0n;
  let i = 0;
  while (i < s.length) {
    const c = s[i];
    if (!(c === '.' || isDigit(c))) return invalid();
    // Integer part.
    const intStart = i;
    while (isDigit(s[i])) i++;
    const intDigits = s.slice(intStart, i);
    // Fraction.
    let fracDigits = '';
    if (s[i] === '.') {
      i++;
      const fracStart = i;
      while (isDigit(s[i])) i++;
      fracDigits = s.slice(fracStart, i);
    }
    if (intDigits === '' && fracDigits === '') return invalid();
    // Unit: everything up to the next digit or dot.
    const unitStart = i;
    while (i < s.length && s[i] !== '.' && !isDigit(s[i])) i++;
    const unit = s.slice(unitStart, i);
    if (unit === '') return { ok: false, error: `missing unit in duration ${quoted}` };
    const perUnit = NS_PER_UNIT.get(unit);
    if (perUnit === undefined) {
      return { ok: false, error: `unknown unit ${JSON.stringify(unit)} in duration ${quoted}` };
    }
    if (intDigits.length > 20) return invalid();
    totalNs += (intDigits === '' ? 0n : BigInt(intDigits)) * perUnit;
    if (fracDigits !== '') {
      // Sub-nanosecond digits are truncated, as Go does.
      const digits = fracDigits.slice(0, 30);
      totalNs += (BigInt(digits) * perUnit) / 10n ** BigInt(digits.length);
    }
    if (totalNs > MAX_NS) return invalid();
  }
  const ms = Number(totalNs) / 1e6;
  return { ok: true, ms: negative ? -ms : ms };
}

/** Parses a Go duration into milliseconds; throws {@link DurationParseError} when invalid. */
export function parseDuration(input: string): number {
  const r = tryParseDuration(input);
  if (!r.ok) throw new DurationParseError(r.error, input);
  return r.ms;
}

function trimFraction(whole: number, frac: number, fracDigits: number): string {
  if (frac === 0) return String(whole);
  const f = String(frac).padStart(fracDigits, '0').replace(/0+$/, '');
  return `${whole}.${f}`;
}

/**
 * Formats milliseconds the way Go's `Duration.String` does: `0s`, `300ms`, `1.5µs`, `45s`,
 * `5m0s`, `1h2m3.5s`. Rounds to whole nanoseconds.
 */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms)) return String(ms);
  let ns = Math.round(Math.abs(ms) * 1e6);
  const sign = ms < 0 && ns !== 0 ? '-' : '';
  if (ns === 0) return '0s';
  if (ns < 1e3) return `${sign}${ns}ns`;
  if (ns < 1e6) return `${sign}${trimFraction(Math.floor(ns / 1e3), ns % 1e3, 3)}\u00b5s`;
  if (ns < 1e9) return `${sign}${trimFraction(Math.floor(ns / 1e6), ns % 1e6, 6)}ms`;
  const h = Math.floor(ns / 3600e9);
  ns -= h * 3600e9;
  const m = Math.floor(ns / 60e9);
  ns -= m * 60e9;
  const sec = trimFraction(Math.floor(ns / 1e9), ns % 1e9, 9);
  if (h > 0) return `${sign}${h}h${m}m${sec}s`;
  if (m > 0) return `${sign}${m}m${sec}s`;
  return `${sign}${sec}s`;
}
