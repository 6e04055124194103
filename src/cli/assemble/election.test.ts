import { PassThrough } from 'node:stream';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Clock } from '../../clock/clock.js';
import { FlagError, loadConfig } from '../../config/index.js';
import { FakeLeaseServer } from '../../election/testing/fake-lease-api.js';
import { KubeApiError, type KubeClient, type KubeRequest, KubeTransportError } from '../../kube/client.js';
import { memoryLogger } from '../../log/logger.js';
import { asyncScheduler } from '../../rx/index.js';
import { createWatchMetrics } from '../../watch/index.js';
import { Election } from './election.js';

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-12-01T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

const NS = 'nlc-system';
const clock: Clock = { scheduler: asyncScheduler, wall: () => Date.now() };
const BUDGET = { totalMs: 10_000, drainMs: 7_000, tailMs: 3_000 };
const configOf = (flags: string[]) =>
  loadConfig(
    [`--leader-elect-resource-namespace=${NS}`, ...flags],
    { POD_NAME: 'nlc-0', POD_NAMESPACE: NS },
    'host-0',
  ).config;

/**
 * Leader election's client on the in-memory lease server; the LeaseCandidate API (v1beta1) served
 * or not, the coordinator's lease unreadable (403: used, with a note). Watches never deliver (the
 * elector polls).
 */
interface ApiShape {
  /** The LeaseCandidate API served. */
  candidates?: boolean;
  /** Nothing answers (each request times out). */
  hang?: boolean;
  /** The coordinator's lease (403) is answered this late. */
  coordinatorDelayMs?: number;
}

function apiOf(server: FakeLeaseServer, o: ApiShape = {}) {
  const candidates = new Map<string, Record<string, unknown>>();
  const requests: string[] = [];
  const selectors: unknown[] = [];
  /** Each watch opened: its path, whether it was ended (aborted), and a way to send it an event. */
  const streams: Array<{ path: string; ended: boolean; send(type: string, object: unknown): void }> = [];
  const base = server.as('nlc-0');
  const status = (code: number, what: string) => new KubeApiError(code, { kind: 'Status', code }, {}, what);
  const candidate = (req: KubeRequest): unknown => {
    const body = req.body as { metadata: { name: string } };
    const name = req.path.split('/leasecandidates')[1]?.replace(/^\//, '') || body?.metadata.name;
    if (!name) return { metadata: { resourceVersion: '1' }, items: [...candidates.values()] };
    if (req.method === 'DELETE') return candidates.delete(name) ? {} : Promise.reject(status(404, req.path));
    if (req.method === 'GET') return candidates.get(name) ?? Promise.reject(status(404, req.path));
    const stored = { ...body, metadata: { ...body.metadata, uid: `uid-${name}`, resourceVersion: '2' } };
    candidates.set(name, stored);
    return stored;
  };
  const client = {
    request: async (req: KubeRequest) => {
      requests.push(`${req.method} ${req.path}`);
      if (req.query?.fieldSelector) selectors.push(req.query.fieldSelector);
      if (o.hang) {
        // Nothing answers: the client's own timeout ends each request.
        return new Promise((_, reject) =>
          setTimeout(() => reject(new KubeTransportError('timed out', 'TIMEOUT')), req.timeoutMs ?? 30_000),
        );
      }
      if (req.path === '/apis/coordination.k8s.io/v1beta1') {
        if (!o.candidates) throw status(404, req.path);
        return { resources: [{ name: 'leasecandidates' }] };
      }
      if (req.path.endsWith('/leases/leader-election-controller')) {
        await new Promise((r) => setTimeout(r, o.coordinatorDelayMs ?? 0));
        throw status(403, req.path);
      }
      if (req.path.includes('/leasecandidates')) return candidate(req);
      return base.request(req);
    },
    stream: async (req: { path: string; signal?: AbortSignal }) => {
      const body = new PassThrough();
      const stream = {
        path: req.path,
        ended: false,
        send: (type: string, object: unknown) => body.write(`${JSON.stringify({ type, object })}\n`),
      };
      streams.push(stream);
      req.signal?.addEventListener('abort', () => {
        stream.ended = true;
        body.destroy();
      });
      return body;
    },
  } as unknown as KubeClient;
  return { client, candidates, requests, selectors, streams };
}

function setup(flags: string[] = [], api: ApiShape = {}) {
  const server = new FakeLeaseServer();
  const { client, candidates, requests, selectors, streams } = apiOf(server, api);
  const log = memoryLogger(2);
  const leadership: string[] = [];
  let idleCalls = 0;
  const election = new Election({
    config: configOf(flags),
    build: { version: '1.37.0' },
    client,
    clock,
    logger: log,
    registry: new Registry(),
    watchMetrics: createWatchMetrics(new Registry()),
    leadership: {
      elected: (on) => leadership.push(`elected ${on}`),
      lost: (reason) => leadership.push(`lost: ${reason}`),
    },
    writesIdle: async () => {
      idleCalls++;
    },
  });
  const abort = new AbortController();
  return {
    server,
    election,
    log,
    leadership,
    candidates,
    requests,
    selectors,
    streams,
    abort,
    idleCalls: () => idleCalls,
    msgs: () => log.lines.map((l) => String(l.msg)),
    start: () => election.runnable.start?.(abort.signal),
  };
}

/** The manager's stop over this runnable alone: halt, then (drained) release and tail, then close. */
async function stop(s: ReturnType<typeof setup>) {
  s.abort.abort();
  const steps = s.election.runnable.stop!;
  steps.halt?.(BUDGET);
  const released = steps.lease?.release(BUDGET.tailMs);
  const tail = steps.tail?.(BUDGET.tailMs);
  await vi.advanceTimersByTimeAsync(BUDGET.tailMs);
  const result = await released;
  await tail;
  await steps.close?.();
  return result;
}

describe('Election', () => {
  it('without --leader-elect: acts alone once started, and says so; no lease, no check', async () => {
    const s = setup(['--leader-elect=false']);
    expect(s.election.elector).toBeUndefined();
    expect(s.election.control).toBeUndefined();
    const r = s.election.runnable;
    expect([r.name, r.group, r.healthz, r.stop]).toEqual([
      'leader-election',
      'election',
      undefined,
      undefined,
    ]);
    expect(s.leadership).toEqual([]);
    await s.start();
    expect(s.leadership).toEqual(['elected true']);
    expect(s.log.lines).toEqual([
      expect.objectContaining({
        level: 'warn',
        msg: 'Leader election disabled: this process acts alone; never run two like this',
      }),
    ]);
  });

  it('campaigns once started (the lock, the elector, the identity lease), tells the manager it leads, and releases the lock at the stop', async () => {
    const s = setup();
    const r = s.election.runnable;
    expect(r.healthz?.map((c) => c.name)).toEqual(['leaderElection']);
    await vi.advanceTimersByTimeAsync(30_000);
    expect(s.requests).toEqual([]); // nothing before its start
    await s.start();
    await vi.advanceTimersByTimeAsync(20_000); // a fresh lock: one lease duration after the first look
    expect(s.leadership).toEqual(['elected true']);
    expect(s.server.get(NS, 'node-lifecycle-controller')?.spec?.holderIdentity).toBe('nlc-0');
    // The lock is watched (its list: this one lease).
    expect(s.selectors).toContain('metadata.name=node-lifecycle-controller');
    expect([...s.server.leases.keys()].filter((k) => k !== `${NS}/node-lifecycle-controller`)).toHaveLength(
      1,
    );
    expect(r.healthz?.[0]?.check()).toBeUndefined();
    expect(await stop(s)).toBe('released');
    expect(s.log.lines.find((l) => l.msg === 'Leader lease release')).toMatchObject({ result: 'released' });
    expect(s.server.get(NS, 'node-lifecycle-controller')?.spec?.holderIdentity ?? '').toBe('');
    // The identity lease is deleted in the tail.
    expect([...s.server.leases.keys()]).toEqual([`${NS}/node-lifecycle-controller`]);
    expect(s.leadership).toEqual(['elected true', 'elected false']);
  });

  it('a lost lease: the manager hears it (not leading, then lost)', async () => {
    const s = setup();
    await s.start();
    await vi.advanceTimersByTimeAsync(20_000);
    expect(s.leadership).toEqual(['elected true']);
    s.server.fault = () => new KubeTransportError('connect ECONNREFUSED', 'ECONNREFUSED');
    await vi.advanceTimersByTimeAsync(15_000);
    expect(s.leadership[1]).toBe('elected false');
    expect(s.leadership[2]).toMatch(/^lost: /);
    expect(s.leadership).toHaveLength(3);
  });

  it('what the reconciler tells it: eligibility, and a step-down that waits for the writes on the wire', async () => {
    const s = setup();
    await s.start();
    await vi.advanceTimersByTimeAsync(20_000);
    s.election.control?.setEligible(false, 'the lease watch is disconnected');
    expect(s.log.lines.find((l) => l.msg === 'Not eligible to lead: not acquiring the lease')).toMatchObject({
      reason: 'the lease watch is disconnected',
    });
    s.election.control?.stepDown('blind for 2m30s');
    await vi.advanceTimersByTimeAsync(1_000);
    expect(s.idleCalls()).toBe(1);
    expect(s.log.lines.find((l) => l.msg === 'Leader lease release after stepping down')).toMatchObject({
      result: 'released',
    });
    expect(s.leadership).toEqual(['elected true', 'elected false']);
  });

  it('coordinated, without the LeaseCandidate API: says so and runs ordinary election', async () => {
    const s = setup(['--feature-gates=CoordinatedLeaderElection=true']);
    await s.start();
    await vi.advanceTimersByTimeAsync(20_000);
    expect(
      s.log.lines.find(
        (l) => l.msg === 'Coordinated leader election unavailable: using ordinary leader election',
      ),
    ).toMatchObject({
      level: 'warn',
      reason: 'the API server does not serve coordination.k8s.io/v1beta1 (404)',
    });
    expect(s.leadership).toEqual(['elected true']);
  });

  it('coordinated, with the API: publishes a LeaseCandidate and waits to be named; the stop withdraws it before the lock is released', async () => {
    const s = setup(['--feature-gates=CoordinatedLeaderElection=true'], { candidates: true });
    await s.start();
    await vi.advanceTimersByTimeAsync(20_000);
    expect(s.msgs()).toContain(
      'Coordinated leader election: publishing a LeaseCandidate; the coordinator names the leader',
    );
    expect([...s.candidates.keys()]).toEqual(['nlc-0']);
    expect(s.leadership).toEqual([]); // the coordinator names the holder; none here
    expect(s.server.get(NS, 'node-lifecycle-controller')).toBeUndefined();
    // What the reconciler says reaches the candidate too: not eligible, it does not answer the
    // coordinator's ping; eligible again, it does.
    const writes = () => s.requests.filter((r) => /^(POST|PUT) .*leasecandidates/.test(r)).length;
    const before = writes();
    s.election.control?.setEligible(false);
    const stored = s.candidates.get('nlc-0') as { spec: Record<string, unknown> };
    const pinged = { ...stored, spec: { ...stored.spec, pingTime: new Date().toISOString() } };
    s.streams.find((x) => x.path.endsWith('/leasecandidates'))?.send('MODIFIED', pinged);
    await vi.advanceTimersByTimeAsync(100);
    expect(writes()).toBe(before);
    s.election.control?.setEligible(true);
    await vi.advanceTimersByTimeAsync(100);
    expect(writes()).toBe(before + 1);
    // The lock's and the candidate's watches are open until the stop.
    expect(s.streams.map((x) => x.path).sort()).toEqual([
      '/apis/coordination.k8s.io/v1/namespaces/nlc-system/leases',
      '/apis/coordination.k8s.io/v1beta1/namespaces/nlc-system/leasecandidates',
    ]);
    expect(s.streams.some((x) => x.ended)).toBe(false);
    expect(await stop(s)).toBe('not-holder');
    expect(s.streams.every((x) => x.ended)).toBe(true);
    expect(s.candidates.size).toBe(0);
    const msgs = s.msgs();
    expect(msgs.indexOf('Deleted lease candidate on shutdown')).toBeLessThan(
      msgs.indexOf('Leader lease release'),
    );
  });

  it('coordinated, then the API gone: the LeaseCandidate is deleted before the replica campaigns; it takes the lock 10 s after it stopped answering', async () => {
    const api: ApiShape = { candidates: true };
    const s = setup(['--feature-gates=CoordinatedLeaderElection=true'], api);
    await s.start();
    await vi.advanceTimersByTimeAsync(20_000);
    expect([...s.candidates.keys()]).toEqual(['nlc-0']);
    api.candidates = false; // a downgrade, a runtime-config change: discovery answers 404
    const deleted = () =>
      s.requests.indexOf(
        'DELETE /apis/coordination.k8s.io/v1beta1/namespaces/nlc-system/leasecandidates/nlc-0',
      );
    // Nobody has led for 60 s: the re-check (at about 61 s) finds no API and withdraws first.
    await vi.advanceTimersByTimeAsync(42_000);
    expect(deleted()).toBeGreaterThan(-1);
    expect(s.candidates.size).toBe(0);
    expect(s.server.get(NS, 'node-lifecycle-controller')).toBeUndefined();
    expect(s.leadership).toEqual([]);
    // The candidate's watch ends with it; the lock's stays.
    expect(s.streams.filter((x) => !x.ended).map((x) => x.path)).toEqual([
      '/apis/coordination.k8s.io/v1/namespaces/nlc-system/leases',
    ]);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(s.leadership).toEqual(['elected true']);
    expect(s.server.get(NS, 'node-lifecycle-controller')?.spec?.holderIdentity).toBe('nlc-0');
    const msgs = s.msgs();
    expect(msgs.indexOf('Deleted lease candidate on shutdown')).toBeGreaterThan(-1);
    expect(msgs.indexOf('Deleted lease candidate on shutdown')).toBeLessThan(
      msgs.indexOf('Switched to ordinary leader election: campaigning for the lock ourselves'),
    );
    expect(await stop(s)).toBe('released');
    expect(s.candidates.size).toBe(0);
  });

  it('coordinated, undecided while the API server does not answer: /healthz says so after 5 minutes; a stop ends the wait and nothing campaigns', async () => {
    const s = setup(['--feature-gates=CoordinatedLeaderElection=true'], { hang: true });
    const check = s.election.runnable.healthz![0]!;
    await s.start();
    await vi.advanceTimersByTimeAsync(5 * 60_000);
    expect(check.check()).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1_000);
    expect(check.check()).toContain('coordinated leader election undecided');
    expect(check.check()).toContain('; last: timed out');
    s.abort.abort();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(s.msgs()).not.toContain('Attempting to acquire leader lease');
    expect(check.check()).toBeUndefined();
    expect(s.leadership).toEqual([]);
  });

  it('coordinated: the halt stops the watchdog (a re-check during the drain would fall back to ordinary election)', async () => {
    const s = setup(['--feature-gates=CoordinatedLeaderElection=true'], { candidates: true });
    await s.start();
    await vi.advanceTimersByTimeAsync(50_000); // nobody leads; the re-check is due after 60 s
    s.abort.abort();
    s.election.runnable.stop?.halt?.(BUDGET);
    await vi.advanceTimersByTimeAsync(20_000); // a long drain: the lock not released yet
    const msgs = s.msgs();
    expect(msgs.filter((m) => m.startsWith('Nobody has led the lock'))).toEqual([]);
    expect(msgs).not.toContain('Coordinated leader election unavailable: using ordinary leader election');
  });

  it('coordinated: a decision that comes as the stop begins starts nothing', async () => {
    const s = setup(['--feature-gates=CoordinatedLeaderElection=true'], {
      candidates: true,
      coordinatorDelayMs: 50,
    });
    await s.start();
    await vi.advanceTimersByTimeAsync(10);
    s.abort.abort();
    await vi.advanceTimersByTimeAsync(60_000);
    const msgs = s.msgs();
    expect(msgs).not.toContain('Attempting to acquire leader lease');
    expect(msgs).not.toContain('Publishing lease candidate');
    expect(s.candidates.size).toBe(0);
  });

  it('/healthz: nobody has led the lock for long (a holder that stopped renewing, and this replica cannot take it)', async () => {
    const s = setup();
    s.server.put(NS, {
      metadata: { name: 'node-lifecycle-controller' },
      spec: {
        holderIdentity: 'nlc-9',
        leaseDurationSeconds: 15,
        acquireTime: new Date(Date.now() - 60_000).toISOString(),
        renewTime: new Date(Date.now() - 60_000).toISOString(),
      },
    });
    s.server.fault = (req) =>
      req.method === 'GET' ? undefined : new KubeApiError(500, { kind: 'Status', code: 500 }, {}, req.path);
    const check = s.election.runnable.healthz![0]!;
    await s.start();
    await vi.advanceTimersByTimeAsync(60_000);
    expect(check.check()).toBeUndefined();
    await vi.advanceTimersByTimeAsync(180_000);
    expect(check.check()).toContain('nobody has led the lock nlc-system/node-lifecycle-controller');
  });

  it('coordinated with an --emulated-version above the binary: a usage error naming the feature gate', () => {
    expect(() =>
      setup(['--feature-gates=CoordinatedLeaderElection=true', '--emulated-version=1.99']),
    ).toThrow(FlagError);
    expect(() =>
      setup(['--feature-gates=CoordinatedLeaderElection=true', '--emulated-version=1.99']),
    ).toThrow(/^--feature-gates=CoordinatedLeaderElection=true: /);
  });
});
