import { Counter, Histogram, Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Ticker } from '../clock/ticker.js';
import { memoryLogger } from '../log/logger.js';
import { asyncScheduler } from '../rx/index.js';
import { type ReconcileResult, ReconcileRunner, type ReconcileRunnerOptions } from './reconcile-runner.js';
import { createWorkQueueMetrics } from './workqueue-metrics.js';

const advance = (ms: number) => vi.advanceTimersByTimeAsync(ms);
const now = () => asyncScheduler.now();

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-05-01T08:00:00.000Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

/** A reconcile that waits until released: resolves with `result`, or rejects with `error`. */
interface Held {
  key: string;
  at: number;
  release(result?: ReconcileResult): void;
  fail(error: Error): void;
}

function setup(o: Partial<ReconcileRunnerOptions<string>> & { act?: boolean; hold?: boolean } = {}) {
  const registry = new Registry();
  const log = memoryLogger(2);
  let act = o.act ?? true;
  const calls: Array<{ key: string; at: number }> = [];
  const held: Held[] = [];
  /** What each key's reconcile returns (or throws) when not held. */
  const results = new Map<string, Array<ReconcileResult | Error>>();
  const done: string[] = [];
  const wakes: number[] = [];
  const runner = new ReconcileRunner<string>({
    scheduler: asyncScheduler,
    log,
    keyField: 'node',
    reconcile: async (key) => {
      calls.push({ key, at: now() });
      if (o.hold) {
        return new Promise<ReconcileResult>((resolve, reject) =>
          held.push({ key, at: now(), release: resolve, fail: reject }),
        );
      }
      const r = results.get(key)?.shift();
      if (r instanceof Error) throw r;
      return r;
    },
    canAct: () => act,
    onWake: () => wakes.push(now()),
    onDone: (key) => done.push(key),
    workers: 2,
    metrics: {
      reconciles: new Counter({
        name: 'test_reconcile_total',
        help: 'h',
        labelNames: ['result'] as const,
        registers: [registry],
      }),
      duration: new Histogram({ name: 'test_reconcile_seconds', help: 'h', registers: [registry] }),
      queue: createWorkQueueMetrics(registry).forQueue<string>('test', now),
    },
    baseDelayMs: 50,
    maxDelayMs: 400,
    ...o,
  });
  const count = async (result?: string) => {
    const m = await registry.getSingleMetric('test_reconcile_total')?.get();
    return (m?.values ?? [])
      .filter((v) => result === undefined || v.labels.result === result)
      .reduce((a, v) => a + v.value, 0);
  };
  const durations = async () => {
    const m = await registry.getSingleMetric('test_reconcile_seconds')?.get();
    const v = m?.values ?? [];
    const pick = (suffix: string) =>
      v.find((x) => (x as { metricName?: string }).metricName?.endsWith(suffix))?.value;
    return { count: pick('_count'), sum: pick('_sum') };
  };
  return {
    runner,
    registry,
    log,
    calls,
    held,
    results,
    done,
    wakes,
    count,
    durations,
    setActing: (a: boolean) => {
      act = a;
    },
  };
}

describe('ReconcileRunner: results', () => {
  it('success: reconciled once, counted, timed, reported done', async () => {
    const t = setup({ hold: true });
    // Waiting once however often added.
    t.runner.add('a');
    t.runner.add('a');
    expect(t.runner.queued).toBe(1);
    t.runner.start();
    await advance(0);
    expect(t.calls.map((c) => c.key)).toEqual(['a']);
    await advance(1_500);
    t.held[0]!.release(undefined);
    await advance(0);
    expect(await t.count('success')).toBe(1);
    expect(await t.count()).toBe(1);
    expect(await t.durations()).toEqual({ count: 1, sum: 1.5 });
    expect(t.done).toEqual(['a']);
    await advance(60_000);
    expect(t.calls).toHaveLength(1);
    await t.runner.stop();
  });

  it('requeue after: the key runs again after that long, not before; counted as requeue', async () => {
    const t = setup();
    t.results.set('a', [1_000, undefined]);
    t.runner.start();
    const from = now();
    t.runner.add('a');
    await advance(999);
    expect(t.calls).toHaveLength(1);
    await advance(1);
    expect(t.calls.map((c) => c.at - from)).toEqual([0, 1_000]);
    expect(await t.count('requeue')).toBe(1);
    expect(await t.count('success')).toBe(1);
    await t.runner.stop();
  });

  it('error: logged with the key and the retry delay, retried with doubling backoff up to the cap; a success forgets it', async () => {
    const t = setup();
    const boom = () => new Error('boom');
    t.results.set('a', [boom(), boom(), boom(), boom(), boom(), undefined, boom()]);
    t.runner.start();
    const from = now();
    t.runner.add('a');
    await advance(10_000);
    // 50, 100, 200, 400 (the cap), 400 ms after each failure.
    expect(t.calls.map((c) => c.at - from)).toEqual([0, 50, 150, 350, 750, 1_150]);
    expect(await t.count('error')).toBe(5);
    expect(await t.count('success')).toBe(1);
    const failed = t.log.lines.filter((l) => l.msg === 'Reconcile failed, will retry');
    expect(failed.map((l) => l.retryIn)).toEqual(['50ms', '100ms', '200ms', '400ms', '400ms']);
    expect(failed[0]).toMatchObject({ level: 'error', node: 'a' });
    expect(String(failed[0]!.err)).toContain('boom');
    // After the success, the next failure starts from the base delay again.
    t.runner.add('a');
    await advance(0);
    expect(t.log.lines.filter((l) => l.msg === 'Reconcile failed, will retry').at(-1)?.retryIn).toBe('50ms');
    expect(
      (await t.registry.getSingleMetric('workqueue_retries_total')?.get())?.values.find(
        (v) => v.labels.name === 'test',
      )?.value,
    ).toBe(6);
    await t.runner.stop();
  });

  it('the earliest of a requeue and an add wins; a key added while it runs runs again after', async () => {
    const t = setup({ hold: true });
    t.runner.start();
    t.runner.add('a');
    await advance(0);
    t.runner.add('a');
    t.held[0]!.release(5_000);
    await advance(0);
    expect(t.calls).toHaveLength(2);
    t.held[1]!.release(undefined);
    await advance(10_000);
    // The requeue after 5 s was still pending: it ran too.
    expect(t.calls).toHaveLength(3);
    t.held[2]!.release(undefined);
    await t.runner.stop();
  });
});

describe('ReconcileRunner: workers and the queue', () => {
  it('N workers: at most N keys at once, a key never on two workers', async () => {
    const t = setup({ hold: true, workers: 2 });
    t.runner.start();
    for (const k of ['a', 'b', 'c']) t.runner.add(k);
    await advance(0);
    expect(t.held.map((h) => h.key)).toEqual(['a', 'b']);
    expect(t.runner.queued).toBe(1);
    t.runner.add('a');
    t.held[0]!.release();
    await advance(0);
    // c waited longer; a was re-added while it ran and comes after it.
    expect(t.held.map((h) => h.key)).toEqual(['a', 'b', 'c']);
    t.held[1]!.release();
    await advance(0);
    expect(t.held.map((h) => h.key)).toEqual(['a', 'b', 'c', 'a']);
    t.held[2]!.release();
    t.held[3]!.release();
    await t.runner.stop();
  });

  it('urgent keys go ahead of ordinary ones', async () => {
    const t = setup({ hold: true, workers: 1 });
    t.runner.start();
    t.runner.add('first');
    await advance(0);
    t.runner.add('x');
    t.runner.add('y');
    t.runner.addUrgent('lost');
    for (let i = 0; i < 4; i++) {
      t.held[i]!.release();
      await advance(0);
    }
    expect(t.calls.map((c) => c.key)).toEqual(['first', 'lost', 'x', 'y']);
    await t.runner.stop();
  });

  it("the queue's workqueue_* series are kept", async () => {
    const t = setup();
    t.runner.start();
    t.runner.add('a');
    t.runner.add('b');
    await advance(0);
    const adds = (await t.registry.getSingleMetric('workqueue_adds_total')?.get())?.values;
    expect(adds?.find((v) => v.labels.name === 'test')?.value).toBe(2);
    await t.runner.stop();
  });
});

describe('ReconcileRunner: without onDone', () => {
  it('a reconcile ends without anyone told', async () => {
    const t = setup({ onDone: undefined });
    t.runner.start();
    t.runner.add('a');
    await advance(0);
    expect(await t.count('success')).toBe(1);
    expect(t.done).toEqual([]);
    await t.runner.stop();
  });
});

describe('ReconcileRunner: gating', () => {
  it('a key taken while we may not act is not reconciled (counted a success, reported done)', async () => {
    const t = setup({ act: false });
    t.runner.start();
    t.runner.add('a');
    await advance(0);
    expect(t.calls).toEqual([]);
    expect(await t.count('success')).toBe(1);
    expect(t.done).toEqual(['a']);
    t.setActing(true);
    t.runner.add('a');
    await advance(0);
    expect(t.calls.map((c) => c.key)).toEqual(['a']);
    await t.runner.stop();
  });
});

describe('ReconcileRunner: the deadline timer', () => {
  it('wakes at the time asked; an earlier time replaces a later one, a later one keeps the earlier', async () => {
    const t = setup();
    const from = now();
    t.runner.wakeAt(from + 10_000);
    t.runner.wakeAt(from + 20_000);
    await advance(10_000);
    expect(t.wakes).toEqual([from + 10_000]);
    t.runner.wakeAt(from + 30_000);
    t.runner.wakeAt(from + 15_000);
    await advance(30_000);
    expect(t.wakes).toEqual([from + 10_000, from + 15_000]);
    await t.runner.stop();
  });

  it('undefined (no deadline) and cancelWake disarm it; a time already past wakes at once', async () => {
    const t = setup();
    t.runner.wakeAt(now() + 1_000);
    t.runner.wakeAt(undefined);
    await advance(5_000);
    expect(t.wakes).toEqual([]);
    t.runner.wakeAt(now() + 2_000);
    t.runner.cancelWake();
    await advance(5_000);
    expect(t.wakes).toEqual([]);
    t.runner.wakeAt(now() - 1_000);
    await advance(0);
    expect(t.wakes).toEqual([now()]);
    await t.runner.stop();
  });

  it('not armed while we may not act, nor once stopped', async () => {
    const t = setup({ act: false });
    t.runner.wakeAt(now() + 1_000);
    await advance(2_000);
    expect(t.wakes).toEqual([]);
    t.setActing(true);
    t.runner.wakeAt(now() + 1_000);
    const stopped = t.runner.stop();
    expect(t.runner.stopped).toBe(true);
    t.runner.wakeAt(now() + 500);
    await advance(2_000);
    await stopped;
    expect(t.wakes).toEqual([]);
  });

  it('a time beyond what a timer takes fires early, once (the caller arms it again)', async () => {
    const t = setup();
    const far = now() + 30 * 24 * 3_600_000;
    t.runner.wakeAt(far);
    await advance(2 ** 31);
    expect(t.wakes).toHaveLength(1);
    expect(t.wakes[0]).toBeLessThan(far);
    await t.runner.stop();
  });
});

describe('ReconcileRunner: periodic work', () => {
  it('on timers of its own without a ticker; stopped by stop()', async () => {
    const t = setup();
    const runs: number[] = [];
    const from = now();
    t.runner.every(1_000, () => runs.push(now() - from));
    await advance(3_500);
    expect(runs).toEqual([1_000, 2_000, 3_000]);
    await t.runner.stop();
    await advance(3_000);
    expect(runs).toHaveLength(3);
  });

  it("on the ticker's ticks when it is at least as fine as the period; on timers when it is coarser", async () => {
    const fns = new Set<() => void>();
    const ticker: Ticker = {
      intervalMs: 250,
      onTick: (fn) => {
        fns.add(fn);
        return () => fns.delete(fn);
      },
    };
    const t = setup({ ticker });
    const fine: number[] = [];
    const coarse: number[] = [];
    const from = now();
    const same: number[] = [];
    t.runner.every(1_000, () => fine.push(now() - from));
    t.runner.every(250, () => same.push(now() - from));
    t.runner.every(100, () => coarse.push(now() - from));
    expect(fns.size).toBe(2);
    for (let i = 0; i < 8; i++) {
      await advance(250);
      for (const fn of fns) fn();
    }
    expect(fine).toEqual([1_000, 2_000]);
    expect(same).toHaveLength(8);
    expect(coarse).toHaveLength(20);
    await t.runner.stop();
    expect(fns.size).toBe(0);
  });
});

describe('ReconcileRunner: stop', () => {
  it('drops waiting keys and waits for the keys in flight; a failure on the way out is not retried', async () => {
    const t = setup({ hold: true, workers: 1 });
    t.runner.start();
    t.runner.add('a');
    t.runner.add('b');
    await advance(0);
    let stopped = false;
    const p = t.runner.stop().then(() => {
      stopped = true;
    });
    expect(t.runner.stopped).toBe(true);
    await advance(1_000);
    expect(stopped).toBe(false);
    t.held[0]!.fail(new Error('aborted'));
    await p;
    expect(t.calls.map((c) => c.key)).toEqual(['a']);
    expect(await t.count()).toBe(0);
    expect(t.log.lines.filter((l) => l.msg === 'Reconcile failed, will retry')).toEqual([]);
    expect(t.log.lines.find((l) => l.msg === 'Reconcile ended by stop')).toMatchObject({ node: 'a' });
    expect(t.done).toEqual(['a']);
    // Adds after stop are ignored; stop again is a no-op.
    t.runner.add('c');
    await t.runner.stop();
    await advance(1_000);
    expect(t.calls).toHaveLength(1);
  });
});
