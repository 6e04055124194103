import { afterEach, describe, expect, it, vi } from 'vitest';
import { EVENT_LOOP_LAG_METRICS, EventLoopSampler } from './event-loop.js';
import { createRegistry } from './registry.js';

async function values(registry: ReturnType<typeof createRegistry>): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const m of await registry.getMetricsAsJSON()) {
    const v = m.values[0]?.value;
    if (v !== undefined) out.set(m.name, v);
  }
  return out;
}

/** Blocks the event loop (a stall) for about `ms`. */
function busy(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    /* spin */
  }
}

afterEach(() => {
  vi.useRealTimers();
});

describe('EventLoopSampler', () => {
  it('the default registry has no event-loop series of its own; the sampler adds them all', () => {
    const registry = createRegistry();
    for (const n of EVENT_LOOP_LAG_METRICS) expect(registry.getSingleMetric(n), n).toBeUndefined();
    expect(registry.getSingleMetric('process_cpu_seconds_total')).toBeDefined();
    new EventLoopSampler(registry, 100);
    for (const n of EVENT_LOOP_LAG_METRICS) expect(registry.getSingleMetric(n), n).toBeDefined();
  });

  it('records the time between ticks: a stall between two ticks shows as max and p99, then resets at the scrape', async () => {
    const registry = createRegistry({ defaultMetrics: false });
    const sampler = new EventLoopSampler(registry, 100);
    sampler.start(); // the first interval starts here
    sampler.stop();
    busy(5);
    sampler.tick();
    busy(5);
    sampler.tick();
    busy(60);
    sampler.tick();
    let v = await values(registry);
    expect(v.get('nodejs_eventloop_lag_min_seconds')).toBeGreaterThanOrEqual(0.004);
    expect(v.get('nodejs_eventloop_lag_min_seconds')).toBeLessThan(0.05);
    expect(v.get('nodejs_eventloop_lag_max_seconds')).toBeGreaterThanOrEqual(0.059);
    expect(v.get('nodejs_eventloop_lag_p99_seconds')).toBeGreaterThanOrEqual(0.059);
    expect(v.get('nodejs_eventloop_lag_p50_seconds')).toBeLessThan(0.05);
    expect(v.get('nodejs_eventloop_lag_mean_seconds')).toBeGreaterThan(0.02);
    expect(v.get('nodejs_eventloop_lag_stddev_seconds')).toBeGreaterThan(0);
    expect(v.get('nodejs_eventloop_lag_seconds')).toBeGreaterThanOrEqual(0);
    // Reset at the scrape: no tick since, so the figures stay; the next tick starts afresh.
    const max = v.get('nodejs_eventloop_lag_max_seconds');
    v = await values(registry);
    expect(v.get('nodejs_eventloop_lag_max_seconds')).toBe(max);
    busy(5);
    sampler.tick();
    v = await values(registry);
    expect(v.get('nodejs_eventloop_lag_max_seconds')).toBeLessThan(0.05);
  });

  it('ticks on its interval and runs the listeners on each tick until stopped', () => {
    vi.useFakeTimers();
    const sampler = new EventLoopSampler(createRegistry({ defaultMetrics: false }), 250);
    let ticks = 0;
    sampler.onTick(() => ticks++);
    sampler.start();
    sampler.start(); // idempotent: still one timer
    vi.advanceTimersByTime(1000);
    expect(ticks).toBe(4);
    sampler.stop();
    vi.advanceTimersByTime(1000);
    expect(ticks).toBe(4);
  });

  it('a listener stops with the function onTick returned, even from within a tick', () => {
    const sampler = new EventLoopSampler(createRegistry({ defaultMetrics: false }), 100);
    const seen: string[] = [];
    const offA = sampler.onTick(() => {
      seen.push('a');
      offA(); // once only
    });
    const offB = sampler.onTick(() => seen.push('b'));
    sampler.onTick(() => seen.push('c'));
    sampler.tick();
    offB();
    offB(); // twice is harmless
    sampler.tick();
    expect(seen).toEqual(['a', 'b', 'c', 'c']);
  });

  it('refuses an interval that is not a whole number of ms above 0', () => {
    const registry = createRegistry({ defaultMetrics: false });
    expect(() => new EventLoopSampler(registry, 0)).toThrow(/> 0/);
    expect(() => new EventLoopSampler(registry, 2.5)).toThrow(/whole number/);
  });
});
