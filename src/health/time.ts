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
