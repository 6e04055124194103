/**
 * The node-pool config mounted from a ConfigMap (manifests/components/node-pools, the chart's
 * nodePools) and updated the way the kubelet updates such a volume: a new timestamped directory and
 * an atomic rename of the `..data` symlink, the file's own symlink untouched. The built controller
 * must pick each update up by itself (no SIGHUP) well before its 30 s polling fallback, and apply
 * the new grace period. Real API server, simulated kubelets.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import type { KubeletSpec } from '../../src/fleet/kubelet.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { ConfigMapVolume } from '../support/configmap-volume.js';
import { startController } from '../support/controller-process.js';
import { ClusterObserver } from '../support/observer.js';
import { sleep, waitUntil } from '../support/wait.js';

const GRACE_MS = 5000;
const POOL_LABEL = 'nlc.dev/pool';

let cluster: TestCluster;
let observer: ClusterObserver;

beforeAll(async () => {
  cluster = await startCluster();
  observer = await ClusterObserver.start(cluster.admin);
});

afterAll(async () => {
  observer?.stop();
  await cluster?.stop();
});

const pools = (edgeGrace: string) =>
  `${JSON.stringify(
    {
      pools: [
        {
          name: 'edge',
          selector: { matchLabels: { [POOL_LABEL]: 'edge' } },
          nodeMonitorGracePeriod: edgeGrace,
        },
      ],
    },
    null,
    2,
  )}\n`;

describe('node pools from a ConfigMap volume', () => {
  it('a kubelet-style ..data swap is reloaded by itself, twice, and the new grace applies', async () => {
    const specs: KubeletSpec[] = [
      { name: 'cm-edge-0', zone: 'zone-a', region: 'region-1', labels: { [POOL_LABEL]: 'edge' } },
      { name: 'cm-edge-1', zone: 'zone-b', region: 'region-1', labels: { [POOL_LABEL]: 'edge' } },
      { name: 'cm-default-0', zone: 'zone-a', region: 'region-1' },
      { name: 'cm-default-1', zone: 'zone-b', region: 'region-1' },
      { name: 'cm-default-2', zone: 'zone-c', region: 'region-1' },
    ];
    const fleet = await SimulatedFleet.start(cluster.admin, {
      nodes: specs,
      timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 1000 },
    });
    const volume = ConfigMapVolume.create(path.join(cluster.cp.dir, 'node-pools'), {
      'pools.json': pools('30s'),
    });
    const ctl = await startController([
      `--kubeconfig=${cluster.cp.kubeconfigPath}`,
      '--leader-elect=false',
      `--node-monitor-grace-period=${GRACE_MS / 1000}s`,
      '--node-startup-grace-period=10s',
      '--watch-silence-threshold=3s',
      `--node-pool-config=${volume.file('pools.json')}`,
    ]);
    onTestFailed(() => console.log(`controller log summary:\n${ctl.summary()}`));
    try {
      await ctl.waitForLog('Acting: watches healthy and leading', 20_000);
      expect(await ctl.metric('nlc_pool_nodes', { pool: 'edge' })).toBe(2);
      const reloads = () => ctl.logs.filter((l) => l.msg === 'Pool config reloaded');

      // First update: edge grace 30s -> 8s, as the kubelet writes it; no signal.
      const swapped = performance.now();
      volume.update({ 'pools.json': pools('8s') });
      await waitUntil(() => reloads().length >= 1, {
        timeoutMs: 5000,
        what: 'reload after the first ..data swap',
      });
      const tookMs = performance.now() - swapped;
      expect(reloads()[0]).toMatchObject({ reason: 'watch', pools: 1 });
      console.log(`first ..data swap reloaded after ${Math.round(tookMs)} ms (polling fallback: 30 s)`);

      // The new grace applies: an edge node silent now is marked after about 8 s, not 30 s.
      await sleep(1500);
      const t0 = performance.now();
      fleet.node('cm-edge-0').pauseHeartbeats();
      await waitUntil(() => observer.readyAt('cm-edge-0', 'Unknown', t0), {
        timeoutMs: 15_000,
        what: 'edge node marked after the reloaded grace',
      });
      const after = observer.readyAt('cm-edge-0', 'Unknown', t0)! - t0;
      console.log(`edge node marked ${Math.round(after)} ms after its last heartbeat (pool grace 8 s)`);
      expect(after).toBeGreaterThanOrEqual(7000);
      expect(after).toBeLessThan(12_000);

      // Second update: the watch survived the first swap (the old directory is gone by now).
      volume.update({ 'pools.json': pools('40s') });
      await waitUntil(() => reloads().length >= 2, {
        timeoutMs: 5000,
        what: 'reload after the second ..data swap',
      });
      expect(reloads()[1]).toMatchObject({ reason: 'watch', pools: 1 });
    } finally {
      await ctl.kill();
      fleet.stop();
    }
  });
});
