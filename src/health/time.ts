/**
 * Parsing and formatting of API timestamps. Remote timestamps are only ever compared with each other
 * (to notice that one CHANGED or moved), never with our clock.
 */

const RFC3339 =
  /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d{2}):(\d{2}))$/;

/**
 * Parses an RFC 3339 timestamp (metav1.Time or MicroTime) into integer MICROseconds since the epoch,
 * so that MicroTime values that differ below the millisecond still compare as different. Digits beyond
 * microseconds are truncated. Returns undefined for anything else (never throws).
 */
export function parseMicros(value: unknown): number | undefined {
  if (typeof value !== 'string' || value.length > 64) return undefined;
  const fast = parseUtcMicrosFast(value);
  return fast === FAST_PATH_DECLINED ? parseMicrosGeneral(value) : fast;
}

/** {@link parseMicros} without the fast path: the reference the fast path is tested against. */
export function parseMicrosGeneral(value: string): number | undefined {
  const m = RFC3339.exec(value);
  if (!m) return undefined;
  const year = Number(m[1]);
  const month = Number(m[2]);
  const day = Number(m[3]);
  const hour = Number(m[4]);
  const minute = Number(m[5]);
  const second = Number(m[6]);
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return undefined;
  }
  let ms = Date.UTC(year, month - 1, day, hour, minute, 0, 0);
  // Reject calendar overflow (Feb 30 -> Mar 2).
  const check = new Date(ms);
  if (check.getUTCFullYear() !== year || check.getUTCMonth() !== month - 1 || check.getUTCDate() !== day) {
    return undefined;
  }
  ms += second * 1000;
  if (m[9] !== undefined) {
    const sign = m[9] === '-' ? -1 : 1;
    const oh = Number(m[10]);
    const om = Number(m[11]);
    if (oh > 23 || om > 59) return undefined;
    ms -= sign * (oh * 60 + om) * 60_000;
  }
  const fraction = m[7] ?? '';
  const micros = fraction === '' ? 0 : Number(fraction.slice(0, 6).padEnd(6, '0'));
  const total = ms * 1000 + micros;
  return Number.isSafeInteger(total) ? total : undefined;
}

const FAST_PATH_DECLINED = -1;
const DAYS_BEFORE_MONTH = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];

/** Value of `count` ASCII digits at `from`, or -1 when one of them is not a digit. */
function digitsAt(s: string, from: number, count: number): number {
  let v = 0;
  for (let i = from; i < from + count; i++) {
    const d = s.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return -1;
    v = v * 10 + d;
  }
  return v;
}

/**
 * What every kubelet and API server writes: `YYYY-MM-DDTHH:MM:SS[.fraction]Z`, years 1970-9999,
 * parsed without a regular expression or a Date: a lease renewal parses one of these. Anything else
 * (offsets, lower-case separators, other years, any doubt) returns FAST_PATH_DECLINED and takes the
 * general path, so both paths agree on every input (a property test holds them to it).
 */
function parseUtcMicrosFast(s: string): number | undefined {
  const len = s.length;
  if (len < 20 || len > 30 || s.charCodeAt(len - 1) !== 90 /* Z */) return FAST_PATH_DECLINED;
  if (s[4] !== '-' || s[7] !== '-' || s[10] !== 'T' || s[13] !== ':' || s[16] !== ':')
    return FAST_PATH_DECLINED;
  const year = digitsAt(s, 0, 4);
  const month = digitsAt(s, 5, 2);
  const day = digitsAt(s, 8, 2);
  const hour = digitsAt(s, 11, 2);
  const minute = digitsAt(s, 14, 2);
  const second = digitsAt(s, 17, 2);
  if (year < 1970 || month < 1 || day < 1 || hour < 0 || minute < 0 || second < 0) return FAST_PATH_DECLINED;
  let micros = 0;
  if (len > 20) {
    // ".f{1,9}" between the seconds and the Z
    const digits = len - 21;
    if (s[19] !== '.' || digits < 1) return FAST_PATH_DECLINED;
    const frac = digitsAt(s, 20, Math.min(digits, 6));
    if (frac < 0 || (digits > 6 && digitsAt(s, 26, digits - 6) < 0)) return FAST_PATH_DECLINED;
    micros = digits >= 6 ? frac : frac * 10 ** (6 - digits);
  }
  if (month > 12 || hour > 23 || minute > 59 || second > 60) return undefined;
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  const monthDays =
    month === 2 ? (leap ? 29 : 28) : month === 4 || month === 6 || month === 9 || month === 11 ? 30 : 31;
  if (day > monthDays) return undefined;
  // Days since 1970-01-01: whole years (with their leap days), then months, then days.
  const y = year - 1;
  const leapDays = Math.floor(y / 4) - Math.floor(y / 100) + Math.floor(y / 400) - 477; // 477 leap days before 1970
  const days =
    (year - 1970) * 365 + leapDays + DAYS_BEFORE_MONTH[month - 1]! + (leap && month > 2 ? 1 : 0) + day - 1;
  const total = ((days * 24 + hour) * 60 + minute) * 60_000_000 + second * 1_000_000 + micros;
  return Number.isSafeInteger(total) ? total : undefined;
}

/**
 * Formats a wall-clock millisecond value as metav1.Time does on the wire (RFC 3339, second precision,
 * UTC): 2026-01-02T03:04:05Z. A non-finite or out-of-range input yields the epoch instead of throwing.
 */
export function formatTime(wallMs: number): string {
  const d = new Date(Number.isFinite(wallMs) ? Math.floor(wallMs / 1000) * 1000 : 0);
  if (Number.isNaN(d.getTime())) return '1970-01-01T00:00:00Z';
  return `${d.toISOString().slice(0, 19)}Z`;
}

/**
 * Two remote timestamps are "the same" when they denote the same instant; when either does not parse,
 * when their raw text is identical. Absent (undefined/null) equals only absent.
 */
export function sameInstant(a: string | null | undefined, b: string | null | undefined): boolean {
  if (a === b) return true;
  if (a == null || b == null) return false;
  const pa = parseMicros(a);
  const pb = parseMicros(b);
  if (pa === undefined || pb === undefined) return false;
  return pa === pb;
}
