import { describe, expect, it } from 'vitest';
import { RetryBackoff } from './backoff.js';
import { DEFAULT_BACKOFF } from './types.js';

/** No jitter: random() = 0.5 gives the nominal delays 800, 1600, 3200, ... ms, capped at 30 s. */
const retries = () => new RetryBackoff(DEFAULT_BACKOFF, () => 0.5);

describe('RetryBackoff', () => {
  it('doubles the delay with each failure in a row, up to the cap, and counts them', () => {
    const r = retries();
    const delays = [0, 1, 2, 3, 4, 5, 6].map(() => r.failed('network', false, 0));
    expect(delays).toEqual([800, 1600, 3200, 6400, 12_800, 25_600, 30_000]);
    expect(r.attempts).toBe(7);
  });

  it('starts again from the first delay after a healthy spell of resetAfterMs', () => {
    const r = retries();
    r.failed('network', false, 0);
    r.failed('network', false, 0);
    r.healthy(1000);
    expect(r.failed('network', false, 1000 + 119_999)).toBe(3200);
    r.healthy(200_000);
    expect(r.failed('network', false, 200_000 + 120_000)).toBe(800);
    expect(r.attempts).toBe(1);
  });

  it('a healthy spell runs from its first sign of health, not its last', () => {
    const r = retries();
    r.failed('network', false, 0);
    r.healthy(10_000);
    r.healthy(100_000);
    expect(r.failed('network', false, 130_000)).toBe(800);
  });

  it('a failure ends the healthy spell', () => {
    const r = retries();
    r.healthy(0);
    r.failed('network', false, 1000);
    r.failed('network', false, 200_000);
    expect(r.failed('network', false, 200_000)).toBe(3200);
  });

  it('a failure to retry at once goes at once when new, backs off when repeated', () => {
    const r = retries();
    r.failed('network', false, 0);
    expect(r.failed('gone', true, 0)).toBe(0);
    expect(r.failed('gone', true, 0)).toBe(3200);
    expect(r.failed('too_large_resource_version', true, 0)).toBe(0);
    expect(r.failed('network', false, 0)).toBe(12_800);
    expect(r.attempts).toBe(5);
  });
});
