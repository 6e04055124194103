import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { candidatePaths, type LeaseCandidate } from '../../src/election/candidate.js';
import { COMPONENT_NAME } from '../../src/election/config.js';
import { KubeClient, paths } from '../../src/kube/client.js';
import type { Lease } from '../../src/kube/types.js';
import type { ControlPlaneOptions } from '../../src/localcluster/control-plane.js';
import { ApiHttpProxy } from '../support/api-http-proxy.js';
import { ApiResolver, serverSideApply } from '../support/apply.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import {
  type ControllerProcess,
  exitWithin,
  sampleValue,
  startController,
} from '../support/controller-process.js';
import { kustomizeOverlay } from '../support/kubectl.js';
import { type AuditEvent, auditWrites } from '../support/observer.js';
import { rawWatch } from '../support/raw-watch.js';
import { requestServiceAccountToken, writeTokenKubeconfig } from '../support/rbac.js';
import { sleep, waitUntil } from '../support/wait.js';

/**
 * Coordinated leader election (KEP-4355) of the BUILT controller against kube-apiserver v1.37.2
 * with --feature-gates=CoordinatedLeaderElection=true and --runtime-config=coordination.k8s.io/v1beta1=true:
 * its coordinator names the holder. Every verdict comes from the test's own watches (of the locks
 * and of the LeaseCandidates) and from the audit log, never from the replicas' logs; each bound is
 * on a time measured here.
 */

const NS = 'nlc-e2e-coord';
const LOCK = COMPONENT_NAME;
const LEASE_MS = 4_000;
const MASTER = 'leader_election_master_status';
/** The coordinator's own answer window (electionDuration in kube-apiserver): 5 s. */
const COORDINATOR_WINDOW_MS = 5_000;

interface LockEvent {
  at: number;
  lock: string;
  type: string;
  holder: string;
  preferred: string;
  strategy: string;
  duration: number;
  renewTime: string;
}
interface CandidateEvent {
  at: number;
  type: string;
  name: string;
  leaseName: string;
  ping: string;
  renew: string;
}

let cluster: TestCluster;
/** Candidates the test answers pings for, as their (other) implementation would. */
const answeredByTest = new Set<string>();
const lockEvents: LockEvent[] = [];
const candidateEvents: CandidateEvent[] = [];
const stops: (() => void)[] = [];
const procs = new Map<string, ControllerProcess>();

async function replica(
  name: string,
  o: {
    coordinated?: boolean;
    lock?: string;
    extra?: string[];
    on?: TestCluster;
    kubeconfig?: string;
    namespace?: string;
  } = {},
): Promise<ControllerProcess> {
  const on = o.on ?? cluster;
  const cp = await startController(
    [
      `--kubeconfig=${o.kubeconfig ?? on.cp.kubeconfigPath}`,
      `--leader-elect-lease-duration=${LEASE_MS / 1000}s`,
      '--leader-elect-renew-deadline=3s',
      '--leader-elect-retry-period=500ms',
      `--leader-elect-resource-name=${o.lock ?? LOCK}`,
      '--node-monitor-grace-period=5s',
      '--watch-silence-threshold=3s',
      ...(o.coordinated === false ? [] : ['--feature-gates=CoordinatedLeaderElection=true']),
      ...(o.extra ?? []),
    ],
    { env: { POD_NAME: name, POD_NAMESPACE: o.namespace ?? NS }, name },
  );
  procs.set(name, cp);
  return cp;
}

const master = async (cp: ControllerProcess, lock = LOCK) =>
  sampleValue(await cp.metrics(), MASTER, { name: lock });
const history = (lock: string, from = 0) => lockEvents.slice(from).filter((e) => e.lock === lock);
const after = <T extends { at: number }>(list: T[], at: number) => list.filter((e) => e.at >= at);

/** The first lock event from index `from` that matches. */
async function lockEvent(
  what: string,
  pred: (e: LockEvent) => boolean,
  from: number,
  timeoutMs: number,
): Promise<LockEvent> {
  return await waitUntil(() => lockEvents.slice(from).find(pred), { timeoutMs, intervalMs: 5, what });
}
async function candidateEvent(
  what: string,
  pred: (e: CandidateEvent) => boolean,
  timeoutMs: number,
): Promise<CandidateEvent> {
  return await waitUntil(() => candidateEvents.find(pred), { timeoutMs, intervalMs: 5, what });
}

/**
 * How long after each ping (a candidate shown with pingTime after its renewTime) our watch showed
 * that candidate's answer (renewTime after the ping); Infinity when none came.
 */
function pingAnswers(which: (e: CandidateEvent) => boolean): number[] {
  return candidateEvents
    .filter((e) => which(e) && e.ping !== '' && e.renew < e.ping)
    .map((p) => {
      const ans = candidateEvents.find((e) => e.at >= p.at && e.name === p.name && e.renew > p.ping);
      return ans ? ans.at - p.at : Number.POSITIVE_INFINITY;
    });
}

/** Successful writes of the lock `lock` by replica `name` (its user agent ends with `(name)`), from the audit log. */
function lockWrites(name: string, lock = LOCK, on = cluster): AuditEvent[] {
  return auditWrites(on.cp.auditLogPath!, `${COMPONENT_NAME}/`).filter(
    (e) =>
      (e.userAgent ?? '').endsWith(`(${name})`) &&
      e.objectRef?.resource === 'leases' &&
      e.objectRef?.name === lock &&
      (e.responseStatus?.code ?? 0) < 300,
  );
}
const ts = (e: AuditEvent) => Date.parse(e.stageTimestamp ?? '');

/** A renewal by the replica itself: the coordinator writes 5 s, our replicas their own lease duration. */
const renewedBy = (name: string) => (e: LockEvent) => e.holder === name && e.duration === LEASE_MS / 1000;

/** A LeaseCandidate of a candidate the test stands in for (it answers the pings itself). */
async function publishCandidate(
  name: string,
  leaseName: string,
  binaryVersion: string,
  emulationVersion: string,
  strategy: string,
): Promise<void> {
  await cluster.admin.request({
    method: 'POST',
    path: candidatePaths.list(NS),
    body: {
      apiVersion: 'coordination.k8s.io/v1beta1',
      kind: 'LeaseCandidate',
      metadata: { name },
      spec: { leaseName, binaryVersion, emulationVersion, strategy, renewTime: microNow() },
    },
  });
}

function dumpOnFailure(): void {
  onTestFailed(() => {
    for (const [name, cp] of procs) console.log(`--- ${name}:\n${cp.summary()}`);
    console.log(`--- locks:\n${lockEvents.map((e) => JSON.stringify(e)).join('\n')}`);
    console.log(`--- candidates:\n${candidateEvents.map((e) => JSON.stringify(e)).join('\n')}`);
  });
}

async function watchNamespace(on: TestCluster): Promise<void> {
  stops.push(
    await rawWatch<Lease>(on.admin, paths.leases(NS), (e) => {
      const s = e.object.spec;
      lockEvents.push({
        at: e.at,
        lock: e.object.metadata.name,
        type: e.type,
        holder: s?.holderIdentity ?? '',
        preferred: s?.preferredHolder ?? '',
        strategy: s?.strategy ?? '',
        duration: s?.leaseDurationSeconds ?? 0,
        renewTime: String(s?.renewTime ?? ''),
      });
    }),
  );
}

beforeAll(async () => {
  cluster = await startCluster({ audit: true, coordinatedLeaderElection: true });
  await cluster.admin.request({ method: 'POST', path: paths.namespaces(), body: { metadata: { name: NS } } });
  await watchNamespace(cluster);
  stops.push(
    await rawWatch<LeaseCandidate>(cluster.admin, candidatePaths.list(NS), (e) => {
      candidateEvents.push({
        at: e.at,
        type: e.type,
        name: e.object.metadata.name,
        leaseName: e.object.spec?.leaseName ?? '',
        ping: String(e.object.spec?.pingTime ?? ''),
        renew: String(e.object.spec?.renewTime ?? ''),
      });
      const spec = e.object.spec;
      if (e.type === 'MODIFIED' && answeredByTest.has(e.object.metadata.name) && spec?.pingTime) {
        if (String(spec.renewTime ?? '') < String(spec.pingTime)) {
          void cluster.admin
            .request({
              method: 'PUT',
              path: candidatePaths.one(NS, e.object.metadata.name),
              body: { ...e.object, spec: { ...spec, renewTime: microNow() } },
            })
            .catch(() => undefined);
        }
      }
    }),
  );
});

const microNow = () => `${new Date().toISOString().slice(0, 23)}000Z`;

afterAll(async () => {
  await Promise.all([...procs.values()].map((cp) => cp.kill('SIGTERM')));
  for (const stop of stops) stop();
  await cluster?.stop();
});

describe('coordinated leader election: kube-apiserver v1.37.2 coordinator, lease 4 s, renew deadline 3 s, retry 500 ms', () => {
  it('a single candidate: the coordinator creates the lock naming it; it renews it one lease duration after its first look and leads', async () => {
    dumpOnFailure();
    const t0 = performance.now();
    const a = await replica('a-0');
    const published = await candidateEvent(
      'a-0 published',
      (e) => e.name === 'a-0' && e.type === 'ADDED',
      20_000,
    );
    const named = await lockEvent(
      'the lock naming a-0',
      (e) => e.lock === LOCK && e.holder === 'a-0',
      0,
      10_000,
    );
    const renewed = await lockEvent(
      'a-0 renewing the lock',
      (e) => e.lock === LOCK && renewedBy('a-0')(e),
      0,
      10_000,
    );
    await waitUntil(async () => (await master(a)) === 1, { timeoutMs: 2_000, what: 'a-0 master 1' });
    const notFound = a.logs.find((l) => String(l.msg).startsWith('Lock not found'));
    console.log(
      `single candidate: published ${(published.at - t0).toFixed(0)} ms after the start, named by the coordinator ` +
        `${(named.at - published.at).toFixed(0)} ms later, its first renewal ${(renewed.at - named.at).toFixed(0)} ms ` +
        `after that (its first look found no lock: it waits one lease duration, ${LEASE_MS} ms)`,
    );
    // The coordinator elects a fresh candidate at once; the replica never created the lock.
    expect(named.at - published.at).toBeLessThan(1_000);
    expect(history(LOCK)[0]).toMatchObject({
      type: 'ADDED',
      holder: 'a-0',
      strategy: 'OldestEmulationVersion',
      duration: 5,
    });
    expect(lockWrites('a-0').map((e) => e.verb)).not.toContain('create');
    // It renewed no earlier than one lease duration after its first look (its own clock both times).
    expect(notFound).toMatchObject({ notBeforeIn: `${LEASE_MS / 1000}s` });
    expect(Date.parse(renewed.renewTime)).toBeGreaterThanOrEqual(Date.parse(String(notFound?.notBeforeAt)));
    expect(renewed.at - named.at).toBeLessThanOrEqual(LEASE_MS + 1_000);
    expect(renewed).toMatchObject({ strategy: 'OldestEmulationVersion', preferred: '' });
    const text = await a.metrics();
    expect(sampleValue(text, 'nlc_leader_election_coordinated', { name: LOCK })).toBe(1);
    expect(
      sampleValue(text, 'nlc_leader_election_lock_info', {
        name: LOCK,
        strategy: 'OldestEmulationVersion',
        preferred_holder: '',
      }),
    ).toBe(1);
  });

  it('a ping is answered within 2 s (measured on our watch of the candidate), once', async () => {
    dumpOnFailure();
    const a = procs.get('a-0')!;
    const current = await cluster.admin.request<LeaseCandidate>({
      method: 'GET',
      path: candidatePaths.one(NS, 'a-0'),
    });
    // Ping as the coordinator does: a new pingTime on the candidate.
    const pingTime = `${new Date().toISOString().slice(0, 23)}456Z`;
    const from = performance.now();
    await cluster.admin.request({
      method: 'PUT',
      path: candidatePaths.one(NS, 'a-0'),
      body: { ...current, spec: { ...current.spec, pingTime } },
    });
    const pinged = await candidateEvent(
      'our ping on the watch',
      (e) => e.at >= from && e.ping === pingTime && e.renew < pingTime,
      5_000,
    );
    const answered = await candidateEvent(
      'a-0 answering',
      (e) => e.at >= from && e.name === 'a-0' && e.renew > pingTime,
      5_000,
    );
    console.log(`ping answered ${(answered.at - pinged.at).toFixed(1)} ms after our watch showed it`);
    expect(answered.at - pinged.at).toBeLessThan(2_000);
    await sleep(3_000);
    expect(
      after(candidateEvents, from).filter((e) => e.name === 'a-0' && e.type === 'MODIFIED'),
    ).toHaveLength(2);
    expect(sampleValue(await a.metrics(), 'nlc_lease_candidate_pings_answered_total')).toBeGreaterThanOrEqual(
      1,
    );
  });

  it('an older version joining later preempts the leader: preferredHolder, release, then the new holder, with no overlap (lock history and audit log)', async () => {
    dumpOnFailure();
    const a = procs.get('a-0')!;
    const from = lockEvents.length;
    const t0 = performance.now();
    const b = await replica('b-0', { extra: ['--emulated-version=0.1'] });
    const published = await candidateEvent(
      'b-0 published',
      (e) => e.name === 'b-0' && e.type === 'ADDED',
      20_000,
    );
    const preferred = await lockEvent(
      'preferredHolder b-0',
      (e) => e.lock === LOCK && e.preferred === 'b-0',
      from,
      20_000,
    );
    const leads = await lockEvent(
      'b-0 renewing the lock',
      (e) => e.lock === LOCK && renewedBy('b-0')(e),
      from,
      20_000,
    );
    await waitUntil(async () => (await master(b)) === 1, { timeoutMs: 2_000, what: 'b-0 master 1' });
    const seq = history(LOCK, from);
    const released = seq.findIndex((e) => e.holder === '');
    const firstB = seq.findIndex((e) => e.holder === 'b-0');
    // The coordinator's pings during this election, and how fast each was answered.
    const answers = pingAnswers((e) => e.at >= published.at);
    console.log(
      `preemption: b-0 published ${(published.at - t0).toFixed(0)} ms after its start; preferredHolder set ` +
        `${(preferred.at - published.at).toFixed(0)} ms after that; lock released ${(seq[released]!.at - preferred.at).toFixed(0)} ms ` +
        `after preferredHolder; named b-0 ${(seq[firstB]!.at - seq[released]!.at).toFixed(0)} ms after the release; b-0 renewed it ` +
        `${(leads.at - seq[firstB]!.at).toFixed(0)} ms later: ${(leads.at - published.at).toFixed(0)} ms from publication to the new leader; ` +
        `coordinator pings answered in ${answers.map((x) => x.toFixed(0)).join(', ') || '-'} ms`,
    );
    // Lock history: a-0 (last with preferredHolder b-0), released (no holder), then b-0 only.
    expect(released).toBeGreaterThan(0);
    expect(seq.slice(0, released).every((e) => e.holder === 'a-0')).toBe(true);
    expect(seq[released]).toMatchObject({ holder: '', duration: 1, strategy: 'OldestEmulationVersion' });
    expect(firstB).toBeGreaterThan(released);
    expect(seq.slice(firstB).every((e) => e.holder === 'b-0')).toBe(true);
    // Audit: a-0's last successful lock write (the release) before b-0's first.
    const lastA = Math.max(...lockWrites('a-0').map(ts));
    const firstBWrite = Math.min(...lockWrites('b-0').map(ts));
    expect(lastA).toBeLessThan(firstBWrite);
    expect(lockWrites('b-0').map((e) => e.verb)).not.toContain('create');
    // Bounds: from preferredHolder to the new leader's renewal within 1 s, a quarter of the lease
    // duration that a leader which only stops renewing (client-go) makes the coordinator wait; the
    // whole preemption within the coordinator's own 5 s answer window of the publication; every
    // ping answered within 2 s.
    expect(leads.at - preferred.at).toBeLessThan(1_000);
    expect(leads.at - published.at).toBeLessThan(COORDINATOR_WINDOW_MS);
    for (const x of answers) expect(x).toBeLessThan(2_000);
    expect(await master(a)).toBe(0);
    expect(a.child.exitCode).toBeNull(); // a-0 stays a candidate
    expect(
      sampleValue(await a.metrics(), 'nlc_leader_election_lock_info', {
        preferred_holder: '',
        strategy: 'OldestEmulationVersion',
      }),
    ).toBe(1);
  });

  it('equal versions keep the current leader: a later candidate with the same version changes nothing for 12 s', async () => {
    dumpOnFailure();
    const from = lockEvents.length;
    const c = await replica('c-0', { extra: ['--emulated-version=0.1'] });
    await candidateEvent('c-0 published', (e) => e.name === 'c-0' && e.type === 'ADDED', 20_000);
    const until = performance.now() + 12_000;
    while (performance.now() < until) {
      expect(await master(c)).toBe(0);
      expect(await master(procs.get('b-0')!)).toBe(1);
      await sleep(500);
    }
    const seq = history(LOCK, from);
    console.log(
      `equal versions: ${seq.length} lock events in 12 s, holders ${[...new Set(seq.map((e) => e.holder))].join(',')}`,
    );
    expect(seq.length).toBeGreaterThan(0); // b-0 renewing
    expect(seq.every((e) => e.holder === 'b-0' && e.preferred === '')).toBe(true);
    expect(lockWrites('c-0')).toEqual([]);
  });

  it('SIGTERM the leader: its candidate is deleted first, then the lock released, and the coordinator names the next (oldest) one', async () => {
    dumpOnFailure();
    const b = procs.get('b-0')!;
    const from = lockEvents.length;
    const t0 = performance.now();
    b.child.kill('SIGTERM');
    const deleted = await candidateEvent(
      'b-0 deleted',
      (e) => e.at >= t0 && e.name === 'b-0' && e.type === 'DELETED',
      10_000,
    );
    const released = await lockEvent(
      'the lock released',
      (e) => e.lock === LOCK && e.holder === '',
      from,
      10_000,
    );
    const next = await lockEvent(
      'c-0 renewing the lock',
      (e) => e.lock === LOCK && renewedBy('c-0')(e),
      from,
      15_000,
    );
    const exit = await exitWithin(b, 10_000);
    procs.delete('b-0');
    console.log(
      `SIGTERM: candidate deleted ${(deleted.at - t0).toFixed(0)} ms after SIGTERM, lock released at ` +
        `${(released.at - t0).toFixed(0)} ms, c-0 (same version as b-0, older than a-0) leading at ${(next.at - t0).toFixed(0)} ms; ` +
        `b-0 exited ${exit.code}`,
    );
    expect(deleted.at - t0).toBeLessThan(1_000);
    expect(deleted.at).toBeLessThan(released.at);
    // Within 1 s: the lock is released, not left to expire (4 s).
    expect(next.at - t0).toBeLessThan(1_000);
    expect(exit.code).toBe(0);
    expect(history(LOCK, from).filter((e) => e.holder === 'a-0')).toEqual([]);
  });

  it("a third-party strategy: the coordinator leaves the lock unheld, the replica never takes it; named by 'another controller', it leads", async () => {
    dumpOnFailure();
    const TP = 'tp-lock';
    // A live candidate of another implementation (the test answers its pings) with a third-party
    // strategy and the newest binary: its strategy wins. (Left unanswered, kube-apiserver v1.37.2's
    // coordinator, voting among our candidate alone on a lease without holderIdentity, dereferences
    // that nil holder and the whole kube-apiserver exits: seen here, not the controller's doing.)
    answeredByTest.add('other-impl');
    await publishCandidate('other-impl', TP, '9.9.9', '9.9.0', 'example.com/custom');
    await lockEvent('tp-lock created without holder', (e) => e.lock === TP, 0, 10_000);
    const d = await replica('d-0', { lock: TP });
    await candidateEvent('d-0 published', (e) => e.name === 'd-0' && e.type === 'ADDED', 20_000);
    const until = performance.now() + 10_000;
    while (performance.now() < until) {
      expect(await master(d, TP)).toBe(0);
      await sleep(500);
    }
    expect(history(TP).every((e) => e.holder === '' && e.strategy === 'example.com/custom')).toBe(true);
    expect(lockWrites('d-0', TP)).toEqual([]);
    // The coordinator pinged d-0 in the meantime (no holder: an election is due every 5 s); each
    // of its pings was answered within 2 s.
    const answers = pingAnswers((e) => e.name === 'd-0');
    console.log(
      `third-party strategy: the coordinator's pings of d-0 answered in ${answers.map((x) => x.toFixed(1)).join(', ')} ms`,
    );
    expect(answers.length).toBeGreaterThan(0);
    for (const x of answers) expect(x).toBeLessThan(2_000);
    // "Another controller" implementing the strategy names d-0.
    const lock = await cluster.admin.request<Lease>({ method: 'GET', path: paths.lease(NS, TP) });
    const t0 = performance.now();
    await cluster.admin.request({
      method: 'PUT',
      path: paths.lease(NS, TP),
      body: {
        ...lock,
        spec: {
          ...lock.spec,
          holderIdentity: 'd-0',
          leaseDurationSeconds: 5,
          renewTime: microNow(),
        },
      },
    });
    const renewed = await lockEvent(
      'd-0 renewing tp-lock',
      (e) => e.lock === TP && renewedBy('d-0')(e),
      0,
      10_000,
    );
    await waitUntil(async () => (await master(d, TP)) === 1, { timeoutMs: 2_000, what: 'd-0 master 1' });
    console.log(
      `third-party strategy: d-0 renewed the lock ${(renewed.at - t0).toFixed(0)} ms after it was named`,
    );
    expect(renewed.at - t0).toBeLessThan(1_000);
    expect(renewed.strategy).toBe('example.com/custom');
    await d.kill('SIGTERM');
    procs.delete('d-0');
    await cluster.admin.request({ method: 'DELETE', path: candidatePaths.one(NS, 'other-impl') });
    await cluster.admin.request({ method: 'DELETE', path: paths.lease(NS, TP) });
  });

  it('mixed fleet: an ordinary-election holder keeps the lock (never two leaders) until it stops, then the coordinated replica leads', async () => {
    dumpOnFailure();
    const MIX = 'mixed-lock';
    const o = await replica('o-0', { coordinated: false, lock: MIX });
    await lockEvent(
      'o-0 holding mixed-lock',
      (e) => e.lock === MIX && e.holder === 'o-0',
      0,
      LEASE_MS + 10_000,
    );
    const k = await replica('k-0', { lock: MIX });
    await candidateEvent('k-0 published', (e) => e.name === 'k-0' && e.type === 'ADDED', 20_000);
    const from = lockEvents.length;
    const until = performance.now() + 10_000;
    while (performance.now() < until) {
      const [om, km] = await Promise.all([master(o, MIX), master(k, MIX)]);
      expect(om + km).toBe(1);
      expect(om).toBe(1);
      await sleep(250);
    }
    expect(history(MIX, from).every((e) => e.holder === 'o-0')).toBe(true);
    expect(lockWrites('k-0', MIX)).toEqual([]);
    const coordinatorSeen = history(MIX, from).some((e) => e.preferred === 'k-0');
    const t0 = performance.now();
    o.child.kill('SIGTERM');
    const released = await lockEvent(
      'mixed-lock released',
      (e) => e.lock === MIX && e.holder === '',
      from,
      10_000,
    );
    const leads = await lockEvent(
      'k-0 renewing mixed-lock',
      (e) => e.lock === MIX && renewedBy('k-0')(e),
      from,
      15_000,
    );
    await waitUntil(async () => (await master(k, MIX)) === 1, { timeoutMs: 2_000, what: 'k-0 master 1' });
    await exitWithin(o, 10_000);
    procs.delete('o-0');
    console.log(
      `mixed fleet: the coordinator ${coordinatorSeen ? 'did' : 'did not'} set preferredHolder k-0 on the ordinary holder's lock; ` +
        `SIGTERM o-0: released at ${(released.at - t0).toFixed(0)} ms, k-0 leading at ${(leads.at - t0).toFixed(0)} ms`,
    );
    expect(Math.max(...lockWrites('o-0', MIX).map(ts))).toBeLessThan(
      Math.min(...lockWrites('k-0', MIX).map(ts)),
    );
    expect(leads.at - t0).toBeLessThan(1_000);
    await k.kill('SIGTERM');
    procs.delete('k-0');
  });
  it('a lock the coordinator handed to a replica before its first look: renewed no earlier than one lease duration after that look', async () => {
    dumpOnFailure();
    const HL = 'handed-lock';
    // A candidate h-0 published before the replica h-0 runs (the test answers its pings meanwhile):
    // the coordinator creates the lock naming h-0, with no acquireTime.
    answeredByTest.add('h-0');
    await publishCandidate('h-0', HL, '0.2.0', '0.2.0', 'OldestEmulationVersion');
    await lockEvent('handed-lock naming h-0', (e) => e.lock === HL && e.holder === 'h-0', 0, 10_000);
    const handed = await cluster.admin.request<Lease>({ method: 'GET', path: paths.lease(NS, HL) });
    expect(handed.spec?.acquireTime ?? undefined).toBeUndefined();
    answeredByTest.delete('h-0');
    const t0 = performance.now();
    const h = await replica('h-0', { lock: HL });
    const renewed = await lockEvent(
      'h-0 renewing handed-lock',
      (e) => e.lock === HL && renewedBy('h-0')(e),
      0,
      20_000,
    );
    await waitUntil(async () => (await master(h, HL)) === 1, { timeoutMs: 2_000, what: 'h-0 master 1' });
    const line = h.logs.find((l) => String(l.msg).startsWith('Lock names us at our first look'));
    const firstWrite = Math.min(...lockWrites('h-0', HL).map(ts));
    console.log(
      `handed before the first look: h-0 renewed ${(renewed.at - t0).toFixed(0)} ms after its start; its first lock ` +
        `write ${(firstWrite - Date.parse(String(line?.notBeforeAt))).toFixed(0)} ms after the end of its wait`,
    );
    // One lease duration from its first look, by its own clock; the API server's audit agrees.
    expect(line).toMatchObject({ notBeforeIn: `${LEASE_MS / 1000}s` });
    expect(Date.parse(renewed.renewTime)).toBeGreaterThanOrEqual(Date.parse(String(line?.notBeforeAt)));
    expect(firstWrite).toBeGreaterThanOrEqual(Date.parse(String(line?.notBeforeAt)));
    expect(history(HL).every((e) => e.holder === 'h-0')).toBe(true);
    // Process start, the decision at start (about 2 s with a coordinator), the 4 s wait: within 9 s.
    expect(renewed.at - t0).toBeLessThan(COORDINATOR_WINDOW_MS + LEASE_MS);
    await h.kill('SIGTERM');
    procs.delete('h-0');
    await cluster.admin.request({ method: 'DELETE', path: paths.lease(NS, HL) });
  });
});

describe('RBAC: manifests/base with the coordinated-leader-election component', () => {
  it('base alone refuses LeaseCandidates; with the component the replica runs coordinated without one refused write', async () => {
    dumpOnFailure();
    const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
    const INSTALL_NS = 'nlc-system';
    const rbacOnly = (components: string[]) =>
      kustomizeOverlay({ resources: [path.join(ROOT, 'manifests', 'base')], components }).filter((o) =>
        ['Namespace', 'ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'].includes(
          o.kind,
        ),
      );
    const resolver = new ApiResolver(cluster.admin);
    for (const o of rbacOnly([])) await serverSideApply(cluster.admin, resolver, o, 'nlc-coordinated-e2e');
    const token = await requestServiceAccountToken(cluster.admin, INSTALL_NS, 'node-lifecycle-controller');
    const tmp = mkdtempSync(path.join(os.tmpdir(), 'nlc-coord-rbac-'));
    try {
      const kubeconfig = path.join(tmp, 'sa.kubeconfig');
      writeTokenKubeconfig(cluster.cp, token, kubeconfig, 'node-lifecycle-controller');
      const sa = await KubeClient.fromKubeConfig(
        cluster.cp.kubeConfigForToken(token, 'node-lifecycle-controller'),
        {
          userAgent: 'nlc-coordinated-e2e-probe',
        },
      );
      const tryCreate = () =>
        sa.raw({
          method: 'POST',
          path: candidatePaths.list(INSTALL_NS),
          body: {
            apiVersion: 'coordination.k8s.io/v1beta1',
            kind: 'LeaseCandidate',
            metadata: { name: 'probe' },
            spec: {
              leaseName: 'x',
              binaryVersion: '1.0.0',
              emulationVersion: '1.0.0',
              strategy: 'OldestEmulationVersion',
            },
          },
        });
      expect((await tryCreate()).status).toBe(403);
      for (const o of rbacOnly([path.join(ROOT, 'manifests', 'components', 'coordinated-leader-election')])) {
        await serverSideApply(cluster.admin, resolver, o, 'nlc-coordinated-e2e');
      }
      await waitUntil(async () => (await tryCreate()).status === 201, {
        timeoutMs: 10_000,
        what: 'the Role in force',
      });
      await cluster.admin.request({ method: 'DELETE', path: candidatePaths.one(INSTALL_NS, 'probe') });
      sa.close();
      const r = await replica('r-0', { kubeconfig, namespace: INSTALL_NS });
      const started = await r.waitForLog(
        'Coordinated leader election: publishing a LeaseCandidate; the coordinator names the leader',
        20_000,
      );
      await waitUntil(async () => (await master(r)) === 1, {
        timeoutMs: LEASE_MS + 10_000,
        what: 'r-0 leading',
      });
      // A ping, answered: its watch (list, watch) and its renewal (update) are allowed too.
      const mineNow = await cluster.admin.request<LeaseCandidate>({
        method: 'GET',
        path: candidatePaths.one(INSTALL_NS, 'r-0'),
      });
      const pingTime = `${new Date().toISOString().slice(0, 23)}789Z`;
      await cluster.admin.request({
        method: 'PUT',
        path: candidatePaths.one(INSTALL_NS, 'r-0'),
        body: { ...mineNow, spec: { ...mineNow.spec, pingTime } },
      });
      await waitUntil(
        async () =>
          String(
            (
              await cluster.admin.request<LeaseCandidate>({
                method: 'GET',
                path: candidatePaths.one(INSTALL_NS, 'r-0'),
              })
            ).spec?.renewTime,
          ) > pingTime,
        { timeoutMs: 2_000, intervalMs: 20, what: 'r-0 answering a ping' },
      );
      await r.kill('SIGTERM');
      procs.delete('r-0');
      const mine = auditWrites(cluster.cp.auditLogPath!, `${COMPONENT_NAME}/`).filter((e) =>
        (e.userAgent ?? '').endsWith('(r-0)'),
      );
      const summary = mine.map(
        (e) => `${e.verb} ${e.objectRef?.resource}/${e.objectRef?.name} ${e.responseStatus?.code}`,
      );
      console.log(`RBAC (base + component): r-0's writes: ${[...new Set(summary)].join('; ')}`);
      // The coordinator's lease was readable (no note), and every write of candidate and lock passed.
      expect(started.note).toBeUndefined();
      expect(mine.filter((e) => e.responseStatus?.code === 403)).toEqual([]);
      for (const [resource, verb] of [
        ['leasecandidates', 'create'],
        ['leasecandidates', 'update'],
        ['leasecandidates', 'delete'],
        ['leases', 'update'],
      ]) {
        expect(
          mine.some(
            (e) =>
              e.objectRef?.resource === resource && e.verb === verb && (e.responseStatus?.code ?? 0) < 300,
          ),
          `${verb} ${resource}`,
        ).toBe(true);
      }
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});

describe('fall-back: the gate asked for, the API server without it', () => {
  /** A replica asking for coordinated election on another control plane: its fall-back, as measured. */
  async function fallBackOn(opts: Omit<ControlPlaneOptions, 'env'>, name: string, decideWithinMs: number) {
    const other = await startCluster({ audit: true, ...opts });
    try {
      await other.admin.request({
        method: 'POST',
        path: paths.namespaces(),
        body: { metadata: { name: NS } },
      });
      const t0 = performance.now();
      const r = await replica(name, { on: other });
      // Undecided, it does not campaign: /readyz fails its lock-access check (sampled 5 s in).
      const undecided = await sleep(Math.max(0, 5_000 - (performance.now() - t0))).then(() =>
        r.logs.some((l) => String(l.msg).startsWith('Coordinated leader election'))
          ? undefined
          : fetch(`http://127.0.0.1:${r.probesPort}/readyz?verbose`).then(async (res) => ({
              status: res.status,
              body: await res.text(),
            })),
      );
      const line = await r.waitForLog(
        'Coordinated leader election unavailable: using ordinary leader election',
        decideWithinMs,
      );
      const decided = performance.now() - t0;
      await waitUntil(async () => (await master(r)) === 1, {
        timeoutMs: LEASE_MS + 5_000,
        what: `${name} leading`,
      });
      const led = performance.now() - t0;
      const ready = await waitUntil(
        async () => (await fetch(`http://127.0.0.1:${r.probesPort}/readyz`)).status === 200,
        { timeoutMs: 5_000, what: `${name} ready` },
      );
      const coordinated = sampleValue(await r.metrics(), 'nlc_leader_election_coordinated', { name: LOCK });
      const writes = lockWrites(name, LOCK, other).map((e) => e.verb);
      await r.kill('SIGTERM');
      procs.delete(name);
      const lines = r.logs.filter((l) => String(l.msg).startsWith('Coordinated leader election'));
      return { reason: line.reason, decided, led, coordinated, writes, lines, undecided, ready };
    } finally {
      await other.stop();
    }
  }

  it('without the LeaseCandidate API (404): one log line, then ordinary election (the lock created one lease duration after the first look)', async () => {
    dumpOnFailure();
    const f = await fallBackOn({}, 'f-0', 10_000);
    console.log(
      `fall-back (404): decided within ${f.decided.toFixed(0)} ms of the start, leading ${f.led.toFixed(0)} ms after it`,
    );
    expect(f.reason).toBe('the API server does not serve coordination.k8s.io/v1beta1 (404)');
    expect(f.lines).toHaveLength(1);
    expect(f.coordinated).toBe(0);
    expect(f.writes).toContain('create');
    expect(f.led).toBeLessThan(LEASE_MS + 5_000);
  });

  it('the API served without a coordinator (runtime-config, no gate): ordinary election after 30 s', async () => {
    dumpOnFailure();
    const g = await fallBackOn(
      { apiserverArgs: ['--runtime-config=coordination.k8s.io/v1beta1=true'] },
      'g-0',
      45_000,
    );
    console.log(`fall-back (no coordinator): decided ${g.decided.toFixed(0)} ms after the start`);
    expect(g.reason).toMatch(/^no coordinator: kube-system\/leader-election-controller was missing for 30s/);
    expect(g.lines).toHaveLength(1);
    expect(g.coordinated).toBe(0);
    expect(g.writes).toContain('create');
    expect(g.undecided?.status).toBe(500); // a failing check, as every probe of this server (src/http/server.ts)
    expect(g.undecided?.body).toMatch(/lock-access/);
    expect(g.ready).toBe(true);
    expect(g.decided).toBeGreaterThanOrEqual(30_000);
    expect(g.decided).toBeLessThan(35_000);
  });

  it("failed checks decide nothing (40 s of 503/429 from the coordinator's lease); decided coordinated with no coordinator, nobody leads: it checks again and falls back", async () => {
    dumpOnFailure();
    // kube-apiserver with the LeaseCandidate API but no coordinator; the replica reaches it through
    // a proxy that answers the coordinator's lease as the test says.
    const other = await startCluster({
      audit: true,
      apiserverArgs: ['--runtime-config=coordination.k8s.io/v1beta1=true'],
    });
    const tmp = mkdtempSync(path.join(os.tmpdir(), 'nlc-coord-'));
    const proxy = await ApiHttpProxy.start(other.cp);
    const healthz: { at: number; status: number; body: string }[] = [];
    let sampling = true;
    try {
      await other.admin.request({
        method: 'POST',
        path: paths.namespaces(),
        body: { metadata: { name: NS } },
      });
      const kubeconfig = path.join(tmp, 'via-proxy.kubeconfig');
      proxy.writeKubeconfig(other.cp, kubeconfig);
      // The coordinator's lease only (kube-controller-manager's lock, in the same namespace, is read
      // by the concurrent-controller check: answered as the API server answers it).
      const coordinatorLease = (r: { method: string; url: string }) =>
        r.method === 'GET' &&
        r.url.startsWith(
          '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/leader-election-controller',
        );
      let n = 0;
      const failing = proxy.answer(coordinatorLease, () => {
        const code = n++ % 2 === 0 ? 503 : 429;
        return { status: code, body: { kind: 'Status', apiVersion: 'v1', status: 'Failure', code } };
      });
      const t0 = performance.now();
      const r = await replica('h-0', { on: other, kubeconfig });
      const sampler = (async () => {
        while (sampling) {
          const res = await fetch(`http://127.0.0.1:${r.probesPort}/healthz?verbose`).catch(() => undefined);
          if (res) healthz.push({ at: performance.now() - t0, status: res.status, body: await res.text() });
          await sleep(1_000);
        }
      })();
      // A kubelet's lease, renewed every second, so that the replica's lease watch stays in contact
      // (this cluster has no node): a replica that cannot see may not lead.
      const nodeLease = paths.lease('kube-node-lease', 'h-node');
      const renewer = (async () => {
        while (sampling) {
          const spec = { holderIdentity: 'h-node', leaseDurationSeconds: 40, renewTime: microNow() };
          await other.admin
            .request<Lease>({ method: 'GET', path: nodeLease })
            .then((l) => other.admin.request({ method: 'PUT', path: nodeLease, body: { ...l, spec } }))
            .catch(() =>
              other.admin.request({
                method: 'POST',
                path: paths.leases('kube-node-lease'),
                body: { metadata: { name: 'h-node' }, spec },
              }),
            )
            .catch(() => undefined);
          await sleep(1_000);
        }
      })();
      const candidates = async () =>
        (
          (
            await other.admin.request<{ items: LeaseCandidate[] }>({
              method: 'GET',
              path: candidatePaths.list(NS),
            })
          ).items ?? []
        ).map((c) => c.metadata.name);

      // 1. 40 s of failures: undecided (the old check took 30 s of them for "a coordinator runs").
      await sleep(Math.max(0, 40_000 - (performance.now() - t0)));
      const decisions = () => r.logs.filter((l) => String(l.msg).startsWith('Coordinated leader election'));
      expect(decisions()).toEqual([]);
      const warned = r.logs.filter((l) =>
        String(l.msg).startsWith('Cannot ask the API server for kube-system/leader-election-controller'),
      );
      console.log(`undecided after 40 s of 503/429: ${warned.length} warnings, ${n} failed reads`);
      expect(warned.length).toBeGreaterThanOrEqual(4);
      expect(warned.length).toBe(n);
      expect(warned.every((l) => l.level === 'warn' && /\b(503|429)\b/.test(JSON.stringify(l.err)))).toBe(
        true,
      );
      expect(await candidates()).toEqual([]);
      expect(lockWrites('h-0', LOCK, other)).toEqual([]);

      // 2. A coordinator that renews (as the proxy shows it): coordinated, at the next retry.
      failing();
      let renewals = 0;
      const fake = proxy.answer(coordinatorLease, () => ({
        status: 200,
        body: {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name: 'leader-election-controller', namespace: 'kube-system' },
          spec: {
            holderIdentity: 'apiserver-test',
            renewTime: `2026-01-01T00:00:${String(renewals++ % 60).padStart(2, '0')}.000000Z`,
          },
        },
      }));
      const decided = await r.waitForLog(
        'Coordinated leader election: publishing a LeaseCandidate; the coordinator names the leader',
        35_000,
      );
      const decidedAt = performance.now() - t0;
      expect(decided.note).toBeUndefined();
      // Gone again: the proxy passes the reads on (404: kube-apiserver runs no coordinator here).
      fake();
      await waitUntil(async () => (await candidates()).includes('h-0'), {
        timeoutMs: 10_000,
        what: 'h-0 candidate',
      });

      // 3. Nobody names it: after 30 s without a leader (4 lease durations, at least 30 s) it checks
      // again, finds no coordinator (its lease missing for 30 s), withdraws and leads by ordinary election.
      const recheck = await r.waitForLog(
        'Nobody has led the lock under coordinated leader election: checking whether the coordinator is still there',
        45_000,
      );
      const recheckAt = performance.now() - t0;
      // Waited for longer than the claim (the test's polling and a loaded machine add to it); the
      // claim is judged on the controller's own log times below.
      const fellBack = await r.waitForLog(
        'Coordinated leader election: the coordinator is gone; using ordinary leader election',
        55_000,
      );
      const fellBackAt = performance.now() - t0;
      // The coordinator's lease missing for 30 s (coordinatorWaitMs, from the check's first read),
      // then the LeaseCandidate withdrawn (at most 10 s): 40 s after the re-check began, plus 1 s
      // for the check's first and last requests.
      expect(Date.parse(String(fellBack.ts)) - Date.parse(String(recheck.ts))).toBeLessThanOrEqual(41_000);
      await waitUntil(async () => (await master(r)) === 1, {
        timeoutMs: LEASE_MS + 5_000,
        what: 'h-0 leading',
      });
      const ledAt = performance.now() - t0;
      console.log(
        `coordinated after ${decidedAt.toFixed(0)} ms; re-check at ${recheckAt.toFixed(0)} ms ` +
          `(${String(recheck.leaderlessFor)} without a leader); fell back at ${fellBackAt.toFixed(0)} ms, leading at ${ledAt.toFixed(0)} ms`,
      );
      expect(decidedAt).toBeGreaterThan(40_000);
      expect(recheckAt - decidedAt).toBeGreaterThanOrEqual(30_000);
      expect(fellBack.reason).toMatch(
        /^no coordinator: kube-system\/leader-election-controller was missing for 30s/,
      );
      expect(ledAt - fellBackAt).toBeLessThan(LEASE_MS + 1_000);
      expect(await candidates()).toEqual([]);
      expect(sampleValue(await r.metrics(), 'nlc_leader_election_coordinated', { name: LOCK })).toBe(0);
      expect(lockWrites('h-0', LOCK, other).map((e) => e.verb)).toContain('create');
      // /healthz stayed 200 throughout: undecided for less than 5 minutes, without a leader for
      // less than 2 minutes (the fall-back came first).
      sampling = false;
      await Promise.all([sampler, renewer]);
      expect(healthz.length).toBeGreaterThan(60);
      expect(healthz.filter((h) => h.status !== 200)).toEqual([]);
      await r.kill('SIGTERM');
      procs.delete('h-0');
    } finally {
      sampling = false;
      await proxy.close();
      await other.stop();
      rmSync(tmp, { recursive: true, force: true });
    }
  }, 300_000);
});
