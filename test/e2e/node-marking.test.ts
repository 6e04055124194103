import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { ApiWriter, createWriterMetrics } from '../../src/apply/writer.js';
import { systemClock } from '../../src/clock/clock.js';
import { parseDuration } from '../../src/clock/duration.js';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { PatchType, paths } from '../../src/kube/client.js';
import type { Node, Pod } from '../../src/kube/types.js';
import { memoryLogger } from '../../src/log/logger.js';
import { createRegistry } from '../../src/metrics/registry.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { type ControllerProcess, startController } from '../support/controller-process.js';
import { auditWrites, ClusterObserver } from '../support/observer.js';
import { sleep, waitUntil } from '../support/wait.js';

const GRACE_MS = 5000;
/**
 * The claim: a lost node is marked milliseconds after its grace period (docs/benchmarks.md: p99 13
 * ms at 100 nodes). Judged here by the test's own watch, from the last renewal it saw to the Ready=
 * Unknown it saw, on a shared 2-core machine that also runs etcd, kube-apiserver and 30 kubelets.
 */
const OVERHEAD_P99_MS = 250;
const UR_NS = 'node.kubernetes.io/unreachable:NoSchedule';
const UR_NE = 'node.kubernetes.io/unreachable:NoExecute';
const CONTROLLER_UA = 'node-lifecycle-controller/';

let cluster: TestCluster;
let fleet: SimulatedFleet;
let observer: ClusterObserver;

const controllerFlags = (extra: string[] = []) => [
  `--kubeconfig=${cluster.cp.kubeconfigPath}`,
  '--leader-elect=false',
  `--node-monitor-grace-period=${GRACE_MS / 1000}s`,
  '--node-startup-grace-period=10s',
  '--watch-silence-threshold=3s',
  ...extra,
];

/** The kubelets of `nodes` post again; resolves once the observer sees every one Ready without a health taint. */
async function resumeUntilReady(nodes: string[]): Promise<void> {
  const resumedAt = performance.now();
  for (const n of nodes) fleet.node(n).resumeHeartbeats();
  for (const n of nodes) {
    await waitUntil(
      () =>
        observer.readyAt(n, 'True', resumedAt) !== undefined &&
        !observer.currentTaints(n).some((t) => t.startsWith('node.kubernetes.io/')),
      {
        timeoutMs: 15_000,
        what: `${n} Ready and untainted again (Ready ${observer.readyStatus(n)}, taints ${observer.currentTaints(n).join(',')})`,
      },
    );
  }
}

/** The kubelets of `nodes` post again; resolves once our unreachable taints are gone from all. */
async function resumeUntilUntainted(nodes: string[]): Promise<number> {
  const resumedAt = performance.now();
  for (const n of nodes) fleet.node(n).resumeHeartbeats();
  for (const n of nodes) {
    await waitUntil(() => observer.taintsGoneAt(n, [UR_NS, UR_NE], resumedAt), {
      timeoutMs: 10_000,
      what: `${n} taints removed`,
    });
  }
  return resumedAt;
}

async function startActing(extra: string[] = []): Promise<ControllerProcess> {
  const ctl = await startController(controllerFlags(extra));
  onTestFailed(() => console.log(`controller log summary:\n${ctl.summary()}`));
  await ctl.waitForLog('Acting: watches healthy and leading', 20_000);
  return ctl;
}

beforeAll(async () => {
  cluster = await startCluster({ audit: true });
  fleet = await SimulatedFleet.start(cluster.admin, {
    nodes: 30,
    podsPerNode: 1,
    timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 1000 },
  });
  observer = await ClusterObserver.start(cluster.admin);
  // Four nodes with skewed clocks: two of them will fail, two stay healthy.
  fleet.node('sim-zone-a-001').stepClock(10 * 60_000);
  fleet.node('sim-zone-b-001').stepClock(-10 * 60_000);
  fleet.node('sim-zone-a-005').stepClock(10 * 60_000);
  fleet.node('sim-zone-c-005').stepClock(-10 * 60_000);
  await waitUntil(() => fleet.names.every((n) => observer.podReadyStatus(`default/${n}-pod-0`) === 'True'), {
    timeoutMs: 20_000,
    what: 'all pods Ready',
  });
});

afterAll(async () => {
  observer?.stop();
  fleet?.stop();
  await cluster?.stop();
});

describe('marking lost nodes (real API server, 30 simulated nodes, grace 5 s, renew 1 s)', () => {
  it('marks exactly the 3 silent nodes within grace + 250 ms, marks their pods, and undoes it on recovery', async () => {
    const controllerStarted = performance.now();
    const ctl = await startActing();
    const failing = ['sim-zone-a-001', 'sim-zone-b-001', 'sim-zone-c-003']; // +10 min, -10 min, no skew
    try {
      await sleep(2000);
      const failedAt = performance.now();
      for (const n of failing) fleet.node(n).pauseHeartbeats();
      await sleep(300); // a renewal already in flight may still land
      const lastRenewal = new Map(failing.map((n) => [n, observer.lastRenewalAt(n)!]));

      for (const n of failing) {
        await waitUntil(() => observer.taintsAt(n, [UR_NS, UR_NE], failedAt), {
          timeoutMs: GRACE_MS + 5000,
          what: `${n} Unknown with both unreachable taints`,
        });
        const unknownAt = observer.readyAt(n, 'Unknown', failedAt)!;
        const taintedAt = observer.taintsAt(n, [UR_NS, UR_NE], failedAt)!;
        const since = lastRenewal.get(n)!;
        console.log(
          `${n}: Unknown ${Math.round(unknownAt - since)} ms and tainted ${Math.round(taintedAt - since)} ms after its last renewal`,
        );
        expect(unknownAt - since).toBeGreaterThanOrEqual(GRACE_MS - 50);
        expect(unknownAt - since).toBeLessThanOrEqual(GRACE_MS + OVERHEAD_P99_MS);
        // The taints are the next writes of the same reconcile, after the Unknown marks of the other
        // nodes that died at the same moment: under a load of ~15 here, writes took 50-100 ms each
        // and one node's taints landed 464 ms after its Unknown.
        expect(taintedAt - since).toBeLessThanOrEqual(GRACE_MS + 1000);
        const node = observer.nodes.get(n)!;
        const ready = node.status?.conditions?.find((c) => c.type === 'Ready');
        expect(ready).toMatchObject({
          status: 'Unknown',
          reason: 'NodeStatusUnknown',
          message: 'Kubelet stopped posting node status.',
        });
        for (const t of ['MemoryPressure', 'DiskPressure', 'PIDPressure']) {
          expect(node.status?.conditions?.find((c) => c.type === t)?.status).toBe('Unknown');
        }
        expect(node.status?.conditions?.find((c) => c.type === 'NetworkUnavailable')?.status).toBe('False');
        await waitUntil(() => observer.podReadyStatus(`default/${n}-pod-0`) === 'False', {
          timeoutMs: 3000,
          what: `${n}'s pod Ready=False`,
        });
      }
      // The other 27 nodes and their pods were never touched.
      for (const n of fleet.names.filter((x) => !failing.includes(x))) {
        expect(observer.everSawReady(n, 'Unknown'), n).toBe(false);
        // (kube-apiserver's TaintNodesByCondition admission adds not-ready:NoSchedule to new nodes;
        // we only check that nothing was ADDED once our controller runs, and that none is left.)
        expect(observer.taintsAddedSince(n, 'node.kubernetes.io/', controllerStarted), n).toEqual([]);
        expect(observer.currentTaints(n), n).toEqual([]);
        expect(observer.podReadyStatus(`default/${n}-pod-0`), n).toBe('True');
      }
      // Events were recorded for the node and its pod (written asynchronously, best effort).
      const eventFor = async (object: string) =>
        (
          await cluster.admin.request<{
            items: { reason: string; source?: { component?: string }; involvedObject: { name: string } }[];
          }>({
            method: 'GET',
            path: '/api/v1/events',
          })
        ).items.some(
          (e) =>
            e.reason === 'NodeNotReady' &&
            e.involvedObject.name === object &&
            e.source?.component === 'node-controller',
        );
      await waitUntil(() => eventFor(failing[0]!), {
        timeoutMs: 5000,
        what: 'NodeNotReady event on the node',
      }).catch(async (err: Error) => {
        const ev = await cluster.admin.request<{ items: unknown[] }>({
          method: 'GET',
          path: '/api/v1/events',
        });
        throw new Error(
          `${err.message}\nevents: ${JSON.stringify(
            ev.items.map((e) => {
              const x = e as { reason: string; involvedObject: { name: string }; source?: unknown };
              return [x.reason, x.involvedObject.name, x.source];
            }),
          )}\nlogs: ${JSON.stringify(ctl.logs.filter((l) => l.level !== 'info' || String(l.msg).includes('Marked')))}`,
        );
      });
      await waitUntil(() => eventFor(`${failing[0]}-pod-0`), {
        timeoutMs: 5000,
        what: 'NodeNotReady event on the pod',
      });
      expect(await ctl.metric('nlc_transitions_total', { kind: 'marked_unknown' })).toBe(3);
      expect(await ctl.metric('nlc_detection_latency_seconds_count')).toBe(3);

      // Someone else's taint on a lost node survives our changes.
      await cluster.admin.request({
        method: 'PATCH',
        path: paths.node(failing[2]!),
        contentType: PatchType.strategic,
        body: {
          spec: {
            taints: [
              ...(observer.nodes.get(failing[2]!)?.spec?.taints ?? []),
              { key: 'example.com/maintenance', effect: 'NoSchedule' },
            ],
          },
        },
      });

      // Recovery: the kubelet posts Ready, we remove our taints within 2 s of that.
      const resumedAt = await resumeUntilUntainted(failing);
      for (const n of failing) {
        const readyAt = observer.readyAt(n, 'True', resumedAt)!;
        const cleanAt = observer.taintsGoneAt(n, [UR_NS, UR_NE], resumedAt)!;
        console.log(
          `${n}: Ready again ${Math.round(readyAt - resumedAt)} ms after resume, taints gone ${Math.round(cleanAt - readyAt)} ms later`,
        );
        expect(cleanAt - readyAt).toBeLessThanOrEqual(2000);
      }
      expect(observer.currentTaints(failing[2]!)).toEqual(['example.com/maintenance:NoSchedule']);
      expect(await ctl.metric('nlc_transitions_total', { kind: 'taint_removed' })).toBeGreaterThanOrEqual(6);
      expect(ctl.logs.filter((l) => l.level === 'error')).toEqual([]);
    } finally {
      // A failure above must not leave these nodes silent for the tests after this one.
      for (const n of failing) fleet.node(n).resumeHeartbeats();
      await ctl.kill();
    }
  });

  it('with --watch-read-interval=200ms: marks exactly the 2 silent nodes within grace + 200 ms + 250 ms, and the event-loop series tick at 200 ms', async () => {
    const controllerStarted = performance.now();
    const ctl = await startActing(['--watch-read-interval=200ms']);
    const failing = ['sim-zone-b-004', 'sim-zone-c-004'];
    try {
      expect(ctl.logs.find((l) => l.msg === 'Starting')).toMatchObject({ watchReadInterval: '200ms' });
      await sleep(2000);
      const failedAt = performance.now();
      for (const n of failing) fleet.node(n).pauseHeartbeats();
      await sleep(300); // a renewal already in flight may still land
      for (const n of failing) {
        await waitUntil(() => observer.taintsAt(n, [UR_NS, UR_NE], failedAt), {
          timeoutMs: GRACE_MS + 5000,
          what: `${n} Unknown with both unreachable taints`,
        });
        const since = observer.lastRenewalAt(n)!;
        const unknownAt = observer.readyAt(n, 'Unknown', failedAt)!;
        console.log(`paced ${n}: Unknown ${Math.round(unknownAt - since)} ms after its last renewal`);
        // Seen up to one interval late, so marked up to that much later; never earlier.
        expect(unknownAt - since).toBeGreaterThanOrEqual(GRACE_MS - 50);
        expect(unknownAt - since).toBeLessThanOrEqual(GRACE_MS + 200 + OVERHEAD_P99_MS);
      }
      // (Earlier tests in this file marked other nodes: look only at what happened since this start.)
      for (const n of fleet.names.filter((x) => !failing.includes(x))) {
        expect(observer.readyAt(n, 'Unknown', controllerStarted), n).toBeUndefined();
        expect(observer.taintsAddedSince(n, 'node.kubernetes.io/', controllerStarted), n).toEqual([]);
      }
      expect(await ctl.metric('nlc_transitions_total', { kind: 'marked_unknown' })).toBe(2);
      // The event-loop samples ride on the read ticks: about 200 ms between two.
      const p50 = await ctl.metric('nodejs_eventloop_lag_p50_seconds');
      expect(p50).toBeGreaterThanOrEqual(0.19);
      expect(p50).toBeLessThan(0.5);
      expect(ctl.logs.filter((l) => l.level === 'error')).toEqual([]);

      await resumeUntilUntainted(failing);
    } finally {
      for (const n of failing) fleet.node(n).resumeHeartbeats();
      await ctl.kill();
    }
  });

  it(`marks 24 nodes lost one after another, each at most ${OVERHEAD_P99_MS} ms past its grace (p99, judged on the test's own watch)`, async () => {
    const controllerStarted = performance.now();
    const ctl = await startActing();
    // Eight of each zone's ten: every zone ends fully disrupted, which holds NoExecute taints back
    // but never the Unknown mark this measures.
    const failing = fleet.names.filter((n) => Number(n.slice(-3)) < 8);
    expect(failing).toHaveLength(24);
    try {
      await sleep(2000);
      const failedAt = performance.now();
      // One every 150 ms: each deadline is its own, as nodes are lost one by one.
      for (const n of failing) {
        fleet.node(n).pauseHeartbeats();
        await sleep(150);
      }
      await sleep(300); // a renewal already in flight may still land
      const overheads: number[] = [];
      for (const n of failing) {
        const since = observer.lastRenewalAt(n)!;
        const unknownAt = await waitUntil(() => observer.readyAt(n, 'Unknown', failedAt), {
          timeoutMs: GRACE_MS + 10_000,
          what: `${n} Unknown`,
        });
        expect(unknownAt - since, n).toBeGreaterThanOrEqual(GRACE_MS - 50);
        overheads.push(unknownAt - since - GRACE_MS);
      }
      const sorted = [...overheads].sort((a, b) => a - b);
      const p = (q: number) => sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;
      console.log(
        `marking overhead past grace over ${sorted.length} nodes: p50 ${Math.round(p(0.5))} ms, ` +
          `p99 ${Math.round(p(0.99))} ms, max ${Math.round(sorted.at(-1)!)} ms`,
      );
      expect(p(0.99)).toBeLessThanOrEqual(OVERHEAD_P99_MS);
      for (const n of fleet.names.filter((x) => !failing.includes(x))) {
        expect(observer.readyAt(n, 'Unknown', controllerStarted), n).toBeUndefined();
      }
      await resumeUntilReady(failing);
    } finally {
      for (const n of failing) fleet.node(n).resumeHeartbeats();
      await ctl.kill();
    }
  });

  it('never marks a healthy node while kube-apiserver is paused for 3x the grace period', async () => {
    const ctl = await startActing();
    try {
      await sleep(2000);
      const before = auditWrites(cluster.cp.auditLogPath!, CONTROLLER_UA).length;
      const t0 = performance.now();
      cluster.cp.pauseApiServer();
      await sleep(3 * GRACE_MS);
      cluster.cp.resumeApiServer();
      // Long enough for any wrong decision to land.
      await sleep(2 * GRACE_MS);
      for (const n of fleet.names) expect(observer.readyAt(n, 'Unknown', t0), n).toBeUndefined();
      const writes = auditWrites(cluster.cp.auditLogPath!, CONTROLLER_UA).slice(before);
      const nodeWrites = writes.filter((w) => ['nodes', 'pods'].includes(w.objectRef?.resource ?? ''));
      expect(nodeWrites).toEqual([]);
      const blind = ctl.logs.find((l) => l.msg === 'Blind: the lease watch is not healthy, marking nothing');
      expect(blind).toBeDefined();
      // Sight came back with every deadline moved by the blind time, which began no later than
      // the pause (a silent watch counts from its last contact) and ended after it.
      expect(
        ctl.logs.some(
          (l) =>
            l.msg === 'Acting: watches healthy and leading' &&
            l.freshGrace === false &&
            typeof l.blindFor === 'string' &&
            parseDuration(l.blindFor) >= 3 * GRACE_MS - 100,
        ),
        JSON.stringify(ctl.logs.filter((l) => l.msg === 'Acting: watches healthy and leading')),
      ).toBe(true);
    } finally {
      await ctl.kill();
    }
  });

  it('dry-run computes, logs and counts the same failure but writes nothing to Nodes or Pods', async () => {
    const ctl = await startActing(['--dry-run']);
    const n = 'sim-zone-b-004';
    try {
      await sleep(1500);
      const before = auditWrites(cluster.cp.auditLogPath!, CONTROLLER_UA).length;
      fleet.node(n).pauseHeartbeats();
      await sleep(500);
      const rv = (await cluster.admin.request<Node>({ method: 'GET', path: paths.node(n) })).metadata
        .resourceVersion;
      await ctl.waitForLog('Dry run: would mark node Unknown', GRACE_MS + 5000, (l) => l.node === n);
      await ctl.waitForLog('Dry run: would mark pod not ready', 5000, (l) => l.node === n);
      await sleep(1000);
      expect(await ctl.metric('nlc_transitions_total', { kind: 'marked_unknown' })).toBe(1);
      expect(await ctl.metric('nlc_writes_total', { outcome: 'dry-run' })).toBeGreaterThanOrEqual(2);
      expect(await ctl.metric('nlc_writes_total', { outcome: 'applied' })).toBe(0);
      const after = (await cluster.admin.request<Node>({ method: 'GET', path: paths.node(n) })).metadata
        .resourceVersion;
      expect(after).toBe(rv);
      expect(auditWrites(cluster.cp.auditLogPath!, CONTROLLER_UA).slice(before)).toEqual([]);
      expect(observer.podReadyStatus(`default/${n}-pod-0`)).toBe('True');
    } finally {
      fleet.node(n).resumeHeartbeats();
      await ctl.kill();
    }
  });

  it('finishes marking pods after a restart, from what the cluster shows (not from memory)', async () => {
    const n = 'sim-zone-c-007';
    // A previous controller marked the node Unknown and died before its pods were marked.
    fleet.node(n).pauseHeartbeats();
    await sleep(300);
    await cluster.admin.request({
      method: 'PATCH',
      path: paths.nodeStatus(n),
      contentType: PatchType.strategic,
      body: {
        status: {
          conditions: [
            {
              type: 'Ready',
              status: 'Unknown',
              reason: 'NodeStatusUnknown',
              message: 'Kubelet stopped posting node status.',
            },
          ],
        },
      },
    });
    await sleep(500);
    expect(observer.podReadyStatus(`default/${n}-pod-0`)).toBe('True');
    const ctl = await startActing();
    const actingAt = performance.now();
    try {
      // A new controller knows nothing of how long the node has been silent: it gives it a fresh
      // grace, and marks the pods once the node is lost on its own clock (never on a mark whose
      // kubelet may have renewed since).
      await waitUntil(() => observer.podReadyStatus(`default/${n}-pod-0`) === 'False', {
        timeoutMs: GRACE_MS + 5000,
        what: 'leftover pod marked not ready by the new controller',
      });
      expect(performance.now() - actingAt).toBeGreaterThan(GRACE_MS - 1000);
      const pod = await cluster.admin.request<Pod>({
        method: 'GET',
        path: paths.pod('default', `${n}-pod-0`),
      });
      expect(pod.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('False');
    } finally {
      fleet.node(n).resumeHeartbeats();
      await ctl.kill();
    }
  });

  it('a concurrent writer adding its own taint during our taint update: both taints survive', async () => {
    const n = 'sim-zone-a-007';
    const client = await cluster.cp.client();
    const writer = new ApiWriter({
      client,
      fence: () => undefined,
      dryRun: false,
      logger: memoryLogger(),
      metrics: createWriterMetrics(createRegistry({ defaultMetrics: false })),
      clock: systemClock,
      qps: 100,
      burst: 100,
      component: 'node-controller',
      instance: 'e2e',
    });
    try {
      // The concurrent write lands between our read and our write.
      const stale = await client.request<Node>({ method: 'GET', path: paths.node(n) });
      await cluster.admin.request({
        method: 'PATCH',
        path: paths.node(n),
        contentType: PatchType.strategic,
        body: {
          spec: {
            taints: [...(stale.spec?.taints ?? []), { key: 'example.com/theirs', effect: 'NoSchedule' }],
          },
        },
      });
      const seen: string[][] = [];
      const res = await writer.patchNode(n, stale, (current) => {
        seen.push((current.spec?.taints ?? []).map((t) => t.key));
        const taints = current.spec?.taints ?? [];
        if (taints.some((t) => t.key === 'node.kubernetes.io/unreachable')) return undefined;
        return {
          spec: { taints: [...taints, { key: 'node.kubernetes.io/unreachable', effect: 'NoSchedule' }] },
        };
      });
      expect(res).toMatchObject({ kind: 'applied', attempts: 2 });
      expect(seen).toEqual([[], ['example.com/theirs']]);
      const final = await client.request<Node>({ method: 'GET', path: paths.node(n) });
      expect((final.spec?.taints ?? []).map((t) => t.key).sort()).toEqual([
        'example.com/theirs',
        'node.kubernetes.io/unreachable',
      ]);
    } finally {
      await cluster.admin.request({
        method: 'PATCH',
        path: paths.node(n),
        contentType: PatchType.merge,
        body: { spec: { taints: null } },
      });
      client.close();
    }
  });
});
