import { VirtualTimeScheduler } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { monotonicScheduler } from '../clock/clock.js';
import { AGING_MS, RateLimiterFullError, RequestRateLimiter } from './rate-limit.js';
import { type LoopbackServer, loopbackServer } from './testing.js';

/** Moves virtual time forward by `ms` in 10 ms steps, letting promise callbacks run at each. */
async function advance(s: VirtualTimeScheduler, ms: number): Promise<void> {
  const end = s.now() + ms;
  for (;;) {
    const to = Math.min(end, s.now() + 10);
    s.schedule(() => undefined, to - s.now()); // the clock only moves with an action
    s.maxFrames = to;
    s.flush();
    for (let i = 0; i < 5; i++) await Promise.resolve();
    if (s.now() >= end) return;
  }
}

describe('RequestRateLimiter (client-go token bucket, FIFO waiters, virtual time)', () => {
  it('starts with `burst` tokens, then admits `qps` per second, first come first served (the critical lane: the whole burst)', async () => {
    const s = new VirtualTimeScheduler();
    const lim = new RequestRateLimiter(10, 3, s);
    const admitted: [number, number][] = [];
    for (let i = 0; i < 7; i++)
      void lim.acquire(undefined, 'critical').then(() => admitted.push([i, s.now()]));
    await advance(s, 0);
    expect(admitted).toEqual([
      [0, 0],
      [1, 0],
      [2, 0],
    ]);
    await advance(s, 400);
    expect(admitted.slice(3)).toEqual([
      [3, 100],
      [4, 200],
      [5, 300],
      [6, 400],
    ]);
    expect(lim.waiting).toBe(0);
  });

  it('low-priority waiters (Events) go after every other waiter, and at most maxLowWaiting of them queue', async () => {
    const s = new VirtualTimeScheduler();
    const lim = new RequestRateLimiter(10, 1, s, 2);
    await lim.acquire();
    const order: string[] = [];
    const refused: unknown[] = [];
    for (const n of ['e1', 'e2', 'e3']) {
      lim.acquire(undefined, 'low').then(
        () => order.push(n),
        (err) => refused.push(err),
      );
    }
    for (const n of ['r1', 'r2']) void lim.acquire().then(() => order.push(n));
    await advance(s, 0);
    expect(refused).toHaveLength(1);
    expect(refused[0]).toBeInstanceOf(RateLimiterFullError);
    expect(lim.waiting).toBe(4);
    await advance(s, 400);
    expect(order).toEqual(['r1', 'r2', 'e1', 'e2']);
  });

  it('priority lanes: a token goes to the first lane with a waiter (critical, taint, normal, pods), whatever the order they came in', async () => {
    const s = new VirtualTimeScheduler();
    const lim = new RequestRateLimiter(10, 1, s);
    await lim.acquire();
    const order: string[] = [];
    const lanes = ['low', 'pods', 'normal', 'taint', 'critical'] as const;
    for (const p of lanes) void lim.acquire(undefined, p).then(() => order.push(p));
    void lim.acquire(undefined, 'critical').then(() => order.push('critical-2'));
    await advance(s, 0);
    expect(lim.waitingIn('critical')).toBe(2);
    await advance(s, 600);
    expect(order).toEqual(['critical', 'critical-2', 'taint', 'normal', 'pods', 'low']);
    expect(lim.waiting).toBe(0);
  });

  it('no lane starves: a pod request behind a steady stream of marks is served within two tokens of having waited AGING_MS, not after the stream', async () => {
    const s = new VirtualTimeScheduler();
    const lim = new RequestRateLimiter(10, 1, s);
    await lim.acquire();
    // 300 marks waiting (30 s of tokens at 10/s), then one pod list, then a taint request 1 s later.
    const marks: number[] = [];
    for (let i = 0; i < 300; i++) void lim.acquire(undefined, 'critical').then(() => marks.push(s.now()));
    let podAt: number | undefined;
    void lim.acquire(undefined, 'pods').then(() => {
      podAt = s.now();
    });
    const taintAt: number[] = [];
    s.schedule(() => {
      void lim.acquire(undefined, 'taint').then(() => taintAt.push(s.now()));
    }, 1_000);
    await advance(s, AGING_MS + 1_000);
    // Served within two tokens once it had waited AGING_MS (tokens every 100 ms).
    expect(podAt).toBeDefined();
    expect(podAt!).toBeGreaterThanOrEqual(AGING_MS);
    expect(podAt!).toBeLessThanOrEqual(AGING_MS + 200);
    // The taint request (1 s later) ages in turn: after the pod list, before the marks still waiting.
    await advance(s, 1_000);
    expect(taintAt).toHaveLength(1);
    expect(taintAt[0]!).toBeGreaterThanOrEqual(1_000 + AGING_MS);
    expect(taintAt[0]!).toBeLessThanOrEqual(1_000 + AGING_MS + 200);
    expect(lim.waitingIn('critical')).toBeGreaterThan(100);
  });

  it('aged waiters go in the order they came, whatever their lane, on every other token; the marks keep the others', async () => {
    const s = new VirtualTimeScheduler();
    const lim = new RequestRateLimiter(1, 1, s);
    await lim.acquire();
    const order: string[] = [];
    void lim.acquire(undefined, 'pods').then(() => order.push('pods@0'));
    s.schedule(() => void lim.acquire(undefined, 'taint').then(() => order.push('taint@0.5')), 500);
    for (let i = 0; i < 12; i++)
      void lim.acquire(undefined, 'critical').then(() => order.push(`critical-${i}`));
    await advance(s, 16_000);
    // Tokens at 1, 2, ... s: the marks take the first nine; from 10 s the pod list has waited
    // AGING_MS (a mark, then it), from 10.5 s the taint has (a mark, then it); then the rest.
    expect(AGING_MS).toBe(10_000);
    expect(order).toEqual([
      ...Array.from({ length: 10 }, (_, i) => `critical-${i}`),
      'pods@0',
      'critical-10',
      'taint@0.5',
      'critical-11',
    ]);
  });

  it("the second half of the burst is the marks': the other lanes take a token only while more than floor(burst / 2) remain, then get qps per second as before", async () => {
    const s = new VirtualTimeScheduler();
    const lim = new RequestRateLimiter(10, 10, s);
    expect(lim.reserve).toBe(5);
    const pods: number[] = [];
    const taints: number[] = [];
    for (let i = 0; i < 8; i++) void lim.acquire(undefined, 'pods').then(() => pods.push(s.now()));
    await advance(s, 0);
    expect(pods).toEqual([0, 0, 0, 0, 0]);
    // Five tokens left, all the marks': two come and take theirs at once.
    const marks: number[] = [];
    for (let i = 0; i < 2; i++) void lim.acquire(undefined, 'critical').then(() => marks.push(s.now()));
    void lim.acquire(undefined, 'taint').then(() => taints.push(s.now()));
    await advance(s, 0);
    expect(marks).toEqual([0, 0]);
    // Three left: the taint (first of the other lanes) waits until six are there again, 300 ms;
    // then the pods one per 100 ms, qps as before.
    await advance(s, 700);
    expect(taints).toEqual([300]);
    expect(pods).toEqual([0, 0, 0, 0, 0, 400, 500, 600]);
  });

  it('a request held back by the reserve takes any token once it has waited AGING_MS', async () => {
    const s = new VirtualTimeScheduler();
    // A token every 20 s; burst 4, reserve 2.
    const lim = new RequestRateLimiter(0.05, 4, s);
    await lim.acquire(undefined, 'critical');
    await lim.acquire(undefined, 'critical');
    let podAt: number | undefined;
    void lim.acquire(undefined, 'pods').then(() => {
      podAt = s.now();
    });
    // Two tokens left, both the reserve's: the pod list would wait for a third (20 s), but it has
    // waited AGING_MS at 10 s.
    await advance(s, AGING_MS + 1_000);
    expect(podAt).toBe(AGING_MS);
  });

  it('refills up to burst while idle, never more', async () => {
    const s = new VirtualTimeScheduler();
    const lim = new RequestRateLimiter(2, 2, s);
    await lim.acquire(undefined, 'critical');
    await lim.acquire(undefined, 'critical');
    await advance(s, 60_000);
    const at: number[] = [];
    for (let i = 0; i < 3; i++) void lim.acquire(undefined, 'critical').then(() => at.push(s.now()));
    await advance(s, 0);
    expect(at).toEqual([60_000, 60_000]);
    await advance(s, 500);
    expect(at).toEqual([60_000, 60_000, 60_500]);
  });

  it('an aborted waiter leaves the queue without spending a token', async () => {
    const s = new VirtualTimeScheduler();
    const lim = new RequestRateLimiter(1, 1, s);
    await lim.acquire();
    const ac = new AbortController();
    const aborted = lim.acquire(ac.signal);
    const next: number[] = [];
    void lim.acquire().then(() => next.push(s.now()));
    ac.abort(new Error('gone'));
    await expect(aborted).rejects.toThrow('gone');
    await advance(s, 1000);
    expect(next).toEqual([1000]);
    await expect(lim.acquire(AbortSignal.abort(new Error('already')))).rejects.toThrow('already');
  });

  it('refuses a qps or burst out of range', () => {
    const s = new VirtualTimeScheduler();
    expect(() => new RequestRateLimiter(0, 1, s)).toThrow(/qps must be > 0/);
    expect(() => new RequestRateLimiter(1, 0, s)).toThrow(/burst must be >= 1/);
  });
});

describe('KubeClient with a rate limiter (real time, loopback stub)', () => {
  let stub: LoopbackServer;
  const arrivals: { url: string; at: number }[] = [];
  const observed: { verb: string; rateLimiterSeconds?: number }[] = [];
  let limiter: RequestRateLimiter;
  beforeAll(async () => {
    limiter = new RequestRateLimiter(20, 2, monotonicScheduler);
    stub = await loopbackServer(
      (req, res) => {
        arrivals.push({ url: req.url ?? '', at: performance.now() });
        res.writeHead(200, { 'content-type': 'application/json' });
        if (req.url?.includes('watch=true')) {
          res.write('{}\n'); // a watch stays open
          return;
        }
        res.end('{}');
      },
      { client: { rateLimiter: limiter, observer: (o) => observed.push(o) } },
    );
  });
  afterAll(async () => {
    await stub?.close();
  });

  it('paces reads and writes alike: burst, then one per 1/qps', async () => {
    arrivals.length = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        stub.client.request(
          i % 2
            ? { method: 'GET', path: `/api/v1/pods?i=${i}` }
            : { method: 'PATCH', path: `/api/v1/nodes/n${i}`, body: {} },
        ),
      ),
    );
    const times = arrivals.map((a) => a.at - t0).sort((a, b) => a - b);
    // 2 at once, then 4 more at 50 ms intervals: the 6th no earlier than 200 ms.
    expect(times[5]!).toBeGreaterThanOrEqual(195);
    expect(times[2]!).toBeGreaterThanOrEqual(45);
    expect(observed.some((o) => (o.rateLimiterSeconds ?? 0) > 0.1)).toBe(true);
  });

  it('a request marked priority low takes the same limiter, after every other request that waits', async () => {
    arrivals.length = 0;
    // Three ahead drain the burst (2): one of them waits, so the low one has to wait too.
    const ahead = Array.from({ length: 3 }, (_, i) =>
      stub.client.request({ method: 'GET', path: `/api/v1/pods?ahead=${i}` }),
    );
    const low = stub.client.request({ method: 'GET', path: '/api/v1/nodes?low=1', priority: 'low' });
    const behind = Array.from({ length: 3 }, (_, i) =>
      stub.client.request({ method: 'GET', path: `/api/v1/pods?behind=${i}` }),
    );
    await Promise.all([...ahead, low, ...behind]);
    expect(arrivals.map((a) => a.url).at(-1)).toBe('/api/v1/nodes?low=1');
    expect(arrivals).toHaveLength(7);
  });

  it('watches and requests marked `throttled` do not wait for a token', async () => {
    // Drain the bucket with a queue of reads, then open a watch and send a pre-throttled write.
    const reads = Array.from({ length: 10 }, () =>
      stub.client.request({ method: 'GET', path: '/api/v1/nodes' }),
    );
    const t0 = performance.now();
    const watch = await stub.client.stream({ path: '/api/v1/pods', query: { watch: true } });
    const watchMs = performance.now() - t0;
    await stub.client.request({ method: 'PATCH', path: '/api/v1/nodes/x', body: {}, throttled: true });
    const writeMs = performance.now() - t0;
    watch.destroy();
    expect(limiter.waiting).toBeGreaterThan(0);
    expect(watchMs).toBeLessThan(150);
    expect(writeMs).toBeLessThan(150);
    await Promise.all(reads);
  });
});
