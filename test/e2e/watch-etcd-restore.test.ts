import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { type KubeClient, paths } from '../../src/kube/client.js';
import type { Node } from '../../src/kube/types.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { type ControllerProcess, startController } from '../support/controller-process.js';
import { sleep, waitUntil } from '../support/wait.js';

/**
 * etcd restored from a backup, on the real kube-apiserver: every resourceVersion the controller
 * holds is then ahead of the server's. First kube-apiserver is left running (its watch cache stalls
 * at the revision it had: it serves that old view, even to quorum lists), then it is restarted as
 * an operator's runbook says (it then accepts our watches from the future and sends nothing). The
 * controller must mark no healthy node in either phase, and recover by itself after the restart:
 * relist, and lift the taint the backup brought back on a node that recovered after it was taken.
 */

/**
 * Longer than the kubelet needs to renew once etcd is back: while the server cannot answer, its lease
 * controller backs off up to 7 s between attempts (client-go's maxBackoff), each up to its 1 s
 * heartbeat timeout here. With 5 s a live node whose renewal came just before an outage had too
 * little grace left after it (seen once in CI: marked 4.3 s after etcd was back, renewed ~5 s later).
 */
const GRACE_S = 10;
const UNREACHABLE = 'node.kubernetes.io/unreachable';

let cluster: TestCluster;
let fleet: SimulatedFleet;
let ctl: ControllerProcess;

beforeAll(async () => {
  cluster = await startCluster();
  fleet = await SimulatedFleet.start(cluster.admin, {
    nodes: 6,
    timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 1000, statusReportIntervalMs: 10_000 },
  });
});

afterAll(async () => {
  await ctl?.kill('SIGKILL');
  fleet?.stop();
  await cluster?.stop();
});

/** The node as etcd has it (a GET without resourceVersion is read from etcd, not the watch cache). */
async function nodeNow(client: KubeClient, name: string): Promise<Node> {
  return await client.request<Node>({ method: 'GET', path: paths.node(name), timeoutMs: 5000 });
}

const marks = (n: Node) => ({
  ready: n.status?.conditions?.find((c) => c.type === 'Ready')?.status,
  unreachable: (n.spec?.taints ?? []).some((t) => t.key === UNREACHABLE),
});

describe('etcd restored from a backup', () => {
  it('kube-apiserver left running, then restarted: no healthy node marked; the controller relists by itself and lifts the restored taint', async () => {
    const { cp, admin } = cluster;
    ctl = await startController(
      [
        `--kubeconfig=${cp.kubeconfigPath}`,
        '--leader-elect=false',
        `--node-monitor-grace-period=${GRACE_S}s`,
        '--node-startup-grace-period=10s',
        '--watch-silence-threshold=3s',
      ],
      { name: 'restore' },
    );
    onTestFailed(() => console.log(`--- controller log summary:\n${ctl.summary()}`));
    await ctl.waitForLog('Acting: watches healthy and leading', 30_000);
    const [lost, later, ...healthy] = fleet.names;
    if (!lost || !later) throw new Error('no nodes');

    // A node goes silent and is marked; the backup is taken while it is.
    fleet.node(lost).pauseHeartbeats();
    await waitUntil(async () => marks(await nodeNow(admin, lost)).unreachable, {
      timeoutMs: (GRACE_S + 20) * 1000,
      what: `${lost} tainted unreachable`,
    });
    const snapshot = await cp.snapshotEtcd();
    // It recovers after the backup; the controller lifts its taint.
    fleet.node(lost).resumeHeartbeats();
    await waitUntil(async () => !marks(await nodeNow(admin, lost)).unreachable, {
      timeoutMs: 30_000,
      what: `${lost} untainted after recovery`,
    });
    // The cluster moves on (a backup is hours old): etcd's revision goes far past the snapshot's.
    const ahead = await cp.advanceEtcdRevision(5000);
    console.log(`snapshot at revision ${snapshot.revision}, etcd at ${ahead} before the restore`);

    // Healthy nodes are watched for false marks from the restore on, from etcd's copy; `later`
    // too, until it is stopped on purpose.
    const falseMarks = new Set<string>();
    const watched = new Set([later, ...healthy]);
    let watching = true;
    const watchHealthy = (async () => {
      while (watching) {
        for (const name of [...watched]) {
          const n = await nodeNow(admin, name).catch(() => undefined);
          if (n && (marks(n).unreachable || marks(n).ready !== 'True')) falseMarks.add(name);
        }
        await sleep(500);
      }
    })();

    // Phase 1: etcd restored under a running kube-apiserver. Its watch cache stays at the old
    // revision; the controller's watches see nothing new, its fresh Lease reads (from etcd) do.
    await cp.restoreEtcd(snapshot);
    console.log(
      `restored: etcd at revision ${await cp.etcdRevision()}, ${lost} in etcd:`,
      marks(await nodeNow(admin, lost)),
    );
    await sleep(3 * GRACE_S * 1000);
    const lagDetected = await ctl.metric('nlc_watch_lag_detected_total');
    const lostInPhase1 = marks(await nodeNow(admin, lost));
    const watchCounts: Record<string, number> = {};
    for (const resource of ['leases', 'nodes']) {
      for (const m of ['nlc_watch_reconnects_total', 'nlc_watch_relists_total']) {
        watchCounts[`${resource} ${m.slice(10, -6)}`] = await ctl.metric(m, { resource });
      }
    }
    // kube-apiserver keeps a watch cache per resource. Usually the leases' stalls at the revision
    // it had (its etcd watch asks for revisions the restored etcd has not reached): the lease watch
    // shows no renewal for three graces, and every node's re-read finds one it had not shown. A
    // cache may follow the restored history instead (seen for the nodes' alone, and once in CI, 1
    // run in about 10, for both): our watches then deliver that history, and with the leases' doing
    // so there is no lag and the restored taint comes off through the node watch in this phase.
    const stalled = lagDetected > 0;
    console.log(
      `phase 1 (${stalled ? 'the lease watch cache stalled' : 'the watch caches followed the restored history'}): lag detected ${lagDetected} times, ${lost} in etcd:`,
      lostInPhase1,
      watchCounts,
    );
    if (!stalled) expect(lostInPhase1.unreachable, `${lost}'s restored taint lifted in phase 1`).toBe(false);

    // Phase 2: kube-apiserver restarted, as the runbook says. After a stalled cache our
    // resourceVersions are ahead of the new history: the server accepts our watches and sends
    // nothing, and only the watch's own probe finds that out (too_large_resource_version; without
    // it no watch fails after the restart and nothing relists). After a cache that followed the
    // restore they are in the new history, older than the restarted cache's start: 410, relist.
    const logsBeforeRestart = ctl.logs.length;
    await cp.restartApiServer();
    const restartedAt = performance.now();
    const relistReasons = ['too_large_resource_version', 'server_rewound', 'gone'];
    const relisted = await ctl.waitForLog(
      'watch failed',
      60_000,
      (l) => ctl.logs.indexOf(l) >= logsBeforeRestart && relistReasons.includes(String(l.reason)),
    );
    console.log(
      `first ${String(relisted.reason)} ${((performance.now() - restartedAt) / 1000).toFixed(1)} s after the restart (${relisted.resource})`,
    );
    await waitUntil(async () => !marks(await nodeNow(admin, lost)).unreachable, {
      timeoutMs: 30_000,
      what: `${lost}'s restored taint lifted`,
    });
    // Both watches relisted: the one that found the server behind, the other told so (or refused
    // with 410 first, from a resourceVersion older than the new history's oldest). A watch that
    // was refused connections through a slow restart (12 s in a loaded run) waits out its backoff
    // first, up to 30 s (src/watch's cap; seen: 14.6 s after the restart was over).
    await waitUntil(
      () =>
        ['leases', 'nodes'].every((r) =>
          ctl.logs
            .slice(logsBeforeRestart)
            .some(
              (l) => l.msg === 'watch failed' && l.resource === r && relistReasons.includes(String(l.reason)),
            ),
        ),
      { timeoutMs: 35_000, what: 'both watches relisted' },
    );
    console.log(
      `both watches relisted ${((performance.now() - restartedAt) / 1000).toFixed(1)} s after the restart`,
    );

    // The watches follow the new history: a node lost now is marked, and its recovery seen (Ready
    // True written by its kubelet reaches the controller only through the node watch).
    const lagBefore = await ctl.metric('nlc_watch_lag_detected_total');
    console.log(
      `storage outages counted (etcd stopped for the copy, the restore, the restart): ${await ctl.metric('nlc_storage_outage_seconds_total')} s`,
      ctl.logs
        .filter((l) => String(l.msg).startsWith('The API server could not reach its storage'))
        .map((l) => `${l.ts} ${l.outage} (${l.endedBy})`),
    );
    watched.delete(later);
    fleet.node(later).pauseHeartbeats();
    await waitUntil(async () => marks(await nodeNow(admin, later)).unreachable, {
      timeoutMs: (GRACE_S + 20) * 1000,
      what: `${later} tainted unreachable`,
    });
    fleet.node(later).resumeHeartbeats();
    const resumed = performance.now();
    await waitUntil(async () => !marks(await nodeNow(admin, later)).unreachable, {
      timeoutMs: 20_000,
      what: `${later} untainted after its recovery`,
    });
    console.log(
      `${later} untainted ${((performance.now() - resumed) / 1000).toFixed(1)} s after its heartbeats resumed`,
    );
    await sleep(2 * GRACE_S * 1000);
    // The lease watch shows renewals again: no stale lease needs a fresh read any more.
    expect(await ctl.metric('nlc_watch_lag_detected_total')).toBe(lagBefore);
    watching = false;
    await watchHealthy;
    expect([...falseMarks]).toEqual([]);
    expect(await ctl.metric('nlc_transitions_total', { kind: 'marked_unknown' })).toBe(2);
  });
});
