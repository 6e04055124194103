import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { COMPONENT_NAME } from '../../src/election/config.js';
import { IDENTITY_LABEL, identityLeaseName, LEADER_LABEL } from '../../src/election/identity.js';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { paths } from '../../src/kube/client.js';
import type { Lease, List } from '../../src/kube/types.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import {
  type ControllerProcess,
  exitWithin,
  sampleValue,
  startController,
} from '../support/controller-process.js';
import { type AuditEvent, auditWrites, ClusterObserver } from '../support/observer.js';
import { rawWatch } from '../support/raw-watch.js';
import { sleep, waitUntil } from '../support/wait.js';

/**
 * Leader election of the BUILT controller: three `node dist/main.js` processes against a real
 * kube-apiserver, stopped with SIGTERM, SIGKILL and SIGSTOP/SIGCONT.
 */

const NS = 'nlc-e2e-procs';
const LOCK = COMPONENT_NAME; // --leader-elect-resource-name default
// Candidates poll the lock every 5 s (x1 to x2.2): only a takeover driven by the lock watch meets
// the hand-over bound; one at the next poll does not.
const LEASE_MS = 8_000;
const RENEW_DEADLINE_MS = 7_000;
const RETRY_MS = 5_000;
/** A graceful hand-over, SIGTERM to new holder on our own watch of the lock (docs/benchmarks.md: <= 300 ms). */
const HANDOVER_BOUND_MS = 300;
const GC_AGE_MS = 5_000;
const GRACE_MS = 5_000;
const MASTER = 'leader_election_master_status';

interface Replica {
  name: string;
  cp: ControllerProcess;
}

interface LockEvent {
  /** performance.now() when the watch delivered it. */
  at: number;
  holder: string;
  duration: number;
  transitions: number;
  renewTime: string;
}

let cluster: TestCluster;
let fleet: SimulatedFleet;
let observer: ClusterObserver;
let stopLockWatch: (() => void) | undefined;
/** Every change of the lock Lease as an independent watch saw it. */
const lockEvents: LockEvent[] = [];
/** Every replica ever started, by name (= POD_NAME = election identity). */
const replicas = new Map<string, Replica>();
/** Replicas not yet stopped by a test. */
let live: Replica[] = [];
let nextIndex = 0;
/** When the first three processes were started: performance.now() and the wall clock. */
let startedAt = 0;
let startedWall = 0;

async function startReplica(): Promise<Replica> {
  const name = `nlc-${nextIndex++}`;
  const cp = await startController(
    [
      `--kubeconfig=${cluster.cp.kubeconfigPath}`,
      `--leader-elect-lease-duration=${LEASE_MS / 1000}s`,
      `--leader-elect-renew-deadline=${RENEW_DEADLINE_MS / 1000}s`,
      `--leader-elect-retry-period=${RETRY_MS}ms`,
      `--identity-lease-gc-age=${GC_AGE_MS / 1000}s`,
      `--node-monitor-grace-period=${GRACE_MS / 1000}s`,
      '--node-startup-grace-period=10s',
      '--watch-silence-threshold=3s',
    ],
    { env: { POD_NAME: name, POD_NAMESPACE: NS }, name },
  );
  const r = { name, cp };
  replicas.set(name, r);
  live.push(r);
  return r;
}

function retire(r: Replica): void {
  live = live.filter((x) => x !== r);
}

async function getLock(): Promise<Lease | undefined> {
  const res = await cluster.admin.raw<Lease>({ method: 'GET', path: paths.lease(NS, LOCK) });
  return res.status === 200 ? res.body : undefined;
}

async function identityLeases(): Promise<Lease[]> {
  // kubectl -n NS get lease -l node-lifecycle-controller.nlc.dev/identity
  return (
    await cluster.admin.request<List<Lease>>({
      method: 'GET',
      path: paths.leases(NS),
      query: { labelSelector: IDENTITY_LABEL },
    })
  ).items;
}

interface Status {
  r: Replica;
  master: number;
  leading: number;
}

async function statuses(rs: Replica[] = live): Promise<Status[]> {
  return await Promise.all(
    rs.map(async (r) => {
      const text = await r.cp.metrics();
      return {
        r,
        master: sampleValue(text, MASTER, { name: LOCK }),
        leading: sampleValue(text, 'nlc_leading'),
      };
    }),
  );
}

/**
 * The leader once everything agrees: the lock names a live replica, which alone reports
 * leader_election_master_status 1 and nlc_leading 1; every other live replica reports 0 and 0.
 */
async function settledLeader(timeoutMs = 10_000): Promise<Replica> {
  return await waitUntil(
    async () => {
      const holder = (await getLock())?.spec?.holderIdentity ?? '';
      const leader = live.find((r) => r.name === holder);
      if (!leader) return undefined;
      const s = await statuses();
      const ok = s.every((x) =>
        x.r === leader ? x.master === 1 && x.leading === 1 : x.master === 0 && x.leading === 0,
      );
      return ok ? leader : undefined;
    },
    { timeoutMs, intervalMs: 100, what: `one settled leader among ${live.map((r) => r.name).join(', ')}` },
  );
}

/** The first lock change after index `from` whose holder is someone other than `old` (and not empty). */
async function nextHolder(from: number, old: string, timeoutMs: number): Promise<LockEvent> {
  return await waitUntil(() => lockEvents.slice(from).find((e) => e.holder !== '' && e.holder !== old), {
    timeoutMs,
    intervalMs: 5,
    what: `the lock to move away from ${old}`,
  });
}

/** performance.now() when `r` first reports leader_election_master_status 1. */
async function masterFlip(r: Replica, timeoutMs = 5_000): Promise<number> {
  return await waitUntil(
    async () => ((await r.cp.metric(MASTER, { name: LOCK })) === 1 ? performance.now() : 0),
    {
      timeoutMs,
      intervalMs: 10,
      what: `${r.name} to report ${MASTER} 1`,
    },
  );
}

function auditOf(r: Replica): AuditEvent[] {
  return auditWrites(cluster.cp.auditLogPath!, `${COMPONENT_NAME}/`).filter((e) =>
    (e.userAgent ?? '').endsWith(`(${r.name})`),
  );
}

const isNodeOrPodWrite = (e: AuditEvent) =>
  ['create', 'update', 'patch'].includes(e.verb) && ['nodes', 'pods'].includes(e.objectRef?.resource ?? '');
const ts = (e: AuditEvent) => Date.parse(e.stageTimestamp ?? '');

function dumpOnFailure(): void {
  onTestFailed(() => {
    for (const r of replicas.values()) {
      const identity = r.cp.logs.filter((l) => /identity lease/.test(String(l.msg)));
      console.log(
        `--- ${r.name} log summary:\n${r.cp.summary()}\n${identity.map((l) => JSON.stringify(l)).join('\n')}`,
      );
    }
    console.log(`--- lock history:\n${lockEvents.map((e) => JSON.stringify(e)).join('\n')}`);
  });
}

beforeAll(async () => {
  cluster = await startCluster({ audit: true });
  await cluster.admin.request({ method: 'POST', path: paths.namespaces(), body: { metadata: { name: NS } } });
  fleet = await SimulatedFleet.start(cluster.admin, {
    nodes: 6,
    podsPerNode: 1,
    timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 1000 },
  });
  observer = await ClusterObserver.start(cluster.admin);
  stopLockWatch = await rawWatch<Lease>(
    cluster.admin,
    paths.leases(NS),
    (e) => {
      if (e.type !== 'ADDED' && e.type !== 'MODIFIED') return;
      const s = e.object.spec;
      lockEvents.push({
        at: e.at,
        holder: s?.holderIdentity ?? '',
        duration: s?.leaseDurationSeconds ?? 0,
        transitions: s?.leaseTransitions ?? 0,
        renewTime: String(s?.renewTime ?? ''),
      });
    },
    { fieldSelector: `metadata.name=${LOCK}` },
  );
  startedAt = performance.now();
  startedWall = Date.now();
  await Promise.all([startReplica(), startReplica(), startReplica()]);
});

afterAll(async () => {
  await Promise.all(live.map((r) => r.cp.kill('SIGTERM')));
  for (const r of replicas.values()) {
    // A stopped process cannot die of SIGTERM.
    if (r.cp.child.exitCode === null && r.cp.child.signalCode === null) {
      r.cp.child.kill('SIGCONT');
      r.cp.child.kill('SIGKILL');
    }
  }
  stopLockWatch?.();
  observer?.stop();
  fleet?.stop();
  await cluster?.stop();
});

describe('leader election between three controller processes (lease 8 s, renew deadline 7 s, retry 5 s)', () => {
  it('exactly one process leads: the lock holder, the only one with leader_election_master_status 1 and nlc_leading 1', async () => {
    dumpOnFailure();
    // No lock yet: it is created one lease duration after the first process found it missing.
    const leader = await settledLeader(LEASE_MS + 15_000);
    const created = lockEvents[0]!;
    // The creator's own wall clock: when it found the lock missing (its log line), the moment one
    // lease duration after that look that it computed then (createAt), and when it created the lock
    // (renewTime). The log line is written a few ms after the look, so only createAt is exact.
    const notFound = leader.cp.logs.find((l) => String(l.msg).startsWith('Lock not found'));
    const lookedWall = Date.parse(String(notFound?.ts));
    const createAtWall = Date.parse(String(notFound?.createAt));
    const createdWall = Date.parse(created.renewTime);
    console.log(
      `fresh lock: ${leader.name} found it missing ${lookedWall - startedWall} ms after the processes were ` +
        `started and created it ${createdWall - lookedWall} ms later (lease ${LEASE_MS} ms); our watch saw ` +
        `it ${(created.at - startedAt).toFixed(0)} ms after the start`,
    );
    expect(created.holder).toBe(leader.name);
    expect(notFound).toMatchObject({ createIn: `${LEASE_MS / 1000}s` });
    expect(createAtWall - lookedWall).toBeGreaterThanOrEqual(LEASE_MS - 50); // the log line's own delay
    expect(createAtWall - lookedWall).toBeLessThanOrEqual(LEASE_MS);
    expect(createdWall).toBeGreaterThanOrEqual(createAtWall); // renewTime has µs, createAt ms
    // It stays so across several renewals and candidate polls.
    for (let i = 0; i < 8; i++) {
      await sleep(250);
      const s = await statuses();
      expect(s.filter((x) => x.master === 1).map((x) => x.r.name)).toEqual([leader.name]);
      expect(s.filter((x) => x.leading === 1).map((x) => x.r.name)).toEqual([leader.name]);
    }
    const lock = await getLock();
    expect(lock?.spec).toMatchObject({ holderIdentity: leader.name, leaseDurationSeconds: LEASE_MS / 1000 });
    const started = (r: Replica) => r.cp.logs.some((l) => l.msg === 'Started leading: reconciling nodes');
    expect(live.filter(started).map((r) => r.name)).toEqual([leader.name]);
    for (const r of live.filter((x) => x !== leader)) {
      expect(
        r.cp.logs.some((l) => l.msg === 'New leader observed' && l.leader === leader.name),
        r.name,
      ).toBe(true);
    }
  });

  it('the lock Lease deleted under the leader: the same process creates it again within a retry period and keeps leading', async () => {
    dumpOnFailure();
    const leader = await settledLeader();
    await sleep(1_000);
    const from = lockEvents.length;
    const t0 = performance.now();
    await cluster.admin.request({ method: 'DELETE', path: paths.lease(NS, LOCK) });
    const recreated = await waitUntil(() => lockEvents.slice(from).find((e) => e.holder !== ''), {
      timeoutMs: 10_000,
      intervalMs: 5,
      what: 'the lock to exist again',
    });
    // Every replica, sampled for a few lease durations: the leader never stopped, nobody else started.
    for (let i = 0; i < 16; i++) {
      const st = await statuses();
      expect(st.filter((x) => x.master === 1).map((x) => x.r.name)).toEqual([leader.name]);
      expect(st.filter((x) => x.leading === 1).map((x) => x.r.name)).toEqual([leader.name]);
      await sleep(LEASE_MS / 4);
    }
    console.log(
      `lock deleted: created again by ${recreated.holder} ${(recreated.at - t0).toFixed(0)} ms later ` +
        `(transitions ${recreated.transitions})`,
    );
    expect(recreated.holder).toBe(leader.name);
    expect(recreated.at - t0).toBeLessThan(1_500); // driven by its lock watch, not its next renewal
    expect(lockEvents.slice(from).every((e) => e.holder === leader.name)).toBe(true);
    expect(leader.cp.child.exitCode).toBeNull();
    const stops = ['Leader election lost', 'Stopped leading', 'Stopped leading: no more writes'];
    expect(leader.cp.logs.filter((l) => stops.includes(String(l.msg)))).toEqual([]);
    expect(leader.cp.logs.filter((l) => l.level === 'error')).toEqual([]);
    expect(await settledLeader()).toBe(leader);
  });

  it('SIGTERM the leader: it releases the lease, another process holds the lock within 300 ms on our own watch (polls every 5 s), the old one exits 0', async () => {
    dumpOnFailure();
    const old = await settledLeader();
    await sleep(1_000);
    const from = lockEvents.length;
    const transitionsBefore = lockEvents.at(-1)!.transitions;
    const t0 = performance.now();
    old.cp.child.kill('SIGTERM');
    // Judged on the test's own watch of the lock: released (no holder), then the new holder.
    const ev = await nextHolder(from, old.name, 3 * RETRY_MS);
    const next = replicas.get(ev.holder)!;
    const flipped = await masterFlip(next);
    const exit = await exitWithin(old.cp, 10_000);
    retire(old);
    const released = lockEvents.slice(from).findIndex((e) => e.holder === '');
    const releasedAt = lockEvents[from + released]?.at ?? Number.NaN;
    console.log(
      `SIGTERM handover: lock released ${(releasedAt - t0).toFixed(1)} ms after SIGTERM, held by ${next.name} ` +
        `${(ev.at - t0).toFixed(1)} ms after SIGTERM (${(ev.at - releasedAt).toFixed(1)} ms after the release), ` +
        `as our watch saw them; ${next.name}'s ${MASTER} was 1 at ${(flipped - t0).toFixed(0)} ms; old process ` +
        `exited ${exit.code} after ${(exit.at - t0).toFixed(0)} ms`,
    );
    expect(ev.at - t0).toBeLessThan(HANDOVER_BOUND_MS);
    expect(flipped - t0).toBeLessThan(1_000);
    expect(live).toContain(next);
    expect(exit).toMatchObject({ code: 0, signal: null });
    // The release is visible on the lock: no holder, 1 s duration, before the new holder took it.
    expect(released).toBeGreaterThanOrEqual(0);
    expect(lockEvents[from + released]).toMatchObject({ duration: 1, transitions: transitionsBefore });
    expect(ev.transitions).toBe(transitionsBefore + 1);
    expect(ev.duration).toBe(LEASE_MS / 1000);
    // And in its log, in order.
    const msgs = old.cp.logs.map((l) => String(l.msg));
    const order = ['Shutting down', 'Released leader lease', 'Leader lease release', 'Stopped'].map((m) =>
      msgs.indexOf(m),
    );
    expect(order.every((i) => i >= 0)).toBe(true);
    expect([...order].sort((a, b) => a - b)).toEqual(order);
    expect(old.cp.logs.find((l) => l.msg === 'Leader lease release')?.result).toBe('released');
    expect(old.cp.logs.filter((l) => l.level === 'error')).toEqual([]);
    // Its identity lease went with it.
    expect((await identityLeases()).map((l) => l.spec?.holderIdentity)).not.toContain(old.name);
    await startReplica(); // three running again
  });

  it("SIGKILL the leader: another leads within leaseDuration + 1 s (not before the lease expired), and the dead replica's identity lease is collected", async () => {
    dumpOnFailure();
    const old = await settledLeader();
    await sleep(1_000);
    const from = lockEvents.length;
    const t0 = performance.now();
    old.cp.child.kill('SIGKILL');
    const ev = await nextHolder(from, old.name, LEASE_MS + 5_000);
    const next = replicas.get(ev.holder)!;
    const flipped = await masterFlip(next);
    const exit = await exitWithin(old.cp, 5_000);
    retire(old);
    // The last renewal of the killed leader that reached the API server, as our watch saw it.
    const lastRenewal = lockEvents.filter((e) => e.holder === old.name).at(-1)!;
    console.log(
      `SIGKILL handover: lock holder ${old.name} -> ${next.name} seen ${(ev.at - t0).toFixed(0)} ms after SIGKILL ` +
        `(${(ev.at - lastRenewal.at).toFixed(0)} ms after its last renewal was seen); ` +
        `${next.name}'s ${MASTER} was 1 at ${(flipped - t0).toFixed(0)} ms`,
    );
    expect(exit.signal).toBe('SIGKILL');
    expect(ev.at - t0).toBeLessThanOrEqual(LEASE_MS + 1_000);
    expect(flipped - t0).toBeLessThanOrEqual(LEASE_MS + 1_000);
    // Nobody took over early: a full lease duration after the last renewal (watch delivery jitter aside).
    expect(ev.at - lastRenewal.at).toBeGreaterThanOrEqual(LEASE_MS - 250);

    // Its identity lease stays behind (no shutdown ran) until a live replica collects it.
    const deadLease = identityLeaseName(COMPONENT_NAME, old.name);
    const gone = await waitUntil(
      async () =>
        (await cluster.admin.raw({ method: 'GET', path: paths.lease(NS, deadLease) })).status === 404
          ? performance.now()
          : 0,
      { timeoutMs: GC_AGE_MS + 10_000, intervalMs: 100, what: `${deadLease} to be collected` },
    );
    const collector = live.find((r) =>
      r.cp.logs.some((l) => l.msg === 'Deleted stale identity lease' && l.stale === deadLease),
    );
    console.log(
      `dead replica's identity lease collected ${(gone - t0).toFixed(0)} ms after SIGKILL by ${collector?.name} ` +
        `(--identity-lease-gc-age=${GC_AGE_MS / 1000}s)`,
    );
    expect(collector).toBeDefined();
    expect(await collector!.cp.metric('nlc_identity_leases_collected_total')).toBeGreaterThanOrEqual(1);
    expect(gone - t0).toBeLessThanOrEqual(GC_AGE_MS + 4_000);
    await startReplica(); // three running again
  });

  it('identity leases list exactly the running replicas, the leader label on exactly the leader, and live ones are never collected', async () => {
    dumpOnFailure();
    const leader = await settledLeader();
    const expectNames = live.map((r) => identityLeaseName(COMPONENT_NAME, r.name)).sort();
    await waitUntil(
      async () => {
        const items = await identityLeases();
        const leaders = items.filter((l) => l.metadata.labels?.[LEADER_LABEL] === 'true');
        return (
          items.length === live.length &&
          leaders.length === 1 &&
          leaders[0]?.spec?.holderIdentity === leader.name
        );
      },
      { timeoutMs: 10_000, what: 'identity leases of the live replicas, one labelled leader' },
    );
    // Stays so for longer than the GC age: a live replica's lease is renewed often enough.
    const until = performance.now() + GC_AGE_MS + 3_000;
    while (performance.now() < until) {
      const items = await identityLeases();
      expect(items.map((l) => l.metadata.name).sort()).toEqual(expectNames);
      expect(items.map((l) => l.spec?.holderIdentity).sort()).toEqual(live.map((r) => r.name).sort());
      expect(
        items.filter((l) => l.metadata.labels?.[LEADER_LABEL] === 'true').map((l) => l.spec?.holderIdentity),
      ).toEqual([leader.name]);
      await sleep(500);
    }
    for (const r of live) {
      const collectedLive = r.cp.logs.filter(
        (l) => l.msg === 'Deleted stale identity lease' && live.some((x) => x.name === l.holder),
      );
      expect(collectedLive, r.name).toEqual([]);
    }
  });

  it('SIGSTOP the leader past its lease: another takes over and does the work; after SIGCONT the stopped one writes no Node or Pod and exits non-zero', async () => {
    dumpOnFailure();
    const stopped = await settledLeader();
    // First it is shown to be an active writer: it marks a silent node and its pod itself.
    const early = 'sim-zone-c-000';
    const earlyAt = performance.now();
    fleet.node(early).pauseHeartbeats();
    // Then two more nodes go silent shortly before the stop, so the stopped leader's own deadlines
    // for them fall while it is stopped: on SIGCONT it has overdue work of its own.
    const failing = ['sim-zone-a-000', 'sim-zone-b-001'];
    let failedAt = Number.POSITIVE_INFINITY;
    try {
      await waitUntil(() => observer.podReadyStatus(`default/${early}-pod-0`) === 'False', {
        timeoutMs: GRACE_MS + 5_000,
        what: `${early} and its pod marked by ${stopped.name}`,
      });
      expect(observer.readyAt(early, 'Unknown', earlyAt)).toBeDefined();
      const ownWrites = auditOf(stopped).filter(isNodeOrPodWrite);
      expect(ownWrites.map((e) => e.objectRef?.name)).toEqual(
        expect.arrayContaining([early, `${early}-pod-0`]),
      );
      failedAt = performance.now();
      for (const n of failing) fleet.node(n).pauseHeartbeats();
      await sleep(1_000);
      const from = lockEvents.length;
      const stopWall = Date.now();
      const t0 = performance.now();
      stopped.cp.child.kill('SIGSTOP');
      const ev = await nextHolder(from, stopped.name, LEASE_MS + 5_000);
      const next = replicas.get(ev.holder)!;
      console.log(
        `SIGSTOP: ${next.name} took the lock ${(ev.at - t0).toFixed(0)} ms after ${stopped.name} stopped`,
      );
      expect(ev.at - t0).toBeLessThanOrEqual(LEASE_MS + 1_000);
      await masterFlip(next);
      await sleep(1_000);
      const contAt = performance.now();
      stopped.cp.child.kill('SIGCONT');
      const exit = await exitWithin(stopped.cp, 5_000);
      retire(stopped);
      console.log(
        `SIGCONT after ${(contAt - t0).toFixed(0)} ms stopped: ${stopped.name} exited ${exit.code} ` +
          `${(exit.at - contAt).toFixed(0)} ms later`,
      );
      expect(exit.signal).toBeNull();
      expect(exit.code).toBe(1);
      expect(stopped.cp.logs.some((l) => l.msg === 'Leadership lost: exiting')).toBe(true);

      // The new leader does the work: both nodes Unknown, their pods not ready.
      for (const n of failing) {
        await waitUntil(() => observer.readyAt(n, 'Unknown', failedAt), {
          timeoutMs: GRACE_MS + 6_000,
          what: `${n} marked Unknown by the new leader`,
        });
        await waitUntil(() => observer.podReadyStatus(`default/${n}-pod-0`) === 'False', {
          timeoutMs: 5_000,
          what: `${n}'s pod marked not ready`,
        });
      }

      // The audit log: when did the stopped replica's lease expire, and what did it write after?
      const mine = auditOf(stopped);
      const lockWrites = mine.filter(
        (e) =>
          ['create', 'update'].includes(e.verb) &&
          e.objectRef?.resource === 'leases' &&
          e.objectRef?.name === LOCK &&
          (e.responseStatus?.code ?? 0) < 300,
      );
      const lastRenewal = Math.max(...lockWrites.map(ts));
      const expiryByAudit = lastRenewal + LEASE_MS;
      const expiryConservative = stopWall + RENEW_DEADLINE_MS;
      const expiry = Math.min(expiryByAudit, expiryConservative);
      const nodePodWrites = mine.filter(isNodeOrPodWrite);
      const late = nodePodWrites.filter((e) => ts(e) > expiry);
      const nextWrites = auditOf(next).filter((e) => isNodeOrPodWrite(e) && ts(e) > expiry);
      console.log(
        `audit: ${stopped.name}'s last successful lock renewal ${new Date(lastRenewal).toISOString()} ` +
          `(SIGSTOP at ${new Date(stopWall).toISOString()}); expiry taken as ${new Date(expiry).toISOString()}; ` +
          `its Node/Pod writes: ${nodePodWrites.length} in total, ${late.length} after expiry; ` +
          `${next.name}'s Node/Pod writes after it: ${nextWrites.length}`,
      );
      expect(lockWrites.length).toBeGreaterThan(0);
      expect(nodePodWrites.length).toBeGreaterThanOrEqual(2); // the early node and its pod
      expect(late).toEqual([]);
      // There was work to do, and it was done by the new leader.
      for (const n of failing) {
        expect(
          nextWrites.some((e) => e.objectRef?.name === n && e.objectRef?.subresource === 'status'),
          n,
        ).toBe(true);
      }
      // The stopped replica did not even try after it resumed: every lock write it made after the
      // stop (if any) was refused.
      expect(lockWrites.filter((e) => ts(e) > stopWall + 1_000)).toEqual([]);
    } finally {
      for (const n of [early, ...failing]) fleet.node(n).resumeHeartbeats();
    }
  });
});
