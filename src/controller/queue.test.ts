import { VirtualTimeScheduler } from 'rxjs';
import { describe, expect, it } from 'vitest';
import { WorkQueue } from './queue.js';

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
