/**
 * What the pod lists of a zone outage cost kube-apiserver and etcd: a local control plane holding
 * many pods (most of them bound to node names that do not exist, as background), a simulated fleet
 * in 3 zones, the built controller; one zone's heartbeats stop. From the outage until every pod of
 * that zone is marked not Ready, counts the controller's pod lists by kind (audit log) and the CPU
 * that kube-apiserver and etcd spent, next to a healthy window of the same length before.
 *
 *   npx tsx bench/pod-list-cost.ts [--nodes=30] [--pods-per-node=5] [--background-pods=6000]
 *     [--pods-watch-cache=on|off] [--main=dist/main.js]
 *
 * --pods-watch-cache=off starts kube-apiserver with --watch-cache-sizes=pods#0: every pod list is
 * then read from etcd, which is what a quorum list (no resourceVersion) costs on a server without
 * consistent reads from the watch cache (Kubernetes <= 1.30, or its ConsistentListFromCache gate
 * off; the gate is gone from the v1.37 server built here, so it cannot be turned off). There, lists
 * with a resourceVersion (0, or NotOlderThan) are still served by the watch cache.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { SimulatedFleet } from '../src/fleet/fleet.js';
import { paths } from '../src/kube/client.js';
import { startCluster } from '../test/support/cluster.js';
import { startController } from '../test/support/controller-process.js';
import { ClusterObserver, readAuditLog } from '../test/support/observer.js';
import { sleep, waitUntil } from '../test/support/wait.js';

function arg(name: string, dflt: string): string {
  const hit = process.argv.find((a) => a.startsWith(`--${name}=`));
  return hit ? hit.slice(name.length + 3) : dflt;
}
const nodes = Number(arg('nodes', '30'));
const podsPerNode = Number(arg('pods-per-node', '5'));
const background = Number(arg('background-pods', '6000'));
const podsCache = arg('pods-watch-cache', 'on');
const main = path.resolve(arg('main', 'dist/main.js'));
if (!(nodes >= 3 && podsPerNode > 0 && background >= 0 && ['on', 'off'].includes(podsCache))) {
  console.error('usage: --nodes=N (>= 3) --pods-per-node=P --background-pods=B --pods-watch-cache=on|off');
  process.exit(2);
}
const GRACE_S = 10;
const UA = 'node-lifecycle-controller/';

/** CPU seconds (user + system) a process has used so far. */
function cpuSeconds(pid: number | undefined): number {
  if (pid === undefined) return Number.NaN;
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

const cluster = await startCluster({
  audit: true,
  auditReads: true,
  apiserverArgs: podsCache === 'off' ? ['--watch-cache-sizes=pods#0'] : [],
});
const { cp, admin } = cluster;
try {
  // Background pods: bound to nodes that do not exist; only their number matters.
  const pod = (i: number) => ({
    metadata: { name: `bg-${i}`, namespace: 'default', labels: { app: 'background' } },
    spec: {
      nodeName: `elsewhere-${i % 500}`,
      containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10' }],
    },
  });
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < background) {
        const i = next++;
        await admin.request({ method: 'POST', path: paths.pods('default'), body: pod(i), timeoutMs: 60_000 });
      }
    }),
  );
  console.log(`${background} background pods in ${((performance.now() - t0) / 1000).toFixed(0)} s`);
  const fleet = await SimulatedFleet.start(admin, {
    nodes,
    podsPerNode,
    timing: { renewIntervalMs: 2000, statusUpdateIntervalMs: 2000 },
  });
  const observer = await ClusterObserver.start(admin);
  const ctl = await startController(
    [
      `--kubeconfig=${cp.kubeconfigPath}`,
      '--leader-elect=false',
      `--node-monitor-grace-period=${GRACE_S}s`,
      '--node-startup-grace-period=20s',
      '--watch-silence-threshold=5s',
    ],
    { install: { node: process.execPath, main, cwd: process.cwd() } },
  );
  try {
    await ctl.waitForLog('Acting: watches healthy and leading', 60_000);
    await sleep(30_000); // start-up work settles
    const lost = fleet.inZone('zone-a').map((k) => k.name);
    const lostPods = lost.flatMap((n) =>
      Array.from({ length: podsPerNode }, (_, i) => `default/${n}-pod-${i}`),
    );
    const cpu = () => ({ api: cpuSeconds(cp.apiserverPid), etcd: cpuSeconds(cp.etcdPid), at: Date.now() });

    // The outage: from the heartbeats' stop until every pod of the zone is marked.
    for (const n of lost) fleet.node(n).pauseHeartbeats();
    const outageFrom = cpu();
    await waitUntil(() => lostPods.every((k) => observer.podReadyStatus(k) === 'False'), {
      timeoutMs: (GRACE_S + 120) * 1000,
      what: 'the zone-a nodes and their pods marked',
    });
    const outageTo = cpu();
    const windowMs = outageTo.at - outageFrom.at;
    // A healthy window of the same length right after (the lost zone stays lost: no more first lists).
    const healthyFrom = cpu();
    await sleep(windowMs);
    const healthyTo = cpu();

    const lists = new Map<string, number>();
    for (const e of readAuditLog(cp.auditLogPath!)) {
      if (!(e.userAgent ?? '').startsWith(UA) || e.verb !== 'list' || e.objectRef?.resource !== 'pods')
        continue;
      const at = Date.parse(e.stageTimestamp ?? '');
      if (!(at >= outageFrom.at && at < outageTo.at)) continue;
      const uri = e.requestURI ?? '';
      const rv = /[?&]resourceVersion=([^&]*)/.exec(uri)?.[1];
      const match = /[?&]resourceVersionMatch=([^&]*)/.exec(uri)?.[1];
      const kind = rv === undefined ? 'quorum' : rv === '0' ? 'rv=0' : `rv=N${match ? `, ${match}` : ''}`;
      lists.set(kind, (lists.get(kind) ?? 0) + 1);
    }
    const d = (a: { api: number; etcd: number }, b: { api: number; etcd: number }) => ({
      api: b.api - a.api,
      etcd: b.etcd - a.etcd,
    });
    const o = d(outageFrom, outageTo);
    const h = d(healthyFrom, healthyTo);
    console.log(
      `controller ${path.relative(process.cwd(), main) || main}; ${nodes} nodes x ${podsPerNode} pods + ${background} background pods; pods watch cache ${podsCache}`,
    );
    console.log(
      `zone-a: ${lost.length} nodes lost; marked with their pods ${(windowMs / 1000).toFixed(1)} s after the outage`,
    );
    console.log(`pod lists in that window: ${[...lists].map(([k, n]) => `${n} ${k}`).join(', ') || 'none'}`);
    console.log(
      `CPU seconds, outage window / healthy window of the same length: kube-apiserver ${o.api.toFixed(2)} / ${h.api.toFixed(2)}, etcd ${o.etcd.toFixed(2)} / ${h.etcd.toFixed(2)}`,
    );
  } finally {
    await ctl.kill();
    observer.stop();
    fleet.stop();
  }
} finally {
  await cluster.stop();
}
