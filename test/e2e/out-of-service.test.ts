import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { PatchType, paths } from '../../src/kube/client.js';
import { APPLIED_ANNOTATION, FENCED_ANNOTATION } from '../../src/remediation/index.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { startController } from '../support/controller-process.js';
import { ClusterObserver } from '../support/observer.js';
import { sleep, waitUntil } from '../support/wait.js';

/**
 * --out-of-service against the real API server: a node fenced by an annotation and one whose
 * kubelet announced its shutdown get node.kubernetes.io/out-of-service after the delay and lose it
 * once they renew and are Ready; a partitioned node (lease silence alone) never gets it.
 */
const GRACE_MS = 5000;
const AFTER_MS = 3000;
const OOS = 'node.kubernetes.io/out-of-service:NoExecute';

let cluster: TestCluster;
let fleet: SimulatedFleet;
let observer: ClusterObserver;

beforeAll(async () => {
  cluster = await startCluster({});
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
