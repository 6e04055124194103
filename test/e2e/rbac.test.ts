/**
 * Least-privilege RBAC, end to end on a real kube-apiserver: every object of manifests/base, moved
 * to another namespace by an overlay that sets kustomize's `namespace:` (as a user's would), is
 * applied server-side, the BUILT controller runs as a process with a token of its ServiceAccount
 * (TokenRequest), bound by nothing but those manifests, and does its whole job without one 403;
 * then the same token is refused everything the code never does, and the ServiceAccount's rules
 * (SelfSubjectRulesReview, SubjectAccessReview) are exactly the expected set below.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { ApiWriter, createWriterMetrics } from '../../src/apply/writer.js';
import { systemClock } from '../../src/clock/clock.js';
import { COMPONENT_NAME } from '../../src/election/config.js';
import {
  HOSTNAME_LABEL,
  IDENTITY_LABEL,
  identityLeaseName,
  LEADER_LABEL,
  labelValue,
} from '../../src/election/identity.js';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { microTime } from '../../src/fleet/kubelet.js';
import { KubeClient, type KubeRequest, PatchType, paths } from '../../src/kube/client.js';
import type { Lease, List, Node, Pod } from '../../src/kube/types.js';
import { memoryLogger } from '../../src/log/logger.js';
import { createRegistry } from '../../src/metrics/registry.js';
import { ApiResolver, type Manifest, serverSideApply } from '../support/apply.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { type ControllerProcess, startController } from '../support/controller-process.js';
import { kustomizeOverlay } from '../support/kubectl.js';
import { type AuditEvent, ClusterObserver, readAuditLog } from '../support/observer.js';
import {
  expandNonResourceRules,
  expandResourceRules,
  mapLimited,
  metricSamples,
  type ResourceRule,
  requestServiceAccountToken,
  selfSubjectRules,
  serviceAccountGroups,
  serviceAccountUser,
  subjectAccessReview,
  writeTokenKubeconfig,
} from '../support/rbac.js';
import { sleep, waitUntil } from '../support/wait.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const BASE = path.join(ROOT, 'manifests', 'base');
const FIELD_MANAGER = 'nlc-rbac-e2e';

/** Not the base's nlc-system: the install is moved here by `namespace:` (nothing may stay behind). */
const NS = 'platform-nlc';
const BASE_NS = 'nlc-system';
const SA = 'node-lifecycle-controller';
const SA_USER = serviceAccountUser(NS, SA);
/** The fleet's pods live outside `default`, so pod Events go to a namespace of their own. */
const POD_NS = 'rbac-e2e-workloads';
const POD_NAME = 'node-lifecycle-controller-5d8f7c9b4-rbac0';
const CONTROLLER_UA = `${COMPONENT_NAME}/`;
/** User agent of this test's own requests with the controller's token. */
const PROBE_UA = 'nlc-rbac-e2e-probe';

const GRACE_MS = 5000;
const UR_NS = 'node.kubernetes.io/unreachable:NoSchedule';
const UR_NE = 'node.kubernetes.io/unreachable:NoExecute';
/** Two lost nodes in different zones: each zone's eviction limiter admits its NoExecute at once. */
const FAILING = ['sim-zone-a-000', 'sim-zone-b-001'];

const CORE = 'core';
const COORD = 'coordination.k8s.io';
const AUTHN = 'authentication.k8s.io';
const AUTHZ = 'authorization.k8s.io';
/** A scraper of the controller's /metrics, bound to the shipped metrics-reader ClusterRole. */
const SCRAPER_NS = 'rbac-e2e-monitoring';
const SCRAPER = 'prometheus';

/**
 * THE EXPECTED PERMISSIONS: exactly what the controller's code calls, and where it calls it.
 * Keys are `<group>/<resource>`; "core" is the legacy group.
 *
 * Cluster-wide (ClusterRole node-lifecycle-controller + ClusterRoleBinding):
 */
const CLUSTER_WIDE: Record<string, string[]> = {
  [`${CORE}/nodes`]: [
    'get', // ApiWriter.patchInner (src/apply/writer.ts): re-reads the node after 409 Conflict (getPath of patchNode / patchNodeStatus)
    'list', // watchNodes() Reflector (src/watch/reflector.ts, started in src/cli/run.ts): list /api/v1/nodes
    'watch', // ... and watch /api/v1/nodes
    'patch', // ApiWriter.patchNode <- NodeLifecycleController.reconcileTaints: unreachable / not-ready taints
  ],
  [`${CORE}/nodes/status`]: [
    'patch', // ApiWriter.patchNodeStatus <- NodeLifecycleController.reconcile step 1: conditions -> Unknown
  ],
  [`${CORE}/pods`]: [
    'get', // ApiWriter.patchInner: re-reads the pod after 409 Conflict (getPath of patchPodStatus)
    'list', // NodeLifecycleController.reconcilePods: GET /api/v1/pods?fieldSelector=spec.nodeName=<node>
    // no watch: nothing in the controller watches pods (src/cli/run.ts starts no pod Reflector)
  ],
  [`${CORE}/pods/status`]: [
    'patch', // ApiWriter.patchPodStatus <- NodeLifecycleController.reconcilePods: Ready=False
  ],
  [`${COORD}/leases`]: [
    // Read-only and cluster-wide (not a Role in kube-node-lease, which kustomize's `namespace:`
    // would move away; manifests/base/clusterrole.yaml), used in kube-node-lease only:
    'get', // NodeLifecycleController.confirmStale: quorum re-read of a node's lease before marking it; RegisteredNodeSign: kube-system/kube-controller-manager
    'list', // watchNodeLeases() Reflector: list kube-node-lease leases
    'watch', // ... and watch them
  ],
  [`${CORE}/events`]: [
    'create', // ApiWriter.event: POST /api/v1/namespaces/<ns>/events ("default" for Nodes, the pod's own for Pods)
    'patch', // ApiWriter.event: a repeat within 10 min merge-patches count + lastTimestamp of the first Event
    'list', // RegisteredNodeSign (src/controller/kcm-registered.ts): kube-controller-manager's RegisteredNode Events in default
  ],
  [`${AUTHN}/tokenreviews`]: [
    'create', // DelegatedAuth.tokenReview (src/http/delegated-auth.ts): the bearer token of a /metrics request
  ],
  [`${AUTHZ}/subjectaccessreviews`]: [
    'create', // DelegatedAuth.subjectAccessReview: may that user get the non-resource URL /metrics?
  ],
};

/** Per namespace (Roles + RoleBindings). */
const PER_NAMESPACE: Record<string, Record<string, string[]>> = {
  // The leader-election lock and the replicas' identity leases (Role node-lifecycle-controller:leases).
  [NS]: {
    [`${COORD}/leases`]: [
      'get', // LeaseApi.get <- LeaderElector.attempt (slow path, lock unknown), LeaderElector.release (after 409), IdentityLeases.sync / collect / shutdown
      'list', // the lock Reflector in src/cli/run.ts (fieldSelector metadata.name=<lock>); IdentityLeases.collect (labelSelector)
      'watch', // the lock Reflector in src/cli/run.ts -> the elector's lockUpdates$
      'create', // LeaseApi.create <- LeaderElector.attempt (lock absent), IdentityLeases.sync (own identity lease absent)
      'update', // LeaseApi.update <- LeaderElector.attempt (acquire / renew), LeaderElector.release, IdentityLeases.sync (renewals)
      'patch', // LeaseApi.patchLabels <- IdentityLeases.collect: the leader resets a dead replica's stale leader=true label
      'delete', // LeaseApi.deleteIfUnchanged <- IdentityLeases.collect (GC of dead replicas), IdentityLeases.shutdown (own lease)
    ],
  },
};

function expectedPermissions(namespace: string): string[] {
  const out = new Set<string>();
  const add = (table: Record<string, string[]> | undefined) => {
    for (const [res, verbs] of Object.entries(table ?? {})) for (const v of verbs) out.add(`${res}:${v}`);
  };
  add(CLUSTER_WIDE);
  add(PER_NAMESPACE[namespace]);
  return [...out].sort();
}

/** May the ServiceAccount do `verb` on `<group>/<resource>` in `namespace` ('' = cluster scope)? */
function expectedAllowed(key: string, namespace: string, verb: string): boolean {
  if (CLUSTER_WIDE[key]?.includes(verb)) return true;
  return namespace !== '' && (PER_NAMESPACE[namespace]?.[key]?.includes(verb) ?? false);
}

/** manifests/base as the project's kubectl renders it, moved by `namespace:` (none: as it is). */
const renderIn = (namespace: string | undefined): Manifest[] =>
  kustomizeOverlay({ resources: [BASE], namespace });

let cluster: TestCluster;
let fleet: SimulatedFleet;
let observer: ClusterObserver;
const applied: { object: Manifest; stored: Manifest }[] = [];
let saKubeconfig: string;
/** Requests of this test with the controller's ServiceAccount token (user agent PROBE_UA). */
let sa: KubeClient;
let tmp: string;

const auditOf = (pred: (e: AuditEvent) => boolean) => readAuditLog(cluster.cp.auditLogPath!).filter(pred);
const permissionOf = (e: AuditEvent) => {
  const r = e.objectRef ?? {};
  const res = `${r.apiGroup || CORE}/${r.resource ?? '?'}${r.subresource ? `/${r.subresource}` : ''}`;
  return `${res}:${e.verb}@${r.namespace || '*'}`;
};

beforeAll(async () => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'nlc-rbac-e2e-'));
  cluster = await startCluster({ audit: true, auditReads: true });
  const { admin } = cluster;

  // manifests/base under `namespace: NS`, rendered by the project's kubectl, server-side applied
  // in kustomize's order.
  const resolver = new ApiResolver(admin);
  for (const object of renderIn(NS)) {
    applied.push({ object, stored: await serverSideApply(admin, resolver, object, FIELD_MANAGER) });
  }

  // The controller's identity: a bound ServiceAccount token and a kubeconfig for it.
  const token = await requestServiceAccountToken(admin, NS, SA);
  saKubeconfig = path.join(tmp, 'controller.kubeconfig');
  writeTokenKubeconfig(cluster.cp, token, saKubeconfig, SA);
  sa = await KubeClient.fromKubeConfig(cluster.cp.kubeConfigForToken(token, SA), { userAgent: PROBE_UA });
  // RBAC caches catch up with new bindings within moments: wait until what the applied Roles and
  // ClusterRole grant is in force (whatever that is: the tests below judge it).
  const rulesOf = (kind: string, ns?: string) =>
    applied
      .filter((a) => a.object.kind === kind && a.object.metadata.namespace === ns)
      .flatMap((a) => (a.object.rules ?? []) as ResourceRule[]);
  for (const ns of [NS, 'kube-node-lease']) {
    const want = expandResourceRules([...rulesOf('ClusterRole'), ...rulesOf('Role', ns)]);
    await waitUntil(
      async () => {
        const have = expandResourceRules((await selfSubjectRules(sa, ns)).resourceRules);
        return [...want].every((p) => have.has(p));
      },
      { timeoutMs: 10_000, what: `the ServiceAccount's rules in ${ns}` },
    );
  }

  // Objects for the negative checks: a lease in default, an Event to try to delete.
  await admin.request({
    method: 'POST',
    path: paths.leases('default'),
    body: { metadata: { name: 'rbac-e2e-probe' }, spec: { holderIdentity: 'someone-else' } },
  });
  await admin.request({ method: 'POST', path: paths.namespaces(), body: { metadata: { name: POD_NS } } });

  fleet = await SimulatedFleet.start(admin, {
    nodes: 6,
    podsPerNode: 2,
    podNamespace: POD_NS,
    timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 1000 },
  });
  observer = await ClusterObserver.start(admin);
  await waitUntil(
    () =>
      fleet.names.every((n) =>
        [0, 1].every((i) => observer.podReadyStatus(`${POD_NS}/${n}-pod-${i}`) === 'True'),
      ),
    { timeoutMs: 20_000, what: 'all pods Ready' },
  );
});

afterAll(async () => {
  sa?.close();
  observer?.stop();
  fleet?.stop();
  await cluster?.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('RBAC of manifests/base (real API server, controller process with its ServiceAccount token)', () => {
  it('applies every object of manifests/base server-side; each exists afterwards, with the kustomize labels', async () => {
    const kinds = applied.map(
      ({ object: o }) => `${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}`,
    );
    console.log(`applied ${applied.length} objects:\n  ${kinds.join('\n  ')}`);
    expect(kinds.sort()).toEqual(
      [
        `Namespace /${NS}`,
        `ServiceAccount ${NS}/node-lifecycle-controller`,
        'ClusterRole /node-lifecycle-controller',
        'ClusterRoleBinding /node-lifecycle-controller',
        'ClusterRole /node-lifecycle-controller-metrics-reader',
        `Role ${NS}/node-lifecycle-controller:leases`,
        `RoleBinding ${NS}/node-lifecycle-controller:leases`,
        `Deployment ${NS}/node-lifecycle-controller`,
        `PodDisruptionBudget ${NS}/node-lifecycle-controller`,
        `Service ${NS}/node-lifecycle-controller-metrics`,
      ].sort(),
    );
    const resolver = new ApiResolver(cluster.admin);
    for (const { object, stored } of applied) {
      const what = `${object.kind} ${object.metadata.name}`;
      // Read back independently of the apply's answer.
      const got = await cluster.admin.request<
        Manifest & { metadata: { managedFields?: { manager: string; operation: string }[] } }
      >({ method: 'GET', path: await resolver.objectPath(object) });
      expect(got.metadata.uid, what).toBe(stored.metadata.uid);
      expect(got.metadata.labels, what).toMatchObject({
        'app.kubernetes.io/name': 'node-lifecycle-controller',
        'app.kubernetes.io/part-of': 'node-lifecycle-controller',
        ...(object.metadata.labels ?? {}),
      });
      expect(
        got.metadata.managedFields?.some((f) => f.manager === FIELD_MANAGER && f.operation === 'Apply'),
        what,
      ).toBe(true);
      if (object.kind.endsWith('Role')) expect(got.rules, what).toEqual(object.rules);
    }
    // `namespace:` changed nothing but the namespace: the base as kustomize renders it, with every
    // mention of its namespace (metadata, the Namespace's name, the bindings' subjects) replaced.
    const key = (o: Manifest) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
    const byKey = (l: Manifest[]) => [...l].sort((a, b) => key(a).localeCompare(key(b)));
    const moved = JSON.parse(
      JSON.stringify(renderIn(undefined)).replaceAll(`"${BASE_NS}"`, `"${NS}"`),
    ) as Manifest[];
    expect(byKey(applied.map((a) => a.object))).toEqual(byKey(moved));
    expect(JSON.stringify(applied.map((a) => a.object))).not.toContain(BASE_NS);
    expect((await cluster.admin.raw({ method: 'GET', path: `/api/v1/namespaces/${BASE_NS}` })).status).toBe(
      404,
    );
    const dep = applied.find((a) => a.object.kind === 'Deployment')!.stored as unknown as {
      spec: { template: { spec: { containers: { image: string }[]; serviceAccountName: string } } };
    };
    // The image is pinned to the version this tree builds (package.json).
    const { version } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
      version: string;
    };
    expect(dep.spec.template.spec.containers[0]!.image).toBe(`node-lifecycle-controller:${version}`);
    expect(dep.spec.template.spec.serviceAccountName).toBe(SA);
  });

  it('the controller process, bound only by those manifests, does its whole job without a 403', async () => {
    const { admin } = cluster;
    // A dead replica's identity lease that still claims leader=true: the leader resets the label,
    // then collects the lease (--identity-lease-gc-age=4s). Created once the controller leads: the
    // lock does not exist yet, so it leads only one lease duration (15s) after it started, and a
    // replica that does not lead collects a stale lease without resetting its label.
    const deadHost = 'node-lifecycle-controller-5d8f7c9b4-dead0';
    const deadLease = identityLeaseName(COMPONENT_NAME, deadHost);
    const createDeadLease = () =>
      admin.request({
        method: 'POST',
        path: paths.leases(NS),
        body: {
          metadata: {
            name: deadLease,
            labels: {
              [IDENTITY_LABEL]: labelValue(COMPONENT_NAME),
              [HOSTNAME_LABEL]: labelValue(deadHost),
              [LEADER_LABEL]: 'true',
            },
          },
          spec: {
            holderIdentity: deadHost,
            leaseDurationSeconds: 3600,
            acquireTime: microTime(Date.now() - 7_200_000),
            renewTime: microTime(Date.now() - 3_600_000),
          },
        },
      });

    // A scraper: a ServiceAccount bound to the shipped metrics-reader ClusterRole. The controller
    // serves /metrics as it does by default (HTTPS, TokenReview + SubjectAccessReview), so each
    // metrics read below makes it review this token with its own ServiceAccount's rights.
    await admin.request({
      method: 'POST',
      path: paths.namespaces(),
      body: { metadata: { name: SCRAPER_NS } },
    });
    await admin.request({
      method: 'POST',
      path: `/api/v1/namespaces/${SCRAPER_NS}/serviceaccounts`,
      body: { metadata: { name: SCRAPER } },
    });
    await admin.request({
      method: 'POST',
      path: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
      body: {
        metadata: { name: 'rbac-e2e-scraper' },
        roleRef: {
          apiGroup: 'rbac.authorization.k8s.io',
          kind: 'ClusterRole',
          name: 'node-lifecycle-controller-metrics-reader',
        },
        subjects: [{ kind: 'ServiceAccount', name: SCRAPER, namespace: SCRAPER_NS }],
      },
    });
    const scraperToken = await requestServiceAccountToken(admin, SCRAPER_NS, SCRAPER);
    const ctl: ControllerProcess = await startController(
      [
        `--kubeconfig=${saKubeconfig}`,
        '--leader-elect=true',
        `--node-monitor-grace-period=${GRACE_MS / 1000}s`,
        '--node-startup-grace-period=10s',
        '--watch-silence-threshold=3s',
        '--identity-lease-gc-age=4s',
      ],
      {
        env: { POD_NAME, POD_NAMESPACE: NS },
        name: 'rbac controller',
        secureMetrics: { token: scraperToken },
      },
    );
    onTestFailed(() => console.log(`controller log summary:\n${ctl.summary()}`));
    let exit: { code: number | null; signal: NodeJS.Signals | null } | undefined;
    try {
      const startedAt = performance.now();
      await ctl.waitForLog('Acting: watches healthy and leading', 30_000);
      console.log(`leading and acting ${Math.round(performance.now() - startedAt)} ms after /healthz`);
      await createDeadLease();

      // Leader election: the lock lease, in the install's namespace (POD_NAMESPACE), is ours.
      const lock = await admin.request<Lease>({ method: 'GET', path: paths.lease(NS, COMPONENT_NAME) });
      expect(lock.spec?.holderIdentity).toBe(POD_NAME);
      // Identity lease published, labelled leader.
      const ownIdentity = identityLeaseName(COMPONENT_NAME, POD_NAME);
      await waitUntil(
        async () => {
          const l = await admin.request<Lease>({ method: 'GET', path: paths.lease(NS, ownIdentity) });
          return l.spec?.holderIdentity === POD_NAME && l.metadata.labels?.[LEADER_LABEL] === 'true';
        },
        { timeoutMs: 10_000, what: 'own identity lease with leader=true' },
      );

      // Two nodes in different zones go silent.
      await sleep(1500);
      let failedAt = performance.now();
      for (const n of FAILING) fleet.node(n).pauseHeartbeats();
      for (const n of FAILING) {
        await waitUntil(() => observer.taintsAt(n, [UR_NS, UR_NE], failedAt), {
          timeoutMs: GRACE_MS + 8000,
          what: `${n} tainted unreachable NoSchedule + NoExecute`,
        });
        expect(observer.readyAt(n, 'Unknown', failedAt), n).toBeDefined();
        for (const i of [0, 1]) {
          await waitUntil(() => observer.podReadyStatus(`${POD_NS}/${n}-pod-${i}`) === 'False', {
            timeoutMs: 5000,
            what: `${n}-pod-${i} Ready=False`,
          });
        }
      }
      for (const n of fleet.names.filter((x) => !FAILING.includes(x))) {
        expect(observer.everSawReady(n, 'Unknown'), n).toBe(false);
      }

      // Events, written by the controller: on the Nodes (namespace default) and on the Pods (theirs).
      const ourEvents = async () =>
        (
          await admin.request<
            List<{
              metadata: { name: string; namespace: string };
              reason: string;
              count?: number;
              involvedObject: { kind: string; name: string };
              source?: { component?: string };
              reportingInstance?: string;
            }>
          >({ method: 'GET', path: '/api/v1/events' })
        ).items.filter((e) => e.source?.component === 'node-controller' && e.reportingInstance === POD_NAME);
      await waitUntil(
        async () => {
          const ev = await ourEvents();
          return FAILING.every(
            (n) =>
              ev.some(
                (e) =>
                  e.reason === 'NodeNotReady' &&
                  e.involvedObject.kind === 'Node' &&
                  e.involvedObject.name === n &&
                  e.metadata.namespace === 'default',
              ) &&
              ev.some(
                (e) =>
                  e.reason === 'NodeNotReady' &&
                  e.involvedObject.kind === 'Pod' &&
                  e.involvedObject.name === `${n}-pod-0` &&
                  e.metadata.namespace === POD_NS,
              ),
          );
        },
        { timeoutMs: 5000, what: 'NodeNotReady events on the lost nodes and their pods' },
      );

      // Recovery: taints removed.
      let resumedAt = performance.now();
      for (const n of FAILING) fleet.node(n).resumeHeartbeats();
      for (const n of FAILING) {
        await waitUntil(() => observer.taintsGoneAt(n, [UR_NS, UR_NE], resumedAt), {
          timeoutMs: 10_000,
          what: `${n} unreachable taints removed`,
        });
      }

      // The same node lost again: the same NodeNotReady event repeats, so the first one is patched.
      const again = FAILING[0]!;
      failedAt = performance.now();
      fleet.node(again).pauseHeartbeats();
      await waitUntil(() => observer.taintsAt(again, [UR_NS], failedAt), {
        timeoutMs: GRACE_MS + 8000,
        what: `${again} tainted again`,
      });
      await waitUntil(
        async () =>
          (await ourEvents()).some(
            (e) =>
              e.reason === 'NodeNotReady' &&
              e.involvedObject.kind === 'Node' &&
              e.involvedObject.name === again &&
              (e.count ?? 0) >= 2,
          ),
        { timeoutMs: 5000, what: `the NodeNotReady event of ${again} counted twice` },
      );
      resumedAt = performance.now();
      fleet.node(again).resumeHeartbeats();
      await waitUntil(() => observer.taintsGoneAt(again, [UR_NS, UR_NE], resumedAt), {
        timeoutMs: 10_000,
        what: `${again} taints removed again`,
      });

      // The dead replica's identity lease: label reset (PATCH), then collected (DELETE).
      await waitUntil(
        async () => (await admin.raw({ method: 'GET', path: paths.lease(NS, deadLease) })).status === 404,
        { timeoutMs: 20_000, what: "the dead replica's identity lease collected" },
      );

      // The process's own request metrics: nothing refused.
      const text = await ctl.metrics();
      const requests = metricSamples(text, 'nlc_api_requests_total');
      const refused = requests.filter((s) => s.labels.code === '403' || s.labels.code === '401');
      const used = new Set(
        requests
          .filter((s) => s.labels.code?.startsWith('2'))
          .map((s) => `${s.labels.verb} ${s.labels.resource}`),
      );
      console.log(
        `nlc_api_requests_total:\n  ${requests.map((s) => `${s.labels.verb} ${s.labels.resource} ${s.labels.code} = ${s.value}`).join('\n  ')}`,
      );
      expect(refused).toEqual([]);
      for (const want of [
        'list nodes',
        'watch nodes',
        'patch nodes',
        'patch nodes/status',
        'list pods',
        'patch pods/status',
        'create events',
        'patch events',
        'get leases',
        'list leases',
        'watch leases',
        'create leases',
        'update leases',
        'patch leases',
        'delete leases',
        'create tokenreviews',
        'create subjectaccessreviews',
      ]) {
        expect([...used], `a successful "${want}" request`).toContain(want);
      }
      expect(await ctl.metric('nlc_transitions_total', { kind: 'marked_unknown' })).toBe(3);
      expect(
        await ctl.metric('nlc_transitions_total', { kind: 'pods_marked_not_ready' }),
      ).toBeGreaterThanOrEqual(4);
      expect(await ctl.metric('nlc_writes_total', { outcome: 'failed' })).toBe(0);

      // Graceful stop: the lock is released and the identity lease deleted, with the same token.
      await ctl.kill('SIGTERM');
      const e = await ctl.exited;
      exit = { code: e.code, signal: e.signal };
    } finally {
      await ctl.kill('SIGKILL');
    }
    expect(exit).toEqual({ code: 0, signal: null });
    expect(ctl.logs.find((l) => l.msg === 'Leader lease release')?.result).toBe('released');
    const released = await admin.request<Lease>({ method: 'GET', path: paths.lease(NS, COMPONENT_NAME) });
    expect(released.spec?.holderIdentity ?? '').toBe('');
    const ownIdentity = identityLeaseName(COMPONENT_NAME, POD_NAME);
    expect((await admin.raw({ method: 'GET', path: paths.lease(NS, ownIdentity) })).status).toBe(404);

    // The audit log (every request, reads included): the controller's requests, all authorized.
    const calls = auditOf(
      (e) => e.user.username === SA_USER && (e.userAgent ?? '').startsWith(CONTROLLER_UA),
    );
    const denied = calls.filter((e) => e.responseStatus?.code === 403 || e.responseStatus?.code === 401);
    expect(denied.map((e) => `${e.verb} ${e.requestURI}`)).toEqual([]);
    const usedPerms = new Set(calls.map(permissionOf));
    console.log(
      `audit: ${calls.length} requests of the controller, permissions used:\n  ${[...usedPerms].sort().join('\n  ')}`,
    );
    // Each permission the process used is one the expected set grants (and so RBAC must grant).
    const outside = [...usedPerms].filter((p) => {
      const m = /^(.+):(\w+)@(.+)$/.exec(p)!;
      return !expectedAllowed(m[1]!, m[3] === '*' ? '' : m[3]!, m[2]!);
    });
    expect(outside).toEqual([]);
    for (const want of [
      `${CORE}/nodes:list@*`,
      `${CORE}/nodes:watch@*`,
      `${CORE}/nodes:patch@*`,
      `${CORE}/nodes/status:patch@*`,
      `${CORE}/pods:list@*`,
      `${CORE}/pods/status:patch@${POD_NS}`,
      `${CORE}/events:create@default`,
      `${CORE}/events:create@${POD_NS}`,
      `${CORE}/events:patch@default`,
      `${CORE}/events:list@default`,
      `${COORD}/leases:list@kube-node-lease`,
      `${COORD}/leases:watch@kube-node-lease`,
      `${COORD}/leases:get@kube-node-lease`,
      ...['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'].map(
        (v) => `${COORD}/leases:${v}@${NS}`,
      ),
      `${AUTHN}/tokenreviews:create@*`,
      `${AUTHZ}/subjectaccessreviews:create@*`,
    ]) {
      expect([...usedPerms], want).toContain(want);
    }
    // The logs: no refusal anywhere (errors or warnings).
    const mentions403 = (l: Record<string, unknown>) => /forbidden|\b403\b/i.test(JSON.stringify(l));
    expect(ctl.logs.filter((l) => l.level === 'error' && mentions403(l))).toEqual([]);
    expect(ctl.logs.filter((l) => /forbidden/i.test(JSON.stringify(l)))).toEqual([]);
    expect(ctl.text.filter((t) => /forbidden/i.test(t))).toEqual([]);
  });

  it('the same token is refused (403) everything the code never does', async () => {
    const { admin } = cluster;
    const node = 'sim-zone-c-000';
    const pod = `${node}-pod-0`;
    const nodeObj = await admin.request<Node>({ method: 'GET', path: paths.node(node) });
    const podObj = await admin.request<Pod>({ method: 'GET', path: paths.pod(POD_NS, pod) });
    const nodeLease = await admin.request<Lease>({
      method: 'GET',
      path: paths.lease('kube-node-lease', node),
    });
    const newLease = (name: string) => ({
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name },
      spec: { holderIdentity: 'intruder' },
    });
    const cases: [string, KubeRequest][] = [
      ['delete a node', { method: 'DELETE', path: paths.node(node) }],
      ['update a node (PUT)', { method: 'PUT', path: paths.node(node), body: nodeObj }],
      ['update a node status (PUT)', { method: 'PUT', path: paths.nodeStatus(node), body: nodeObj }],
      ['proxy to a node', { method: 'GET', path: `${paths.node(node)}/proxy/healthz` }],
      [
        'create a pod',
        {
          method: 'POST',
          path: paths.pods(POD_NS),
          body: {
            apiVersion: 'v1',
            kind: 'Pod',
            metadata: { name: 'rbac-e2e-intruder' },
            spec: { nodeName: node, containers: [{ name: 'c', image: 'registry.k8s.io/pause:3.10' }] },
          },
        },
      ],
      ['delete a pod', { method: 'DELETE', path: paths.pod(POD_NS, pod) }],
      [
        'patch a pod (spec/metadata)',
        {
          method: 'PATCH',
          path: paths.pod(POD_NS, pod),
          contentType: PatchType.merge,
          body: { metadata: { labels: { x: 'y' } } },
        },
      ],
      ['update a pod status (PUT)', { method: 'PUT', path: paths.podStatus(POD_NS, pod), body: podObj }],
      [
        'evict a pod',
        {
          method: 'POST',
          path: `${paths.pod(POD_NS, pod)}/eviction`,
          body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: pod, namespace: POD_NS } },
        },
      ],
      // A watch that were allowed would stream: timeoutSeconds ends it.
      ['watch pods', { method: 'GET', path: paths.pods(), query: { watch: 'true', timeoutSeconds: 1 } }],
      [
        'patch a lease in kube-node-lease',
        {
          method: 'PATCH',
          path: paths.lease('kube-node-lease', node),
          contentType: PatchType.merge,
          body: { spec: { holderIdentity: 'intruder' } },
        },
      ],
      [
        'update a lease in kube-node-lease (PUT)',
        { method: 'PUT', path: paths.lease('kube-node-lease', node), body: nodeLease },
      ],
      [
        'create a lease in kube-node-lease',
        { method: 'POST', path: paths.leases('kube-node-lease'), body: newLease('intruder') },
      ],
      ['delete a lease in kube-node-lease', { method: 'DELETE', path: paths.lease('kube-node-lease', node) }],
      ['list secrets (all namespaces)', { method: 'GET', path: '/api/v1/secrets' }],
      ['list secrets in its namespace', { method: 'GET', path: `/api/v1/namespaces/${NS}/secrets` }],
      ['list configmaps in its namespace', { method: 'GET', path: `/api/v1/namespaces/${NS}/configmaps` }],
      [
        'update a lease in another namespace (default)',
        { method: 'PUT', path: paths.lease('default', 'rbac-e2e-probe'), body: newLease('rbac-e2e-probe') },
      ],
      ['delete a lease in default', { method: 'DELETE', path: paths.lease('default', 'rbac-e2e-probe') }],
      [
        'create a lease in kube-system',
        { method: 'POST', path: paths.leases('kube-system'), body: newLease('intruder') },
      ],
      [
        'watch events',
        { method: 'GET', path: '/api/v1/events', query: { watch: 'true', timeoutSeconds: 1 } },
      ],
      [
        'create an events.k8s.io/v1 Event (the code writes core/v1 Events only)',
        {
          method: 'POST',
          path: paths.events('default'),
          body: {
            apiVersion: 'events.k8s.io/v1',
            kind: 'Event',
            metadata: { name: 'rbac-e2e-intruder' },
            eventTime: microTime(Date.now()),
            reportingController: 'x/y',
            reportingInstance: 'x',
            action: 'A',
            reason: 'R',
            type: 'Normal',
            regarding: { kind: 'Node', name: node, apiVersion: 'v1' },
          },
        },
      ],
      [
        'request a token for its own ServiceAccount',
        {
          method: 'POST',
          path: `/api/v1/namespaces/${NS}/serviceaccounts/${SA}/token`,
          body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: {} },
        },
      ],
      [
        'scale its own Deployment',
        {
          method: 'PATCH',
          path: `/apis/apps/v1/namespaces/${NS}/deployments/${SA}`,
          contentType: PatchType.merge,
          body: { spec: { replicas: 0 } },
        },
      ],
      [
        'widen its own Role',
        {
          method: 'PATCH',
          path: `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/roles/node-lifecycle-controller:leases`,
          contentType: PatchType.merge,
          body: { rules: [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'] }] },
        },
      ],
      [
        'bind itself to cluster-admin',
        {
          method: 'POST',
          path: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
          body: {
            metadata: { name: 'rbac-e2e-intruder' },
            roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
            subjects: [{ kind: 'ServiceAccount', name: SA, namespace: NS }],
          },
        },
      ],
      ['delete a namespace', { method: 'DELETE', path: `/api/v1/namespaces/${POD_NS}` }],
    ];

    const before = readAuditLog(cluster.cp.auditLogPath!).length;
    const results = await mapLimited(cases, 4, async ([what, req]) => {
      const res = await sa.raw<{ reason?: string }>(req);
      return {
        what,
        status: res.status,
        reason: typeof res.body === 'object' ? res.body?.reason : undefined,
      };
    });
    console.log(
      `refused with the controller's token:\n  ${results.map((r) => `${r.status} ${r.what}`).join('\n  ')}`,
    );
    expect(results.filter((r) => r.status !== 403 || r.reason !== 'Forbidden')).toEqual([]);

    // Nothing changed.
    expect((await admin.request<Node>({ method: 'GET', path: paths.node(node) })).metadata.uid).toBe(
      nodeObj.metadata.uid,
    );
    const podNow = await admin.request<Pod>({ method: 'GET', path: paths.pod(POD_NS, pod) });
    expect(podNow.metadata.uid).toBe(podObj.metadata.uid);
    expect(podNow.metadata.labels?.x).toBeUndefined();
    expect((await admin.raw({ method: 'GET', path: paths.pod(POD_NS, 'rbac-e2e-intruder') })).status).toBe(
      404,
    );
    expect((await admin.raw({ method: 'GET', path: paths.lease('kube-system', 'intruder') })).status).toBe(
      404,
    );
    const leaseNow = await admin.request<Lease>({
      method: 'GET',
      path: paths.lease('kube-node-lease', node),
    });
    expect(leaseNow.spec?.holderIdentity).toBe(nodeLease.spec?.holderIdentity);

    // Positive controls: the same client is authenticated and may do what the code does.
    for (const req of [
      { method: 'GET', path: paths.node(node) },
      { method: 'GET', path: paths.nodes() },
      { method: 'GET', path: paths.pods(), query: { fieldSelector: `spec.nodeName=${node}` } },
      { method: 'GET', path: paths.pod(POD_NS, pod) },
      { method: 'GET', path: paths.lease('kube-node-lease', node) },
      { method: 'GET', path: paths.leases('kube-node-lease') },
      { method: 'GET', path: paths.leases(NS) },
      // Lease reads are cluster-wide (the ClusterRole): reading one elsewhere is allowed.
      { method: 'GET', path: paths.lease('default', 'rbac-e2e-probe') },
      { method: 'GET', path: '/apis/coordination.k8s.io/v1/leases' },
    ] as KubeRequest[]) {
      expect((await sa.raw(req)).status, `${req.method} ${req.path}`).toBe(200);
    }

    // The audit log records every refusal, with the ServiceAccount as the user: the audit check of
    // the controller's run above would have seen a 403 of the controller.
    await waitUntil(
      () =>
        readAuditLog(cluster.cp.auditLogPath!)
          .slice(before)
          .filter(
            (e) => e.user.username === SA_USER && e.userAgent === PROBE_UA && e.responseStatus?.code === 403,
          ).length >= cases.length,
      { timeoutMs: 5000, what: 'every refusal in the audit log' },
    );
  });

  it("the ServiceAccount's rules are exactly the expected set (SelfSubjectRulesReview)", async () => {
    const { admin } = cluster;
    // Baseline: what any authenticated ServiceAccount may do (self reviews, discovery), from an
    // unbound ServiceAccount's own review.
    await admin.request({
      method: 'POST',
      path: `/api/v1/namespaces/${POD_NS}/serviceaccounts`,
      body: { metadata: { name: 'nobody' } },
    });
    const nobody = await KubeClient.fromKubeConfig(
      cluster.cp.kubeConfigForToken(await requestServiceAccountToken(admin, POD_NS, 'nobody'), 'nobody'),
      { userAgent: PROBE_UA },
    );
    try {
      for (const ns of [NS, 'kube-node-lease', 'default', 'kube-system', POD_NS]) {
        const mine = await selfSubjectRules(sa, ns);
        const base = await selfSubjectRules(nobody, ns);
        expect(mine.incomplete, ns).toBe(false);
        const baseline = expandResourceRules(base.resourceRules);
        const granted = [...expandResourceRules(mine.resourceRules)].filter((p) => !baseline.has(p)).sort();
        expect(granted, `rules in ${ns}`).toEqual(expectedPermissions(ns));
        // No wildcards, no resource-name rules, nothing beyond the baseline for non-resource URLs.
        expect(granted.filter((p) => p.includes('*') || p.includes('['))).toEqual([]);
        expect([...expandNonResourceRules(mine.nonResourceRules)].sort()).toEqual(
          [...expandNonResourceRules(base.nonResourceRules)].sort(),
        );
      }
    } finally {
      nobody.close();
    }
  });

  it('SubjectAccessReview agrees with the expected set for every verb, resource and scope', async () => {
    const verbs = ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete', 'deletecollection'];
    const namespaced = [
      `${CORE}/pods`,
      `${CORE}/pods/status`,
      `${CORE}/pods/eviction`,
      `${CORE}/pods/exec`,
      `${CORE}/pods/log`,
      `${CORE}/events`,
      'events.k8s.io/events',
      `${COORD}/leases`,
      `${CORE}/secrets`,
      `${CORE}/configmaps`,
      `${CORE}/serviceaccounts`,
      `${CORE}/serviceaccounts/token`,
      'apps/deployments',
      'rbac.authorization.k8s.io/roles',
      'rbac.authorization.k8s.io/rolebindings',
    ];
    const clusterScoped = [
      `${CORE}/nodes`,
      `${CORE}/nodes/status`,
      `${CORE}/nodes/proxy`,
      `${CORE}/namespaces`,
      'rbac.authorization.k8s.io/clusterroles',
      'rbac.authorization.k8s.io/clusterrolebindings',
      'certificates.k8s.io/certificatesigningrequests',
      `${AUTHN}/tokenreviews`,
      `${AUTHZ}/subjectaccessreviews`,
    ];
    const namespaces = ['', NS, 'kube-node-lease', 'default', 'kube-system', POD_NS];
    const checks: { key: string; namespace: string; verb: string }[] = [];
    for (const key of namespaced)
      for (const namespace of namespaces) for (const verb of verbs) checks.push({ key, namespace, verb });
    for (const key of clusterScoped) for (const verb of verbs) checks.push({ key, namespace: '', verb });
    // Verbs that escalate privileges.
    const special: { key: string; namespace: string; verb: string }[] = [
      { key: `${CORE}/users`, namespace: '', verb: 'impersonate' },
      { key: `${CORE}/groups`, namespace: '', verb: 'impersonate' },
      { key: `${CORE}/serviceaccounts`, namespace: NS, verb: 'impersonate' },
      { key: 'rbac.authorization.k8s.io/clusterroles', namespace: '', verb: 'bind' },
      { key: 'rbac.authorization.k8s.io/clusterroles', namespace: '', verb: 'escalate' },
      { key: 'rbac.authorization.k8s.io/roles', namespace: NS, verb: 'escalate' },
      { key: 'certificates.k8s.io/signers', namespace: '', verb: 'approve' },
    ];
    const all = [...checks, ...special];
    const t0 = performance.now();
    const answers = await mapLimited(all, 8, async (c) => {
      const [group, resource, subresource] = c.key.split('/') as [string, string, string | undefined];
      const r = await subjectAccessReview(cluster.admin, SA_USER, serviceAccountGroups(NS), {
        verb: c.verb,
        group: group === CORE ? '' : group,
        resource,
        subresource,
        namespace: c.namespace || undefined,
      });
      return { ...c, allowed: r.allowed, expected: expectedAllowed(c.key, c.namespace, c.verb) };
    });
    console.log(
      `${answers.length} SubjectAccessReviews in ${Math.round(performance.now() - t0)} ms, ${answers.filter((a) => a.allowed).length} allowed`,
    );
    expect(answers.filter((a) => a.allowed !== a.expected)).toEqual([]);
    // Sanity: the matrix covers every expected permission.
    const allowedKeys = new Set(answers.filter((a) => a.allowed).map((a) => `${a.key}:${a.verb}`));
    for (const p of new Set([...expectedPermissions(NS), ...expectedPermissions('kube-node-lease')])) {
      expect([...allowedKeys], p).toContain(p);
    }
  });

  it("the writer's re-read after a conflict (get nodes, get pods) works with the token", async () => {
    const { admin } = cluster;
    const client = await KubeClient.fromKubeConfig(
      cluster.cp.kubeConfigForToken(await requestServiceAccountToken(admin, NS, SA), SA),
      { userAgent: PROBE_UA },
    );
    const registry = createRegistry({ defaultMetrics: false });
    const metrics = createWriterMetrics(registry);
    const writer = new ApiWriter({
      client,
      fence: () => undefined,
      dryRun: false,
      logger: memoryLogger(),
      metrics,
      clock: systemClock,
      qps: 100,
      burst: 100,
      component: 'node-controller',
      instance: 'rbac-e2e',
    });
    try {
      const node = 'sim-zone-c-001';
      const pod = `${node}-pod-1`;
      const staleNode = await client.request<Node>({ method: 'GET', path: paths.node(node) });
      const stalePod = await client.request<Pod>({ method: 'GET', path: paths.pod(POD_NS, pod) });
      // Someone else writes both: our copies are stale, the precondition fails with 409.
      await admin.request({
        method: 'PATCH',
        path: paths.node(node),
        contentType: PatchType.merge,
        body: { metadata: { labels: { 'rbac-e2e/touched': 'x' } } },
      });
      await admin.request({
        method: 'PATCH',
        path: paths.pod(POD_NS, pod),
        contentType: PatchType.merge,
        body: { metadata: { labels: { 'rbac-e2e/touched': 'x' } } },
      });
      const seenNode: string[] = [];
      const nodeOut = await writer.patchNode(node, staleNode, (cur) => {
        seenNode.push(cur.metadata.resourceVersion ?? '');
        return cur === staleNode ? { spec: { taints: cur.spec?.taints ?? [] } } : undefined;
      });
      const seenPod: string[] = [];
      const podOut = await writer.patchPodStatus(POD_NS, pod, stalePod, (cur) => {
        seenPod.push(cur.metadata.resourceVersion ?? '');
        return cur === stalePod ? { status: { conditions: cur.status?.conditions ?? [] } } : undefined;
      });
      // Patched (409), re-read with GET, found nothing to do.
      expect(nodeOut).toEqual({ kind: 'unchanged' });
      expect(podOut).toEqual({ kind: 'unchanged' });
      expect(seenNode).toHaveLength(2);
      expect(seenPod).toHaveLength(2);
      expect(seenNode[1]).not.toBe(seenNode[0]);
      expect(seenPod[1]).not.toBe(seenPod[0]);
      const conflicts = await registry.getSingleMetricAsString('nlc_write_conflicts_total');
      expect(conflicts).toMatch(/resource="nodes"} 1/);
      expect(conflicts).toMatch(/resource="pods\/status"} 1/);
    } finally {
      client.close();
    }
  });
});
