import { Registry } from 'prom-client';
import { asyncScheduler } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Clock } from '../clock/clock.js';
import { KubeApiError, type KubeRequest } from '../kube/client.js';
import { memoryLogger } from '../log/logger.js';
import { Subject } from '../rx/index.js';
import {
  CoordinationWatchdog,
  candidatePaths,
  candidateVersions,
  checkCoordinatedElection,
  type LeaseCandidate,
  LeaseCandidatePublisher,
} from './candidate.js';
import { candidateNameProblem, coordinatedRecheckMs, resolveLeaderElectionConfig } from './config.js';
import { LeaderElector } from './elector.js';
import type { KubeRequester } from './lease-api.js';
import { createLeaderElectionMetrics } from './metrics.js';
import { microTime, microTimeAfter } from './record.js';
import { FakeLeaseServer } from './testing/fake-lease-api.js';

const NS = 'nlc-system';
const ME = 'nlc-0_abc';
const T0 = Date.parse('2026-03-01T12:00:00.000Z');

beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
});

const advance = (ms: number) => vi.advanceTimersByTimeAsync(ms);
const notFound = () => new KubeApiError(404, { kind: 'Status', reason: 'NotFound', code: 404 }, {}, 'x');
const conflict = () => new KubeApiError(409, { kind: 'Status', reason: 'Conflict', code: 409 }, {}, 'x');

/** kube-apiserver for LeaseCandidates in one namespace: resourceVersion and uid preconditions. */
class FakeCandidates {
  readonly items = new Map<string, LeaseCandidate>();
  readonly calls: string[] = [];
  /** What a watch of our candidate shows, 1 ms after each change. */
  readonly updates$ = new Subject<LeaseCandidate | undefined>();
  /** ms from a write's commit to its response (the watch shows the change after 1 ms). */
  responseLagMs = 0;
  private rv = 10;
  private uid = 0;

  store(c: LeaseCandidate, fresh = false): LeaseCandidate {
    const stored: LeaseCandidate = JSON.parse(JSON.stringify(c));
    stored.metadata.resourceVersion = String(++this.rv);
    if (fresh) stored.metadata.uid = `uid-${++this.uid}`;
    this.items.set(stored.metadata.name, stored);
    const copy = JSON.parse(JSON.stringify(stored));
    setTimeout(() => this.updates$.next(copy), 1);
    return JSON.parse(JSON.stringify(stored));
  }

  /** The coordinator pings: a new pingTime on the stored object (its own clock). */
  ping(name: string, wallMs: number): string {
    const c = this.items.get(name)!;
    const pingTime = `${new Date(wallMs).toISOString().slice(0, 23)}123Z`;
    this.store({ ...c, spec: { ...c.spec, pingTime } });
    return pingTime;
  }

  remove(name: string): void {
    this.items.delete(name);
    setTimeout(() => this.updates$.next(undefined), 1);
  }

  client(): KubeRequester {
    return {
      request: async <T>(req: KubeRequest): Promise<T> => {
        await new Promise((r) => setTimeout(r, 2));
        const name = req.path.startsWith(`${candidatePaths.list(NS)}/`)
          ? decodeURIComponent(req.path.slice(candidatePaths.list(NS).length + 1))
          : undefined;
        this.calls.push(`${req.method}${name ? ` ${name}` : ''}`);
        const body = req.body as LeaseCandidate & { preconditions?: { uid?: string } };
        const current = name ? this.items.get(name) : undefined;
        switch (req.method) {
          case 'GET':
            if (!current) throw notFound();
            return JSON.parse(JSON.stringify(current)) as T;
          case 'POST':
            if (this.items.has(body.metadata.name)) throw conflict();
            return this.store(body, true) as T;
          case 'PUT': {
            if (!current) throw notFound();
            if (body.metadata.resourceVersion !== current.metadata.resourceVersion) throw conflict();
            if (body.spec?.leaseName !== current.spec?.leaseName) throw new Error('leaseName is immutable');
            const stored = this.store(body);
            if (this.responseLagMs > 0) await new Promise((r) => setTimeout(r, this.responseLagMs));
            return stored as T;
          }
          case 'DELETE':
            if (!current) throw notFound();
            if (body.preconditions?.uid !== current.metadata.uid) throw conflict();
            this.remove(current.metadata.name);
            return {} as T;
          default:
            throw new Error(req.method);
        }
      },
    };
  }
}

function publisher(server: FakeCandidates, o: { skewMs?: number; client?: KubeRequester } = {}) {
  const registry = new Registry();
  const metrics = createLeaderElectionMetrics(registry);
  const clock: Clock = { scheduler: asyncScheduler, wall: () => Date.now() + (o.skewMs ?? 0) };
  const logger = memoryLogger(10);
  const p = new LeaseCandidatePublisher({
    client: o.client ?? server.client(),
    clock,
    logger,
    metrics,
    namespace: NS,
    name: ME,
    leaseName: 'node-lifecycle-controller',
    binaryVersion: '0.2.0',
    emulationVersion: '0.1.0',
    updates$: server.updates$,
  });
  const pings = async () =>
    (await registry.getSingleMetric('nlc_lease_candidate_pings_answered_total')?.get())?.values[0]?.value;
  return { p, logs: logger.lines, pings };
}

describe('LeaseCandidatePublisher', () => {
  it('publishes its candidate (name = identity, the lock, its versions, the strategy) and renews it every 5 minutes', async () => {
    const server = new FakeCandidates();
    const { p } = publisher(server);
    p.start();
    await advance(20);
    expect(server.items.get(ME)?.spec).toEqual({
      leaseName: 'node-lifecycle-controller',
      binaryVersion: '0.2.0',
      emulationVersion: '0.1.0',
      strategy: 'OldestEmulationVersion',
      renewTime: microTime(T0 + 2),
    });
    server.calls.length = 0;
    await advance(5 * 60_000 - 100);
    expect(server.calls).toEqual([]);
    await advance(200);
    expect(server.calls).toEqual([`PUT ${ME}`]);
    expect(server.items.get(ME)?.spec?.renewTime).toBe(microTime(T0 + 4 + 5 * 60_000));
    p.stop();
  });

  it('answers each new ping at once, once (no loop), renewTime 1 µs after a ping that is ahead of our clock', async () => {
    const server = new FakeCandidates();
    // Our clock is 10 s behind the coordinator's.
    const { p, pings } = publisher(server, { skewMs: -10_000 });
    p.start();
    await advance(20);
    server.calls.length = 0;
    const sent = Date.now();
    const pingTime = server.ping(ME, Date.now());
    await advance(20);
    expect(server.calls).toEqual([`PUT ${ME}`]);
    const renew = server.items.get(ME)!.spec!.renewTime!;
    expect(renew).toBe(microTimeAfter(Date.now() - 10_000, pingTime));
    expect(renew > pingTime).toBe(true);
    expect(renew).toBe(`${pingTime.slice(0, 23)}124Z`);
    // Answered within a few ms (two requests' latency), counted once; its own write is no new ping.
    expect(Date.now() - sent).toBeLessThan(25);
    await advance(10_000);
    expect(server.calls).toEqual([`PUT ${ME}`]);
    expect(await pings()).toBe(1);
    // A second ping: a second answer.
    server.ping(ME, Date.now() + 1);
    await advance(20);
    expect(server.calls).toEqual([`PUT ${ME}`, `PUT ${ME}`]);
    expect(await pings()).toBe(2);
    p.stop();
  });

  it('a ping is answered once also when the watch shows the answer before its response arrives', async () => {
    const server = new FakeCandidates();
    // kube-apiserver may send the watch event of our write before the write's response.
    server.responseLagMs = 5;
    const { p, pings } = publisher(server);
    p.start();
    await advance(20);
    server.calls.length = 0;
    server.ping(ME, Date.now());
    await advance(10_000);
    expect(server.calls).toEqual([`PUT ${ME}`]);
    expect(await pings()).toBe(1);
    // A new ping between the commit of an answer and its response: answered too, right after it.
    server.calls.length = 0;
    server.ping(ME, Date.now() + 1);
    await advance(5);
    server.ping(ME, Date.now() + 2);
    await advance(10_000);
    // (The answer's response, older than the new ping the watch showed, makes the next write a
    // conflict: read, then answer.)
    expect(await pings()).toBe(3);
    expect(server.items.get(ME)!.spec!.renewTime! > server.items.get(ME)!.spec!.pingTime!).toBe(true);
    const calls = server.calls.length;
    await advance(60_000);
    expect(server.calls).toHaveLength(calls);
    p.stop();
  });

  it('a replica that cannot see answers no ping; the pending one is answered when it sees again', async () => {
    const server = new FakeCandidates();
    const { p, pings } = publisher(server);
    p.start();
    await advance(20);
    p.setEligible(false);
    server.calls.length = 0;
    server.ping(ME, Date.now());
    await advance(6 * 60_000);
    expect(server.calls).toEqual([]);
    p.setEligible(true);
    await advance(20);
    expect(server.calls).toEqual([`PUT ${ME}`]);
    expect(await pings()).toBe(1);
    p.stop();
  });

  it('a candidate deleted by someone else (the coordinator collects stale ones) is created again', async () => {
    const server = new FakeCandidates();
    const { p, logs } = publisher(server);
    p.start();
    await advance(20);
    server.remove(ME);
    await advance(20);
    expect(server.items.get(ME)?.spec?.leaseName).toBe('node-lifecycle-controller');
    expect(logs.filter((l) => l.msg === 'Created lease candidate').map((l) => l.why)).toEqual([
      'start',
      'deleted',
    ]);
    p.stop();
  });

  it('a candidate of ours left for another lock is replaced (leaseName is immutable)', async () => {
    const server = new FakeCandidates();
    server.store(
      {
        metadata: { name: ME, namespace: NS },
        spec: { leaseName: 'old-lock', binaryVersion: '0.1.0', strategy: 'x' },
      },
      true,
    );
    const { p } = publisher(server);
    p.start();
    await advance(30);
    expect(server.items.get(ME)?.spec?.leaseName).toBe('node-lifecycle-controller');
    p.stop();
  });

  it('shutdown deletes our candidate (uid precondition) and nothing creates it again', async () => {
    const server = new FakeCandidates();
    const { p, logs } = publisher(server);
    p.start();
    await advance(20);
    const done = p.shutdown();
    await advance(20);
    expect(await done).toBe(true);
    expect(server.items.has(ME)).toBe(false);
    expect(logs.some((l) => l.msg === 'Deleted lease candidate on shutdown')).toBe(true);
    // Nothing is created again after the stop.
    await advance(10 * 60_000);
    expect(server.items.has(ME)).toBe(false);
    // Already gone: nothing to delete, and it says so.
    const again = p.shutdown();
    await advance(20);
    expect(await again).toBe(true);
  });

  it('shutdown says whether the candidate is gone: a deletion that fails answers false (and stops answering pings all the same)', async () => {
    const server = new FakeCandidates();
    const client = server.client();
    const { p, logs } = publisher(server, {
      client: {
        request: <T>(req: KubeRequest) =>
          req.method === 'DELETE'
            ? Promise.reject(new KubeApiError(500, { kind: 'Status', code: 500 }, {}, 'x'))
            : client.request<T>(req),
      },
    });
    p.start();
    await advance(20);
    expect(server.items.has(ME)).toBe(true);
    const done = p.shutdown();
    await advance(20);
    expect(await done).toBe(false);
    expect(server.items.has(ME)).toBe(true);
    expect(logs.filter((l) => l.msg === 'Failed to delete lease candidate on shutdown')).toHaveLength(1);
    // Stopped all the same: a ping is not answered.
    const writes = server.calls.length;
    server.ping(ME, Date.now());
    await advance(1_000);
    expect(server.calls.length).toBe(writes);
  });
});

describe('candidate names and versions', () => {
  it('the identity must be a valid LeaseCandidate name', () => {
    expect(candidateNameProblem('nlc-7d9f_0a1b2c3d')).toBeUndefined();
    expect(candidateNameProblem('host.example_1')).toBeUndefined();
    expect(candidateNameProblem('a b')).toMatch(/cannot name a LeaseCandidate/);
    expect(candidateNameProblem('x'.repeat(254))).toBeDefined();
  });

  it('binary version without pre-release, emulation version major.minor.0 (kube-controller-manager)', () => {
    expect(candidateVersions('0.2.0-dev', undefined)).toEqual({
      binaryVersion: '0.2.0',
      emulationVersion: '0.2.0',
    });
    expect(candidateVersions('1.37.2+abc', '')).toEqual({
      binaryVersion: '1.37.2',
      emulationVersion: '1.37.0',
    });
    expect(candidateVersions('1.37.2', '1.36')).toEqual({
      binaryVersion: '1.37.2',
      emulationVersion: '1.36.0',
    });
    expect(candidateVersions('1.37.2', '0.9')).toEqual({
      binaryVersion: '1.37.2',
      emulationVersion: '0.9.0',
    });
    expect(() => candidateVersions('1.37.2', '1.38')).toThrow(
      /--emulated-version.*not be above the binary's version 1.37/,
    );
    expect(() => candidateVersions('1.37.2', 'v1.36')).toThrow(/--emulated-version.*MAJOR.MINOR/);
    expect(() => candidateVersions('1.37.2', '1.36.1')).toThrow(/--emulated-version/);
    expect(() => candidateVersions('unknown', undefined)).toThrow(/semantic version/);
    expect(() => candidateVersions('v1.2.3', undefined)).toThrow(/semantic version/);
  });

  it('microTimeAfter: our clock, or 1 µs after a later time', () => {
    expect(microTimeAfter(T0, '2026-03-01T11:59:59.999999Z')).toBe(microTime(T0));
    expect(microTimeAfter(T0, '2026-03-01T12:00:00.000000Z')).toBe('2026-03-01T12:00:00.000001Z');
    expect(microTimeAfter(T0, '2026-03-01T12:00:05.999999Z')).toBe('2026-03-01T12:00:06.000000Z');
    expect(microTimeAfter(T0, '2026-03-01T12:00:05Z')).toBe('2026-03-01T12:00:05.000001Z');
    expect(microTimeAfter(T0, 'garbage')).toBe(microTime(T0));
  });
});

describe('checkCoordinatedElection (the fall-back decision)', () => {
  type Answer = unknown | Error;
  /** Answers discovery with `discovery` (in turn) and the coordinator's lease with `lease(n)`. */
  function stub(discovery: Answer[], lease: (n: number) => Answer): KubeRequester & { calls: string[] } {
    let d = 0;
    let l = 0;
    const calls: string[] = [];
    return {
      calls,
      request: async <T>(req: KubeRequest): Promise<T> => {
        calls.push(req.path);
        await new Promise((r) => setTimeout(r, 1));
        const a =
          req.path === candidatePaths.group ? discovery[Math.min(d++, discovery.length - 1)] : lease(l++);
        if (a instanceof Error) throw a;
        return a as T;
      },
    };
  }
  const served = { resources: [{ name: 'leasecandidates' }] };
  const status = (code: number) => new KubeApiError(code, { kind: 'Status', code }, {}, 'x');
  const renewed = (n: number) => ({
    spec: { holderIdentity: 'apiserver-1', renewTime: `2026-03-01T12:00:0${Math.floor(n / 2)}.000000Z` },
  });
  const clock: Clock = { scheduler: asyncScheduler, wall: () => Date.now() };

  async function check(client: KubeRequester) {
    const logger = memoryLogger(10);
    const p = checkCoordinatedElection({ client, clock, logger });
    await advance(60_000);
    return { result: await p, logs: logger.lines };
  }

  it('no LeaseCandidate API (404, or not in discovery): ordinary election', async () => {
    expect((await check(stub([status(404)], renewed))).result).toEqual({
      ok: false,
      reason: 'the API server does not serve coordination.k8s.io/v1beta1 (404)',
    });
    expect((await check(stub([{ resources: [] }], renewed))).result).toMatchObject({ ok: false });
  });

  it('the API and a coordinator that renews its lease (every 2 s, as kube-apiserver): coordinated within ~2 s', async () => {
    const client = stub([served], renewed);
    const logger = memoryLogger(10);
    const p = checkCoordinatedElection({ client, clock, logger });
    let done = false;
    void p.then(() => (done = true));
    await advance(1_900);
    expect(done).toBe(false);
    await advance(200);
    expect(done).toBe(true);
    expect(await p).toEqual({ ok: true });
  });

  it('the API without a coordinator (gate off in kube-apiserver): ordinary election after 30 s', async () => {
    const missing = await check(stub([served], () => status(404)));
    expect(missing.result).toEqual({
      ok: false,
      reason:
        'no coordinator: kube-system/leader-election-controller was missing for 30s (kube-apiserver runs it only with --feature-gates=CoordinatedLeaderElection=true)',
    });
    const stale = await check(stub([served], () => renewed(0)));
    expect(stale.result).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/was not renewed for 30s/),
    });
  });

  it('an unreachable API server decides nothing: discovery is retried, each failure a warning with its cause', async () => {
    const client = stub([status(503), new Error('ECONNREFUSED'), served], renewed);
    const { result, logs } = await check(client);
    expect(result).toEqual({ ok: true });
    expect(client.calls.filter((c) => c === candidatePaths.group)).toHaveLength(3);
    expect(
      logs.filter((l) => String(l.msg).startsWith('Cannot ask the API server')).map((l) => [l.level, l.err]),
    ).toEqual([
      ['warn', expect.stringMatching(/503/)],
      ['warn', expect.stringMatching(/ECONNREFUSED/)],
    ]);
  });

  /** Runs a check for `ms` of virtual time; `result()` is undefined while it is undecided. */
  function running(client: KubeRequester, o: { signal?: AbortSignal } = {}) {
    const logger = memoryLogger(10);
    const failures: string[] = [];
    let result: Awaited<ReturnType<typeof checkCoordinatedElection>> | undefined;
    const p = checkCoordinatedElection({
      client,
      clock,
      logger,
      signal: o.signal,
      onFailure: (c) => failures.push(c),
    }).then((r) => {
      result = r;
      return r;
    });
    return { p, result: () => result, logs: logger.lines, failures };
  }

  it("the coordinator's lease answered 500 and 429 for 60 s: undecided (never 'coordinated' for want of an answer); real answers then decide", async () => {
    // The API is served; every read of the coordinator's lease fails for the first 60 s.
    let failing = true;
    let n = 0;
    const answer = (fail: () => Answer, real: () => Answer) => () => (failing ? fail() : real());
    const client = stub(
      [served],
      answer(
        () => (n++ % 2 === 0 ? status(500) : status(429)),
        () => status(404),
      ),
    );
    const c = running(client);
    await advance(60_000);
    expect(c.result()).toBeUndefined();
    // Each failure a warning with its cause; the backoff doubles (2 s, 4 s, 8 s, 16 s, 30 s...).
    const warned = c.logs.filter((l) =>
      String(l.msg).startsWith('Cannot ask the API server for kube-system'),
    );
    expect(warned.length).toBeGreaterThanOrEqual(4);
    expect(warned.length).toBeLessThanOrEqual(6);
    expect(warned.every((l) => l.level === 'warn')).toBe(true);
    expect(warned.map((l) => String(l.err)).join(' ')).toMatch(/500.*429/);
    expect(c.failures).toHaveLength(warned.length);
    // Still failing 10 minutes on: still undecided, at most one warning per 30 s.
    await advance(10 * 60_000);
    expect(c.result()).toBeUndefined();
    const later = c.logs.filter((l) => String(l.msg).startsWith('Cannot ask the API server for kube-system'));
    expect(later.length - warned.length).toBeLessThanOrEqual(21);
    expect(later.at(-1)?.retryIn).toBe('30s');
    // Real answers (404: no coordinator's lease) for 30 s decide: no coordinator.
    failing = false;
    await advance(31_000 + 30_000);
    expect(c.result()).toEqual({
      ok: false,
      reason:
        'no coordinator: kube-system/leader-election-controller was missing for 30s (kube-apiserver runs it only with --feature-gates=CoordinatedLeaderElection=true)',
    });
  });

  it('a coordinator that renews once the API server answers again: coordinated, without a note', async () => {
    let failing = true;
    let reads = 0;
    const client = stub([served], () => (failing ? status(503) : renewed(reads++)));
    const c = running(client);
    await advance(45_000);
    expect(c.result()).toBeUndefined();
    failing = false;
    await advance(35_000);
    expect(c.result()).toEqual({ ok: true });
  });

  it('discovery answered 500 and 429 for 10 minutes: undecided, backoff capped at 30 s; a 404 then decides', async () => {
    let failing = true;
    let n = 0;
    const client: KubeRequester & { calls: string[] } = {
      calls: [],
      request: async <T>(req: KubeRequest): Promise<T> => {
        client.calls.push(req.path);
        await new Promise((r) => setTimeout(r, 1));
        if (failing) throw n++ % 2 === 0 ? status(500) : status(429);
        throw status(404);
      },
    };
    const c = running(client);
    await advance(10 * 60_000);
    expect(c.result()).toBeUndefined();
    // 2+4+8+16 s, then every 30 s: ~23 requests in 10 minutes, each failure a warning.
    expect(client.calls.length).toBeGreaterThanOrEqual(20);
    expect(client.calls.length).toBeLessThanOrEqual(25);
    const warned = c.logs.filter((l) => String(l.msg).startsWith('Cannot ask the API server whether'));
    expect(warned).toHaveLength(client.calls.length);
    expect(warned.slice(0, 5).map((l) => l.retryIn)).toEqual(['2s', '4s', '8s', '16s', '30s']);
    failing = false;
    await advance(30_000);
    expect(c.result()).toEqual({
      ok: false,
      reason: 'the API server does not serve coordination.k8s.io/v1beta1 (404)',
    });
  });

  it('each real answer starts the backoff over: failures after discovery answered wait 2 s again, and after a lease answer too', async () => {
    const leaseAnswers: (Error | object)[] = [status(503), status(503), renewed(0), status(503)];
    const client = stub(
      [status(500), status(500), status(500), served],
      (n) => leaseAnswers[n] ?? renewed(2),
    );
    const c = running(client);
    await advance(60_000);
    const retryIn = c.logs
      .filter((l) => String(l.msg).startsWith('Cannot ask the API server'))
      .map((l) => l.retryIn);
    // Discovery 2, 4, 8 s; answered: the lease's failures 2, 4 s; answered: 2 s.
    expect(retryIn).toEqual(['2s', '4s', '8s', '2s', '4s', '2s']);
    expect(c.result()).toEqual({ ok: true });
  });

  it("a 429's Retry-After is honoured (up to the cap)", async () => {
    const tooMany = new KubeApiError(429, { kind: 'Status', code: 429 }, { 'retry-after': '20' }, 'x');
    const client = stub([tooMany, served], renewed);
    const c = running(client);
    await advance(19_000);
    expect(client.calls).toEqual([candidatePaths.group]);
    await advance(5_000);
    expect(c.result()).toEqual({ ok: true });
  });

  it('the same lease before and after failures that span the window: not renewed (real answers 30 s apart)', async () => {
    let n = 0;
    // Read once, then 40 s of 503, then the same lease again.
    const start = Date.now();
    const client = stub([served], () =>
      n++ === 0 || Date.now() - start > 40_000 ? renewed(0) : status(503),
    );
    const c = running(client);
    await advance(35_000);
    expect(c.result()).toBeUndefined();
    await advance(60_000);
    // (The failures' backoff: 2+4+8+16+30 s, so the second real answer came 61 s after the first.)
    expect(c.result()).toMatchObject({
      ok: false,
      reason: expect.stringMatching(/was not renewed for 1m1s /),
    });
  });

  it("the coordinator's lease created during the window: coordinated (a coordinator acquired it)", async () => {
    const start = Date.now();
    const client = stub([served], () => (Date.now() - start < 20_000 ? status(404) : renewed(0)));
    const c = running(client);
    await advance(21_000);
    expect(c.result()).toEqual({ ok: true });
  });

  it('stop ends a check in its backoff at once, deciding nothing', async () => {
    const ac = new AbortController();
    const client = stub([status(503)], renewed);
    const c = running(client, { signal: ac.signal });
    await advance(20_000);
    expect(c.result()).toBeUndefined();
    ac.abort();
    await advance(1);
    expect(c.result()).toEqual({ ok: false, reason: 'stopped' });
  });

  it('a coordinator lease we may not read (403): coordinated as asked, with a note', async () => {
    expect((await check(stub([served], () => status(403)))).result).toMatchObject({
      ok: true,
      note: expect.stringMatching(/403/),
    });
  });
});

describe('CoordinationWatchdog (the fall-back after the decision)', () => {
  const LOCK_NAME = 'node-lifecycle-controller';
  const served = { resources: [{ name: 'leasecandidates' }] };
  const apiStatus = (code: number) => new KubeApiError(code, { kind: 'Status', code }, {}, 'x');
  const clock: Clock = { scheduler: asyncScheduler, wall: () => Date.now() };

  /**
   * A coordinated elector on the in-memory lease server, its watchdog, and kube-apiserver's
   * coordination answers: `api` decides what discovery and the coordinator's lease answer now.
   */
  function setup(
    api: { discovery: () => unknown; coordinator: () => unknown },
    o: { withdraw?: (e: LeaderElector) => Promise<boolean | undefined> } = {},
  ) {
    const server = new FakeLeaseServer();
    const logger = memoryLogger(10);
    const elector = (who: string) =>
      new LeaderElector({
        config: resolveLeaderElectionConfig({ namespace: NS, identity: who }),
        client: server.as(who),
        clock,
        logger,
        metrics: createLeaderElectionMetrics(new Registry()),
        lockUpdates$: server.watch(NS, LOCK_NAME),
        coordinated: true,
      });
    const apiClient: KubeRequester = {
      request: async <T>(req: KubeRequest): Promise<T> => {
        await new Promise((r) => setTimeout(r, 1));
        const a = req.path === candidatePaths.group ? api.discovery() : api.coordinator();
        if (a instanceof Error) throw a;
        return a as T;
      },
    };
    const withdrawn: string[] = [];
    const reinstated: string[] = [];
    const watch = (e: LeaderElector) => {
      const w = new CoordinationWatchdog({
        elector: e,
        clock,
        logger,
        recheckAfterMs: coordinatedRecheckMs(15_000),
        check: (signal) => checkCoordinatedElection({ client: apiClient, clock, logger, signal }),
        withdraw: async () => {
          withdrawn.push(e.identity);
          return o.withdraw ? await o.withdraw(e) : true;
        },
        reinstate: () => {
          reinstated.push(e.identity);
        },
      });
      w.start();
      return w;
    };
    /** kube-apiserver's coordinator names a holder (a 5 s lease, its strategy). */
    const coordinate = (holderIdentity: string) =>
      server.put(NS, {
        metadata: { name: LOCK_NAME, resourceVersion: server.get(NS, LOCK_NAME)?.metadata.resourceVersion },
        spec: {
          holderIdentity,
          leaseDurationSeconds: 5,
          renewTime: microTime(Date.now()),
          strategy: 'OldestEmulationVersion',
        },
      });
    return { server, logs: logger.lines, elector, watch, withdrawn, reinstated, coordinate };
  }
  let renewals = 0;
  const renewing = () => ({
    spec: { holderIdentity: 'apiserver-1', renewTime: microTime(T0 + 2_000 * renewals++) },
  });

  it('decided coordinated, nobody leads for 4 lease durations: re-checks; the API gone (404), it withdraws and leads by ordinary election', async () => {
    let gone = false;
    const t = setup({
      discovery: () => (gone ? apiStatus(404) : served),
      coordinator: renewing,
    });
    const a = t.elector('a_1');
    a.start();
    const w = t.watch(a);
    // The API server stops serving LeaseCandidates (a downgrade, a runtime-config change).
    gone = true;
    await advance(60_000 - 100);
    expect(w.rechecks).toBe(0);
    expect(a.coordinated).toBe(true);
    expect(t.server.get(NS, LOCK_NAME)).toBeUndefined();
    // Nobody has led for 60 s (its first look at +4 ms): the re-check finds no API, it withdraws
    // its candidate, and falls back 10 s after it stopped answering pings.
    await advance(1_200);
    expect(w.rechecks).toBe(1);
    expect(t.withdrawn).toEqual(['a_1']);
    expect(a.coordinated).toBe(true);
    await advance(10_000);
    expect(a.coordinated).toBe(false);
    const reason = 'the API server does not serve coordination.k8s.io/v1beta1 (404)';
    expect(t.logs.filter((l) => String(l.msg).includes('the coordinator is gone'))).toMatchObject([
      {
        level: 'warn',
        reason,
        campaignIn: '10s',
        msg: expect.stringContaining('withdrawing the lease candidate'),
      },
      { level: 'warn', reason, msg: expect.stringContaining('using ordinary leader election') },
    ]);
    // Ordinary election at once: the lock, missing for far longer than a lease duration, is created.
    await advance(50);
    expect(a.isLeader()).toBe(true);
    expect(t.server.get(NS, LOCK_NAME)?.spec?.holderIdentity).toBe('a_1');
    a.stop();
    w.stop();
  });

  it('the coordinator gone: its LeaseCandidate is withdrawn BEFORE it campaigns (still coordinated, the lock untouched, while it is deleted); ordinary election 10 s after it stopped answering', async () => {
    let gone = false;
    const seen: Array<{ coordinated: boolean; lock: unknown }> = [];
    const t = setup(
      { discovery: () => (gone ? apiStatus(404) : served), coordinator: renewing },
      {
        withdraw: async (e) => {
          seen.push({ coordinated: e.coordinated, lock: t.server.get(NS, LOCK_NAME) });
          await new Promise((r) => setTimeout(r, 2_000)); // the GET and DELETE take 2 s
          seen.push({ coordinated: e.coordinated, lock: t.server.get(NS, LOCK_NAME) });
          return true;
        },
      },
    );
    const a = t.elector('a_1');
    a.start();
    const w = t.watch(a);
    gone = true;
    // The re-check at 61 s finds no API (its answer at 61.001 s): the withdrawal starts.
    await advance(61_100);
    expect(t.withdrawn).toEqual(['a_1']);
    await advance(2_000);
    expect(seen).toEqual([
      { coordinated: true, lock: undefined },
      { coordinated: true, lock: undefined },
    ]);
    // Deleted at 63 s; still no campaign before 10 s after it stopped answering pings (71.001 s).
    await advance(7_800);
    expect(a.coordinated).toBe(true);
    expect(t.server.calls.filter((c) => c.method !== 'GET')).toEqual([]);
    await advance(200);
    expect(a.coordinated).toBe(false);
    await advance(50);
    expect(a.isLeader()).toBe(true);
    expect(t.reinstated).toEqual([]);
    a.stop();
    w.stop();
  });

  it.each([
    ['fails', async (): Promise<boolean> => false],
    ['throws', (): Promise<boolean> => Promise.reject(new Error('connection reset'))],
    ['hangs', (): Promise<boolean> => new Promise<boolean>(() => undefined)],
  ] as const)(
    'the deletion of the candidate %s: ordinary election only 10 s after it stopped answering, with a warning',
    async (_, withdraw) => {
      let gone = false;
      const t = setup(
        { discovery: () => (gone ? apiStatus(404) : served), coordinator: renewing },
        { withdraw },
      );
      const a = t.elector('a_1');
      a.start();
      const w = t.watch(a);
      gone = true;
      await advance(61_100);
      expect(t.withdrawn).toEqual(['a_1']);
      await advance(9_800);
      expect(a.coordinated).toBe(true);
      expect(t.server.get(NS, LOCK_NAME)).toBeUndefined();
      await advance(200);
      expect(a.coordinated).toBe(false);
      expect(
        t.logs.filter((l) => String(l.msg).startsWith('Lease candidate not confirmed deleted')),
      ).toMatchObject([{ level: 'warn' }]);
      await advance(50);
      expect(a.isLeader()).toBe(true);
      a.stop();
      w.stop();
    },
  );

  it('named by the coordinator while its candidate is withdrawn: no fall-back, the candidate is published again', async () => {
    let gone = false;
    let named: (() => void) | undefined;
    const t = setup(
      { discovery: () => (gone ? apiStatus(404) : served), coordinator: renewing },
      {
        withdraw: async () => {
          // An election the coordinator ran on our last answer lands after we stopped answering.
          setTimeout(() => named?.(), 1_000);
          return true;
        },
      },
    );
    named = () => t.coordinate('a_1');
    const a = t.elector('a_1');
    a.start();
    const w = t.watch(a);
    gone = true;
    await advance(61_100);
    expect(t.withdrawn).toEqual(['a_1']);
    await advance(11_000);
    expect(a.isLeader()).toBe(true);
    expect(a.coordinated).toBe(true);
    expect(t.reinstated).toEqual(['a_1']);
    expect(t.logs.filter((l) => String(l.msg).includes('using ordinary leader election'))).toEqual([]);
    a.stop();
    w.stop();
  });

  it('named by the coordinator during the re-check: nothing is withdrawn', async () => {
    let stale = false;
    const t = setup({
      discovery: () => served,
      coordinator: () =>
        stale ? { spec: { holderIdentity: 'apiserver-1', renewTime: microTime(T0) } } : renewing(),
    });
    const a = t.elector('a_1');
    a.start();
    const w = t.watch(a);
    stale = true;
    await advance(70_000); // the re-check (from 61 s) reads the coordinator's lease unchanged
    t.coordinate('a_1');
    await advance(40_000); // its verdict at about 91 s: no coordinator; but a leads
    expect(a.isLeader()).toBe(true);
    expect(t.withdrawn).toEqual([]);
    expect(a.coordinated).toBe(true);
    expect(t.logs.filter((l) => String(l.msg).startsWith('Not falling back'))).toHaveLength(1);
    a.stop();
    w.stop();
  });

  it('stopped (shutdown) while its candidate is withdrawn: no fall-back', async () => {
    let gone = false;
    const t = setup({ discovery: () => (gone ? apiStatus(404) : served), coordinator: renewing });
    const a = t.elector('a_1');
    a.start();
    const w = t.watch(a);
    gone = true;
    await advance(61_100);
    expect(t.withdrawn).toEqual(['a_1']);
    w.stop();
    await advance(30_000);
    expect(a.coordinated).toBe(true);
    expect(t.server.get(NS, LOCK_NAME)).toBeUndefined();
    a.stop();
  });

  it('the coordinator gone (its lease no longer renewed): falls back after the 30 s of its check', async () => {
    let stale = false;
    const t = setup({
      discovery: () => served,
      coordinator: () =>
        stale ? { spec: { holderIdentity: 'apiserver-1', renewTime: microTime(T0) } } : renewing(),
    });
    const a = t.elector('a_1');
    a.start();
    const w = t.watch(a);
    stale = true;
    await advance(61_000);
    expect(w.rechecks).toBe(1);
    expect(a.coordinated).toBe(true);
    // Its lease is read unchanged for 30 s from the re-check's first read (at 61 s); the
    // withdrawal starts then, ordinary election 10 s later.
    await advance(29_900);
    expect(t.withdrawn).toEqual([]);
    await advance(1_200);
    expect(t.withdrawn).toEqual(['a_1']);
    await advance(8_700);
    expect(a.coordinated).toBe(true);
    await advance(1_300);
    expect(a.coordinated).toBe(false);
    await advance(50);
    expect(a.isLeader()).toBe(true);
    a.stop();
    w.stop();
  });

  it('the coordinator still there: no fall-back, another re-check only after another 4 lease durations', async () => {
    const t = setup({ discovery: () => served, coordinator: renewing });
    const a = t.elector('a_1');
    a.start();
    const w = t.watch(a);
    // The re-check at 61 s sees the coordinator's lease renewed at its second read (62 s).
    await advance(63_000);
    expect(w.rechecks).toBe(1);
    expect(a.coordinated).toBe(true);
    expect(t.logs.filter((l) => String(l.msg).startsWith('The coordinator is there'))).toHaveLength(1);
    await advance(58_000);
    expect(w.rechecks).toBe(1);
    await advance(3_000);
    expect(w.rechecks).toBe(2);
    expect(a.coordinated).toBe(true);
    expect(t.withdrawn).toEqual([]);
    expect(t.server.get(NS, LOCK_NAME)).toBeUndefined();
    a.stop();
    w.stop();
  });

  it('a re-check the API server answers only with failures decides nothing: no fall-back', async () => {
    let failing = false;
    const t = setup({
      discovery: () => (failing ? apiStatus(503) : served),
      coordinator: renewing,
    });
    const a = t.elector('a_1');
    a.start();
    const w = t.watch(a);
    failing = true;
    await advance(10 * 60_000);
    expect(w.rechecks).toBe(1);
    expect(a.coordinated).toBe(true);
    expect(t.server.get(NS, LOCK_NAME)).toBeUndefined();
    a.stop();
    w.stop();
  });

  it('a standby that sees the coordinator elect and the leader renew never re-checks', async () => {
    const t = setup({ discovery: () => apiStatus(404), coordinator: renewing });
    const a = t.elector('a_1');
    const b = t.elector('b_2');
    a.start();
    b.start();
    const wa = t.watch(a);
    const wb = t.watch(b);
    await advance(1_000);
    t.coordinate('b_2');
    // b renews the lock one lease duration after its first look (a hand-over from a holder it never saw).
    await advance(20 * 60_000);
    expect(b.isLeader()).toBe(true);
    expect(a.isLeader()).toBe(false);
    expect([wa.rechecks, wb.rechecks]).toEqual([0, 0]);
    expect(a.coordinated && b.coordinated).toBe(true);
    a.stop();
    b.stop();
    wa.stop();
    wb.stop();
  });
});
