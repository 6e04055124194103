import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { type RunningController, startKcm } from '../../bench/compare/controllers.js';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { PatchType, paths } from '../../src/kube/client.js';
import type { List } from '../../src/kube/types.js';
import { APPLIED_ANNOTATION, FENCED_ANNOTATION } from '../../src/remediation/index.js';
import { ApiResolver, serverSideApply } from '../support/apply.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { startController } from '../support/controller-process.js';
import { kustomizeOverlay } from '../support/kubectl.js';
import { ClusterObserver, readAuditLog } from '../support/observer.js';
import { requestServiceAccountToken, serviceAccountUser, writeTokenKubeconfig } from '../support/rbac.js';
import { sleep, waitUntil } from '../support/wait.js';

/**
 * --out-of-service against the real API server: a node fenced by an annotation and one whose
 * kubelet announced its shutdown get node.kubernetes.io/out-of-service after the delay and lose it
 * once they renew and are Ready; a partitioned node (lease silence alone) never gets it. Then what
 * the taint is for, with kube-controller-manager v1.37.2's own controllers doing their part
 * (taint-eviction, pod garbage collector, attach-detach) and ours bound only by manifests/base +
 * manifests/components/out-of-service: the fenced node's stuck pod is force-deleted and its
 * volume detached; the partitioned node's stay as they were.
 */
const GRACE_MS = 5000;
const AFTER_MS = 3000;
const OOS = 'node.kubernetes.io/out-of-service:NoExecute';

let cluster: TestCluster;
let fleet: SimulatedFleet;
let observer: ClusterObserver;

beforeAll(async () => {
  cluster = await startCluster({ audit: true, auditReads: true });
  fleet = await SimulatedFleet.start(cluster.admin, {
    nodes: 9,
    podsPerNode: 0,
    timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 1000 },
  });
  observer = await ClusterObserver.start(cluster.admin);
});

afterAll(async () => {
  observer?.stop();
  fleet?.stop();
  await cluster?.stop();
});

describe('the out-of-service taint (real API server, 9 nodes in 3 zones, grace 5 s, delay 3 s)', () => {
  it('fenced nodes get it after the delay and lose it after they renew; a partitioned node never gets it', async () => {
    const ctl = await startController([
      `--kubeconfig=${cluster.cp.kubeconfigPath}`,
      '--leader-elect=false',
      `--node-monitor-grace-period=${GRACE_MS / 1000}s`,
      '--node-startup-grace-period=10s',
      '--watch-silence-threshold=3s',
      '--node-eviction-rate=1',
      '--out-of-service',
      `--out-of-service-after=${AFTER_MS / 1000}s`,
    ]);
    onTestFailed(() => console.log(`controller log summary:\n${ctl.summary()}`));
    try {
      await ctl.waitForLog('Acting: watches healthy and leading', 20_000);
      await sleep(1500);
      // One node per zone (a zone of 3 with 2 down would be partially disrupted: no NoExecute at all).
      const [fenced, announced, partitioned] = ['sim-zone-a-001', 'sim-zone-b-001', 'sim-zone-c-001'];
      fleet.node(announced!).reportNotReady('KubeletNotReady', 'node is shutting down');
      await waitUntil(() => observer.readyStatus(announced!) === 'False', {
        timeoutMs: 5000,
        what: `${announced} Ready=False (shutting down)`,
      });
      const failedAt = performance.now();
      for (const n of [fenced!, announced!, partitioned!]) fleet.node(n).pauseHeartbeats();
      await cluster.admin.request({
        method: 'PATCH',
        path: paths.node(fenced!),
        contentType: PatchType.strategic,
        body: { metadata: { annotations: { [FENCED_ANNOTATION]: 'true' } } },
      });

      const figures: string[] = [];
      for (const n of [fenced!, announced!]) {
        await waitUntil(() => observer.taintsAt(n, [OOS], failedAt) !== undefined, {
          timeoutMs: GRACE_MS + AFTER_MS + 15_000,
          what: `${n} tainted out-of-service (taints ${observer.currentTaints(n).join(',')})`,
        });
        const unknownAt = observer.readyAt(n, 'Unknown', failedAt)!;
        const taintedAt = observer.taintsAt(n, [OOS], failedAt)!;
        figures.push(`${n}: out-of-service ${Math.round(taintedAt - unknownAt)} ms after Unknown`);
        expect(taintedAt - unknownAt).toBeGreaterThanOrEqual(AFTER_MS - 100);
      }
      expect(observer.nodes.get(fenced!)?.metadata.annotations?.[APPLIED_ANNOTATION]).toBe(
        'fence-annotation',
      );
      expect(observer.nodes.get(announced!)?.metadata.annotations?.[APPLIED_ANNOTATION]).toBe(
        'kubelet-shutdown',
      );
      expect(observer.readyStatus(partitioned!)).toBe('Unknown');
      expect(observer.currentTaints(partitioned!)).not.toContain(OOS);

      // Back: both renew and report Ready; the taint goes.
      const resumedAt = performance.now();
      fleet.node(announced!).reportReady();
      for (const n of [fenced!, announced!]) fleet.node(n).resumeHeartbeats();
      for (const n of [fenced!, announced!]) {
        await waitUntil(() => observer.taintsGoneAt(n, [OOS], resumedAt) !== undefined, {
          timeoutMs: 15_000,
          what: `${n} out-of-service taint removed`,
        });
        figures.push(
          `${n}: removed ${Math.round(observer.taintsGoneAt(n, [OOS], resumedAt)! - resumedAt)} ms after it resumed`,
        );
      }
      expect(observer.nodes.get(fenced!)?.metadata.annotations?.[FENCED_ANNOTATION]).toBeUndefined();
      // The partitioned node stayed silent all along: still no taint.
      expect(observer.currentTaints(partitioned!)).not.toContain(OOS);
      expect(
        ctl.logs.filter((l) => l.msg === 'Applied the out-of-service taint').map((l) => l.signal),
      ).toEqual(expect.arrayContaining(['fence-annotation', 'kubelet-shutdown']));
      console.log(figures.join('\n'));
      fleet.node(partitioned!).resumeHeartbeats();
    } finally {
      await ctl.kill();
    }
  });
});

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const NS = 'nlc-oos';
const SA = 'node-lifecycle-controller';
const POD_NS = 'oos-workloads';
const DRIVER = 'e2e.csi.node-lifecycle-controller.io';
const CONTROLLER_UA = 'node-lifecycle-controller/';
/** kube-controller-manager's pod garbage collector looks every 20 s (pkg/controller/podgc, fixed). */
const PODGC_PERIOD_MS = 20_000;

interface VolumeAttachment {
  metadata: { name: string };
  spec: { nodeName: string; attacher: string; source: { persistentVolumeName?: string } };
  status?: { attached?: boolean };
}

/** A pod of a StatefulSet-like workload on `node`, with a ReadWriteOnce CSI volume bound to it. */
async function statefulPod(node: string): Promise<{ pod: string; volume: string }> {
  const { admin } = cluster;
  const claim = `data-${node}`;
  const pv = `pv-${node}`;
  const pvc = await admin.request<{ metadata: { uid: string } }>({
    method: 'POST',
    path: `/api/v1/namespaces/${POD_NS}/persistentvolumeclaims`,
    body: {
      metadata: { name: claim },
      spec: {
        accessModes: ['ReadWriteOnce'],
        storageClassName: '',
        volumeName: pv,
        resources: { requests: { storage: '1Gi' } },
      },
    },
  });
  await admin.request({
    method: 'POST',
    path: '/api/v1/persistentvolumes',
    body: {
      metadata: { name: pv },
      spec: {
        accessModes: ['ReadWriteOnce'],
        capacity: { storage: '1Gi' },
        storageClassName: '',
        persistentVolumeReclaimPolicy: 'Retain',
        claimRef: { namespace: POD_NS, name: claim, uid: pvc.metadata.uid },
        csi: { driver: DRIVER, volumeHandle: `vol-${node}` },
      },
    },
  });
  // kube-controller-manager's PV binder is not running: the claim is bound as it would bind it.
  for (const p of [
    `/api/v1/namespaces/${POD_NS}/persistentvolumeclaims/${claim}/status`,
    `/api/v1/persistentvolumes/${pv}/status`,
  ])
    await admin.request({
      method: 'PATCH',
      path: p,
      contentType: PatchType.merge,
      body: { status: { phase: 'Bound' } },
    });
  const pod = `app-${node}`;
  await admin.request({
    method: 'POST',
    path: paths.pods(POD_NS),
    body: {
      metadata: { name: pod, labels: { app: 'oos-e2e' } },
      spec: {
        nodeName: node,
        containers: [
          {
            name: 'app',
            image: 'registry.k8s.io/pause:3.10',
            volumeMounts: [{ name: 'data', mountPath: '/data' }],
          },
        ],
        volumes: [{ name: 'data', persistentVolumeClaim: { claimName: claim } }],
        // The 300 s of DefaultTolerationSeconds, cut to 1 s: the pod is evicted (and stuck
        // terminating, its kubelet gone) soon after the node is marked, on both nodes alike.
        tolerations: [
          {
            key: 'node.kubernetes.io/unreachable',
            operator: 'Exists',
            effect: 'NoExecute',
            tolerationSeconds: 1,
          },
          {
            key: 'node.kubernetes.io/not-ready',
            operator: 'Exists',
            effect: 'NoExecute',
            tolerationSeconds: 1,
          },
        ],
      },
    },
  });
  // What its kubelet reported while it lived: running, Ready.
  const now = new Date().toISOString();
  await admin.request({
    method: 'PATCH',
    path: `${paths.pod(POD_NS, pod)}/status`,
    contentType: PatchType.strategic,
    body: {
      status: {
        phase: 'Running',
        conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: now }],
        containerStatuses: [
          {
            name: 'app',
            ready: true,
            restartCount: 0,
            image: 'registry.k8s.io/pause:3.10',
            imageID: '',
            started: true,
            state: { running: { startedAt: now } },
          },
        ],
      },
    },
  });
  return { pod, volume: `kubernetes.io/csi/${DRIVER}^vol-${node}` };
}

/** The volumes the attach-detach controller reports attached in the node's status. */
const attachedOn = (node: string): string[] =>
  (
    (observer.nodes.get(node)?.status as { volumesAttached?: { name: string }[] } | undefined)
      ?.volumesAttached ?? []
  ).map((v) => v.name);

async function volumeAttachments(): Promise<VolumeAttachment[]> {
  return (
    await cluster.admin.request<List<VolumeAttachment>>({
      method: 'GET',
      path: '/apis/storage.k8s.io/v1/volumeattachments',
    })
  ).items;
}

describe("what the taint is for: kube-controller-manager's taint-eviction, pod GC and attach-detach beside ours, bound by base + components/out-of-service", () => {
  it("the fenced node's stuck pod is force-deleted and its volume detached after the taint; the partitioned node's pod and volume stay", async () => {
    const { admin } = cluster;
    const tmp = mkdtempSync(path.join(os.tmpdir(), 'nlc-oos-e2e-'));
    let kcm: RunningController | undefined;
    try {
      // Our install: the base and the component, as a user applies them.
      const resolver = new ApiResolver(admin);
      for (const o of kustomizeOverlay({
        resources: [path.join(ROOT, 'manifests', 'base')],
        components: [path.join(ROOT, 'manifests', 'components', 'out-of-service')],
        namespace: NS,
      }))
        await serverSideApply(admin, resolver, o, 'nlc-oos-e2e');
      await admin.request({ method: 'POST', path: paths.namespaces(), body: { metadata: { name: POD_NS } } });
      kcm = await startKcm({
        kubeconfigPath: cluster.cp.kubeconfigPath,
        kcmControllers: [
          // Its taint-eviction controller finds a node's pods through an index that the daemonset
          // (or node-lifecycle) controller adds to the shared pod informer: as in a cluster where
          // ours replaces kube-controller-manager's node-lifecycle-controller, that one is on.
          'daemonset-controller',
          'taint-eviction-controller',
          'pod-garbage-collector-controller',
          'persistentvolume-attach-detach-controller',
        ],
        graceMs: 40_000,
        startupGraceMs: 60_000,
        qps: 20,
        burst: 30,
        logDir: tmp,
      });
      onTestFailed(() => console.log(`kube-controller-manager log: ${kcm?.logPath}`));
      await waitUntil(() => kcm!.healthy(), { timeoutMs: 30_000, what: 'kube-controller-manager healthy' });

      const [fenced, partitioned] = ['sim-zone-a-002', 'sim-zone-c-002'] as const;
      const volumes = new Map<string, string>();
      for (const n of [fenced, partitioned]) {
        // The kubelet of a node whose volumes the attach-detach controller manages says so.
        await admin.request({
          method: 'PATCH',
          path: paths.node(n),
          contentType: PatchType.strategic,
          body: {
            metadata: { annotations: { 'volumes.kubernetes.io/controller-managed-attach-detach': 'true' } },
          },
        });
        volumes.set(n, (await statefulPod(n)).volume);
      }
      // The attach-detach controller creates each VolumeAttachment; the CSI external-attacher's part
      // (attached: true) is played here; then the kubelet reports the volume mounted (volumesInUse).
      for (const n of [fenced, partitioned]) {
        let va: VolumeAttachment | undefined;
        await waitUntil(
          async () => {
            va = (await volumeAttachments()).find((a) => a.spec.nodeName === n);
            return va !== undefined;
          },
          { timeoutMs: 20_000, what: `a VolumeAttachment for ${n}` },
        );
        expect(va!.spec.attacher).toBe(DRIVER);
        await admin.request({
          method: 'PATCH',
          path: `/apis/storage.k8s.io/v1/volumeattachments/${va!.metadata.name}/status`,
          contentType: PatchType.merge,
          body: { status: { attached: true } },
        });
        await admin.request({
          method: 'PATCH',
          path: paths.nodeStatus(n),
          contentType: PatchType.strategic,
          body: { status: { volumesInUse: [volumes.get(n)] } },
        });
        await waitUntil(() => attachedOn(n).includes(volumes.get(n)!), {
          timeoutMs: 20_000,
          what: `${n} reports its volume attached`,
        });
      }

      const token = await requestServiceAccountToken(admin, NS, SA);
      const kubeconfig = path.join(tmp, 'controller.kubeconfig');
      writeTokenKubeconfig(cluster.cp, token, kubeconfig, SA);
      const ctl = await startController([
        `--kubeconfig=${kubeconfig}`,
        '--leader-elect=false',
        `--node-monitor-grace-period=${GRACE_MS / 1000}s`,
        '--node-startup-grace-period=10s',
        '--watch-silence-threshold=3s',
        '--node-eviction-rate=1',
        '--out-of-service',
        `--out-of-service-after=${AFTER_MS / 1000}s`,
      ]);
      onTestFailed(() => console.log(`controller log summary:\n${ctl.summary()}`));
      try {
        await ctl.waitForLog('Acting: watches healthy and leading', 20_000);
        await sleep(1500);
        const failedAt = performance.now();
        for (const n of [fenced, partitioned]) fleet.node(n).pauseHeartbeats();
        await admin.request({
          method: 'PATCH',
          path: paths.node(fenced),
          contentType: PatchType.strategic,
          body: { metadata: { annotations: { [FENCED_ANNOTATION]: 'true' } } },
        });
        const key = (n: string) => `${POD_NS}/app-${n}`;
        // Both pods are evicted once their toleration runs out, and stay terminating: no kubelet.
        for (const n of [fenced, partitioned])
          await waitUntil(() => observer.podDeletedAt(key(n), failedAt) !== undefined, {
            timeoutMs: GRACE_MS + 15_000,
            what: `app-${n} terminating`,
          });
        await waitUntil(() => observer.taintsAt(fenced, [OOS], failedAt) !== undefined, {
          timeoutMs: GRACE_MS + AFTER_MS + 15_000,
          what: `${fenced} tainted out-of-service`,
        });
        const taintedAt = observer.taintsAt(fenced, [OOS], failedAt)!;
        // The partitioned node's pod was terminating before the taint: every pass of the pod
        // garbage collector from then on saw it, and left it.
        expect(observer.podDeletedAt(key(partitioned), failedAt)!).toBeLessThan(taintedAt);
        expect(observer.podGoneAt(key(fenced), failedAt)).toBeUndefined();

        await waitUntil(() => observer.podGoneAt(key(fenced), taintedAt) !== undefined, {
          timeoutMs: PODGC_PERIOD_MS + 10_000,
          what: `app-${fenced} force-deleted by the pod garbage collector`,
        });
        const podGoneAt = observer.podGoneAt(key(fenced), taintedAt)!;
        let detachedAt = 0;
        await waitUntil(
          async () => {
            const left = (await volumeAttachments()).some((a) => a.spec.nodeName === fenced);
            if (!left) detachedAt = performance.now();
            return !left;
          },
          { timeoutMs: 15_000, intervalMs: 100, what: `${fenced}'s VolumeAttachment removed` },
        );
        await ctl.waitForLog('Out-of-service node has no VolumeAttachment left', 20_000);

        // The partitioned node: no taint, its pod still terminating, its volume still attached.
        expect(observer.currentTaints(partitioned)).not.toContain(OOS);
        expect(observer.podGoneAt(key(partitioned), failedAt)).toBeUndefined();
        const stuck = await admin.request<{ metadata: { deletionTimestamp?: string } }>({
          method: 'GET',
          path: paths.pod(POD_NS, `app-${partitioned}`),
        });
        expect(stuck.metadata.deletionTimestamp).toBeDefined();
        expect((await volumeAttachments()).filter((a) => a.spec.nodeName === partitioned)).toHaveLength(1);
        console.log(
          [
            `${fenced}: out-of-service ${Math.round(taintedAt - observer.readyAt(fenced, 'Unknown', failedAt)!)} ms after Unknown`,
            `pod force-deleted ${Math.round(podGoneAt - taintedAt)} ms after the taint (pod GC every ${PODGC_PERIOD_MS / 1000} s)`,
            `VolumeAttachment gone ${Math.round(detachedAt - taintedAt)} ms after the taint`,
            `${partitioned}: pod terminating and volume attached ${Math.round(performance.now() - failedAt)} ms after it went silent`,
          ].join('\n'),
        );
      } finally {
        await ctl.kill('SIGKILL');
      }
      // Bound only by the install's RBAC: nothing refused, and the component's rule was used.
      const calls = readAuditLog(cluster.cp.auditLogPath!).filter(
        (e) =>
          e.user.username === serviceAccountUser(NS, SA) && (e.userAgent ?? '').startsWith(CONTROLLER_UA),
      );
      expect(
        calls
          .filter((e) => e.responseStatus?.code === 403 || e.responseStatus?.code === 401)
          .map((e) => `${e.verb} ${e.requestURI}`),
      ).toEqual([]);
      expect(
        calls.some(
          (e) =>
            e.objectRef?.resource === 'volumeattachments' &&
            e.verb === 'list' &&
            e.responseStatus?.code === 200,
        ),
      ).toBe(true);
    } finally {
      kcm?.process.kill('SIGKILL');
      for (const n of ['sim-zone-a-002', 'sim-zone-c-002']) fleet.node(n).resumeHeartbeats();
      rmSync(tmp, { recursive: true, force: true });
    }
  });
});
