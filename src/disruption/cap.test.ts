import { describe, expect, it } from 'vitest';
import { BlastRadiusCap, validateCapSettings } from './cap.js';

describe('BlastRadiusCap', () => {
  it('is off without bounds', () => {
    const c = new BlastRadiusCap({});
    expect(c.enabled).toBe(false);
    expect(c.limit(100)).toBeUndefined();
    expect(c.allows(0, 100)).toBe(true);
    expect(new BlastRadiusCap({ maxNodes: 0, maxPercent: 0, windowMs: 0 }).enabled).toBe(false);
  });

  it('takes the smaller of N and percent', () => {
    const c = new BlastRadiusCap({ maxNodes: 5, maxPercent: 10, windowMs: 1000 });
    expect(c.limit(30)).toBe(3);
    expect(c.limit(100)).toBe(5);
    expect(c.limit(1000)).toBe(5);
  });

  it('rounds the percent bound down but allows at least one', () => {
    const c = new BlastRadiusCap({ maxPercent: 10, windowMs: 1000 });
    expect(c.limit(39)).toBe(3);
    expect(c.limit(5)).toBe(1);
    expect(c.limit(0)).toBe(1);
  });

  it('frees slots as grants leave the sliding window', () => {
    const c = new BlastRadiusCap({ maxNodes: 2, windowMs: 60_000 });
    c.record('a', 0);
    c.record('b', 10_000);
    expect(c.allows(20_000, 10)).toBe(false);
    expect(c.nextFreeAt(20_000, 10)).toBe(60_000);
    expect(c.allows(59_999, 10)).toBe(false);
    expect(c.allows(60_000, 10)).toBe(true);
    expect(c.used(60_000)).toBe(1);
    c.record('c', 60_000);
    expect(c.nextFreeAt(60_000, 10)).toBe(70_000);
  });

  it('refunds a grant', () => {
    const c = new BlastRadiusCap({ maxNodes: 1, windowMs: 60_000 });
    c.record('a', 0);
    expect(c.allows(1, 10)).toBe(false);
    expect(c.refund('a')).toBe(true);
    expect(c.allows(1, 10)).toBe(true);
    expect(c.refund('a')).toBe(false);
  });

  it('validates settings naming the field', () => {
    expect(validateCapSettings({ maxNodes: -1 })[0]).toMatch(/^cap\.maxNodes: -1/);
    expect(validateCapSettings({ maxPercent: 150, windowMs: 1 })[0]).toMatch(/^cap\.maxPercent: 150/);
    expect(validateCapSettings({ maxNodes: 3 })[0]).toMatch(/^cap\.windowMs: undefined: must be > 0/);
    expect(validateCapSettings({ maxNodes: 3, windowMs: 1000 })).toEqual([]);
    expect(() => new BlastRadiusCap({ maxNodes: 1.5, windowMs: 1 })).toThrow(RangeError);
  });
});
