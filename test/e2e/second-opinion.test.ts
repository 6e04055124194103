import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { startController } from '../support/controller-process.js';
import { ClusterObserver } from '../support/observer.js';
import { sleep, waitUntil } from '../support/wait.js';

/**
 * --second-opinion=kubelet against the real API server, with simulated kubelets that serve a TLS
 * endpoint on loopback (reported in their Node status as InternalIP 127.0.0.1 and their port):
 *  - a dead node (lease stopped, port closed) is marked at --confirm-after + the confirming probe,
 *    well before the grace, Ready's message saying so;
 *  - a node cut from the API server only (lease stopped, port answering) is marked at the grace
 *    with NoSchedule, its NoExecute held and its pod left Ready while it answers, and both done
 *    once its port closes;
 *  - every other node is left alone.
 * Judged by an observer's watch outside the controller.
 */
const GRACE_MS = 20_000;
const CONFIRM_AFTER_MS = 10_000;
/** The confirming probe 3 s after the first, the 1 s tick, a probe's own time (refused: ms). */
const CONFIRM_SLACK_MS = 3_000 + 1_000 + 1_500;
const UR_NS = 'node.kubernetes.io/unreachable:NoSchedule';
const UR_NE = 'node.kubernetes.io/unreachable:NoExecute';

let cluster: TestCluster;
let fleet: SimulatedFleet;
let observer: ClusterObserver;

beforeAll(async () => {
  cluster = await startCluster();
  fleet = await SimulatedFleet.start(cluster.admin, {
    nodes: 9,
    podsPerNode: 1,
    kubeletEndpoints: true,
    timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 1000 },
  });
  observer = await ClusterObserver.start(cluster.admin);
});

/** The controller both cases run: grace 20 s, --second-opinion=kubelet, confirm-after 10 s, hold 10 m. */
const startWithSecondOpinion = () =>
  startController([
    `--kubeconfig=${cluster.cp.kubeconfigPath}`,
    '--leader-elect=false',
    `--node-monitor-grace-period=${GRACE_MS / 1000}s`,
    '--node-startup-grace-period=30s',
    '--watch-silence-threshold=3s',
    '--node-eviction-rate=1',
    '--second-opinion=kubelet',
    `--confirm-after=${CONFIRM_AFTER_MS / 1000}s`,
    '--cut-off-hold=10m',
  ]);

afterAll(async () => {
  observer?.stop();
  fleet?.stop();
  await cluster?.stop();
});

describe('a second opinion before each verdict (real API server, 9 nodes, grace 20 s, confirm-after 10 s)', () => {
  it('a dead node is marked at confirm-after; a node cut off from the API server keeps its pods until its kubelet stops answering', async () => {
    const ctl = await startWithSecondOpinion();
    onTestFailed(() => console.log(`controller log summary:\n${ctl.summary()}`));
    try {
      await ctl.waitForLog('Acting: watches healthy and leading', 20_000);
      await waitUntil(
        () => fleet.names.every((n) => observer.podReadyStatus(`default/${n}-pod-0`) === 'True'),
        {
          timeoutMs: 20_000,
          what: 'all pods Ready',
        },
      );
      await sleep(1500);
      // One node per zone: a zone with two of three down would be partially disrupted.
      const [dead, cutOff] = ['sim-zone-a-001', 'sim-zone-b-001'];
      const failedAt = performance.now();
      fleet.node(dead!).kill();
      fleet.node(cutOff!).pauseHeartbeats();

      await waitUntil(() => observer.readyAt(dead!, 'Unknown', failedAt) !== undefined, {
        timeoutMs: GRACE_MS,
        what: `${dead} Unknown`,
      });
      const deadAt = observer.readyAt(dead!, 'Unknown', failedAt)! - failedAt;
      // Its last renewal came up to 1 s before the kill.
      expect(deadAt).toBeGreaterThanOrEqual(CONFIRM_AFTER_MS - 1_000);
      expect(deadAt).toBeLessThan(CONFIRM_AFTER_MS + CONFIRM_SLACK_MS);
      const ready = observer.nodes.get(dead!)?.status?.conditions?.find((c) => c.type === 'Ready');
      expect(ready?.message).toMatch(
        /^Kubelet stopped posting node status\. Confirmed down before the grace: its kubelet at 127\.0\.0\.1:\d+ did not answer two probes \(connection refused\)\.$/,
      );
      // The cut-off node is not confirmed down: its kubelet answers.
      expect(observer.readyStatus(cutOff!)).toBe('True');

      await waitUntil(() => observer.readyAt(cutOff!, 'Unknown', failedAt) !== undefined, {
        timeoutMs: GRACE_MS + 10_000,
        what: `${cutOff} Unknown`,
      });
      const cutOffAt = observer.readyAt(cutOff!, 'Unknown', failedAt)! - failedAt;
      expect(cutOffAt).toBeGreaterThanOrEqual(GRACE_MS - 1_000);
      await waitUntil(() => observer.currentTaints(cutOff!).includes(UR_NS), {
        timeoutMs: 5_000,
        what: `${cutOff} NoSchedule`,
      });
      // Held: 12 s past its mark (a dead node's NoExecute comes within 1 s at this eviction rate).
      await sleep(12_000);
      expect(observer.currentTaints(cutOff!)).not.toContain(UR_NE);
      expect(observer.podReadyStatus(`default/${cutOff}-pod-0`)).toBe('True');
      expect(observer.currentTaints(dead!)).toContain(UR_NE);
      expect(observer.podReadyStatus(`default/${dead}-pod-0`)).toBe('False');
      expect(
        ctl.logs.some((l) => l.msg === 'Kubelet still answers: NoExecute held' && l.node === cutOff),
      ).toBe(true);

      // Its kubelet stops answering: NoExecute after the next probe and the confirming one.
      const closedAt = performance.now();
      await fleet.node(cutOff!).endpoint!.close();
      await waitUntil(() => observer.taintsAt(cutOff!, [UR_NE], closedAt) !== undefined, {
        timeoutMs: 20_000,
        what: `${cutOff} NoExecute after its port closed`,
      });
      const heldFor = observer.taintsAt(cutOff!, [UR_NE], closedAt)! - closedAt;
      expect(heldFor).toBeLessThan(10_000 + CONFIRM_SLACK_MS);
      await waitUntil(() => observer.podReadyStatus(`default/${cutOff}-pod-0`) === 'False', {
        timeoutMs: 5_000,
        what: `${cutOff}'s pod not Ready once its kubelet stopped answering`,
      });
      for (const n of fleet.names) {
        if (n !== dead && n !== cutOff) expect(observer.readyStatus(n), n).toBe('True');
      }
      console.log(
        `dead node Unknown ${Math.round(deadAt)} ms after it stopped (grace ${GRACE_MS} ms); cut-off node Unknown at ${Math.round(cutOffAt)} ms, NoExecute ${Math.round(heldFor)} ms after its kubelet stopped answering`,
      );
    } finally {
      await ctl.kill();
    }
  });

  it('no false marks through a control-plane fault with the feature on: kube-apiserver SIGKILLed for longer than --confirm-after while every kubelet answers, then restarted', async () => {
    // The first case's dead and cut-off nodes stay down: leave them out.
    const healthy = fleet.names.filter((n) => observer.readyStatus(n) === 'True');
    expect(healthy.length).toBeGreaterThanOrEqual(7);
    const ctl = await startWithSecondOpinion();
    onTestFailed(() => console.log(`controller log summary:\n${ctl.summary()}`));
    try {
      await ctl.waitForLog('Acting: watches healthy and leading', 20_000);
      await sleep(3_000);
      const start = performance.now();
      // Every lease silent (nothing reaches the API server) for longer than --confirm-after: the
      // probes run meanwhile and every kubelet answers them.
      const answersBefore = await ctl.metric('nlc_second_opinion_probes_total', { outcome: 'answers' });
      await cluster.cp.stopApiServer('SIGKILL');
      await sleep(CONFIRM_AFTER_MS + 8_000);
      // The probes did run while it was down, and found the kubelets answering.
      const answered =
        (await ctl.metric('nlc_second_opinion_probes_total', { outcome: 'answers' })) - answersBefore;
      cluster.cp.startApiServer();
      await cluster.cp.waitApiServerReady();
      const back = performance.now();
      // A grace and more after it came back: every deadline the outage could have moved has passed.
      await sleep(GRACE_MS + 5_000);
      for (const n of healthy) {
        expect(observer.readyAt(n, 'Unknown', start), `${n} marked Unknown`).toBeUndefined();
        expect(observer.taintsAddedSince(n, 'node.kubernetes.io/unreachable', start), n).toEqual([]);
      }
      expect(answered).toBeGreaterThanOrEqual(healthy.length);
      // Only the first case's nodes (really down) may be confirmed down.
      const confirmed = ctl.logs
        .filter((l) => l.msg === 'Kubelet not answering: node confirmed down')
        .map((l) => String(l.node));
      expect(confirmed.filter((n) => healthy.includes(n))).toEqual([]);
      console.log(
        `kube-apiserver down ${Math.round(back - start)} ms (confirm-after ${CONFIRM_AFTER_MS} ms), ${answered} probes answered meanwhile; watched ${GRACE_MS + 5_000} ms after: none of ${healthy.length} healthy nodes marked`,
      );
    } finally {
      await ctl.kill();
    }
  });
});
