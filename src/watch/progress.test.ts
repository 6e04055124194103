import { describe, expect, it } from 'vitest';
import { WatchProgress } from './progress.js';

describe('WatchProgress', () => {
  it('is idle since the request, then since the last thing heard', () => {
    const p = new WatchProgress();
    p.requested(1000);
    expect(p.idleFor(1500)).toBe(500);
    p.heard(1400);
    expect(p.idleFor(1500)).toBe(100);
    p.answered(1, 1450);
    expect(p.idleFor(1500)).toBe(50);
    p.requested(2000);
    expect(p.idleFor(2000)).toBe(0);
  });

  it('knows which watch was answered', () => {
    const p = new WatchProgress();
    expect(p.isAnswered(0)).toBe(false);
    p.answered(3, 0);
    expect(p.isAnswered(3)).toBe(true);
    expect(p.isAnswered(4)).toBe(false);
  });

  it('closed at once: no event within the time given, counted from the answer', () => {
    const p = new WatchProgress();
    p.requested(0);
    p.answered(1, 5000);
    expect(p.closedAtOnce(5999, 1000)).toBe(true);
    expect(p.closedAtOnce(6000, 1000)).toBe(false);
    p.delivered();
    expect(p.closedAtOnce(5001, 1000)).toBe(false);
    expect(p.events).toBe(1);
  });

  it('a new request counts events from zero', () => {
    const p = new WatchProgress();
    p.requested(0);
    p.delivered();
    p.delivered();
    expect(p.events).toBe(2);
    p.requested(10);
    expect(p.events).toBe(0);
    expect(p.closedAtOnce(10, 1000)).toBe(true);
  });

  it('malformed data is first once per request', () => {
    const p = new WatchProgress();
    expect(p.firstMalformed()).toBe(true);
    expect(p.firstMalformed()).toBe(false);
    p.heard(5);
    p.answered(1, 5);
    expect(p.firstMalformed()).toBe(false);
    p.requested(10);
    expect(p.firstMalformed()).toBe(true);
  });
});
