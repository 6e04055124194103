import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { EVENT_LOOP_SAMPLE_MS } from '../../metrics/event-loop.js';
import { processTicker } from './ticker.js';

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

const health = (watchReadIntervalMs: number) => ({ health: { watchReadIntervalMs } }) as never;

describe('processTicker', () => {
  it('ticks on --watch-read-interval when set, else on the event-loop sample period; from start to stop only', async () => {
    const paced = processTicker(new Registry(), health(250));
    expect(paced.ticker.intervalMs).toBe(250);
    expect(processTicker(new Registry(), health(0)).ticker.intervalMs).toBe(EVENT_LOOP_SAMPLE_MS);
    expect(paced.runnable).toMatchObject({ name: 'process-ticker', group: 'process' });
    let ticks = 0;
    paced.ticker.onTick(() => ticks++);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(ticks).toBe(0);
    await paced.runnable.start?.(new AbortController().signal);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(ticks).toBe(4);
    await paced.runnable.stop?.close?.();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(ticks).toBe(4);
  });
});
