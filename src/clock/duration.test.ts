import { describe, expect, it } from 'vitest';
import { DurationParseError, formatDuration, parseDuration, tryParseDuration } from './duration.js';

describe('parseDuration (Go time.ParseDuration)', () => {
  it.each([
    ['0', 0],
    ['-0', 0],
    ['+0', 0],
    ['0s', 0],
    ['300ms', 300],
    ['45s', 45_000],
    ['5m', 300_000],
    ['10m', 600_000],
    ['1h', 3_600_000],
    ['1h2m3.5s', 3_723_500],
    ['1.5h', 5_400_000],
    ['.5s', 500],
    ['1.s', 1000],
    ['2h45m', 9_900_000],
    ['1m30s', 90_000],
    ['-2m', -120_000],
    ['+5s', 5000],
    ['1.1s', 1100],
    ['100us', 0.1],
    ['100\u00b5s', 0.1],
    ['100\u03bcs', 0.1],
    ['1500ns', 0.0015],
    ['1ms500us', 1.5],
    ['3m0.5s', 180_500],
    ['00010s', 10_000],
    ['1h.5m', 3_630_000],
    ['1.05s', 1050],
  ])('%s -> %d ms', (input, ms) => {
    expect(parseDuration(input)).toBeCloseTo(ms, 9);
    expect(tryParseDuration(input)).toEqual({ ok: true, ms: expect.closeTo(ms, 9) });
  });

  it.each([
    ['', 'invalid duration ""'],
    ['5', 'missing unit in duration "5"'],
    ['1h5', 'missing unit in duration "1h5"'],
    ['5x', 'unknown unit "x" in duration "5x"'],
    ['5d', 'unknown unit "d" in duration "5d"'],
    ['5 s', 'unknown unit " s" in duration "5 s"'],
    [' 5s', 'invalid duration " 5s"'],
    ['5s ', 'unknown unit "s " in duration "5s "'],
    ['s', 'invalid duration "s"'],
    ['.s', 'invalid duration ".s"'],
    ['-', 'invalid duration "-"'],
    ['--5s', 'invalid duration "--5s"'],
    ['5S', 'unknown unit "S" in duration "5S"'],
    ['1e3s', 'unknown unit "e" in duration "1e3s"'],
    ['3000000h', 'invalid duration "3000000h"'],
    ['abc', 'invalid duration "abc"'],
  ])('%j is rejected: %s', (input, error) => {
    expect(tryParseDuration(input)).toEqual({ ok: false, error });
    expect(() => parseDuration(input)).toThrow(DurationParseError);
    expect(() => parseDuration(input)).toThrow(error);
  });

  it('accepts the largest Go duration and rejects one nanosecond more', () => {
    expect(tryParseDuration('2562047h47m16.854775807s').ok).toBe(true);
    expect(tryParseDuration('2562047h47m16.854775808s').ok).toBe(false);
  });

  it('rejects non-strings without throwing from tryParseDuration', () => {
    expect(tryParseDuration(5 as unknown as string)).toEqual({ ok: false, error: 'invalid duration 5' });
  });

  it('throws a DurationParseError that keeps the input', () => {
    const err = (() => {
      try {
        parseDuration('5x');
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(DurationParseError);
    expect(err).toMatchObject({ name: 'DurationParseError', input: '5x' });
  });
});

describe('formatDuration (Go Duration.String)', () => {
  it.each([
    [0, '0s'],
    [300, '300ms'],
    [1.5, '1.5ms'],
    [0.0015, '1.5\u00b5s'],
    [0.000001, '1ns'],
    [45_000, '45s'],
    [300_000, '5m0s'],
    [3_723_500, '1h2m3.5s'],
    [-120_000, '-2m0s'],
    [50_000, '50s'],
    [1050, '1.05s'],
    [0.001, '1\u00b5s'],
    [1, '1ms'],
    [1000, '1s'],
    [1.000001, '1.000001ms'],
    [Number.NaN, 'NaN'],
    [Number.POSITIVE_INFINITY, 'Infinity'],
    [Number.NEGATIVE_INFINITY, '-Infinity'],
  ])('%d ms -> %s', (ms, text) => {
    expect(formatDuration(ms)).toBe(text);
  });

  it('round-trips through parseDuration', () => {
    for (const ms of [1, 999, 1000, 61_000, 3_600_000, 3_723_500, 86_400_000]) {
      expect(parseDuration(formatDuration(ms))).toBe(ms);
    }
  });
});
