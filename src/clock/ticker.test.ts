import { describe, expect, it } from 'vitest';
import { everyOnTicks, type Ticker } from './ticker.js';

/** A ticker ticked by hand, with its own clock: `tickAt(t)` sets the time and ticks. */
function manual(intervalMs: number) {
  let t = 0;
  const listeners = new Set<() => void>();
  const ticker: Ticker = {
    intervalMs,
    onTick(fn) {
      const f = () => fn();
      listeners.add(f);
      return () => listeners.delete(f);
    },
  };
  return {
    ticker,
    now: () => t,
    tickAt(at: number) {
      t = at;
      for (const f of [...listeners]) f();
    },
    listeners: () => listeners.size,
  };
}

describe('everyOnTicks', () => {
  it('runs on the tick that completes each period, whole ticks apart', () => {
    const m = manual(250);
    const runs: number[] = [];
    everyOnTicks(m.ticker, m.now, 1000, () => runs.push(m.now()));
    for (let t = 250; t <= 5000; t += 250) m.tickAt(t);
    expect(runs).toEqual([1000, 2000, 3000, 4000, 5000]);
  });

  it('a tick that comes a little early or late still counts; the next period starts from that run', () => {
    const m = manual(250);
    const runs: number[] = [];
    everyOnTicks(m.ticker, m.now, 1000, () => runs.push(m.now()));
    for (const t of [251, 498, 760, 999.2, 1249, 1502, 1751, 2003, 2250, 2499, 2748, 3001]) m.tickAt(t);
    expect(runs).toEqual([999.2, 2003, 3001]);
  });

  it('a period that is not a whole number of ticks runs on the nearest tick (900 ms for 1 s on 300 ms ticks)', () => {
    const m = manual(300);
    const runs: number[] = [];
    everyOnTicks(m.ticker, m.now, 1000, () => runs.push(m.now()));
    for (let t = 300; t <= 2700; t += 300) m.tickAt(t);
    expect(runs).toEqual([900, 1800, 2700]);
  });

  it('stops with the function it returned', () => {
    const m = manual(100);
    let runs = 0;
    const off = everyOnTicks(m.ticker, m.now, 200, () => runs++);
    m.tickAt(200);
    off();
    m.tickAt(400);
    expect(runs).toBe(1);
    expect(m.listeners()).toBe(0);
  });

  it('refuses ticks coarser than the period', () => {
    const m = manual(500);
    expect(() => everyOnTicks(m.ticker, m.now, 400, () => undefined)).toThrow(
      /400 ms period cannot ride on 500 ms ticks/,
    );
  });
});
