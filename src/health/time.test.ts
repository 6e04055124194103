import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatTime, parseMicros, parseMicrosGeneral, sameInstant } from './time.js';

describe('parseMicros', () => {
  it('fast path and general path agree on every input (property)', () => {
    const pad = (n: number, w: number) => String(n).padStart(w, '0');
    const stamp = fc
      .record({
        year: fc.oneof(fc.integer({ min: 1960, max: 2300 }), fc.integer({ min: 0, max: 9999 })),
        month: fc.integer({ min: 0, max: 13 }),
        day: fc.integer({ min: 0, max: 32 }),
        hour: fc.integer({ min: 0, max: 25 }),
        minute: fc.integer({ min: 0, max: 61 }),
        second: fc.integer({ min: 0, max: 61 }),
        fraction: fc.oneof(fc.constant(''), fc.stringMatching(/^\.[0-9]{0,10}$/), fc.constant('.1a')),
        zone: fc.constantFrom('Z', 'Z', 'Z', 'z', '+02:00', '-01:30', ''),
        sep: fc.constantFrom('T', 'T', 'T', 't', ' '),
      })
      .map(
        (p) =>
          `${pad(p.year, 4)}-${pad(p.month, 2)}-${pad(p.day, 2)}${p.sep}${pad(p.hour, 2)}:${pad(p.minute, 2)}:${pad(p.second, 2)}${p.fraction}${p.zone}`,
      );
    fc.assert(
      fc.property(fc.oneof(stamp, fc.string({ maxLength: 32 })), (s) => {
        expect(parseMicros(s)).toBe(parseMicrosGeneral(s));
      }),
      { numRuns: 20_000 },
    );
    // Leap days, month ends and the far end of the safe-integer range, exactly.
    for (const s of [
      '2024-02-29T23:59:59.999999Z',
      '2100-02-29T00:00:00Z',
      '2000-02-29T00:00:00Z',
      '1970-01-01T00:00:00Z',
      '2026-12-31T23:59:60.5Z',
      '2255-06-01T00:00:00Z',
      '2300-01-01T00:00:00Z',
    ]) {
      expect(parseMicros(s)).toBe(parseMicrosGeneral(s));
    }
  });

  it('parses MicroTime to microseconds, keeping sub-millisecond digits', () => {
    const base = Date.UTC(2026, 10, 30, 10, 0, 0) * 1000;
    expect(parseMicros('2026-11-30T10:00:00.123456Z')).toBe(base + 123_456);
    expect(parseMicros('2026-11-30T10:00:00.123457Z')).toBe(base + 123_457);
    expect(parseMicros('2026-11-30T10:00:00Z')).toBe(base);
    expect(parseMicros('2026-11-30T10:00:00.1Z')).toBe(base + 100_000);
    // nanoseconds are truncated to microseconds
    expect(parseMicros('2026-11-30T10:00:00.123456789Z')).toBe(base + 123_456);
  });

  it('applies numeric offsets', () => {
    expect(parseMicros('2026-11-30T12:00:00+02:00')).toBe(parseMicros('2026-11-30T10:00:00Z'));
    expect(parseMicros('2026-11-30T08:30:00-01:30')).toBe(parseMicros('2026-11-30T10:00:00Z'));
  });

  it('rejects junk without throwing', () => {
    for (const v of [
      undefined,
      null,
      42,
      {},
      '',
      'yesterday',
      '2026-02-30T00:00:00Z',
      '2026-13-01T00:00:00Z',
      '2026-01-01T24:00:00Z',
      '2026-01-01T00:00:00',
      '0050-01-01T00:00:00Z',
      'x'.repeat(100),
    ]) {
      expect(parseMicros(v)).toBeUndefined();
    }
  });

  it('never throws and round-trips formatTime (property)', () => {
    fc.assert(
      fc.property(fc.string(), (s) => {
        const v = parseMicros(s);
        expect(v === undefined || Number.isSafeInteger(v)).toBe(true);
      }),
    );
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 4_102_444_800_000 }), (ms) => {
        expect(parseMicros(formatTime(ms))).toBe(Math.floor(ms / 1000) * 1_000_000);
      }),
    );
  });
});

describe('formatTime', () => {
  it('formats like metav1.Time: RFC 3339, seconds, UTC', () => {
    expect(formatTime(Date.UTC(2026, 0, 2, 3, 4, 5, 999))).toBe('2026-01-02T03:04:05Z');
  });
  it('never throws on bad input', () => {
    expect(formatTime(Number.NaN)).toBe('1970-01-01T00:00:00Z');
    expect(formatTime(Number.POSITIVE_INFINITY)).toBe('1970-01-01T00:00:00Z');
    expect(formatTime(1e20)).toBe('1970-01-01T00:00:00Z');
  });
});

describe('sameInstant', () => {
  it('compares parsed values, falling back to raw text', () => {
    expect(sameInstant('2026-01-01T00:00:00Z', '2026-01-01T00:00:00.000000Z')).toBe(true);
    expect(sameInstant('2026-01-01T01:00:00+01:00', '2026-01-01T00:00:00Z')).toBe(true);
    expect(sameInstant('2026-01-01T00:00:01Z', '2026-01-01T00:00:00Z')).toBe(false);
    expect(sameInstant('junk', 'junk')).toBe(true);
    expect(sameInstant('junk', 'junk2')).toBe(false);
    expect(sameInstant(undefined, null)).toBe(false);
    expect(sameInstant(null, null)).toBe(true);
    expect(sameInstant(undefined, '2026-01-01T00:00:00Z')).toBe(false);
  });
});
