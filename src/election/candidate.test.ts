import { Registry } from 'prom-client';
import { asyncScheduler } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Clock } from '../clock/clock.js';
import { KubeApiError, type KubeRequest } from '../kube/client.js';
import { memoryLogger } from '../log/logger.js';
import { Subject } from '../rx/index.js';
import {
  candidatePaths,
  candidateVersions,
  checkCoordinatedElection,
  type LeaseCandidate,
  LeaseCandidatePublisher,
} from './candidate.js';
import { candidateNameProblem } from './config.js';
import type { KubeRequester } from './lease-api.js';
import { createLeaderElectionMetrics } from './metrics.js';
import { microTime, microTimeAfter } from './record.js';

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

function publisher(server: FakeCandidates, o: { skewMs?: number } = {}) {
  const registry = new Registry();
  const metrics = createLeaderElectionMetrics(registry);
  const clock: Clock = { scheduler: asyncScheduler, wall: () => Date.now() + (o.skewMs ?? 0) };
  const logger = memoryLogger(10);
  const p = new LeaseCandidatePublisher({
    client: server.client(),
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
    await done;
    expect(server.items.has(ME)).toBe(false);
    expect(logs.some((l) => l.msg === 'Deleted lease candidate on shutdown')).toBe(true);
    // Nothing is created again after the stop.
    await advance(10 * 60_000);
    expect(server.items.has(ME)).toBe(false);
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

  it('an unreachable API server decides nothing: discovery is retried', async () => {
    const client = stub([status(503), new Error('ECONNREFUSED'), served], renewed);
    const { result, logs } = await check(client);
    expect(result).toEqual({ ok: true });
    expect(client.calls.filter((c) => c === candidatePaths.group)).toHaveLength(3);
    expect(logs.filter((l) => String(l.msg).startsWith('Cannot ask the API server'))).toHaveLength(1);
  });

  it('a coordinator lease we may not read (403): coordinated as asked, with a note', async () => {
    expect((await check(stub([served], () => status(403)))).result).toMatchObject({
      ok: true,
      note: expect.stringMatching(/403/),
    });
  });
});
