import { describe, expect, it } from 'vitest';
import { TokenBucket } from './token-bucket.js';

describe('TokenBucket', () => {
  it('starts full and refills one token per 1/rate seconds', () => {
    const b = TokenBucket.full(0.1);
    expect(b.tryTake(0)).toBe(true);
    expect(b.tryTake(0)).toBe(false);
    expect(b.available(9_999)).toBe(false);
    expect(b.nextTokenAt(1)).toBe(10_000);
    expect(b.tryTake(10_000)).toBe(true);
  });

  it('never holds more than burst tokens', () => {
    const b = TokenBucket.full(1, 1);
    expect(b.tryTake(0)).toBe(true);
    // a long idle time still only gives one token
    expect(b.tryTake(60_000)).toBe(true);
    expect(b.tryTake(60_000)).toBe(false);
    const b3 = TokenBucket.full(1, 3);
    expect([b3.tryTake(0), b3.tryTake(0), b3.tryTake(0), b3.tryTake(0)]).toEqual([true, true, true, false]);
    expect(b3.nextTokenAt(0)).toBe(1000);
  });

  it('admits nothing at rate 0', () => {
    const b = TokenBucket.full(0);
    expect(b.tryTake(0)).toBe(false);
    expect(b.tryTake(1e12)).toBe(false);
    expect(b.nextTokenAt(0)).toBeUndefined();
  });

  it('admits nothing at rate 0 whatever the burst', () => {
    const b = TokenBucket.full(0, 3);
    expect(b.available(0)).toBe(false);
    expect(b.tryTake(1e12)).toBe(false);
  });

  it('admits nothing at a rate so small that its interval overflows', () => {
    const b = TokenBucket.full(Number.MIN_VALUE);
    expect(b.never).toBe(true);
    expect(b.tryTake(0)).toBe(false);
    expect(b.nextTokenAt(0)).toBeUndefined();
  });

  it('swap keeps the bucket when the rate is the same', () => {
    const b = TokenBucket.full(0.1);
    b.tryTake(0);
    expect(b.swapped(0.1, 5)).toBe(b);
  });

  it('swap gives a full bucket when the old one had a token', () => {
    const b = TokenBucket.full(0.1);
    const n = b.swapped(0.01, 0);
    expect(n.rate).toBe(0.01);
    expect(n.tryTake(0)).toBe(true);
  });

  it('swap gives a drained bucket when the old one had none', () => {
    const b = TokenBucket.full(0.1);
    b.tryTake(0);
    const n = b.swapped(0.01, 1000);
    expect(n.tryTake(1000)).toBe(false);
    expect(n.nextTokenAt(1000)).toBe(101_000);
  });

  it('swap from rate 0 always starts drained', () => {
    const never = TokenBucket.full(0);
    const n = never.swapped(0.1, 50_000);
    expect(n.available(50_000)).toBe(false);
    expect(n.nextTokenAt(50_000)).toBe(60_000);
    expect(never.swapped(0, 1)).toBe(never);
  });

  it('a token taken in the past: none until one interval after it, however long ago the bucket was full', () => {
    const b = TokenBucket.full(0.1);
    b.takenAt(3_000);
    expect(b.available(12_999)).toBe(false);
    expect(b.nextTokenAt(5_000)).toBe(13_000);
    expect(b.tryTake(13_000)).toBe(true);
    const old = TokenBucket.full(0.1);
    old.takenAt(-10_000);
    expect(old.available(0)).toBe(true);
  });

  it('a token taken in the past counts once with one taken since, whichever is later', () => {
    const b = TokenBucket.full(0.1);
    b.tryTake(5_000);
    b.takenAt(2_000);
    expect(b.nextTokenAt(5_000)).toBe(15_000);
    b.takenAt(8_000);
    expect(b.nextTokenAt(8_000)).toBe(18_000);
  });

  it('a token taken in the past leaves the rest of a larger burst', () => {
    const b = TokenBucket.full(0.1, 2);
    b.takenAt(0);
    expect(b.tryTake(1_000)).toBe(true);
    expect(b.available(1_000)).toBe(false);
    expect(b.nextTokenAt(1_000)).toBe(10_000);
  });

  it('a token taken in the past changes nothing for a never limiter', () => {
    const never = TokenBucket.full(0);
    never.takenAt(0);
    expect(never.nextTokenAt(0)).toBeUndefined();
    expect(never.swapped(0.1, 50_000).nextTokenAt(50_000)).toBe(60_000);
  });
});
