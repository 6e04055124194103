/**
 * The controller in steady state, held open for a tracer or profiler: a local control plane, a
 * simulated fleet of N healthy nodes, and the controller as the image runs it (no leader election),
 * until Ctrl-C. Prints the controller's pid once every node is seen Ready. What it is for
 * (docs/benchmarks.md, "sixth"): which wake-ups an idle controller has and where its CPU goes.
 *
 *   flock /tmp/nlc-e2e.lock npx tsx bench/steady-hold.ts [--nodes=100] [--entry=dist/controller.mjs]
 *       [--node-flag=FLAG ...] [-- CONTROLLER_FLAG ...]
 *   strace -f -tt -T -e trace='!futex' -p PID -o wakeups.txt      # every epoll_wait and what follows
 *   perf record -F 4999 -g -p PID                                  # with --node-flag=--perf-basic-prof-only-functions
 */
import path from 'node:path';
import { SimulatedFleet } from '../src/fleet/fleet.js';
import { startCluster } from '../test/support/cluster.js';
import { imageNodeFlags, startController } from '../test/support/controller-process.js';
import { waitUntil } from '../test/support/wait.js';

const dashdash = process.argv.indexOf('--');
const own = dashdash === -1 ? process.argv.slice(2) : process.argv.slice(2, dashdash);
const controllerFlags = dashdash === -1 ? [] : process.argv.slice(dashdash + 1);
const values = (name: string) =>
  own.filter((a) => a.startsWith(`--${name}=`)).map((a) => a.slice(name.length + 3));
for (const a of own) {
  if (!/^--(nodes|entry|node-flag)=/.test(a)) {
    console.error(
      `${a}: unknown; expected --nodes=N, --entry=FILE, --node-flag=FLAG, then -- and controller flags`,
    );
    process.exit(2);
  }
}
const nodes = Number(values('nodes').at(-1) ?? '100');
if (!(Number.isInteger(nodes) && nodes > 0)) {
  console.error('--nodes needs a whole number > 0');
  process.exit(2);
}
const entry = path.resolve(values('entry').at(-1) ?? 'dist/controller.mjs');

const cluster = await startCluster();
const fleet = await SimulatedFleet.start(cluster.admin, { nodes, podsPerNode: 2, startConcurrency: 4 });
const ctl = await startController(
  [
    `--kubeconfig=${cluster.cp.kubeconfigPath}`,
    '--leader-elect=false',
    '--node-monitor-grace-period=40s',
    '--node-startup-grace-period=60s',
    ...controllerFlags,
  ],
  {
    install: { node: process.execPath, main: entry, cwd: process.cwd() },
    nodeFlags: [...imageNodeFlags(), ...values('node-flag')],
  },
);
await waitUntil(async () => (await ctl.metric('nlc_nodes', { state: 'ready' })) === nodes || undefined, {
  timeoutMs: 60_000,
  what: `all ${nodes} nodes seen Ready`,
});
console.log(`controller pid ${ctl.child.pid}: ${nodes} nodes Ready; Ctrl-C to stop`);
await new Promise<void>((resolve) => process.once('SIGINT', resolve));
await ctl.kill('SIGTERM');
fleet.stop();
await cluster.stop();
