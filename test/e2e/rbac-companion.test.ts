/**
 * RBAC of manifests/overlays/companion with manifests/components/companion-evictions, end to end on a
 * real kube-apiserver, proven against the base: both installs are applied server-side (each moved to
 * its own namespace by `namespace:`), and the companion ServiceAccount's rules are exactly the base
 * ServiceAccount's (which test/e2e/rbac.test.ts proves are exactly what the code calls) plus create
 * on pods/eviction. The BUILT controller then runs in companion mode with evictions, with a token of
 * the companion ServiceAccount, and does its whole job (our condition and taint, pods Ready=False,
 * evictions, Events, recovery) without one 401 or 403.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { Companion } from '../../src/health/reasons.js';
import { KubeClient, type KubeRequest, paths } from '../../src/kube/client.js';
import { ApiResolver, type Manifest, serverSideApply } from '../support/apply.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { startController } from '../support/controller-process.js';
import { kustomizeOverlay } from '../support/kubectl.js';
import { ClusterObserver, readAuditLog } from '../support/observer.js';
import {
  expandNonResourceRules,
  expandResourceRules,
  mapLimited,
  requestServiceAccountToken,
  selfSubjectRules,
  serviceAccountUser,
  writeTokenKubeconfig,
} from '../support/rbac.js';
import { sleep, waitUntil } from '../support/wait.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const BASE = path.join(ROOT, 'manifests', 'base');
const COMPANION = path.join(ROOT, 'manifests', 'overlays', 'companion');
const EVICTIONS = path.join(ROOT, 'manifests', 'components', 'companion-evictions');
const FIELD_MANAGER = 'nlc-rbac-companion-e2e';
const SA = 'node-lifecycle-controller';
/** The base install (the reference) and the companion install, each in its own namespace. */
const BASE_NS = 'nlc-upstream';
const NS = 'nlc-companion';
const POD_NS = 'rbac-companion-workloads';
const POD_NAME = 'node-lifecycle-controller-6c9d8e7f5-cmp00';
const CONTROLLER_UA = 'node-lifecycle-controller/';
const PROBE_UA = 'nlc-rbac-companion-e2e-probe';
const GRACE_MS = 5000;
const OURS = `${Companion.DefaultTaintKey}:NoSchedule`;
/** Two lost nodes in different zones: each zone's limiter admits its evictions at once. */
const FAILING = ['sim-zone-a-000', 'sim-zone-b-001'];
/** What the evictions component adds to the base, and nothing else. */
const EXTRA = 'core/pods/eviction:create';

let cluster: TestCluster;
let fleet: SimulatedFleet;
let observer: ClusterObserver;
let tmp: string;
const clients: KubeClient[] = [];

/** The `<group>/<resource>:<verb>` a ServiceAccount's token may use in `ns`, beyond what any token may. */
async function granted(client: KubeClient, baseline: KubeClient, ns: string): Promise<string[]> {
  const mine = await selfSubjectRules(client, ns);
  const base = await selfSubjectRules(baseline, ns);
  expect(mine.incomplete, ns).toBe(false);
  expect([...expandNonResourceRules(mine.nonResourceRules)].sort()).toEqual(
    [...expandNonResourceRules(base.nonResourceRules)].sort(),
  );
  const floor = expandResourceRules(base.resourceRules);
  return [...expandResourceRules(mine.resourceRules)].filter((p) => !floor.has(p)).sort();
}

async function tokenClient(ns: string, name: string): Promise<KubeClient> {
  const c = await KubeClient.fromKubeConfig(
    cluster.cp.kubeConfigForToken(await requestServiceAccountToken(cluster.admin, ns, name), name),
    { userAgent: PROBE_UA },
  );
  clients.push(c);
  return c;
}

beforeAll(async () => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'nlc-rbac-companion-e2e-'));
  cluster = await startCluster({ audit: true, auditReads: true });
  const resolver = new ApiResolver(cluster.admin);
  for (const [namespace, resources, components] of [
    [BASE_NS, [BASE], []],
    [NS, [COMPANION], [EVICTIONS]],
  ] as const) {
    // Cluster-scoped objects share their names between installs: the second takes them over, so the
    // reference install's ClusterRole and binding are renamed apart first.
    const objects = kustomizeOverlay({
      resources: [...resources],
      components: [...components],
      namespace,
    }).map((o) => (namespace === BASE_NS ? renameClusterScoped(o) : o));
    for (const o of objects) await serverSideApply(cluster.admin, resolver, o, FIELD_MANAGER);
  }
  await cluster.admin.request({
    method: 'POST',
    path: paths.namespaces(),
    body: { metadata: { name: POD_NS } },
  });
  fleet = await SimulatedFleet.start(cluster.admin, {
    nodes: 6,
    podsPerNode: 1,
    podNamespace: POD_NS,
    timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 1000 },
  });
  observer = await ClusterObserver.start(cluster.admin);
  await waitUntil(
    () => fleet.names.every((n) => observer.podReadyStatus(`${POD_NS}/${n}-pod-0`) === 'True'),
    {
      timeoutMs: 20_000,
      what: 'all pods Ready',
    },
  );
}, 120_000);

/** The reference install's cluster-scoped RBAC under its own names (the companion install keeps the shipped ones). */
function renameClusterScoped(o: Manifest): Manifest {
  if (o.kind !== 'ClusterRole' && o.kind !== 'ClusterRoleBinding') return o;
  const copy = structuredClone(o) as Manifest & { roleRef?: { name: string } };
  copy.metadata.name = `${BASE_NS}:${copy.metadata.name}`;
  if (copy.roleRef) copy.roleRef.name = `${BASE_NS}:${copy.roleRef.name}`;
  return copy;
}

afterAll(async () => {
  for (const c of clients) c.close();
  observer?.stop();
  fleet?.stop();
  await cluster?.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('RBAC of manifests/overlays/companion + components/companion-evictions (real API server)', () => {
  it("the companion ServiceAccount's rules are the base's plus create pods/eviction, nothing else", async () => {
    const { admin } = cluster;
    await admin.request({
      method: 'POST',
      path: `/api/v1/namespaces/${POD_NS}/serviceaccounts`,
      body: { metadata: { name: 'nobody' } },
    });
    const nobody = await tokenClient(POD_NS, 'nobody');
    const base = await tokenClient(BASE_NS, SA);
    const companion = await tokenClient(NS, SA);
    await waitUntil(async () => (await granted(companion, nobody, NS)).includes(EXTRA), {
      timeoutMs: 10_000,
      what: 'the companion rules in force',
    });
    // The own namespace of each is the other's, mapped: Role rules there, ClusterRole rules everywhere.
    for (const [mine, reference] of [
      [NS, BASE_NS],
      ['kube-node-lease', 'kube-node-lease'],
      ['default', 'default'],
      [POD_NS, POD_NS],
    ] as const) {
      const want = [...(await granted(base, nobody, reference)), EXTRA].sort();
      expect(await granted(companion, nobody, mine), `rules in ${mine}`).toEqual(want);
    }
  });

  it('the controller in companion mode with evictions, bound only by those manifests, does its whole job without a 401 or 403', async () => {
    const token = await requestServiceAccountToken(cluster.admin, NS, SA);
    const kubeconfig = path.join(tmp, 'companion.kubeconfig');
    writeTokenKubeconfig(cluster.cp, token, kubeconfig, SA);
    const ctl = await startController(
      [
        `--kubeconfig=${kubeconfig}`,
        '--leader-elect=true',
        '--leader-elect-lease-duration=4s',
        '--leader-elect-renew-deadline=3s',
        '--leader-elect-retry-period=500ms',
        '--mode=companion',
        '--companion-evict-after=1s',
        `--node-monitor-grace-period=${GRACE_MS / 1000}s`,
        '--node-startup-grace-period=10s',
        '--watch-silence-threshold=3s',
      ],
      { env: { POD_NAME, POD_NAMESPACE: NS }, name: 'rbac companion controller' },
    );
    onTestFailed(() => console.log(`controller log summary:\n${ctl.summary()}`));
    try {
      await ctl.waitForLog('Acting: watches healthy and leading', 30_000);
      await sleep(1500);
      const failedAt = performance.now();
      for (const n of FAILING) fleet.node(n).pauseHeartbeats();
      for (const n of FAILING) {
        await waitUntil(() => observer.taintsAt(n, [OURS], failedAt), {
          timeoutMs: GRACE_MS + 8000,
          what: `${n} tainted ${OURS}`,
        });
        await waitUntil(() => observer.podDeletedAt(`${POD_NS}/${n}-pod-0`, failedAt), {
          timeoutMs: 8000,
          what: `${n}-pod-0 evicted`,
        });
        expect(
          observer.podReady.get(`${POD_NS}/${n}-pod-0`)?.some((r) => r.status === 'False'),
          n,
        ).toBe(true);
      }
      const resumedAt = performance.now();
      for (const n of FAILING) fleet.node(n).resumeHeartbeats();
      for (const n of FAILING) {
        await waitUntil(() => observer.taintsGoneAt(n, [OURS], resumedAt), {
          timeoutMs: 10_000,
          what: `${n} without our taint`,
        });
      }
      expect(await ctl.metric('nlc_transitions_total', { kind: 'pods_evicted' })).toBe(2);
      expect(await ctl.metric('nlc_writes_total', { outcome: 'failed' })).toBe(0);
    } finally {
      await ctl.kill('SIGKILL');
    }
    const calls = readAuditLog(cluster.cp.auditLogPath!).filter(
      (e) => e.user.username === serviceAccountUser(NS, SA) && (e.userAgent ?? '').startsWith(CONTROLLER_UA),
    );
    const denied = calls.filter((e) => e.responseStatus?.code === 403 || e.responseStatus?.code === 401);
    expect(denied.map((e) => `${e.verb} ${e.requestURI}`)).toEqual([]);
    const used = new Set(
      calls.map((e) => {
        const r = e.objectRef ?? {};
        return `${r.apiGroup || 'core'}/${r.resource}${r.subresource ? `/${r.subresource}` : ''}:${e.verb}`;
      }),
    );
    console.log(`permissions the companion controller used:\n  ${[...used].sort().join('\n  ')}`);
    for (const want of [
      'core/nodes:patch',
      'core/nodes/status:patch',
      'core/pods:list',
      'core/pods/status:patch',
      'core/pods/eviction:create',
      'core/events:create',
    ]) {
      expect([...used], want).toContain(want);
    }
    expect(ctl.logs.filter((l) => /forbidden/i.test(JSON.stringify(l)))).toEqual([]);
  });

  it('the companion token is refused what the code never does', async () => {
    const sa = await tokenClient(NS, SA);
    const node = 'sim-zone-c-000';
    const pod = `${node}-pod-0`;
    const cases: [string, KubeRequest][] = [
      ['delete a pod', { method: 'DELETE', path: paths.pod(POD_NS, pod) }],
      ['delete a node', { method: 'DELETE', path: paths.node(node) }],
      ['watch pods', { method: 'GET', path: paths.pods(), query: { watch: 'true', timeoutSeconds: 1 } }],
      ['list secrets', { method: 'GET', path: '/api/v1/secrets' }],
    ];
    const results = await mapLimited(cases, 4, async ([what, req]) => ({
      what,
      status: (await sa.raw(req)).status,
    }));
    expect(results.filter((r) => r.status !== 403)).toEqual([]);
  });
});
