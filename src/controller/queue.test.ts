import { Registry } from 'prom-client';
import { VirtualTimeScheduler } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { WorkQueue } from './queue.js';
import { createWorkQueueMetrics } from './workqueue-metrics.js';

describe('WorkQueue', () => {
  it('dedupes waiting keys and preserves order', async () => {
    const q = new WorkQueue<string>(new VirtualTimeScheduler());
    q.add('a');
    q.add('b');
    q.add('a');
    expect(q.length).toBe(2);
    expect(await q.get()).toBe('a');
    expect(await q.get()).toBe('b');
  });

  it('never hands a key to two workers; a re-add during processing runs once more afterwards', async () => {
    const q = new WorkQueue<string>(new VirtualTimeScheduler());
    q.add('a');
    const k = await q.get();
    q.add('a');
    q.add('a');
    expect(q.length).toBe(0);
    q.done(k!);
    expect(q.length).toBe(1);
    expect(await q.get()).toBe('a');
    q.done('a');
    expect(q.length).toBe(0);
  });

  it('wakes a waiting worker when a key arrives', async () => {
    const q = new WorkQueue<string>(new VirtualTimeScheduler());
    const p = q.get();
    q.add('x');
    expect(await p).toBe('x');
    expect(q.inFlight).toBe(1);
  });

  it('maxOrdinary: at most that many ordinary keys processed at once; urgent keys go to the other workers; a freed room goes to a waiting worker', async () => {
    const q = new WorkQueue<string>(new VirtualTimeScheduler(), { maxOrdinary: 2 });
    for (const k of ['a', 'b', 'c', 'd']) q.add(k);
    const taken: string[] = [];
    // Five workers waiting for keys.
    for (let i = 0; i < 5; i++) void q.get().then((k) => taken.push(k!));
    await Promise.resolve();
    expect(taken).toEqual(['a', 'b']);
    expect(q.length).toBe(2);
    // An urgent key does not wait for the ordinary room: a waiting worker takes it at once.
    q.addUrgent('x');
    q.add('e');
    await Promise.resolve();
    expect(taken).toEqual(['a', 'b', 'x']);
    // x done frees no ordinary room; a done frees one, and c goes to a worker still waiting.
    q.done('x');
    await Promise.resolve();
    expect(taken).toEqual(['a', 'b', 'x']);
    q.done('a');
    await Promise.resolve();
    expect(taken).toEqual(['a', 'b', 'x', 'c']);
    // A key re-added while processed comes back within the bound too.
    q.add('b');
    q.done('b');
    await Promise.resolve();
    expect(taken).toEqual(['a', 'b', 'x', 'c', 'd']);
    expect(q.inFlight).toBe(2);
    expect(await Promise.race([q.get(), Promise.resolve('none')])).toBe('none');
  });

  it('maxOrdinary: get() takes an urgent key while the ordinary room is full, and an ordinary one once it is not', async () => {
    const q = new WorkQueue<string>(new VirtualTimeScheduler(), { maxOrdinary: 1 });
    q.add('a');
    q.add('b');
    expect(await q.get()).toBe('a');
    q.addUrgent('u');
    expect(await q.get()).toBe('u');
    let next: string | undefined;
    void q.get().then((k) => {
      next = k;
    });
    await Promise.resolve();
    expect(next).toBeUndefined();
    q.done('a');
    await Promise.resolve();
    expect(next).toBe('b');
  });

  it('addUrgent: ahead of every ordinary key, FIFO among urgent ones; a waiting key moves ahead once', async () => {
    const q = new WorkQueue<string>(new VirtualTimeScheduler());
    for (let i = 0; i < 1000; i++) q.add(`startup-${i}`);
    q.addUrgent('lost-1');
    q.addUrgent('startup-500'); // already waiting: moves ahead, its old place is skipped
    q.addUrgent('lost-1');
    q.add('lost-1');
    expect(q.length).toBe(1001);
    const order: string[] = [];
    while (q.length > 0) {
      const k = (await q.get())!;
      order.push(k);
      q.done(k);
    }
    expect(order.slice(0, 3)).toEqual(['lost-1', 'startup-500', 'startup-0']);
    expect(order).toHaveLength(1001);
    expect(order.filter((k) => k === 'startup-500')).toHaveLength(1);
    expect(order.at(-1)).toBe('startup-999');
  });

  it('addUrgent of a key being processed: processed again afterwards, ahead of ordinary keys', async () => {
    const q = new WorkQueue<string>(new VirtualTimeScheduler());
    q.add('a');
    const k = (await q.get())!;
    q.add('b');
    q.addUrgent('a');
    expect(q.length).toBe(1);
    q.done(k);
    expect(await q.get()).toBe('a');
    q.done('a');
    expect(await q.get()).toBe('b');
  });

  it('a key moved ahead and re-added ordinarily later is served once per add, not from its stale place', async () => {
    const q = new WorkQueue<string>(new VirtualTimeScheduler());
    q.add('x');
    q.add('y');
    q.addUrgent('y');
    expect(await q.get()).toBe('y');
    q.done('y');
    q.add('y'); // a new ordinary add: after x, not at y's old, skipped place
    q.add('z');
    const order: string[] = [];
    while (q.length > 0) {
      const k = (await q.get())!;
      order.push(k);
      q.done(k);
    }
    expect(order).toEqual(['x', 'y', 'z']);
  });

  it('delays with addAfter in virtual time, earliest wins', async () => {
    const s = new VirtualTimeScheduler();
    const q = new WorkQueue<string>(s);
    q.addAfter('a', 1000);
    q.addAfter('a', 500);
    q.addAfter('a', 2000);
    s.maxFrames = 499;
    s.flush();
    expect(q.length).toBe(0);
    s.maxFrames = Number.POSITIVE_INFINITY;
    s.flush();
    expect(q.length).toBe(1);
    expect(q.delayedCount).toBe(0);
  });

  it('backs off failed keys exponentially up to the cap, and forget resets it', () => {
    const q = new WorkQueue<string>(new VirtualTimeScheduler(), { baseDelayMs: 5, maxDelayMs: 100 });
    expect([1, 2, 3, 4, 5, 6].map(() => q.addRateLimited('a'))).toEqual([5, 10, 20, 40, 80, 100]);
    q.forget('a');
    expect(q.addRateLimited('a')).toBe(5);
  });

  it('shutDown wakes idle workers and drops delayed work', async () => {
    const s = new VirtualTimeScheduler();
    const q = new WorkQueue<string>(s);
    const p = q.get();
    q.addAfter('later', 100);
    q.shutDown();
    expect(await p).toBeUndefined();
    s.flush();
    expect(q.length).toBe(0);
    q.add('x');
    expect(await q.get()).toBeUndefined();
  });
});

describe('WorkQueue metrics (client-go workqueue_* semantics)', () => {
  async function read(registry: Registry) {
    const json = await registry.getMetricsAsJSON();
    const one = (n: string, suffix?: string) =>
      json
        .find((m) => m.name === n)
        ?.values.filter(
          (v) =>
            v.labels.name === 'node_lifecycle_controller' &&
            (suffix === undefined || (v as { metricName?: string }).metricName === `${n}${suffix}`),
        )
        .map((v) => (v.labels.le === undefined ? v.value : `${v.labels.le}:${v.value}`));
    return {
      adds: one('workqueue_adds_total')?.[0],
      depth: one('workqueue_depth')?.[0],
      retries: one('workqueue_retries_total')?.[0],
      queueCount: one('workqueue_queue_duration_seconds', '_count')?.[0],
      queueSum: one('workqueue_queue_duration_seconds', '_sum')?.[0],
      workCount: one('workqueue_work_duration_seconds', '_count')?.[0],
      workSum: one('workqueue_work_duration_seconds', '_sum')?.[0],
      unfinished: one('workqueue_unfinished_work_seconds')?.[0],
      longest: one('workqueue_longest_running_processor_seconds')?.[0],
    };
  }

  it('counts adds, depth, queue and work durations, unfinished work and retries as client-go does', async () => {
    const s = new VirtualTimeScheduler();
    const registry = new Registry();
    const metrics = createWorkQueueMetrics(registry).forQueue<string>('node_lifecycle_controller', () =>
      s.now(),
    );
    const q = new WorkQueue<string>(s, { metrics, baseDelayMs: 100 });
    const at = (ms: number) => {
      s.schedule(() => undefined, ms - s.now());
      s.flush();
    };
    // Present from the start, at zero.
    expect(await read(registry)).toMatchObject({
      adds: 0,
      depth: 0,
      retries: 0,
      queueCount: 0,
      workCount: 0,
    });

    q.add('a');
    q.add('b');
    q.add('a'); // already waiting: not an add
    expect(await read(registry)).toMatchObject({ adds: 2, depth: 2 });

    at(100);
    const a = await q.get(); // waited 100 ms
    expect(a).toBe('a');
    expect(await read(registry)).toMatchObject({ depth: 1, queueCount: 1, queueSum: 0.1 });

    at(200);
    q.add('a'); // added while processing: counted (client-go's dirty set), queued after done
    q.add('a'); // already dirty: not counted
    expect(await read(registry)).toMatchObject({ adds: 3, depth: 2 });

    at(400); // 'a' has been worked on for 300 ms
    const b = await q.get(); // 'b' waited 400 ms
    expect(b).toBe('b');
    at(500);
    expect(await read(registry)).toMatchObject({ unfinished: 0.4 + 0.1, longest: 0.4 });

    q.done('a'); // worked 400 ms; re-queued without another add
    expect(await read(registry)).toMatchObject({ adds: 3, depth: 1, workCount: 1, workSum: 0.4 });
    expect(q.length).toBe(1);

    at(600);
    expect(await q.get()).toBe('a'); // queued since its add at 200 ms while processing
    expect(await read(registry)).toMatchObject({ depth: 0, queueCount: 3 });
    expect((await read(registry)).queueSum).toBeCloseTo(0.1 + 0.4 + 0.4, 9);

    q.done('b');
    q.done('a');
    expect(await read(registry)).toMatchObject({ workCount: 3, unfinished: 0, longest: 0 });

    // A failure: re-added with backoff, counted as a retry, and as an add when the delay ends.
    q.addRateLimited('a');
    expect(await read(registry)).toMatchObject({ retries: 1, adds: 3 });
    at(700);
    expect(await read(registry)).toMatchObject({ retries: 1, adds: 4, depth: 1 });
  });
});
