import { Registry } from 'prom-client';
import { asyncScheduler } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Clock } from '../clock/clock.js';
import { KubeApiError } from '../kube/client.js';
import type { Lease } from '../kube/types.js';
import { type KV, memoryLogger } from '../log/logger.js';
import { resolveLeaderElectionConfig } from './config.js';
import { type ElectionEvent, LeaderElector, type LostLeadership, NotLeaderError } from './elector.js';
import { createLeaderElectionMetrics, type LeaderElectionMetrics } from './metrics.js';
import { microTime } from './record.js';
import { FakeLeaseServer } from './testing/fake-lease-api.js';

const NS = 'nlc-system';
const LOCK = 'node-lifecycle-controller';
const T0 = Date.parse('2026-03-01T12:00:00.000Z');
const HOUR = 3_600_000;

interface Replica {
  e: LeaderElector;
  logs: KV[];
  events: ElectionEvent[];
  lost: LostLeadership[];
  metrics: LeaderElectionMetrics;
  registry: Registry;
  started(): number | undefined;
}

let server: FakeLeaseServer;
const replicas: Replica[] = [];

beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
  server = new FakeLeaseServer();
});
afterEach(() => {
  for (const r of replicas.splice(0)) r.e.stop();
  vi.useRealTimers();
});

function replica(
  who: string,
  o: {
    watch?: boolean;
    skewMs?: number;
    random?: number;
    timing?: { ld: number; rd: number; rp: number };
    coordinated?: boolean;
    drained?: () => Promise<void>;
  } = {},
): Replica {
  const registry = new Registry();
  const metrics = createLeaderElectionMetrics(registry);
  // Monotonic = the fake Date.now; the wall clock may be skewed (it only feeds renewTime/acquireTime).
  const clock: Clock = { scheduler: asyncScheduler, wall: () => Date.now() + (o.skewMs ?? 0) };
  const t = o.timing ?? { ld: 15_000, rd: 10_000, rp: 2_000 };
  const config = resolveLeaderElectionConfig({
    namespace: NS,
    identity: who,
    leaseDurationMs: t.ld,
    renewDeadlineMs: t.rd,
    retryPeriodMs: t.rp,
  });
  const logger = memoryLogger(10);
  const e = new LeaderElector({
    config,
    client: server.as(who),
    clock,
    logger,
    metrics,
    lockUpdates$: o.watch === false ? undefined : server.watch(NS, LOCK, 1),
    random: () => o.random ?? 0.5,
    coordinated: o.coordinated,
    drained: o.drained,
  });
  const events: ElectionEvent[] = [];
  const lost: LostLeadership[] = [];
  e.events$.subscribe((ev) => events.push(ev));
  e.lost$.subscribe((l) => lost.push(l));
  const r: Replica = {
    e,
    logs: logger.lines,
    events,
    lost,
    metrics,
    registry,
    started: () => events.find((ev) => ev.type === 'started-leading')?.at,
  };
  replicas.push(r);
  return r;
}

async function metric(r: Replica, name: string): Promise<number | undefined> {
  const m = r.registry.getSingleMetric(name);
  const values = (await m?.get())?.values ?? [];
  return values.find((v) => v.labels.name === LOCK || v.labels.name === undefined)?.value;
}

/**
 * A fresh cluster: the first replica finds no lock at T0 + 4 ms (its GET) and creates it one lease
 * duration later (a holder it never saw may have renewed just before the lock was deleted).
 */
const FIRST_LEADER_MS = 15_000 + 20;

const advance = (ms: number) => vi.advanceTimersByTimeAsync(ms);
const lock = () => server.get(NS, LOCK);
const leaders = () => replicas.filter((r) => r.e.isLeader()).map((r) => r.e.identity);

describe('LeaderElector', () => {
  it('creates a missing lock one lease duration after it found it missing, leads, and renews every retryPeriod by the fast path', async () => {
    const a = replica('a_1');
    expect(await metric(a, 'leader_election_master_status')).toBe(0);
    a.e.start();
    // Its GET (answered at T0 + 4) finds no lock: it reads again every poll, creates nothing yet.
    await advance(4 + 15_000 - 1);
    expect(a.e.isLeader()).toBe(false);
    expect(lock()).toBeUndefined();
    expect(a.logs.filter((l) => String(l.msg).startsWith('Lock not found'))).toMatchObject([
      {
        msg: 'Lock not found; creating it after one lease duration unless a leader shows up',
        createIn: '15s',
      },
    ]);
    expect(server.calls.filter((c) => c.who === 'a_1').map((c) => `${c.method} ${c.status}`)).toEqual(
      Array(1 + 4).fill('GET 404'), // the first look, then every 3.2 s (2 s x (1 + 1.2 x 0.5))
    );
    await advance(1 + 4);
    expect(a.e.isLeader()).toBe(true);
    expect(a.events.map((e) => e.type)).toEqual(['new-leader', 'started-leading']);
    expect(await metric(a, 'leader_election_master_status')).toBe(1);
    const created = T0 + 4 + 15_000;
    expect(lock()?.spec).toEqual({
      holderIdentity: 'a_1',
      leaseDurationSeconds: 15,
      acquireTime: microTime(created),
      renewTime: microTime(created),
      leaseTransitions: 0,
    });
    const before = server.calls.length;
    await advance(6_020);
    const renewals = server.calls.slice(before);
    expect(renewals.map((c) => `${c.method} ${c.status}`)).toEqual(['PUT 200', 'PUT 200', 'PUT 200']);
    expect(lock()?.spec).toMatchObject({ acquireTime: microTime(created), leaseTransitions: 0 });
    expect(await metric(a, 'leader_election_slowpath_total')).toBe(0);
  });

  describe.each([
    ['synchronised clocks', 0, 0],
    ['a leader clock 5 h ahead', 5 * HOUR, 0],
    ['a leader clock 5 h behind', -5 * HOUR, 0],
    ['a candidate clock 7 h ahead', 0, 7 * HOUR],
  ])('with %s', (_label, skewA, skewB) => {
    it('a candidate respects the live holder and takes the expired lease within 100 ms of expiry', async () => {
      const a = replica('a_1', { skewMs: skewA });
      a.e.start();
      await advance(FIRST_LEADER_MS);
      // random 0.999: polls as late as client-go allows (2 s x 2.2), to show the expiry timer acts.
      const b = replica('b_2', { skewMs: skewB, random: 0.999 });
      b.e.start();
      await advance(9_000);
      expect(leaders()).toEqual(['a_1']);
      expect(b.e.getLeader()).toBe('a_1');
      a.e.stop(); // frozen/crashed: no release
      const seen = b.e.snapshot().lock;
      if (seen.kind !== 'present') throw new Error('b has not seen the lock');
      const expiry = seen.since + 15_000;
      await advance(expiry - Date.now() - 1);
      expect(b.e.isLeader()).toBe(false);
      await advance(100);
      expect(b.e.isLeader()).toBe(true);
      const took = b.started()!;
      expect(took - expiry).toBeGreaterThanOrEqual(0);
      expect(took - expiry).toBeLessThanOrEqual(100);
      expect(lock()?.spec).toMatchObject({ holderIdentity: 'b_2', leaseTransitions: 1 });
    });
  });

  it('without a watch, falls back to jittered polling (client-go behaviour)', async () => {
    const a = replica('a_1', { watch: false });
    a.e.start();
    await advance(FIRST_LEADER_MS);
    const b = replica('b_2', { watch: false, random: 0 });
    b.e.start();
    await advance(3_000);
    a.e.stop();
    const seen = b.e.snapshot().lock;
    if (seen.kind !== 'present') throw new Error('b has not seen the lock');
    await advance(15_000 + 2_500);
    expect(b.e.isLeader()).toBe(true);
    // It took over no later than the first poll after expiry.
    expect(b.started()! - (seen.since + 15_000)).toBeLessThanOrEqual(2_000 + 20);
  });

  it('takes a released lease within 100 ms of the watch signal; release writes no holder and 1 s', async () => {
    const a = replica('a_1');
    a.e.start();
    await advance(FIRST_LEADER_MS);
    const b = replica('b_2', { random: 0.999 });
    b.e.start();
    await advance(5_000);
    const writes: (Lease | undefined)[] = [];
    server.changes.subscribe((c) => writes.push(c.lease));
    const acquiredBefore = lock()?.spec?.acquireTime;
    const releasedAt = Date.now();
    const result = a.e.release();
    await advance(200);
    expect(await result).toBe('released');
    expect(writes[0]?.spec).toMatchObject({
      holderIdentity: '',
      leaseDurationSeconds: 1,
      leaseTransitions: 0,
    });
    // A stopped watching when it released: the last it knows is "nobody".
    expect(a.events.slice(-2)).toMatchObject([
      { type: 'stopped-leading', reason: 'released' },
      { type: 'new-leader', identity: '' },
    ]);
    expect(b.e.isLeader()).toBe(true);
    expect(b.started()! - releasedAt).toBeLessThan(100);
    expect(lock()?.spec).toMatchObject({
      holderIdentity: 'b_2',
      leaseTransitions: 1,
      leaseDurationSeconds: 15,
    });
    expect(lock()?.spec?.acquireTime).not.toBe(acquiredBefore);
    expect(await metric(a, 'leader_election_master_status')).toBe(0);
    expect(await metric(b, 'nlc_leader_election_transitions_total')).toBe(1);
  });

  it('release() by a non-leader writes nothing', async () => {
    const a = replica('a_1');
    a.e.start();
    await advance(FIRST_LEADER_MS);
    const b = replica('b_2');
    b.e.start();
    await advance(100);
    const n = server.calls.filter((c) => c.who === 'b_2' && c.method === 'PUT').length;
    const result = b.e.release();
    await advance(50);
    expect(await result).toBe('not-holder');
    expect(server.calls.filter((c) => c.who === 'b_2' && c.method === 'PUT').length).toBe(n);
    expect(lock()?.spec?.holderIdentity).toBe('a_1');
  });

  it('failed renewals are retried every retryPeriod; leadership is lost renewDeadline after the last success was sent', async () => {
    const a = replica('a_1');
    const timeouts: number[] = [];
    server.fault = (req, who) => {
      if (who === 'a_1' && req.timeoutMs !== undefined) timeouts.push(req.timeoutMs);
      return who === 'a_1' && broken ? 'hang' : undefined;
    };
    let broken = false;
    a.e.start();
    await advance(FIRST_LEADER_MS + 4_100);
    const renewedAt = a.e.snapshot().renewedAt!;
    broken = true;
    expect(a.e.fenceDeadline()).toBe(renewedAt + 10_000);
    await advance(renewedAt + 10_000 - Date.now() - 1);
    expect(a.e.isLeader()).toBe(true);
    expect(a.e.canWrite()).toBe(true);
    expect(() => a.e.fence()).not.toThrow();
    await advance(1);
    expect(a.e.isLeader()).toBe(false);
    expect(a.lost).toEqual([
      { reason: 'failed to renew lease within the renew deadline', at: renewedAt + 10_000 },
    ]);
    expect(a.events.at(-1)).toMatchObject({ type: 'stopped-leading', reason: 'lost' });
    expect(a.e.canWrite()).toBe(false);
    expect(() => a.e.fence()).toThrow(NotLeaderError);
    expect(await metric(a, 'leader_election_master_status')).toBe(0);
    // Hung requests time out after renewDeadline/2: the fast PUT (5 s) then the slow-path GET,
    // which the deadline cut short.
    expect(Math.max(...timeouts)).toBe(5_000);
    expect(
      server.calls
        .filter((c) => c.who === 'a_1')
        .slice(-2)
        .map((c) => `${c.method} ${c.status}`),
    ).toEqual(['PUT TIMEOUT', 'GET ABORTED']);
    // The loss is terminal: nothing more is sent.
    const n = server.calls.length;
    await advance(30_000);
    expect(server.calls.length).toBe(n);
  });

  it('renew errors (500) are retried every retryPeriod until the deadline', async () => {
    const a = replica('a_1');
    let broken = false;
    server.fault = (_req, who) =>
      who === 'a_1' && broken ? new KubeApiError(500, { reason: 'InternalError' }, {}, 'x') : undefined;
    a.e.start();
    await advance(FIRST_LEADER_MS);
    const renewedAt = a.e.snapshot().renewedAt!;
    broken = true;
    const from = server.calls.length;
    await advance(12_000);
    const attempts = server.calls.slice(from).filter((c) => c.method === 'PUT' || c.method === 'GET');
    expect(a.lost[0]?.at).toBe(renewedAt + 10_000);
    // Each renew attempt = fast PUT, then slow path GET (both fail): one attempt every ~2 s.
    expect(attempts.length).toBeGreaterThanOrEqual(8);
    expect(await metric(a, 'nlc_leader_election_renew_errors_total')).toBe(4);
  });

  it('a 409 on acquire means we lost the race: exactly one of two racing candidates leads', async () => {
    const a = replica('a_1');
    a.e.start();
    await advance(FIRST_LEADER_MS);
    const b = replica('b_2');
    const c = replica('c_3');
    b.e.start();
    c.e.start();
    await advance(3_000);
    const released = a.e.release();
    await advance(500);
    expect(await released).toBe('released');
    expect(leaders()).toHaveLength(1);
    const conflicts = server.calls.filter((x) => x.method === 'PUT' && x.status === 409);
    expect(conflicts).toHaveLength(1);
    const loser = conflicts[0]!.who;
    expect(leaders()).not.toContain(loser);
    const l = replicas.find((r) => r.e.identity === loser)!;
    expect(l.e.getLeader()).toBe(leaders()[0]);
    await advance(20_000);
    expect(leaders()).toHaveLength(1);
  });

  it('a lock it cannot read or create (403, 404 namespace, 5xx) is a warning naming the lock and the cause, once a minute per cause; a 409 lost race is not', async () => {
    const a = replica('a_1');
    const forbidden = new KubeApiError(
      403,
      {
        kind: 'Status',
        reason: 'Forbidden',
        message: `leases.coordination.k8s.io "${LOCK}" is forbidden: User "system:serviceaccount:nlc-system:x" cannot get resource "leases"`,
        code: 403,
      },
      {},
      `GET /apis/coordination.k8s.io/v1/namespaces/${NS}/leases/${LOCK}`,
    );
    let fault: Error | undefined = forbidden;
    server.fault = () => fault;
    const warnings = () => a.logs.filter((l) => l.level === 'warn');
    a.e.start();
    // Retried every ~3.2 s (2 s x (1 + 1.2 x 0.5)): 19 failures in the first minute, one warning.
    await advance(59_000);
    expect(server.calls.filter((c) => c.status === 403).length).toBeGreaterThanOrEqual(15);
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]).toMatchObject({
      msg: 'Cannot read or create the leader election lock',
      lock: `${NS}/${LOCK}`,
      cause: '403 Forbidden',
      hint: `RBAC: the controller's user needs get, create and update on leases in namespace ${NS}`,
    });
    expect(String(warnings()[0]!.err)).toContain('cannot get resource "leases"');
    // A minute later, the same cause once more, with how often it repeated.
    await advance(5_000);
    expect(warnings()).toHaveLength(2);
    expect(warnings()[1]).toMatchObject({ cause: '403 Forbidden' });
    expect(warnings()[1]!.repeatsSinceLastWarning).toBeGreaterThanOrEqual(15);
    // Another cause is warned about at once: the namespace does not exist (the create's 404).
    server.fault = (req) =>
      req.method === 'POST'
        ? new KubeApiError(404, { kind: 'Status', reason: 'NotFound', code: 404 }, {}, 'POST leases')
        : undefined;
    await advance(20_000);
    expect(warnings()).toHaveLength(3);
    expect(warnings()[2]).toMatchObject({
      cause: '404 NotFound',
      hint: `namespace ${NS} does not exist (--leader-elect-resource-namespace, else POD_NAMESPACE)`,
    });
    fault = new KubeApiError(
      503,
      { kind: 'Status', reason: 'ServiceUnavailable', code: 503 },
      {},
      'GET lease',
    );
    server.fault = () => fault;
    await advance(4_000);
    expect(warnings()).toHaveLength(4);
    expect(warnings()[3]).toMatchObject({ cause: '503 ServiceUnavailable' });
    expect(warnings()[3]!.hint).toBeUndefined();
    // Working again: said once; it then leads. (The reads between the 403s and the refused create
    // had worked: said then too.)
    server.fault = undefined;
    fault = undefined;
    await advance(FIRST_LEADER_MS + 4_000);
    expect(a.logs.filter((l) => l.msg === 'Leader election lock requests succeed again')).toMatchObject([
      { level: 'info', after: '403 Forbidden' },
      { level: 'info', after: '503 ServiceUnavailable' },
    ]);
    expect(a.e.isLeader()).toBe(true);
    expect(warnings()).toHaveLength(4);
  });

  it('losing the race for the lock (409) stays at debug level: no warning', async () => {
    const a = replica('a_1');
    a.e.start();
    await advance(FIRST_LEADER_MS);
    // Two pollers on the same schedule: both read the released lock, both write it, one gets 409
    // after its read (no slow path left to take).
    const b = replica('b_2', { watch: false });
    const c = replica('c_3', { watch: false });
    b.e.start();
    c.e.start();
    await advance(3_000);
    void a.e.release();
    await advance(20_000);
    const conflicts = server.calls.filter((x) => x.method === 'PUT' && x.status === 409);
    expect(conflicts.length).toBeGreaterThanOrEqual(1);
    expect(new Set(conflicts.map((x) => x.who)).size).toBe(1);
    const loser = replicas.find((r) => r.e.identity === conflicts[0]!.who)!;
    expect(loser.logs.filter((l) => l.msg === 'Failed to acquire lease')).toMatchObject([
      { level: 'debug', err: 'conflict' },
    ]);
    expect(leaders()).toHaveLength(1);
    expect(replicas.flatMap((r) => r.logs).filter((l) => l.level === 'warn')).toEqual([]);
  });

  it('a leader whose cached copy is stale takes the slow path (GET + update) and stays leader', async () => {
    // No watch: with one, the leader would have refreshed its copy from the label edit's event.
    const a = replica('a_1', { watch: false });
    a.e.start();
    await advance(FIRST_LEADER_MS);
    const current = lock()!;
    // Someone edits a label: the spec (and so the lease) is unchanged, the resourceVersion moves.
    server.put(NS, { ...current, metadata: { ...current.metadata, labels: { team: 'x' } } });
    const from = server.calls.length;
    await advance(2_100);
    expect(server.calls.slice(from).map((c) => `${c.method} ${c.status}`)).toEqual([
      'PUT 409',
      'GET 200',
      'PUT 200',
    ]);
    expect(a.e.isLeader()).toBe(true);
    expect(await metric(a, 'leader_election_slowpath_total')).toBe(1);
    expect(await metric(a, 'nlc_leader_election_renew_errors_total')).toBe(0);
    expect(lock()?.metadata.labels).toEqual({ team: 'x' });
  });

  it('a leader that sees the lock taken closes the fence at once and loses when a GET confirms it', async () => {
    const a = replica('a_1');
    a.e.start();
    await advance(FIRST_LEADER_MS);
    const cur = lock()!;
    server.put(NS, { ...cur, spec: { ...cur.spec, holderIdentity: 'intruder_9' } });
    await advance(1); // the watch delivers
    expect(a.e.canWrite()).toBe(false);
    await advance(10);
    expect(a.lost).toEqual([{ reason: 'lock taken by intruder_9', at: expect.any(Number) }]);
    expect(a.e.getLeader()).toBe('intruder_9');
  });

  it('a leader whose lock is deleted closes the fence, creates it again at once and keeps leading', async () => {
    const a = replica('a_1');
    const b = replica('b_2');
    a.e.start();
    await advance(FIRST_LEADER_MS);
    b.e.start();
    await advance(3_000);
    const from = server.calls.length;
    server.remove(NS, LOCK);
    await advance(1); // the watch delivers
    expect(a.e.canWrite()).toBe(false);
    await advance(20);
    expect(a.e.canWrite()).toBe(true);
    expect(a.e.isLeader()).toBe(true);
    expect(a.lost).toEqual([]);
    expect(lock()?.spec).toMatchObject({ holderIdentity: 'a_1', leaseTransitions: 0 });
    expect(
      server.calls
        .slice(from)
        .filter((c) => c.who === 'a_1')
        .map((c) => `${c.method} ${c.status}`),
    ).toEqual(['GET 404', 'POST 200']);
    // The standby did not jump on the deleted lock (it waits for a_1's lease to run out first),
    // and nobody saw a new leader.
    expect(server.calls.slice(from).filter((c) => c.who === 'b_2' && c.method === 'POST')).toEqual([]);
    await advance(30_000);
    expect(leaders()).toEqual(['a_1']);
    expect(
      a.events.filter((e) => e.type === 'new-leader').map((e) => e.type === 'new-leader' && e.identity),
    ).toEqual(['a_1']);
    expect(await metric(a, 'nlc_leader_election_transitions_total')).toBe(0);
  });

  /** Steps through `ms` in 10 ms steps; the most replicas whose fence was open at the same instant. */
  async function mostWriters(ms: number): Promise<number> {
    let most = 0;
    for (let t = 0; t < ms; t += 10) {
      most = Math.max(most, replicas.filter((r) => r.e.canWrite()).length);
      await advance(10);
    }
    return most;
  }

  it('a replica started after the lock was deleted does not take it while the old leader may still write (issue 28 defect 8)', async () => {
    // The old leader notices the deletion only at its next renewal (no watch).
    const a = replica('a_1', { watch: false });
    a.e.start();
    await advance(16_000);
    expect(a.e.isLeader()).toBe(true);
    // Right after its next renewal: its fence is open for 10 s more.
    await advance(a.e.snapshot().renewedAt! + 2_000 + 100 - Date.now());
    expect(a.e.canWrite()).toBe(true);
    server.remove(NS, LOCK); // kubectl delete, a GitOps prune
    await advance(400);
    const c = replica('c_3'); // a new pod, started after the delete: it never saw a_1 hold the lock
    c.e.start();
    expect(await mostWriters(30_000)).toBe(1);
    expect(leaders()).toEqual(['a_1']);
    expect(a.lost).toEqual([]);
    expect(lock()?.spec?.holderIdentity).toBe('a_1');
    expect(server.calls.filter((x) => x.who === 'c_3' && x.method === 'POST')).toEqual([]);
  });

  it('a lock deleted under a leader cut off from the API server is not created by a standby polling before the lease ran out', async () => {
    // The leader does not see the deletion (no watch; its requests hang below).
    const a = replica('a_1', { watch: false });
    a.e.start();
    await advance(16_000);
    // random 0: the standby polls every 2 s, so it polls several times within the lease.
    const b = replica('b_2', { random: 0 });
    b.e.start();
    await advance(a.e.snapshot().renewedAt! + 2_000 + 100 - Date.now()); // just after a renewal
    const seen = b.e.snapshot().lock;
    if (seen.kind !== 'present') throw new Error('b has not seen the lock');
    // a's requests no longer arrive (its fence stays open until 10 s after its last renewal).
    server.fault = (_req, who) => (who === 'a_1' ? 'hang' : undefined);
    server.remove(NS, LOCK);
    expect(await mostWriters(seen.since + 15_000 - Date.now() - 10)).toBe(1);
    expect(b.e.isLeader()).toBe(false);
    expect(server.calls.filter((x) => x.who === 'b_2' && x.method === 'POST')).toEqual([]);
    // Once a_1's lease would have expired, b_2 creates the lock.
    await advance(120);
    expect(b.e.isLeader()).toBe(true);
    expect(b.started()! - (seen.since + 15_000)).toBeLessThanOrEqual(100);
    expect(a.e.canWrite()).toBe(false);
  });

  it('the fence is judged from the monotonic clock, not from timers (a frozen loop cannot write)', async () => {
    const a = replica('a_1');
    a.e.start();
    await advance(FIRST_LEADER_MS);
    const renewedAt = a.e.snapshot().renewedAt!;
    // No timers run between these checks: as if the event loop were stopped (SIGSTOP).
    expect(a.e.canWrite(renewedAt + 9_999)).toBe(true);
    expect(a.e.canWrite(renewedAt + 10_000)).toBe(false);
    expect(() => a.e.fence(renewedAt + 10_000)).toThrow(NotLeaderError);
  });

  it('stop() leaves the lease to expire and closes the fence immediately', async () => {
    const a = replica('a_1');
    a.e.start();
    await advance(FIRST_LEADER_MS);
    a.e.stop();
    expect(a.e.canWrite()).toBe(false);
    expect(a.events.at(-1)).toMatchObject({ type: 'stopped-leading', reason: 'stopped' });
    expect(a.lost).toEqual([]);
    expect(lock()?.spec?.holderIdentity).toBe('a_1');
    const n = server.calls.length;
    await advance(20_000);
    expect(server.calls.length).toBe(n);
  });

  it('reports new leaders like client-go OnNewLeader, and the leader$ stream', async () => {
    const seen: string[] = [];
    const a = replica('a_1');
    a.e.start();
    await advance(FIRST_LEADER_MS);
    const b = replica('b_2');
    b.e.leader$.subscribe((l) => seen.push(l));
    b.e.start();
    await advance(100);
    const released = a.e.release();
    await advance(100);
    expect(await released).toBe('released');
    expect(seen).toEqual(['', 'a_1', '', 'b_2']);
    expect(
      b.events.filter((e) => e.type === 'new-leader').map((e) => e.type === 'new-leader' && e.identity),
    ).toEqual(['a_1', '', 'b_2']);
  });

  it('a renewal applied but unanswered is recovered by the slow path: still ours, no new transition', async () => {
    const a = replica('a_1', { watch: false });
    a.e.start();
    await advance(FIRST_LEADER_MS);
    let dropped = false;
    server.fault = (req, who) => {
      if (who !== 'a_1' || req.method !== 'PUT' || dropped) return undefined;
      dropped = true;
      return 'lose-response';
    };
    const from = server.calls.length;
    await advance(2_000 + 5_000 + 20);
    expect(server.calls.slice(from).map((c) => `${c.method} ${c.status}`)).toEqual([
      'PUT TIMEOUT',
      'GET 200',
      'PUT 200',
    ]);
    expect(a.e.isLeader()).toBe(true);
    expect(a.lost).toEqual([]);
    expect(lock()?.spec).toMatchObject({ holderIdentity: 'a_1', leaseTransitions: 0 });
    expect(await metric(a, 'leader_election_slowpath_total')).toBe(1);
    expect(await metric(a, 'nlc_leader_election_renew_errors_total')).toBe(0);
  });

  describe('coordinated leader election', () => {
    /** What kube-apiserver's coordinator writes: the holder it elects, 5 s, its strategy. */
    const coordinate = (spec: Lease['spec']) =>
      server.put(NS, {
        metadata: { name: LOCK, resourceVersion: lock()?.metadata.resourceVersion },
        spec: {
          leaseDurationSeconds: 5,
          renewTime: microTime(Date.now()),
          strategy: 'OldestEmulationVersion',
          ...spec,
        },
      });
    const lockInfo = async (r: Replica) =>
      ((await r.registry.getSingleMetric('nlc_leader_election_lock_info')?.get())?.values ?? []).map(
        (v) => v.labels,
      );

    it('never creates the lock; leads only once the coordinator names it; preempted, it closes the fence at once, releases after its writes drained and stays a candidate', async () => {
      let drain: () => void = () => {};
      const a = replica('a_1', { coordinated: true, drained: () => new Promise<void>((r) => (drain = r)) });
      const b = replica('b_2', { coordinated: true });
      a.e.start();
      b.e.start();
      expect(await metric(a, 'nlc_leader_election_coordinated')).toBe(1);
      // Nobody creates the missing lock, however long it stays missing.
      await advance(10 * 15_000);
      expect(lock()).toBeUndefined();
      expect(server.calls.filter((c) => c.method !== 'GET')).toEqual([]);
      // The coordinator creates it naming a: a renews it (keeping the strategy) and leads; b does not.
      const named = Date.now();
      coordinate({ holderIdentity: 'a_1' });
      await advance(50);
      expect(leaders()).toEqual(['a_1']);
      expect(a.started()! - named).toBeLessThan(20);
      expect(lock()?.spec).toMatchObject({
        holderIdentity: 'a_1',
        leaseDurationSeconds: 15,
        strategy: 'OldestEmulationVersion',
      });
      await advance(6_000);
      expect(leaders()).toEqual(['a_1']);
      expect(server.calls.filter((c) => c.who === 'b_2' && c.method !== 'GET')).toEqual([]);
      // An older version joins: the coordinator prefers it. a stops writing at once...
      const preferred = Date.now();
      coordinate({ ...lock()?.spec, preferredHolder: 'b_2' });
      await advance(5);
      expect(a.e.canWrite()).toBe(false);
      expect(a.e.isLeader()).toBe(false);
      expect(await lockInfo(a)).toEqual([
        { name: LOCK, strategy: 'OldestEmulationVersion', preferred_holder: 'b_2' },
      ]);
      // ...and releases the lock only once its writes on the wire are over.
      await advance(3_000);
      expect(lock()?.spec?.holderIdentity).toBe('a_1');
      drain();
      await advance(20);
      expect(lock()?.spec).toMatchObject({
        holderIdentity: '',
        leaseDurationSeconds: 1,
        strategy: 'OldestEmulationVersion',
      });
      expect(a.events.filter((e) => e.type === 'stopped-leading')).toMatchObject([
        { reason: 'stepped-down', detail: 'preempted: the coordinator prefers b_2', at: preferred + 1 },
      ]);
      expect(a.lost).toEqual([]);
      // The coordinator names b, which leads; a does not take the lock back.
      coordinate({ holderIdentity: 'b_2' });
      await advance(50);
      expect(leaders()).toEqual(['b_2']);
      await advance(20_000);
      expect(leaders()).toEqual(['b_2']);
      expect(b.started()! - a.events.find((e) => e.type === 'stopped-leading')!.at).toBeGreaterThan(3_000);
      // a is still a candidate the coordinator may name again.
      const released = b.e.release();
      await advance(20);
      expect(await released).toBe('released');
      coordinate({ holderIdentity: 'a_1' });
      await advance(50);
      expect(leaders()).toEqual(['a_1']);
    });

    it('preempted while shutting down: release() still releases the lock the step-down had not released yet', async () => {
      const a = replica('a_1', { coordinated: true, drained: () => new Promise<void>(() => {}) });
      a.e.start();
      // (Its first look found no lock: it leads no earlier than one lease duration later.)
      await advance(15_100);
      coordinate({ holderIdentity: 'a_1' });
      await advance(50);
      expect(leaders()).toEqual(['a_1']);
      // The coordinator prefers another replica just as the shutdown starts: the step-down waits for
      // writes to drain (never, here), the shutdown drained its own and releases.
      coordinate({ ...lock()?.spec, preferredHolder: 'b_2' });
      await advance(5);
      expect(a.e.isLeader()).toBe(false);
      const released = a.e.release();
      await advance(20);
      expect(await released).toBe('released');
      expect(lock()?.spec).toMatchObject({ holderIdentity: '', leaseDurationSeconds: 1 });
    });

    it('useOrdinaryElection() before start: an ordinary elector (the fall-back)', async () => {
      const a = replica('a_1', { coordinated: true });
      a.e.useOrdinaryElection();
      expect(a.e.coordinated).toBe(false);
      expect(await metric(a, 'nlc_leader_election_coordinated')).toBe(0);
      a.e.start();
      await advance(FIRST_LEADER_MS);
      expect(leaders()).toEqual(['a_1']);
      // Leading: nothing changes.
      expect(a.e.useOrdinaryElection()).toBe(false);
    });

    it('useOrdinaryElection() while campaigning: takes a lock nobody holds at once; refused (false) while leading', async () => {
      const a = replica('a_1', { coordinated: true });
      a.e.start();
      // The coordinator never names anyone: a never writes the lock.
      await advance(5 * 15_000);
      expect(lock()).toBeUndefined();
      expect(a.e.leaderlessFor()).toBeGreaterThanOrEqual(5 * 15_000 - 10);
      const switched = Date.now();
      expect(a.e.useOrdinaryElection()).toBe(true);
      expect(a.e.coordinated).toBe(false);
      expect(await metric(a, 'nlc_leader_election_coordinated')).toBe(0);
      await advance(20);
      expect(leaders()).toEqual(['a_1']);
      expect(a.started()! - switched).toBeLessThan(10);
      expect(a.e.leaderlessFor()).toBeUndefined();
      // A coordinated leader does not switch.
      const b = replica('b_2', { coordinated: true, watch: false });
      const c = replica('c_3', { coordinated: true });
      server.remove(NS, LOCK);
      a.e.stop();
      b.e.start();
      c.e.start();
      await advance(20);
      coordinate({ holderIdentity: 'c_3' });
      await advance(15_100);
      expect(leaders()).toEqual(['c_3']);
      expect(c.e.useOrdinaryElection()).toBe(false);
      expect(c.e.coordinated).toBe(true);
    });
  });

  describe('sight and access', () => {
    const unauthorized = () =>
      new KubeApiError(401, { kind: 'Status', reason: 'Unauthorized', code: 401 }, {}, 'GET lease');

    it('a candidate that is not eligible reads the lock but never takes it; eligible again, it takes a free lock at once', async () => {
      const b = replica('b_2');
      b.e.setEligible(false);
      b.e.start();
      await advance(30_000);
      expect(lock()).toBeUndefined();
      expect(b.e.isLeader()).toBe(false);
      const reads = server.calls.filter((c) => c.who === 'b_2');
      expect(reads.length).toBeGreaterThanOrEqual(30_000 / 4_400);
      expect(reads.every((c) => c.method === 'GET')).toBe(true);
      b.e.setEligible(true);
      await advance(20);
      expect(b.e.isLeader()).toBe(true);
      expect(lock()?.spec?.holderIdentity).toBe('b_2');
    });

    it('stepDown: fence closed at once, no loss, lease released once drained, a sighted standby leads at once; no re-acquire until eligible', async () => {
      const a = replica('a_1');
      const b = replica('b_2');
      a.e.start();
      await advance(FIRST_LEADER_MS);
      b.e.start();
      await advance(3_000);
      let drain!: () => void;
      const drained = new Promise<void>((r) => {
        drain = r;
      });
      const result = a.e.stepDown('blind for 2m30s', () => drained);
      expect(a.e.canWrite()).toBe(false);
      expect(a.e.isLeader()).toBe(false);
      expect(a.events.at(-1)).toMatchObject({
        type: 'stopped-leading',
        reason: 'stepped-down',
        detail: 'blind for 2m30s',
      });
      // Nothing released while a write may still be on the wire.
      await advance(1_000);
      expect(lock()?.spec?.holderIdentity).toBe('a_1');
      drain();
      await advance(20);
      expect(await result).toBe('released');
      expect(b.e.isLeader()).toBe(true);
      expect(a.lost).toEqual([]);
      expect(await metric(a, 'leader_election_master_status')).toBe(0);
      // b leaves: a may not take it while not eligible, and does once eligible.
      const released = b.e.release();
      await advance(20);
      expect(await released).toBe('released');
      await advance(10_000);
      expect(a.e.isLeader()).toBe(false);
      a.e.setEligible(true);
      await advance(20);
      expect(a.e.isLeader()).toBe(true);
    });

    it('a renewal already on the wire when stepping down does not make us leader again', async () => {
      const a = replica('a_1', { watch: false });
      a.e.start();
      await advance(FIRST_LEADER_MS);
      server.halfLatencyMs = 500;
      const rvBefore = lock()!.metadata.resourceVersion;
      // A renewal PUT is applied by the server, its answer still on the way back.
      await advance(2_000 + 700);
      expect(server.calls.at(-1)).toMatchObject({ method: 'PUT', status: 'pending' });
      expect(lock()!.metadata.resourceVersion).not.toBe(rvBefore);
      const from = server.calls.length - 1;
      const result = a.e.stepDown('blind');
      server.halfLatencyMs = 2;
      await advance(5_000);
      // Our copy was stale: the release re-read the lock (still ours) and released it.
      expect(server.calls.slice(from, from + 4).map((c) => `${c.method} ${c.status}`)).toEqual([
        'PUT ABORTED',
        'PUT 409',
        'GET 200',
        'PUT 200',
      ]);
      expect(await result).toBe('released');
      expect(a.e.isLeader()).toBe(false);
      expect(lock()?.spec?.holderIdentity).toBe('');
      await advance(20_000);
      expect(a.e.isLeader()).toBe(false);
    });

    it('apiAccess: answers to lock requests; 401s leave it stale, 403s prove only authentication', async () => {
      const b = replica('b_2');
      b.e.setEligible(false);
      b.e.start();
      await advance(10);
      const first = b.e.apiAccess();
      expect(first.okAt).toBeDefined();
      expect(first.lastError).toBeUndefined();
      server.fault = () => unauthorized();
      await advance(20_000);
      const after401 = b.e.apiAccess();
      expect(after401.okAt).toBe(first.okAt);
      expect(after401.authenticatedAt).toBe(first.authenticatedAt);
      expect(after401.lastError).toMatch(/401/);
      server.fault = () =>
        new KubeApiError(403, { kind: 'Status', reason: 'Forbidden', code: 403 }, {}, 'GET lease');
      await advance(5_000);
      const after403 = b.e.apiAccess();
      expect(after403.okAt).toBe(first.okAt);
      expect(after403.authenticatedAt).toBeGreaterThan(first.authenticatedAt!);
      server.fault = undefined;
      await advance(5_000);
      expect(b.e.apiAccess().okAt).toBeGreaterThan(first.okAt!);
      expect(b.e.apiAccess().lastError).toBeUndefined();
    });
  });
});
