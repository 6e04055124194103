/**
 * Where the controller's resident memory comes from in its first seconds, per variant, against one
 * local control plane and fleet: RSS sampled every 50 ms from start until synced + a settle time,
 * then a breakdown of the final RSS from /proc/<pid>/smaps (the node binary's pages, anonymous
 * memory incl. the V8 heap, malloc's heap, shared libraries).
 *
 *   npx tsx bench/startup-memory.ts [--nodes=100] [--rounds=2] [--settle=10s]
 *       [--variant=NAME=ENTRY[,NODE_FLAG...][;ENV=VALUE...]] ...
 *
 * Take the shared lock: flock /tmp/nlc-e2e.lock npx tsx bench/startup-memory.ts ...
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { tryParseDuration } from '../src/clock/duration.js';
import { SimulatedFleet } from '../src/fleet/fleet.js';
import { startCluster } from '../test/support/cluster.js';
import { imageNodeFlags, startController } from '../test/support/controller-process.js';
import { sleep, waitUntil } from '../test/support/wait.js';

function args(name: string): string[] {
  return process.argv.filter((a) => a.startsWith(`--${name}=`)).map((a) => a.slice(name.length + 3));
}
const arg = (name: string, dflt: string) => args(name).at(-1) ?? dflt;

interface Variant {
  name: string;
  entry: string;
  nodeFlags: string[];
  env: Record<string, string>;
}
const variants: Variant[] = (
  args('variant').length ? args('variant') : [['image=dist/controller.mjs', ...imageNodeFlags()].join(',')]
).map((v) => {
  const eq = v.indexOf('=');
  if (eq <= 0) {
    console.error(`--variant=${v}: expected NAME=ENTRY[,NODE_FLAG...][;ENV=VALUE...]`);
    process.exit(2);
  }
  const [run, ...envs] = v.slice(eq + 1).split(';');
  const [entry, ...nodeFlags] = run!.split(',');
  const env = Object.fromEntries(envs.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
  return { name: v.slice(0, eq), entry: path.resolve(entry!), nodeFlags, env };
});
const nodes = Number(arg('nodes', '100'));
const rounds = Number(arg('rounds', '2'));
const settle = tryParseDuration(arg('settle', '10s'));
const settleMs = settle.ok ? settle.ms : -1;
if (!(Number.isInteger(nodes) && nodes > 0 && Number.isInteger(rounds) && rounds > 0 && settleMs >= 0)) {
  console.error('--nodes and --rounds need whole numbers > 0, --settle a duration such as 10s');
  process.exit(2);
}

const kib = (s: string, k: string) => Number(new RegExp(`^${k}:\\s*(\\d+)`, 'm').exec(s)?.[1] ?? 0);
/** Resident KiB of a process by what backs it: the executable, other files, malloc heap, stack, other anonymous. */
function breakdown(pid: number): Record<string, number> {
  const exe = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0]!;
  const out: Record<string, number> = { exe: 0, libs: 0, brk: 0, anon: 0, other: 0 };
  let kind = 'other';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      const name = head[1] ?? '';
      kind =
        name === ''
          ? 'anon'
          : name === '[heap]'
            ? 'brk'
            : name === exe || name.endsWith('/bin/node')
              ? 'exe'
              : name.startsWith('/')
                ? 'libs'
                : 'other';
    } else if (line.startsWith('Rss:')) out[kind]! += kib(line, 'Rss');
  }
  return out;
}

const cluster = await startCluster();
const fleet = await SimulatedFleet.start(cluster.admin, { nodes, podsPerNode: 2, startConcurrency: 4 });
console.log(`${nodes} nodes registered`);
try {
  for (let round = 1; round <= rounds; round++) {
    for (const v of variants) {
      const ctl = await startController(
        [
          `--kubeconfig=${cluster.cp.kubeconfigPath}`,
          '--leader-elect=false',
          '--node-monitor-grace-period=40s',
          '--node-startup-grace-period=60s',
        ],
        {
          install: { node: process.execPath, main: v.entry, cwd: process.cwd() },
          nodeFlags: v.nodeFlags,
          env: v.env,
        },
      );
      const pid = ctl.child.pid!;
      const t0 = Date.now();
      const timeline: string[] = [];
      let last = 0;
      const sampler = setInterval(() => {
        try {
          const st = readFileSync(`/proc/${pid}/status`, 'utf8');
          const rss = kib(st, 'VmRSS') / 1024;
          if (Math.abs(rss - last) >= 1) {
            timeline.push(`${((Date.now() - t0) / 1000).toFixed(2)}s:${rss.toFixed(1)}`);
            last = rss;
          }
        } catch {}
      }, 50);
      await waitUntil(
        async () => (await ctl.metric('nlc_nodes', { state: 'ready' })) === nodes || undefined,
        {
          timeoutMs: 60_000,
          what: `${v.name}: all ${nodes} nodes seen Ready`,
        },
      );
      const syncedS = ((Date.now() - t0) / 1000).toFixed(1);
      await sleep(settleMs);
      clearInterval(sampler);
      const st = readFileSync(`/proc/${pid}/status`, 'utf8');
      const b = breakdown(pid);
      const heap = (await ctl.metric('nodejs_heap_size_total_bytes')) / 2 ** 20;
      const heapUsed = (await ctl.metric('nodejs_heap_size_used_bytes')) / 2 ** 20;
      const threads = kib(st, 'Threads');
      await ctl.kill('SIGTERM');
      const mib = (k: number) => (k / 1024).toFixed(1);
      console.log(
        `round ${round} ${v.name}: synced ${syncedS}s, peak ${mib(kib(st, 'VmHWM'))} MiB, now ${mib(kib(st, 'VmRSS'))} ` +
          `(exe ${mib(b.exe!)}, libs ${mib(b.libs!)}, malloc brk ${mib(b.brk!)}, anon ${mib(b.anon!)}, other ${mib(b.other!)}); ` +
          `V8 heap total ${heap.toFixed(1)} used ${heapUsed.toFixed(1)} MiB; ${threads} threads\n  RSS MiB over time: ${timeline.join(' ')}`,
      );
    }
  }
} finally {
  fleet.stop();
  await cluster.stop();
}
