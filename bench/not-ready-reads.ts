/**
 * API requests the controller sends per not-ready node per minute, counted by the real
 * kube-apiserver's audit log (every request at Metadata level), on a local control plane with a
 * simulated fleet. Stops the heartbeats of some nodes, waits until the controller has marked them
 * and their pods, then counts the controller's requests (by its User-Agent) for a while and prints
 * them by verb and resource, per not-ready node per minute, next to the same count for a window of
 * the same length before the failure (all nodes healthy).
 *
 *   npx tsx bench/not-ready-reads.ts [--nodes=12] [--not-ready=6] [--minutes=10] [--main=dist/main.js]
 *
 * --main runs another build of the controller (e.g. one of an older commit, to compare).
 */
import path from 'node:path';
import { SimulatedFleet } from '../src/fleet/fleet.js';
import { startCluster } from '../test/support/cluster.js';
import { startController } from '../test/support/controller-process.js';
import { ClusterObserver, readAuditLog } from '../test/support/observer.js';
import { sleep, waitUntil } from '../test/support/wait.js';

function arg(name: string, dflt: string): string {
  const hit = process.argv.find((a) => a.startsWith(`--${name}=`));
  return hit ? hit.slice(name.length + 3) : dflt;
}
const nodes = Number(arg('nodes', '12'));
const notReady = Number(arg('not-ready', '6'));
const minutes = Number(arg('minutes', '10'));
const main = path.resolve(arg('main', 'dist/main.js'));
if (!(nodes > 0 && notReady > 0 && notReady <= nodes && minutes > 0)) {
  console.error('usage: --nodes=N --not-ready=K (1 <= K <= N) --minutes=M (M > 0)');
  process.exit(2);
}
const GRACE_S = 10;
const UA = 'node-lifecycle-controller/';

const cluster = await startCluster({ audit: true, auditReads: true });
const fleet = await SimulatedFleet.start(cluster.admin, {
  nodes,
  podsPerNode: 2,
  timing: { renewIntervalMs: 2000, statusUpdateIntervalMs: 2000 },
});
const observer = await ClusterObserver.start(cluster.admin);
const ctl = await startController(
  [
    `--kubeconfig=${cluster.cp.kubeconfigPath}`,
    '--leader-elect=false',
    `--node-monitor-grace-period=${GRACE_S}s`,
    '--node-startup-grace-period=20s',
    '--watch-silence-threshold=5s',
  ],
  { install: { node: process.execPath, main, cwd: process.cwd() } },
);

interface Count {
  total: number;
  byKind: Map<string, number>;
}
function count(from: number, to: number): Count {
  const byKind = new Map<string, number>();
  let total = 0;
  for (const e of readAuditLog(cluster.cp.auditLogPath!)) {
    if (!(e.userAgent ?? '').startsWith(UA) || e.verb === 'watch') continue;
    const at = Date.parse(e.stageTimestamp ?? '');
    if (!(at >= from && at < to)) continue;
    const res = [e.objectRef?.resource, e.objectRef?.subresource].filter(Boolean).join('/');
    const uri = e.requestURI ?? '';
    const rv = /[?&]resourceVersion=([^&]*)/.exec(uri)?.[1];
    const match = /[?&]resourceVersionMatch=([^&]*)/.exec(uri)?.[1];
    const kind = `${e.verb} ${res}${e.verb === 'list' ? (rv === undefined ? ' (quorum)' : rv === '0' ? ' (rv=0)' : ` (rv=N${match ? `, ${match}` : ''})`) : ''}`;
    byKind.set(kind, (byKind.get(kind) ?? 0) + 1);
    total++;
  }
  return { total, byKind };
}

try {
  await ctl.waitForLog('Acting: watches healthy and leading', 60_000);
  // Let the start-up work settle (e.g. removing the not-ready taints admission put on new nodes).
  await sleep(60_000);
  // Baseline: all nodes healthy, same length as the measurement.
  const windowMs = minutes * 60_000;
  const baseFrom = Date.now();
  await sleep(windowMs);
  const baseTo = Date.now();

  const failing = fleet.names.slice(0, notReady);
  for (const n of failing) fleet.node(n).pauseHeartbeats();
  await waitUntil(
    () =>
      failing.every((n) => [0, 1].every((i) => observer.podReadyStatus(`default/${n}-pod-${i}`) === 'False')),
    { timeoutMs: (GRACE_S + 60) * 1000, what: 'the not-ready nodes and their pods marked' },
  );
  const from = Date.now();
  await sleep(windowMs);
  const to = Date.now();

  const base = count(baseFrom, baseTo);
  const during = count(from, to);
  const kinds = [...new Set([...base.byKind.keys(), ...during.byKind.keys()])].sort();
  const perNodeMinute = (n: number, b: number) => ((n - b) / notReady / minutes).toFixed(2);
  console.log(
    `controller ${path.relative(process.cwd(), main) || main}: ${nodes} nodes, ${notReady} not ready, ${minutes} min windows`,
  );
  console.log('requests (no watches)                      healthy  not-ready  per not-ready node per minute');
  for (const k of kinds) {
    const b = base.byKind.get(k) ?? 0;
    const d = during.byKind.get(k) ?? 0;
    console.log(`${k.padEnd(42)} ${String(b).padStart(7)}  ${String(d).padStart(9)}  ${perNodeMinute(d, b)}`);
  }
  console.log(
    `${'all'.padEnd(42)} ${String(base.total).padStart(7)}  ${String(during.total).padStart(9)}  ${perNodeMinute(during.total, base.total)}`,
  );
} finally {
  await ctl.kill();
  observer.stop();
  fleet.stop();
  await cluster.stop();
}
