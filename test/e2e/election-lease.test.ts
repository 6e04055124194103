import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock/clock.js';
import { resolveLeaderElectionConfig } from '../../src/election/config.js';
import { type ElectionEvent, LeaderElector } from '../../src/election/elector.js';
import {
  IDENTITY_LABEL,
  IdentityLeases,
  identityLeaseName,
  LEADER_LABEL,
} from '../../src/election/identity.js';
import { lockUpdates, watchLock } from '../../src/election/lock-watch.js';
import { createLeaderElectionMetrics } from '../../src/election/metrics.js';
import { type KubeClient, paths } from '../../src/kube/client.js';
import type { Lease, List } from '../../src/kube/types.js';
import { silentLogger } from '../../src/log/logger.js';
import type { Reflector } from '../../src/watch/reflector.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { rawWatch } from '../support/raw-watch.js';
import { sleep, waitUntil } from '../support/wait.js';

const NS = 'nlc-election';
type Timing = { leaseDurationMs: number; renewDeadlineMs: number; retryPeriodMs: number };
// Short durations, as the issue asks: lease 3 s, renew deadline 2 s, retry 0.5 s.
const TIMING: Timing = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 500 };
/**
 * For the hand-over: candidates poll every 5 s (x1 to x2.2), so only a takeover driven by the
 * lock watch meets the bound below, not one at the next poll.
 */
const SLOW_POLL: Timing = { leaseDurationMs: 8_000, renewDeadlineMs: 7_000, retryPeriodMs: 5_000 };
/** A graceful hand-over, as the test's own watch of the lock sees it (docs/benchmarks.md: <= 300 ms). */
const HANDOVER_BOUND_MS = 300;

interface Replica {
  host: string;
  client: KubeClient;
  lockWatch: Reflector<Lease>;
  elector: LeaderElector;
  identity?: IdentityLeases;
  events: ElectionEvent[];
  startedAt(): number | undefined;
}

let cluster: TestCluster;
const replicas: Replica[] = [];

beforeAll(async () => {
  cluster = await startCluster();
  await cluster.admin.request({ method: 'POST', path: paths.namespaces(), body: { metadata: { name: NS } } });
});
afterAll(async () => {
  await cluster?.stop();
});
afterEach(() => {
  for (const r of replicas.splice(0)) {
    r.elector.stop();
    r.identity?.stop();
    r.lockWatch.dispose();
    r.client.close();
  }
});

async function replica(
  lock: string,
  host: string,
  o: { withIdentity?: { gcAgeMs: number }; timing?: Timing; lockWatch?: boolean } = {},
): Promise<Replica> {
  const { withIdentity, timing = TIMING } = o;
  const client = await cluster.cp.client();
  const config = resolveLeaderElectionConfig({
    namespace: NS,
    name: lock,
    identity: `${host}_${lock}`,
    ...timing,
  });
  const metrics = createLeaderElectionMetrics(new Registry());
  const lockWatch = watchLock({ client, clock: systemClock, logger: silentLogger }, NS, lock);
  const elector = new LeaderElector({
    config,
    client,
    clock: systemClock,
    logger: silentLogger,
    metrics,
    // Without the lock watch the elector polls, as client-go does.
    lockUpdates$: o.lockWatch === false ? undefined : lockUpdates(lockWatch, lock),
  });
  const events: ElectionEvent[] = [];
  elector.events$.subscribe((e) => events.push(e));
  lockWatch.start();
  const r: Replica = {
    host,
    client,
    lockWatch,
    elector,
    events,
    startedAt: () => events.find((e) => e.type === 'started-leading')?.at,
  };
  if (withIdentity) {
    r.identity = new IdentityLeases({
      client,
      clock: systemClock,
      logger: silentLogger,
      metrics,
      namespace: NS,
      hostname: host,
      holderIdentity: config.identity,
      renewIntervalMs: 500,
      gcAgeMs: withIdentity.gcAgeMs,
      gcCheckIntervalMs: 250,
      elector,
    });
  }
  replicas.push(r);
  return r;
}

async function three(
  lock: string,
  o: { withIdentity?: { gcAgeMs: number }; timing?: Timing } = {},
): Promise<Replica[]> {
  const rs = await Promise.all([0, 1, 2].map((i) => replica(lock, `replica-${i}`, o)));
  for (const r of rs) {
    r.identity?.start();
    r.elector.start();
  }
  return rs;
}

const leaders = (rs: Replica[]) => rs.filter((r) => r.elector.isLeader());

/** Samples every few ms how many replicas would pass the writer's fence at the same moment. */
function fenceSampler(rs: Replica[]): { stop(): number; samples(): number } {
  let max = 0;
  let n = 0;
  const t = setInterval(() => {
    const now = performance.now();
    n++;
    max = Math.max(max, rs.filter((r) => r.elector.canWrite(now)).length);
  }, 2);
  return {
    stop: () => {
      clearInterval(t);
      return max;
    },
    samples: () => n,
  };
}

async function getLease(name: string): Promise<Lease> {
  return await cluster.admin.request<Lease>({ method: 'GET', path: paths.lease(NS, name) });
}

describe('leader election on a real API server', () => {
  it('three electors on one lock: exactly one leads, the others follow it', async () => {
    const t0 = performance.now();
    const rs = await three('lock-one');
    const sampler = fenceSampler(rs);
    const [leader] = await waitUntil(() => (leaders(rs).length > 0 ? leaders(rs) : undefined), {
      timeoutMs: 5_000,
      intervalMs: 10,
      what: 'a leader',
    });
    // No lock yet: the first leader creates it one lease duration after its first look.
    const firstLeader = leader!.startedAt()! - t0;
    console.log(`fresh lock: first leader ${firstLeader.toFixed(0)} ms after the electors started`);
    expect(firstLeader).toBeGreaterThanOrEqual(TIMING.leaseDurationMs);
    await sleep(4_000); // several renewals and candidate polls
    expect(leaders(rs)).toEqual([leader]);
    expect(sampler.stop()).toBe(1);
    const lease = await getLease('lock-one');
    expect(lease.spec).toMatchObject({
      holderIdentity: leader!.elector.identity,
      leaseDurationSeconds: 3,
      leaseTransitions: 0,
    });
    expect(lease.spec?.renewTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    for (const r of rs) expect(r.elector.getLeader()).toBe(leader!.elector.identity);
  });

  it('release() by the leader: the lock watch hands it over within 300 ms (polls every 5 s), never two writers at once', async () => {
    const rs = await three('lock-release', { timing: SLOW_POLL });
    const history: { at: number; holder: string; duration: number; transitions: number }[] = [];
    const stopWatch = await rawWatch<Lease>(
      cluster.admin,
      paths.leases(NS),
      (e) => {
        const s = e.object.spec;
        history.push({
          at: e.at,
          holder: s?.holderIdentity ?? '',
          duration: s?.leaseDurationSeconds ?? 0,
          transitions: s?.leaseTransitions ?? 0,
        });
      },
      { fieldSelector: 'metadata.name=lock-release' },
    );
    const [old] = await waitUntil(() => (leaders(rs).length > 0 ? leaders(rs) : undefined), {
      timeoutMs: SLOW_POLL.leaseDurationMs + 3_000,
      what: 'a leader',
    });
    const candidates = rs.filter((r) => r !== old);
    // Release when no candidate's next poll of the lock is due within 1 s: a candidate that acts
    // only on its polls cannot take over within the bound.
    await waitUntil(
      () => candidates.every((r) => r.elector.snapshot().nextAttemptAt - performance.now() >= 1_000),
      { timeoutMs: 15_000, intervalMs: 5, what: 'no candidate poll due within 1 s' },
    );
    const sampler = fenceSampler(rs);
    const from = history.length;
    const t = performance.now();
    const nextPoll = Math.min(...candidates.map((r) => r.elector.snapshot().nextAttemptAt)) - t;
    expect(await old!.elector.release()).toBe('released');
    // The hand-over as the test's own watch of the lock saw it: no holder, then the new one. A
    // renewal the old leader wrote just before the call may reach the watch after it: those come
    // before the release and are the old leader's own.
    const releasedAt = () => history.findIndex((h, i) => i >= from && h.holder === '');
    const taken = await waitUntil(
      () => (releasedAt() < 0 ? undefined : history.slice(releasedAt()).find((h) => h.holder !== '')),
      {
        timeoutMs: SLOW_POLL.leaseDurationMs,
        intervalMs: 5,
        what: 'a new holder of the lock',
      },
    );
    const released = history[releasedAt()];
    expect(history.slice(from, releasedAt()).map((h) => h.holder)).toEqual(
      history.slice(from, releasedAt()).map(() => old!.elector.identity),
    );
    const next = rs.find((r) => r.elector.identity === taken.holder);
    console.log(
      `release: lock seen released ${((released?.at ?? Number.NaN) - t).toFixed(1)} ms and taken by ` +
        `${taken.holder} ${(taken.at - t).toFixed(1)} ms after release() was called ` +
        `(${(taken.at - (released?.at ?? Number.NaN)).toFixed(1)} ms between the two watch events); ` +
        `the first candidate poll was due ${nextPoll.toFixed(0)} ms after the call`,
    );
    expect(next).toBeDefined();
    expect(next).not.toBe(old);
    expect(taken.at - t).toBeLessThan(HANDOVER_BOUND_MS);
    await sleep(300);
    expect(sampler.stop()).toBe(1);
    stopWatch();
    expect(released).toMatchObject({ duration: 1, transitions: 0 });
    expect(history.slice(releasedAt()).map((h) => h.holder)).toEqual(['', taken.holder]);
    expect(taken).toMatchObject({ duration: SLOW_POLL.leaseDurationMs / 1000, transitions: 1 });
    expect(next!.elector.isLeader()).toBe(true);
  });

  it('a replica started right after the lock was deleted does not lead while the old leader may still write (issue 28 defect 8)', async () => {
    // The old leader has no lock watch: it notices the deletion at its next renewal (<= 500 ms).
    const old = await replica('lock-deleted', 'replica-old', { lockWatch: false });
    old.elector.start();
    await waitUntil(() => old.elector.isLeader(), { timeoutMs: 5_000, what: 'the first leader' });
    await sleep(700);
    await cluster.admin.request({ method: 'DELETE', path: paths.lease(NS, 'lock-deleted') });
    const fresh = await replica('lock-deleted', 'replica-new'); // never saw the lock held
    fresh.elector.start();
    const sampler = fenceSampler([old, fresh]);
    await sleep(TIMING.leaseDurationMs + 2_000);
    expect(sampler.stop()).toBe(1);
    expect(old.elector.isLeader()).toBe(true);
    expect(fresh.elector.isLeader()).toBe(false);
    expect(fresh.elector.getLeader()).toBe(old.elector.identity);
    expect((await getLease('lock-deleted')).spec).toMatchObject({
      holderIdentity: old.elector.identity,
      leaseTransitions: 0,
    });
  });

  it('a leader that stops renewing (frozen, no release) is replaced within leaseDuration + 1 s, after its fence closed', async () => {
    const rs = await three('lock-frozen');
    const [old] = await waitUntil(() => (leaders(rs).length > 0 ? leaders(rs) : undefined), {
      timeoutMs: 5_000,
      what: 'a leader',
    });
    await sleep(1_200);
    const fenceWouldClose = old!.elector.fenceDeadline()!;
    const t = performance.now();
    old!.elector.stop(); // its loop stops; the lease is left as it was
    // Once the last renewal (maybe in flight at the stop) has reached everyone, note when each
    // candidate will judge the lease expired: its own observation time + leaseDuration.
    await sleep(300);
    const expiryOf = new Map(
      rs.map((r) => {
        const l = r.elector.snapshot().lock;
        return [r, l.kind === 'present' ? l.since + TIMING.leaseDurationMs : Number.NaN] as const;
      }),
    );
    const [next] = await waitUntil(() => (leaders(rs).length > 0 ? leaders(rs) : undefined), {
      timeoutMs: TIMING.leaseDurationMs + 3_000,
      what: 'a new leader',
    });
    const took = next!.startedAt()!;
    const afterExpiry = took - expiryOf.get(next!)!;
    console.log(
      `frozen leader replaced after ${(took - t).toFixed(0)} ms; ` +
        `${(took - fenceWouldClose).toFixed(0)} ms after its fence would have closed; ` +
        `${afterExpiry.toFixed(1)} ms after the lease expired as the winner observed it`,
    );
    expect(afterExpiry).toBeGreaterThanOrEqual(0);
    expect(afterExpiry).toBeLessThanOrEqual(100);
    expect(took - t).toBeLessThanOrEqual(TIMING.leaseDurationMs + 1_000);
    // The new leader cannot have started before the old one's fence (renewDeadline) closed.
    expect(took).toBeGreaterThan(fenceWouldClose);
    const lease = await getLease('lock-frozen');
    expect(lease.spec).toMatchObject({ holderIdentity: next!.elector.identity, leaseTransitions: 1 });
  });

  it('identity leases list every replica by label and show who leads', async () => {
    const rs = await three('lock-identity', { withIdentity: { gcAgeMs: 3_600_000 } });
    const selector = `${IDENTITY_LABEL}=node-lifecycle-controller`;
    const list = async () =>
      (
        await cluster.admin.request<List<Lease>>({
          method: 'GET',
          path: paths.leases(NS),
          query: { labelSelector: selector },
        })
      ).items;
    const [leader] = await waitUntil(() => (leaders(rs).length > 0 ? leaders(rs) : undefined), {
      timeoutMs: 5_000,
      what: 'a leader',
    });
    const items = await waitUntil(
      async () => {
        const it = await list();
        return it.length === 3 && it.filter((l) => l.metadata.labels?.[LEADER_LABEL] === 'true').length === 1
          ? it
          : undefined;
      },
      { timeoutMs: 5_000, what: 'three identity leases, one marked leader' },
    );
    expect(items.map((l) => l.metadata.name).sort()).toEqual(
      rs.map((r) => identityLeaseName('node-lifecycle-controller', r.host)).sort(),
    );
    expect(items.map((l) => l.spec?.holderIdentity).sort()).toEqual(rs.map((r) => r.elector.identity).sort());
    const marked = items.find((l) => l.metadata.labels?.[LEADER_LABEL] === 'true');
    expect(marked?.spec?.holderIdentity).toBe(leader!.elector.identity);
    expect(marked?.metadata.labels?.['kubernetes.io/hostname']).toBe(leader!.host);
    // kubectl get lease -l <identity>,<leader>=true finds exactly the leader.
    const onlyLeader = await cluster.admin.request<List<Lease>>({
      method: 'GET',
      path: paths.leases(NS),
      query: { labelSelector: `${selector},${LEADER_LABEL}=true` },
    });
    expect(onlyLeader.items.map((l) => l.spec?.holderIdentity)).toEqual([leader!.elector.identity]);

    // Leadership moves: the labels follow.
    await leader!.elector.release();
    const [next] = await waitUntil(() => (leaders(rs).length > 0 ? leaders(rs) : undefined), {
      timeoutMs: 3_000,
      what: 'a new leader',
    });
    await waitUntil(
      async () => {
        const it = await list();
        const trues = it.filter((l) => l.metadata.labels?.[LEADER_LABEL] === 'true');
        return trues.length === 1 && trues[0]?.spec?.holderIdentity === next!.elector.identity;
      },
      { timeoutMs: 3_000, what: 'the leader label to move' },
    );
  });

  it("a dead replica's identity lease is collected after the (shortened) GC age", async () => {
    const gcAgeMs = 3_000;
    const rs = await three('lock-gc', { withIdentity: { gcAgeMs } });
    const dead = rs[2]!;
    const name = identityLeaseName('node-lifecycle-controller', dead.host);
    await waitUntil(async () => (await getLease(name)).spec?.holderIdentity === dead.elector.identity, {
      timeoutMs: 5_000,
      what: 'the identity lease',
    });
    await sleep(1_000);
    dead.identity!.stop();
    dead.elector.stop();
    const t = performance.now();
    const gone = await waitUntil(
      async () => {
        const r = await cluster.admin.raw({ method: 'GET', path: paths.lease(NS, name) });
        return r.status === 404 ? performance.now() : undefined;
      },
      { timeoutMs: gcAgeMs + 5_000, intervalMs: 50, what: 'the dead lease to be collected' },
    );
    console.log(`dead identity lease collected ${(gone - t).toFixed(0)} ms after the replica stopped`);
    expect(gone - t).toBeGreaterThanOrEqual(gcAgeMs - 600); // its last renewal was <= 500 ms before the stop
    expect(gone - t).toBeLessThanOrEqual(gcAgeMs + 1_500);
    for (const r of rs.slice(0, 2)) {
      expect(
        (await getLease(identityLeaseName('node-lifecycle-controller', r.host))).spec?.holderIdentity,
      ).toBe(r.elector.identity);
    }
  });
});
