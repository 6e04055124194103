import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatTime, parseMicros, sameInstant } from './time.js';

describe('parseMicros', () => {
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
