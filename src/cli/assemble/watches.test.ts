import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../config/index.js';
import { SimApiServer } from '../../controller/testing/sim-api.js';
import type { KubeClient } from '../../kube/client.js';
import { memoryLogger } from '../../log/logger.js';
import { asyncScheduler } from '../../rx/index.js';
import { createWatchMetrics } from '../../watch/index.js';
import { assembleWatches, NODE_LIST_WAIT_MS, nodeListWait, type Watches } from './watches.js';

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

const clock = { scheduler: asyncScheduler };

function setup(flags: string[] = []) {
  const sim = new SimApiServer();
  sim.addNode('node-0');
  sim.addNode('node-1');
  const ticks: Array<() => void> = [];
  const watches = assembleWatches({
    config: loadConfig(flags, {}, 'host-0').config,
    client: sim.client as unknown as KubeClient,
    clock,
    logger: memoryLogger(),
    metrics: createWatchMetrics(new Registry()),
    ticker: { onTick: (fn: () => void) => ticks.push(fn) },
    transport: (resource) => sim.transport(resource),
  });
  return { sim, watches, ticks };
}

/** Resolves to the time `p` settled at (virtual), or undefined if it did not within `ms`. */
async function settledAt(p: Promise<unknown>, ms: number): Promise<number | undefined> {
  let at: number | undefined;
  void p.then(() => {
    at = Date.now();
  });
  await vi.advanceTimersByTimeAsync(0);
  for (let t = 0; t < ms && at === undefined; t += 100) await vi.advanceTimersByTimeAsync(100);
  return at;
}

const stopAll = (w: Watches) => {
  w.nodes.dispose();
  w.leases.dispose();
};

describe('assembleWatches', () => {
  it('the node watch starts first and its start waits for the node list; the lease watch starts with its own runnable', async () => {
    const { sim, watches } = setup();
    sim.delayList('nodes', 2_000);
    const { nodesRunnable, leasesRunnable } = watches;
    expect([nodesRunnable.name, nodesRunnable.group, leasesRunnable.name, leasesRunnable.group]).toEqual([
      'node-watch',
      'watches',
      'lease-watch',
      'watches',
    ]);
    const started = nodesRunnable.start?.(new AbortController().signal) as Promise<void>;
    expect(watches.nodes.running).toBe(true);
    expect(watches.leases.running).toBe(false);
    expect(await settledAt(started, 10_000)).toBe(2_000);
    expect(watches.nodes.store.size).toBe(2);
    await leasesRunnable.start?.(new AbortController().signal);
    expect(watches.leases.running).toBe(true);
    stopAll(watches);
    sim.stopAll();
  });

  it('halt stops each watch (and lets the paced reads go with the node watch, the last to halt)', async () => {
    const { sim, watches, ticks } = setup(['--watch-read-interval=250ms']);
    expect(watches.readPacer).toBeDefined();
    expect(ticks).toHaveLength(1);
    const close = vi.spyOn(watches.readPacer!, 'close');
    await settledAt(watches.nodesRunnable.start?.(new AbortController().signal) as Promise<void>, 1_000);
    await watches.leasesRunnable.start?.(new AbortController().signal);
    watches.leasesRunnable.stop?.halt?.({ totalMs: 0, drainMs: 0, tailMs: 0 });
    expect(watches.leases.running).toBe(false);
    expect(watches.nodes.running).toBe(true);
    expect(close).not.toHaveBeenCalled();
    watches.nodesRunnable.stop?.halt?.({ totalMs: 0, drainMs: 0, tailMs: 0 });
    expect(watches.nodes.running).toBe(false);
    expect(close).toHaveBeenCalledTimes(1);
    stopAll(watches);
    sim.stopAll();
  });

  it('without --watch-read-interval: no pacer, nothing on the tick', () => {
    const { watches, ticks } = setup();
    expect(watches.readPacer).toBeUndefined();
    expect(ticks).toHaveLength(0);
    stopAll(watches);
  });
});

describe('nodeListWait', () => {
  const never = { whenSynced: () => new Promise<void>(() => {}) };

  it(`gives up after ${NODE_LIST_WAIT_MS / 1000} s without the node list`, async () => {
    expect(await settledAt(nodeListWait(never, new AbortController().signal, asyncScheduler), 60_000)).toBe(
      NODE_LIST_WAIT_MS,
    );
  });

  it('ends when the stop begins (the signal aborts), or at once if it already has', async () => {
    const stop = new AbortController();
    const waiting = nodeListWait(never, stop.signal, asyncScheduler);
    await vi.advanceTimersByTimeAsync(1_000);
    stop.abort();
    expect(await settledAt(waiting, 100)).toBe(1_000);
    expect(await settledAt(nodeListWait(never, stop.signal, asyncScheduler), 100)).toBe(1_000);
  });
});
