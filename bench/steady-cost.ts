/**
 * The controller's cost in steady state (every node healthy, renewing every 10 s), compared across
 * builds or Node.js flags on ONE local control plane and fleet, interleaved (A B A B ...) so that the
 * machine's drifting load hits every variant alike. Per variant and round: start the controller
 * (no leader election), wait until it has synced and is past its start-up writes, let it warm up,
 * then measure for a window:
 *  - CPU of the whole process and of its main thread (utime + stime from /proc), per lease renewal
 *    the fleet made in the window, and as % of a core;
 *  - event-loop wake-ups per second (voluntary context switches of the main thread);
 *  - resident memory: VmHWM (peak) and VmRSS at the end, and the V8 heap from its metrics.
 *
 *   npx tsx bench/steady-cost.ts [--nodes=100] [--window=60s] [--warmup=20s] [--rounds=3]
 *       [--variant=NAME=ENTRY[,NODE_FLAG...][;CONTROLLER_FLAG...]] ...
 *
 * Default variants: `tsc=dist/main.js` (the per-module build the tests run) and
 * `image=dist/controller.mjs` with the image's Node.js flags (the Dockerfile's ENTRYPOINT); build
 * both with `npm run build`.
 * `--variant=floor=bench/watch-floor.mjs[,NODE_FLAG...][;--read-every=MS]` runs the floor instead of
 * the controller: list + watch of the leases with node:https and a JSON.parse per event, nothing else
 * (with --read-every, the socket read once per MS).
 * Example, a V8 flag:  --variant=bundle=dist/controller.mjs --variant=semi1=dist/controller.mjs,--max-semi-space-size=1
 * --json=FILE also writes the figures as a results record (bench/results.ts).
 * Take the shared lock: flock /tmp/nlc-e2e.lock npx tsx bench/steady-cost.ts ...
 */
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { SimulatedFleet } from '../src/fleet/fleet.js';
import { startCluster } from '../test/support/cluster.js';
import { imageNodeFlags, startController } from '../test/support/controller-process.js';
import { sleep, waitUntil } from '../test/support/wait.js';
import { type MachineShare, machineCpu, machineShare } from './compare/proc.js';
import { round as r } from './compare/stats.js';
import type { SteadyRecord } from './records.js';
import { jsonOption, publicPath, recorder, writeResults } from './results.js';
import { args, cpuOf, memOf, steadyOptions } from './steady.js';

interface Variant {
  name: string;
  entry: string;
  nodeFlags: string[];
  /** Extra controller flags (after `;` in --variant). */
  controllerFlags: string[];
}
const variants: Variant[] = (
  args('variant').length
    ? args('variant')
    : ['tsc=dist/main.js', ['image=dist/controller.mjs', ...imageNodeFlags()].join(',')]
).map((v) => {
  const eq = v.indexOf('=');
  if (eq <= 0) {
    console.error(`--variant=${v}: expected NAME=ENTRY[,NODE_FLAG...][;CONTROLLER_FLAG...]`);
    process.exit(2);
  }
  const [run, ...controllerFlags] = v.slice(eq + 1).split(';');
  const [entry, ...nodeFlags] = run!.split(',');
  return { name: v.slice(0, eq), entry: path.resolve(entry!), nodeFlags, controllerFlags };
});
const { nodes, rounds, windowMs, warmupMs } = steadyOptions();
const JSON_FILE = jsonOption();
const record = recorder('steady-cost');
interface Sample {
  variant: string;
  round: number;
  renewals: number;
  cpuMs: number;
  mainMs: number;
  wakeupsPerS: number;
  hwmMiB: number;
  rssMiB: number;
  heapUsedMiB: number;
  /** The whole machine's CPU in the window (all CPUs, every process). */
  machine: MachineShare | undefined;
}

const cluster = await startCluster();
const fleet = await SimulatedFleet.start(cluster.admin, { nodes, podsPerNode: 2, startConcurrency: 4 });
const renewals = () => [...fleet.kubelets.values()].reduce((n, k) => n + k.stats.renewals, 0);
console.log(
  `${nodes} nodes registered; load ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
interface Running {
  pid: number;
  heapUsedMiB(): Promise<number>;
  stop(): Promise<void>;
}

/** The controller, or the floor (bench/watch-floor.mjs: list + watch + JSON.parse, nothing else). */
async function start(v: Variant): Promise<Running> {
  const kubeconfig = `--kubeconfig=${cluster.cp.kubeconfigPath}`;
  if (path.basename(v.entry) === 'watch-floor.mjs') {
    const child = spawn(process.execPath, [...v.nodeFlags, v.entry, kubeconfig, ...v.controllerFlags], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString();
    });
    await waitUntil(() => out.includes(`synced ${nodes}\n`) || undefined, {
      timeoutMs: 60_000,
      what: `${v.name}: listed ${nodes} leases`,
    });
    return {
      pid: child.pid!,
      heapUsedMiB: async () => Number.NaN,
      stop: async () => {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      },
    };
  }
  const ctl = await startController(
    [
      kubeconfig,
      '--leader-elect=false',
      '--node-monitor-grace-period=40s',
      '--node-startup-grace-period=60s',
      ...v.controllerFlags,
    ],
    { install: { node: process.execPath, main: v.entry, cwd: process.cwd() }, nodeFlags: v.nodeFlags },
  );
  // Past the first sync and the start-up writes (the not-ready taints of new nodes, once).
  await waitUntil(async () => (await ctl.metric('nlc_nodes', { state: 'ready' })) === nodes || undefined, {
    timeoutMs: 60_000,
    what: `${v.name}: all ${nodes} nodes seen Ready`,
  });
  return {
    pid: ctl.child.pid!,
    heapUsedMiB: async () => (await ctl.metric('nodejs_heap_size_used_bytes')) / 2 ** 20,
    stop: () => ctl.kill('SIGTERM'),
  };
}

/** How a variant runs, as a reader would type it. */
const commandOf = (v: Variant) =>
  ['node', ...v.nodeFlags, publicPath(v.entry), ...v.controllerFlags].join(' ');

const samples: Sample[] = [];
try {
  for (let round = 1; round <= rounds; round++) {
    for (const v of variants) {
      const run = await start(v);
      const pid = run.pid;
      await sleep(warmupMs);
      const r0 = renewals();
      const p0 = cpuOf(`/proc/${pid}`);
      const m0 = cpuOf(`/proc/${pid}/task/${pid}`);
      const machine0 = machineCpu();
      await sleep(windowMs);
      const machine = machineShare(machine0, machineCpu());
      const p1 = cpuOf(`/proc/${pid}`);
      const m1 = cpuOf(`/proc/${pid}/task/${pid}`);
      const r1 = renewals();
      const mem = memOf(pid);
      const heapUsedMiB = await run.heapUsedMiB();
      await run.stop();
      const s: Sample = {
        variant: v.name,
        round,
        renewals: r1 - r0,
        cpuMs: p1.cpuMs - p0.cpuMs,
        mainMs: m1.cpuMs - m0.cpuMs,
        wakeupsPerS: ((m1.wakeups - m0.wakeups) * 1000) / windowMs,
        ...mem,
        heapUsedMiB,
        machine,
      };
      samples.push(s);
      console.log(
        `round ${round} ${v.name}: ${s.renewals} renewals, CPU ${s.cpuMs} ms (main thread ${s.mainMs} ms), ` +
          `${((s.cpuMs * 1000) / s.renewals).toFixed(0)} µs/renewal, ${((100 * s.cpuMs) / windowMs).toFixed(2)}% of a core, ` +
          `${s.wakeupsPerS.toFixed(0)} wake-ups/s, peak RSS ${s.hwmMiB.toFixed(1)} MiB, RSS ${s.rssMiB.toFixed(1)} MiB, ` +
          `heap used ${heapUsedMiB.toFixed(1)} MiB`,
      );
    }
  }
} finally {
  fleet.stop();
  await cluster.stop();
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
console.log(
  `\n${nodes} nodes, window ${windowMs / 1000} s, ${rounds} round(s), node ${process.version}, load at end ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
console.log(
  '| variant | CPU per renewal (µs) | CPU (% of a core) | main thread (% of a core) | wake-ups/s | peak RSS (MiB) | RSS at end (MiB) | heap used (MiB) |',
);
console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
for (const v of variants) {
  const mine = samples.filter((s) => s.variant === v.name);
  const fmt = (f: (s: Sample) => number, d = 1) => {
    const xs = mine.map(f);
    return `${median(xs).toFixed(d)} (${Math.min(...xs).toFixed(d)}-${Math.max(...xs).toFixed(d)})`;
  };
  console.log(
    `| ${v.name}: \`${commandOf(v)}\` | ${fmt((s) => (s.cpuMs * 1000) / s.renewals, 0)} | ${fmt((s) => (100 * s.cpuMs) / windowMs, 2)} | ${fmt((s) => (100 * s.mainMs) / windowMs, 2)} | ${fmt((s) => s.wakeupsPerS, 0)} | ${fmt((s) => s.hwmMiB)} | ${fmt((s) => s.rssMiB)} | ${fmt((s) => s.heapUsedMiB)} |`,
  );
}

if (JSON_FILE) {
  writeResults(
    JSON_FILE,
    record({
      options: { nodes, rounds, windowMs, warmupMs, podsPerNode: 2 },
      variants: variants.map((v) => ({
        name: v.name,
        command: commandOf(v),
        rounds: samples
          .filter((s) => s.variant === v.name)
          .map((s) => ({
            round: s.round,
            renewals: s.renewals,
            cpuMs: s.cpuMs,
            mainThreadMs: s.mainMs,
            cpuMicrosPerRenewal: r((s.cpuMs * 1000) / s.renewals, 0),
            corePct: r((100 * s.cpuMs) / windowMs, 2),
            wakeupsPerS: r(s.wakeupsPerS, 1),
            peakRssMiB: r(s.hwmMiB, 1),
            rssMiB: r(s.rssMiB, 1),
            heapUsedMiB: Number.isFinite(s.heapUsedMiB) ? r(s.heapUsedMiB, 1) : null,
            machineCpu: s.machine ?? null,
          })),
      })),
    }) satisfies SteadyRecord,
  );
  console.log(`results: ${JSON_FILE}`);
}
