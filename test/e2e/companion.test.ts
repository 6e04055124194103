/**
 * Companion mode beside a live provider: upstream kube-controller-manager v1.37.2 runs its
 * node-lifecycle controller AT ITS DEFAULTS (grace 50s, monitor period 5s, QPS 20; with the
 * taint-eviction and EndpointSlice controllers), as on a managed control plane, and ours runs with
 * --mode=companion and a 5 s grace, both against a real kube-apiserver + etcd on loopback with
 * simulated kubelets. Judged on the test's own watches; the audit log (request bodies) shows what
 * each of our writes asked to change.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { type RunningController, startKcm } from '../../bench/compare/controllers.js';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { Companion } from '../../src/health/reasons.js';
import { KubeApiError, PatchType, paths } from '../../src/kube/client.js';
import type { Node, NodeCondition, Taint } from '../../src/kube/types.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { type ControllerProcess, startController } from '../support/controller-process.js';
import { EndpointsWatch } from '../support/endpoints.js';
import { ClusterObserver, readAuditLog } from '../support/observer.js';
import { rawWatch } from '../support/raw-watch.js';
import { sleep, waitUntil } from '../support/wait.js';

const GRACE_MS = 5000;
/** Our taint within our grace + this, from the last renewal to the taint, both seen by the test's watch. */
const OVERHEAD_MS = 250;
/** kube-controller-manager v1.37 defaults: --node-monitor-grace-period, --node-monitor-period. */
const KCM_GRACE_MS = 50_000;
const KCM_PERIOD_MS = 5000;
const KEY = Companion.DefaultTaintKey;
const OURS = `${KEY}:NoSchedule`;
const UR_NS = 'node.kubernetes.io/unreachable:NoSchedule';
const UR_NE = 'node.kubernetes.io/unreachable:NoExecute';
const CHURN = 'e2e.example.com/churn';
const OUR_UA = 'node-lifecycle-controller/';

let cluster: TestCluster;
let fleet: SimulatedFleet;
let observer: ClusterObserver;
let kcm: RunningController;
let logDir: string;
const stops: (() => void)[] = [];
/** Every version of every Node the test's watch saw, by `name@resourceVersion`. */
const versions = new Map<string, Node>();
let endpoints: EndpointsWatch;
/** node -> [time, our taint's value ('' or 'evicting'), undefined when absent] on each change. */
const ourTaint = new Map<string, { at: number; value: string | undefined }[]>();

const ourFlags = (extra: string[] = []) => [
  `--kubeconfig=${cluster.cp.kubeconfigPath}`,
  '--leader-elect=false',
  '--mode=companion',
  `--node-monitor-grace-period=${GRACE_MS / 1000}s`,
  '--node-startup-grace-period=10s',
  '--watch-silence-threshold=3s',
  ...extra,
];

/**
 * Starts ours and waits until it acts and every node renewed since: a controller judges staleness
 * from the renewals it saw itself, so a node whose last renewal came before ours started is given
 * a fresh grace from ours' start, and the grace would not be measured from the last renewal.
 */
async function startOurs(extra: string[] = []): Promise<ControllerProcess> {
  const ctl = await startController(ourFlags(extra));
  onTestFailed(() => console.log(`controller log summary:\n${ctl.summary()}`));
  await ctl.waitForLog('Acting: watches healthy and leading', 20_000);
  const acting = performance.now();
  await waitUntil(() => fleet.names.every((n) => (observer.lastRenewalAt(n) ?? 0) > acting + 50), {
    timeoutMs: 10_000,
    what: 'a renewal of every node after ours began to act',
  });
  return ctl;
}

const podOf = (node: string) => `default/${node}-pod-0`;
const serviceOf = (node: string) => `svc-${node}`;

/** First time after `since` that `f` held for the series. */
const firstAt = <T extends { at: number }>(s: T[] | undefined, since: number, f: (x: T) => boolean) =>
  s?.find((x) => x.at >= since && f(x))?.at;

/** A Service selecting the one pod of `node`: its EndpointSlice shows when traffic stops going there. */
async function serviceFor(node: string): Promise<void> {
  await cluster.admin.request({
    method: 'POST',
    path: '/api/v1/namespaces/default/services',
    body: {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: serviceOf(node) },
      spec: { selector: { 'sim.nlc.dev/node': node }, ports: [{ port: 80, targetPort: 8080 }] },
    },
  });
  await waitUntil(() => endpoints.readyNow(serviceOf(node)) === 1, {
    timeoutMs: 20_000,
    what: `${serviceOf(node)} with its one endpoint ready`,
  });
}

/**
 * Another writer of the node's taints (an operator, a third controller): read-modify-write with a
 * resourceVersion precondition, flipping its own taint back to back until stopped. Returns whether
 * its taint should be on the node now.
 */
function churn(node: string): { stop(): Promise<boolean> } {
  let running = true;
  let present = false;
  const loop = (async () => {
    while (running) {
      await sleep(5);
      const n = await cluster.admin.request<Node>({ method: 'GET', path: paths.node(node) });
      const others = (n.spec?.taints ?? []).filter((t) => t.key !== CHURN);
      const want: boolean = !present;
      try {
        await cluster.admin.request({
          method: 'PATCH',
          path: paths.node(node),
          contentType: PatchType.strategic,
          body: {
            metadata: { resourceVersion: n.metadata.resourceVersion },
            spec: { taints: want ? [...others, { key: CHURN, effect: 'NoSchedule' }] : others },
          },
        });
        present = want;
      } catch (err) {
        if (!(err instanceof KubeApiError && err.isConflict)) throw err;
      }
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return present;
    },
  };
}

/** Our node writes that got 409 Conflict and were re-read (nodes and nodes/status). */
async function conflictCount(ctl: ControllerProcess): Promise<number> {
  return (
    (await ctl.metric('nlc_write_conflicts_total', { resource: 'nodes' })) +
    (await ctl.metric('nlc_write_conflicts_total', { resource: 'nodes/status' }))
  );
}

/** Resumes the kubelets; resolves once Ready, with none of our marks nor the provider's taints. */
async function resumeUntilClean(nodes: string[]): Promise<number> {
  const resumedAt = performance.now();
  for (const n of nodes) fleet.node(n).resumeHeartbeats();
  for (const n of nodes) {
    await waitUntil(
      () => {
        const node = observer.nodes.get(n);
        const taints = observer.currentTaints(n);
        return (
          observer.readyStatus(n) === 'True' &&
          !taints.some((t) => t.startsWith('node.kubernetes.io/') || t.startsWith(KEY)) &&
          !node?.status?.conditions?.some((c) => c.type === Companion.ConditionType)
        );
      },
      { timeoutMs: 20_000, what: `${n} Ready, without our marks or the provider's taints` },
    );
  }
  return resumedAt;
}

beforeAll(async () => {
  cluster = await startCluster({ audit: true, auditBodies: true });
  fleet = await SimulatedFleet.start(cluster.admin, {
    nodes: 12,
    podsPerNode: 1,
    timing: { renewIntervalMs: 1000 },
  });
  observer = await ClusterObserver.start(cluster.admin);
  stops.push(
    await rawWatch<Node>(cluster.admin, paths.nodes(), (e) => {
      const name = e.object.metadata.name;
      versions.set(`${name}@${e.object.metadata.resourceVersion}`, e.object);
      const t = (e.object.spec?.taints ?? []).find((x) => x.key === KEY);
      const value = t ? (t.value ?? '') : undefined;
      const h = ourTaint.get(name) ?? [];
      if (h.length === 0 || h.at(-1)!.value !== value) ourTaint.set(name, [...h, { at: e.at, value }]);
    }),
  );
  endpoints = await EndpointsWatch.start(cluster.admin);
  logDir = mkdtempSync(path.join(os.tmpdir(), 'nlc-companion-e2e-'));
  kcm = await startKcm({
    kubeconfigPath: cluster.cp.kubeconfigPath,
    kcmDefaults: true,
    kcmControllers: ['node-lifecycle-controller', 'taint-eviction-controller', 'endpointslice-controller'],
    graceMs: KCM_GRACE_MS,
    startupGraceMs: 60_000,
    qps: 20,
    burst: 30,
    logDir,
  });
  await waitUntil(() => kcm.healthy(), { timeoutMs: 30_000, what: 'kube-controller-manager healthy' });
  await waitUntil(() => fleet.names.every((n) => observer.podReadyStatus(podOf(n)) === 'True'), {
    timeoutMs: 20_000,
    what: 'all pods Ready',
  });
}, 120_000);

afterAll(async () => {
  kcm?.process.kill('SIGKILL');
  for (const s of stops) s();
  endpoints?.close();
  observer?.stop();
  fleet?.stop();
  await cluster?.stop();
  if (logDir) rmSync(logDir, { recursive: true, force: true });
});

describe('companion mode beside kube-controller-manager at its defaults (real API server, 12 nodes, renew 1 s)', () => {
  /** Figures for the report, printed at the end of each test. */
  const figures: Record<string, number> = {};

  it('the provider alone marks a stopped kubelet at its own grace; the pod leaves its Service then', async () => {
    const n = 'sim-zone-a-000';
    await serviceFor(n);
    const paused = performance.now();
    fleet.node(n).pauseHeartbeats();
    await sleep(300);
    const last = observer.lastRenewalAt(n)!;
    await waitUntil(() => observer.taintsAt(n, [UR_NS], paused), {
      timeoutMs: KCM_GRACE_MS + KCM_PERIOD_MS + 10_000,
      what: `${n} marked by kube-controller-manager`,
    });
    await waitUntil(() => endpoints.goneAt(serviceOf(n), paused), {
      timeoutMs: 10_000,
      what: `${serviceOf(n)} without a ready endpoint`,
    });
    const unknown = observer.readyAt(n, 'Unknown', paused)! - last;
    figures.providerUnknownMs = unknown;
    figures.providerPodNotReadyMs =
      firstAt(observer.podReady.get(podOf(n)), paused, (x) => x.status === 'False')! - last;
    figures.providerEndpointGoneMs = endpoints.goneAt(serviceOf(n), paused)! - last;
    console.log(`provider alone: ${JSON.stringify(figures)}`);
    expect(unknown).toBeGreaterThanOrEqual(KCM_GRACE_MS - 50);
    expect(unknown).toBeLessThanOrEqual(KCM_GRACE_MS + KCM_PERIOD_MS + 1000);
    await resumeUntilClean([n]);
  });

  it("ours: our taint at our grace + <= 250 ms, the provider's at its own; other writers' taints kept; only our fields written; recovery cleans both", async () => {
    const ctl = await startOurs();
    const n = 'sim-zone-b-000';
    // A second node whose taints another writer flips back to back while we mark it.
    const raced = 'sim-zone-b-001';
    try {
      await serviceFor(n);
      const conflictsBefore = await conflictCount(ctl);
      const paused = performance.now();
      fleet.node(n).pauseHeartbeats();
      fleet.node(raced).pauseHeartbeats();
      await sleep(300);
      const last = observer.lastRenewalAt(n)!;
      await sleep(GRACE_MS - 1500);
      const other = churn(raced);
      await waitUntil(() => observer.taintsAt(n, [OURS], paused), {
        timeoutMs: GRACE_MS + 5000,
        what: 'our taint',
      });
      await waitUntil(() => observer.taintsAt(raced, [OURS], paused), {
        timeoutMs: 10_000,
        what: 'our taint on the raced node',
      });
      await sleep(1000);
      const churnPresent = await other.stop();
      const tainted = observer.taintsAt(n, [OURS], paused)! - last;
      figures.oursTaintMs = tainted;
      figures.oursPodNotReadyMs =
        firstAt(observer.podReady.get(podOf(n)), paused, (x) => x.status === 'False')! - last;
      await waitUntil(() => endpoints.goneAt(serviceOf(n), paused), {
        timeoutMs: 10_000,
        what: `${serviceOf(n)} without a ready endpoint`,
      });
      figures.oursEndpointGoneMs = endpoints.goneAt(serviceOf(n), paused)! - last;
      expect(tainted).toBeGreaterThanOrEqual(GRACE_MS - 50);
      expect(tainted).toBeLessThanOrEqual(GRACE_MS + OVERHEAD_MS);
      // No taint lost: the other writer's is there exactly when it last wrote it there, ours too.
      await sleep(500);
      expect(observer.currentTaints(raced).includes(`${CHURN}:NoSchedule`)).toBe(churnPresent);
      expect(observer.currentTaints(raced)).toContain(OURS);
      const marked = observer.nodes.get(n)!;
      const condition = marked.status?.conditions?.find((c) => c.type === Companion.ConditionType);
      expect(condition).toMatchObject({ status: 'True', reason: 'LeaseNotRenewed' });
      expect(condition?.message).toMatch(
        /^Lease kube-node-lease\/sim-zone-b-000 not renewed within 5s \(last renewal observed: .+\); marked by .+ in companion mode$/,
      );
      expect(observer.readyStatus(n), "Ready is still the provider's").toBe('True');
      // managedFields: of the node's conditions, ours owns only its own.
      const mine = (
        marked.metadata as { managedFields?: { manager: string; fieldsV1?: unknown }[] }
      ).managedFields?.filter((m) => m.manager === 'node-lifecycle-controller');
      const owned = JSON.stringify(mine?.map((m) => m.fieldsV1));
      expect(owned).toContain(`k:{\\"type\\":\\"${Companion.ConditionType}\\"}`);
      expect(owned).not.toMatch(
        /k:\{\\"type\\":\\"(Ready|MemoryPressure|DiskPressure|PIDPressure|NetworkUnavailable)\\"\}/,
      );

      // The provider marks the node at its own grace, beside ours.
      for (const x of [n, raced]) {
        await waitUntil(() => observer.taintsAt(x, [UR_NS, UR_NE, OURS], paused), {
          timeoutMs: KCM_GRACE_MS + KCM_PERIOD_MS + 10_000,
          what: `the provider's taints beside ours on ${x}`,
        });
      }
      expect(observer.currentTaints(raced).includes(`${CHURN}:NoSchedule`)).toBe(churnPresent);
      const unknown = observer.readyAt(n, 'Unknown', paused)! - last;
      figures.providerBesideOursUnknownMs = unknown;
      expect(unknown).toBeGreaterThanOrEqual(KCM_GRACE_MS - 50);
      expect(unknown).toBeLessThanOrEqual(KCM_GRACE_MS + KCM_PERIOD_MS + 1000);

      const resumed = await resumeUntilClean([n, raced]);
      figures.oursClearedAfterResumeMs = observer.taintsGoneAt(n, [OURS], resumed)! - resumed;
      expect(observer.currentTaints(raced).includes(`${CHURN}:NoSchedule`)).toBe(churnPresent);

      // Conflicts: each 409 our node writes got is in the audit log and counted.
      const conflicts = (await conflictCount(ctl)) - conflictsBefore;
      const audit = readAuditLog(cluster.cp.auditLogPath!);
      const ours = audit.filter(
        (e) => (e.userAgent ?? '').startsWith(OUR_UA) && e.stage === 'ResponseComplete',
      );
      const refused = ours.filter((e) => e.objectRef?.resource === 'nodes' && e.responseStatus?.code === 409);
      figures.ourConflicts = conflicts;
      expect(conflicts).toBe(refused.length);
      expect(conflicts, 'our writes raced the other writer').toBeGreaterThanOrEqual(1);

      // Every write of ours, from the request bodies: only our condition, our taint, pods' Ready=False
      // and our Events; a taints patch carries every other taint as the node had it at the
      // resourceVersion it was conditioned on.
      const problems: string[] = [];
      const notOurs = (ts: Taint[] | undefined) => JSON.stringify((ts ?? []).filter((t) => t.key !== KEY));
      for (const e of ours) {
        const ref = e.objectRef ?? {};
        const body = e.requestObject as {
          metadata?: { resourceVersion?: string };
          spec?: { taints?: Taint[] };
          status?: { conditions?: NodeCondition[] };
          reason?: string;
          source?: { component?: string };
        };
        const what = `${e.verb} ${ref.resource}/${ref.subresource ?? ''} ${ref.name ?? ''}`;
        if (ref.resource === 'nodes' && ref.subresource === 'status') {
          const types = (body.status?.conditions ?? []).map((c) => c.type);
          if (types.some((t) => t !== Companion.ConditionType)) problems.push(`${what}: conditions ${types}`);
        } else if (ref.resource === 'nodes' && !ref.subresource) {
          if (Object.keys(body.spec ?? {}).join() !== 'taints')
            problems.push(`${what}: ${JSON.stringify(body.spec)}`);
          const before = versions.get(`${ref.name}@${body.metadata?.resourceVersion}`);
          if (!before)
            problems.push(`${what}: the test never saw resourceVersion ${body.metadata?.resourceVersion}`);
          else if (notOurs(body.spec?.taints) !== notOurs(before.spec?.taints)) {
            problems.push(
              `${what}: other taints ${notOurs(before.spec?.taints)} -> ${notOurs(body.spec?.taints)}`,
            );
          }
        } else if (ref.resource === 'pods' && ref.subresource === 'status') {
          const conditions = (body.status?.conditions ?? []).map((c) => `${c.type}=${c.status}`);
          if (conditions.join() !== 'Ready=False') problems.push(`${what}: ${conditions}`);
        } else if (ref.resource === 'events') {
          if (e.verb === 'create' && !['NodeLeaseExpired', 'NodeLeaseRenewed'].includes(body.reason ?? '')) {
            problems.push(`${what}: reason ${body.reason}`);
          }
          if (e.verb === 'create' && body.source?.component !== 'node-lifecycle-controller') {
            problems.push(`${what}: source ${body.source?.component}`);
          }
        } else problems.push(`${what}: not a write companion mode makes`);
      }
      expect(problems).toEqual([]);
      expect(
        ours.some((e) => e.objectRef?.resource === 'nodes' && e.objectRef.subresource === 'status'),
      ).toBe(true);
      console.log(`beside the provider: ${JSON.stringify(figures)}`);
    } finally {
      await ctl.kill();
    }
  });

  it('a zone outage evicts nothing beyond the zone rate (--companion-evict-after=1s; 0.1 node/s in a fully disrupted zone)', async () => {
    const ctl = await startOurs(['--companion-evict-after=1s']);
    const zone = fleet.names.filter((n) => n.startsWith('sim-zone-c-'));
    try {
      const paused = performance.now();
      for (const n of zone) fleet.node(n).pauseHeartbeats();
      await sleep(GRACE_MS + 1000 + 25_000);
      const began = zone
        .map((n) => firstAt(ourTaint.get(n), paused, (x) => x.value === 'evicting'))
        .filter((t): t is number => t !== undefined)
        .sort((a, b) => a - b);
      console.log(
        `zone outage: evictions began ${began.map((t) => Math.round(t - paused)).join(', ')} ms after the kubelets stopped`,
      );
      for (const n of zone)
        expect(
          firstAt(ourTaint.get(n), paused, (x) => x.value === ''),
          n,
        ).toBeDefined();
      // At most one token at once, then one per 10 s (0.1 node/s in a fully disrupted zone while
      // others are healthy): never more than three nodes in these 31 s, never two within 10 s. The
      // first waits 10 s when the zone passed through PartialDisruption on its way (3 of 4 lost
      // before the 4th: rate 0 in a zone of <= 50 nodes), as upstream's SwapLimiter starts the new
      // limiter drained; it comes at once when the zone went straight to FullDisruption.
      expect(began.length).toBeGreaterThanOrEqual(2);
      expect(began.length).toBeLessThanOrEqual(3);
      // None before the node's grace + the 1 s delay ran out, the grace counted from the last renewal
      // this observer saw (the claim: evict this long after the grace ran out; the taint itself may
      // land some 100-200 ms after the deadline under load, so it is not the origin).
      for (const n of zone) {
        const evictingAt = firstAt(ourTaint.get(n), paused, (x) => x.value === 'evicting');
        if (evictingAt === undefined) continue;
        expect(evictingAt - (observer.lastRenewalAt(n)! + GRACE_MS), n).toBeGreaterThanOrEqual(1000 - 50);
      }
      for (let i = 1; i < began.length; i++)
        expect(began[i]! - began[i - 1]!).toBeGreaterThanOrEqual(10_000 - 100);
      // Pods were evicted on exactly those nodes.
      const evicting = zone.filter((n) => firstAt(ourTaint.get(n), paused, (x) => x.value === 'evicting'));
      for (const n of zone) {
        expect(observer.podDeletedAt(podOf(n), paused) !== undefined, n).toBe(evicting.includes(n));
      }
      expect(await ctl.metric('nlc_transitions_total', { kind: 'pods_evicted' })).toBe(began.length);
      expect(await ctl.metric('node_collector_evictions_total')).toBe(began.length);
    } finally {
      await ctl.kill();
    }
  });
});
