/**
 * What leader election costs, as the Deployment runs it (2 replicas, --leader-elect=true): a
 * leader, a standby and, for comparison, a replica without leader election, all three at the same
 * time on ONE local control plane and simulated fleet, so the machine's load hits them alike
 * (benchmarks run one after the other on a shared VM drift more than the effect). Each is the
 * bundle with the image's Node.js flags (the Dockerfile's ENTRYPOINT) and every leader-election
 * timing at its default (lease 15 s, renew deadline 10 s, retry 2 s). Per round, over a window:
 * CPU of each process and of its main thread per lease renewal the fleet made, event-loop wake-ups
 * (voluntary context switches of the main thread), and at the end VmHWM / VmRSS; plus the
 * machine's busy and stolen CPU. The standby is checked to be a standby and the leader to lead at
 * the end of every round (else exit 1).
 *
 *   flock /tmp/nlc-e2e.lock npx tsx bench/replicas-cost.ts [--nodes=100] [--rounds=3] [--window=60s] [--warmup=20s]
 *       [--json=FILE]   (also write the figures as a results record, bench/results.ts)
 *
 * Build first (npm run build). Starts a control plane: take the shared lock.
 */
import path from 'node:path';
import { SimulatedFleet } from '../src/fleet/fleet.js';
import { startCluster } from '../test/support/cluster.js';
import {
  type ControllerProcess,
  imageNodeFlags,
  startController,
} from '../test/support/controller-process.js';
import { sleep, waitUntil } from '../test/support/wait.js';
import { type MachineShare, machineCpu, machineShare } from './compare/proc.js';
import { median, round } from './compare/stats.js';
import type { ReplicasRecord } from './records.js';
import { jsonOption, recorder, writeResults } from './results.js';
import { cpuOf, memOf, steadyOptions } from './steady.js';

const { nodes, rounds, windowMs, warmupMs } = steadyOptions();
const JSON_FILE = jsonOption();
const record = recorder('replicas-cost');
const MASTER = 'leader_election_master_status';

const cluster = await startCluster();
const fleet = await SimulatedFleet.start(cluster.admin, { nodes, podsPerNode: 2, startConcurrency: 4 });
const renewals = () => [...fleet.kubelets.values()].reduce((n, k) => n + k.stats.renewals, 0);

const replica = (name: string, leaderElect: boolean) =>
  startController(
    [
      `--kubeconfig=${cluster.cp.kubeconfigPath}`,
      `--leader-elect=${leaderElect}`,
      '--node-monitor-grace-period=40s',
      '--node-startup-grace-period=60s',
    ],
    {
      install: { node: process.execPath, main: path.resolve('dist/controller.mjs'), cwd: process.cwd() },
      nodeFlags: imageNodeFlags(),
      env: { POD_NAME: name, POD_NAMESPACE: 'kube-system' },
      name,
    },
  );

const names = ['leader', 'standby', 'no-election'] as const;
type Name = (typeof names)[number];
const procs = new Map<Name, ControllerProcess>();
interface Sample {
  name: Name;
  usPerRenewal: number;
  corePct: number;
  mainPct: number;
  wakeupsPerS: number;
  hwmMiB: number;
  rssMiB: number;
}
const samples: Sample[] = [];
const roundsSeen: Array<{ round: number; renewals: number; machine: MachineShare | undefined }> = [];
try {
  procs.set('leader', await replica('leader', true));
  await waitUntil(async () => (await procs.get('leader')!.metric(MASTER)) === 1 || undefined, {
    timeoutMs: 60_000,
    what: 'the first replica to lead',
  });
  procs.set('standby', await replica('standby', true));
  procs.set('no-election', await replica('no-election', false));
  for (const [name, p] of procs) {
    await waitUntil(async () => (await p.metric('nlc_nodes', { state: 'ready' })) === nodes || undefined, {
      timeoutMs: 60_000,
      what: `${name}: all ${nodes} nodes seen Ready`,
    });
  }
  console.log(
    `${nodes} nodes; pids ${[...procs].map(([n, p]) => `${n} ${p.child.pid}`).join(', ')}; warming up ${warmupMs / 1000} s`,
  );
  await sleep(warmupMs);
  for (let round = 1; round <= rounds; round++) {
    const pid = (n: Name) => procs.get(n)!.child.pid!;
    const start = names.map((n) => ({
      p: cpuOf(`/proc/${pid(n)}`),
      m: cpuOf(`/proc/${pid(n)}/task/${pid(n)}`),
    }));
    const r0 = renewals();
    const machine0 = machineCpu();
    await sleep(windowMs);
    const machine = machineShare(machine0, machineCpu());
    const r = renewals() - r0;
    const line: string[] = [];
    names.forEach((n, i) => {
      const p = cpuOf(`/proc/${pid(n)}`);
      const m = cpuOf(`/proc/${pid(n)}/task/${pid(n)}`);
      const cpuMs = p.cpuMs - start[i]!.p.cpuMs;
      const s: Sample = {
        name: n,
        usPerRenewal: (cpuMs * 1000) / r,
        corePct: (100 * cpuMs) / windowMs,
        mainPct: (100 * (m.cpuMs - start[i]!.m.cpuMs)) / windowMs,
        wakeupsPerS: ((m.wakeups - start[i]!.m.wakeups) * 1000) / windowMs,
        ...memOf(pid(n)),
      };
      samples.push(s);
      line.push(
        `${n} ${s.usPerRenewal.toFixed(0)} µs/renewal (${s.corePct.toFixed(2)}%, ${s.wakeupsPerS.toFixed(0)}/s)`,
      );
    });
    if (
      (await procs.get('leader')!.metric(MASTER)) !== 1 ||
      (await procs.get('standby')!.metric(MASTER)) !== 0
    ) {
      throw new Error(`round ${round}: the leader no longer leads, or the standby does`);
    }
    roundsSeen.push({ round, renewals: r, machine });
    console.log(
      `round ${round}: ${r} renewals; ${line.join('; ')}; machine ${machine ? `${machine.busyPct}% busy, ${machine.stealPct}% stolen` : '?'}`,
    );
  }
} finally {
  await Promise.all([...procs.values()].map((p) => p.kill('SIGTERM')));
  fleet.stop();
  await cluster.stop();
}

const fmt = (xs: number[], d: number) =>
  `${median(xs).toFixed(d)} (${Math.min(...xs).toFixed(d)}-${Math.max(...xs).toFixed(d)})`;
console.log(
  `\n${nodes} nodes, ${rounds} round(s) of ${windowMs / 1000} s, node ${process.version}; median (min-max)`,
);
console.log(
  '| replica | CPU per renewal (µs) | CPU (% of a core) | main thread (% of a core) | wake-ups/s | peak RSS (MiB) | RSS at end (MiB) |',
);
console.log('| --- | --- | --- | --- | --- | --- | --- |');
for (const n of names) {
  const mine = samples.filter((s) => s.name === n);
  const col = (f: (s: Sample) => number, d: number) => fmt(mine.map(f), d);
  console.log(
    `| ${n} | ${col((s) => s.usPerRenewal, 0)} | ${col((s) => s.corePct, 2)} | ${col((s) => s.mainPct, 2)} | ${col((s) => s.wakeupsPerS, 0)} | ${col((s) => s.hwmMiB, 1)} | ${col((s) => s.rssMiB, 1)} |`,
  );
}

if (JSON_FILE) {
  writeResults(
    JSON_FILE,
    record({
      options: { nodes, rounds, windowMs, warmupMs, podsPerNode: 2 },
      rounds: roundsSeen.map((x) => ({
        round: x.round,
        renewals: x.renewals,
        machineCpu: x.machine ?? null,
      })),
      replicas: names.map((n) => ({
        name: n,
        rounds: samples
          .filter((s) => s.name === n)
          .map((s) => ({
            cpuMicrosPerRenewal: round(s.usPerRenewal, 0),
            corePct: round(s.corePct, 2),
            mainThreadPct: round(s.mainPct, 2),
            wakeupsPerS: round(s.wakeupsPerS, 1),
            peakRssMiB: round(s.hwmMiB, 1),
            rssMiB: round(s.rssMiB, 1),
          })),
      })),
    }) satisfies ReplicasRecord,
  );
  console.log(`results: ${JSON_FILE}`);
}
