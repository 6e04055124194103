import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import type { KubeletSpec } from '../../src/fleet/kubelet.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { type ControllerProcess, sampleValue, startController } from '../support/controller-process.js';
import { ClusterObserver } from '../support/observer.js';
import { sleep, waitUntil } from '../support/wait.js';

const GRACE_MS = 5000;
const UR_NE = 'node.kubernetes.io/unreachable:NoExecute';

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

async function controller(extra: string[]): Promise<ControllerProcess> {
  const ctl = await startController([
    `--kubeconfig=${cluster.cp.kubeconfigPath}`,
    '--leader-elect=false',
    `--node-monitor-grace-period=${GRACE_MS / 1000}s`,
    '--node-startup-grace-period=10s',
    '--watch-silence-threshold=3s',
    ...extra,
  ]);
  onTestFailed(() => console.log(`controller log summary:\n${ctl.summary()}`));
  await ctl.waitForLog('Acting: watches healthy and leading', 20_000);
  return ctl;
}

/** When each node first carried the NoExecute unreachable taint after `since`. */
function noExecuteTimes(nodes: string[], since: number): number[] {
  return nodes.map((n) => observer.taintsAt(n, [UR_NE], since)).filter((t): t is number => t !== undefined);
}

describe('zones and eviction rate limits (3 zones x 10 nodes, grace 5 s)', () => {
  it('taints at the primary rate, slows to the secondary rate in a partial disruption, stops in master disruption', async () => {
    const fleet = await SimulatedFleet.start(cluster.admin, {
      nodes: 30,
      namePrefix: 'dz-',
      timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 1000 },
    });
    // Zones of 10 count as "large" (> 5), so a partially disrupted zone keeps the secondary rate.
    // The primary rate (one per 1.25 s) is slower than the spread of the 6 detections in zone b
    // (their last renewals fall within one 1 s renew interval + 4% jitter), so at most one more
    // taint can pass at the primary rate before the 6th detection turns the zone PartialDisruption.
    // (At 2/s a spread just over 1 s let three through: 0, 0.5 and 1.0 s.)
    const ctl = await controller([
      '--node-eviction-rate=0.8',
      '--secondary-node-eviction-rate=0.25',
      '--large-cluster-size-threshold=5',
    ]);
    try {
      await sleep(2000);
      const zoneA = fleet.inZone('zone-a').map((k) => k.name);
      const zoneB = fleet.inZone('zone-b').map((k) => k.name);

      // 1 node in zone a: Normal zone, tainted at once.
      const t1 = performance.now();
      fleet.node(zoneA[0]!).pauseHeartbeats();
      await waitUntil(() => observer.taintsAt(zoneA[0]!, [UR_NE], t1), {
        timeoutMs: GRACE_MS + 3000,
        what: 'zone a node tainted',
      });
      const tainted1 = observer.taintsAt(zoneA[0]!, [UR_NE], t1)! - t1;
      console.log(
        `zone a, 1 of 10 failed: NoExecute after ${Math.round(tainted1)} ms (grace ${GRACE_MS} ms)`,
      );
      expect(tainted1).toBeLessThan(GRACE_MS + 2000);

      // 6 of 10 in zone b: PartialDisruption (>2 and >= 55%), the secondary rate (one per 4 s).
      const t2 = performance.now();
      const failB = zoneB.slice(0, 6);
      for (const n of failB) fleet.node(n).pauseHeartbeats();
      await waitUntil(
        async () => (await ctl.metric('nlc_zone_state', { state: 'PartialDisruption' })) === 1,
        {
          timeoutMs: GRACE_MS + 5000,
          what: 'zone b PartialDisruption',
        },
      );
      await waitUntil(() => noExecuteTimes(failB, t2).length === 6, {
        timeoutMs: 45_000,
        what: 'all 6 zone b nodes tainted',
      });
      const times = noExecuteTimes(failB, t2).sort((a, b) => a - b);
      const gaps = times.slice(1).map((t, i) => Math.round(t - times[i]!));
      console.log(`zone b, 6 of 10 failed: NoExecute gaps ${gaps.join(', ')} ms`);
      // Once the zone is partially disrupted, taints come one per 4 s (0.25/s); at most the first
      // two can come at the primary rate while the failures are still being noticed (see above).
      const slow = gaps.filter((g) => g >= 3500);
      expect(slow.length).toBeGreaterThanOrEqual(gaps.length - 1);
      expect(times.at(-1)! - times[0]!).toBeGreaterThanOrEqual(4 * 3500);
      const metrics = await ctl.metrics();
      expect(sampleValue(metrics, 'node_collector_unhealthy_nodes_in_zone')).toBeGreaterThanOrEqual(7);
      expect(sampleValue(metrics, 'node_collector_evictions_total')).toBe(7);

      // Everything fails: every zone FullDisruption -> master disruption -> our NoExecute taints go.
      const t3 = performance.now();
      for (const n of fleet.names) fleet.node(n).pauseHeartbeats();
      await waitUntil(async () => (await ctl.metric('nlc_master_disruption_active')) === 1, {
        timeoutMs: GRACE_MS + 10_000,
        what: 'master disruption',
      });
      await waitUntil(() => fleet.names.every((n) => !observer.currentTaints(n).includes(UR_NE)), {
        timeoutMs: 10_000,
        what: 'every NoExecute taint removed',
      });
      expect(fleet.names.every((n) => observer.readyStatus(n) === 'Unknown')).toBe(true);
      await sleep(3000);
      expect(fleet.names.filter((n) => observer.currentTaints(n).includes(UR_NE))).toEqual([]);
      console.log(
        `all 30 failed: master disruption and NoExecute taints gone ${Math.round(performance.now() - t3)} ms after`,
      );

      // Recover all: master disruption ends with a fresh grace period for everyone; no spurious taint.
      const t4 = performance.now();
      for (const n of fleet.names) fleet.node(n).resumeHeartbeats();
      await waitUntil(async () => (await ctl.metric('nlc_master_disruption_active')) === 0, {
        timeoutMs: 15_000,
        what: 'master disruption over',
      });
      await ctl.waitForLog('Master disruption over: fresh grace period for every node', 5000);
      await waitUntil(() => fleet.names.every((n) => observer.readyStatus(n) === 'True'), {
        timeoutMs: 15_000,
        what: 'all Ready',
      });
      await sleep(2 * GRACE_MS);
      for (const n of fleet.names) {
        expect(observer.taintsAddedSince(n, 'node.kubernetes.io/', t4), n).toEqual([]);
        expect(observer.currentTaints(n), n).toEqual([]);
      }
      expect(await ctl.metric('nlc_master_disruption_transitions_total', { direction: 'enter' })).toBe(1);
      expect(await ctl.metric('nlc_master_disruption_transitions_total', { direction: 'exit' })).toBe(1);
    } finally {
      await ctl.kill();
      fleet.stop();
    }
  });
});

describe('per-pool grace periods', () => {
  it('a pool with a long grace keeps its nodes Ready while a default-pool node with the same silence is marked; SIGHUP reloads', async () => {
    const specs: KubeletSpec[] = [
      { name: 'pool-edge-0', zone: 'zone-a', region: 'region-1', labels: { 'nlc.dev/pool': 'edge' } },
      { name: 'pool-edge-1', zone: 'zone-b', region: 'region-1', labels: { 'nlc.dev/pool': 'edge' } },
      { name: 'pool-default-0', zone: 'zone-a', region: 'region-1' },
      { name: 'pool-default-1', zone: 'zone-b', region: 'region-1' },
      { name: 'pool-default-2', zone: 'zone-c', region: 'region-1' },
    ];
    const fleet = await SimulatedFleet.start(cluster.admin, {
      nodes: specs,
      timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 1000 },
    });
    const file = path.join(cluster.cp.dir, 'pools.json');
    const pools = (edgeGrace: string) =>
      JSON.stringify({
        pools: [
          {
            name: 'edge',
            selector: { matchLabels: { 'nlc.dev/pool': 'edge' } },
            nodeMonitorGracePeriod: edgeGrace,
          },
        ],
      });
    writeFileSync(file, pools('20s'));
    const ctl = await controller([`--node-pool-config=${file}`]);
    try {
      await sleep(1500);
      const t0 = performance.now();
      fleet.node('pool-edge-0').pauseHeartbeats();
      fleet.node('pool-default-0').pauseHeartbeats();
      await waitUntil(() => observer.readyAt('pool-default-0', 'Unknown', t0), {
        timeoutMs: GRACE_MS + 3000,
        what: 'default node marked',
      });
      await sleep(4000);
      expect(observer.readyStatus('pool-edge-0')).toBe('True');
      await waitUntil(() => observer.readyAt('pool-edge-0', 'Unknown', t0), {
        timeoutMs: 20_000,
        what: 'edge node marked after its own grace',
      });
      const edgeAfter = observer.readyAt('pool-edge-0', 'Unknown', t0)! - t0;
      console.log(
        `default-pool node marked after ~5 s; edge-pool node after ${Math.round(edgeAfter)} ms (pool grace 20 s)`,
      );
      expect(edgeAfter).toBeGreaterThanOrEqual(19_000);
      expect(await ctl.metric('nlc_pool_nodes', { pool: 'edge' })).toBe(2);

      // Shorter edge grace, reloaded on SIGHUP without a restart.
      writeFileSync(file, pools('8s'));
      ctl.child.kill('SIGHUP');
      await ctl.waitForLog('Pool config reloaded', 5000);
      const t1 = performance.now();
      fleet.node('pool-edge-1').pauseHeartbeats();
      await waitUntil(() => observer.readyAt('pool-edge-1', 'Unknown', t1), {
        timeoutMs: 15_000,
        what: 'edge node marked after the reloaded grace',
      });
      const after = observer.readyAt('pool-edge-1', 'Unknown', t1)! - t1;
      console.log(`after reload to 8 s: edge-pool node marked after ${Math.round(after)} ms`);
      expect(after).toBeGreaterThanOrEqual(7000);
      expect(after).toBeLessThan(12_000);

      // An invalid file keeps the previous config and says why.
      writeFileSync(file, '{"pools": [{"name": "edge", "nodeMonitorGracePeriod": "soon"}]}');
      ctl.child.kill('SIGHUP');
      const err = await ctl.waitForLog('Pool config invalid, keeping the previous one', 5000);
      expect(JSON.stringify(err)).toContain('nodeMonitorGracePeriod');

      // A file nested 100,000 levels deep (quoting it in the error threw RangeError, and SIGHUP's
      // unhandled rejection exited the process): refused the same way, by SIGHUP and by the file
      // watch, counted; the process lives on and a later good file is applied.
      const invalidBefore = await ctl.metric('nlc_pool_config_reloads_total', { result: 'invalid' });
      const reloadedBefore = ctl.logs.filter((l) => l.msg === 'Pool config reloaded').length;
      writeFileSync(file, `{"pools":[${'['.repeat(100_000)}${']'.repeat(100_000)}]}`);
      ctl.child.kill('SIGHUP');
      const deep = await ctl.waitForLog('Pool config invalid, keeping the previous one', 5000, (l) =>
        JSON.stringify(l.errors).includes('nested deeper than 32 levels'),
      );
      expect(deep).toMatchObject({ path: file, reason: 'SIGHUP' });
      await waitUntil(
        async () =>
          (await ctl.metric('nlc_pool_config_reloads_total', { result: 'invalid' })) >= invalidBefore + 2,
        { timeoutMs: 5000, what: 'the deep file refused by SIGHUP and by the file watch' },
      );
      writeFileSync(file, pools('9s'));
      ctl.child.kill('SIGHUP');
      await waitUntil(
        () => ctl.logs.filter((l) => l.msg === 'Pool config reloaded').length > reloadedBefore,
        {
          timeoutMs: 5000,
          what: 'the good file applied after the deep one',
        },
      );
      expect(ctl.child.exitCode).toBeNull();
      expect(ctl.child.signalCode).toBeNull();
    } finally {
      await ctl.kill();
      fleet.stop();
    }
  });
});
