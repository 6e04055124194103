import { describe, expect, it } from 'vitest';
import { MAX_TIMER_DELAY_MS, timerDelay } from './clock.js';

describe('timerDelay', () => {
  it('keeps delays a timer takes, clamps the others into [0, 2^31 - 1]', () => {
    expect(MAX_TIMER_DELAY_MS).toBe(2_147_483_647);
    expect(timerDelay(0)).toBe(0);
    expect(timerDelay(1.5)).toBe(1.5);
    expect(timerDelay(50_000)).toBe(50_000);
    expect(timerDelay(MAX_TIMER_DELAY_MS)).toBe(MAX_TIMER_DELAY_MS);
    expect(timerDelay(720 * 3_600_000)).toBe(MAX_TIMER_DELAY_MS);
    expect(timerDelay(Number.POSITIVE_INFINITY)).toBe(MAX_TIMER_DELAY_MS);
    expect(timerDelay(-5)).toBe(0);
    expect(timerDelay(Number.NEGATIVE_INFINITY)).toBe(0);
    expect(timerDelay(Number.NaN)).toBe(0);
  });
});
