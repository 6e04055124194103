#!/usr/bin/env node
// The whole test suite: lint, typecheck, build, the control-plane binaries, kubectl and helm (built
// once from the Go module proxy, cached outside the repo), unit, then e2e (loopback API server) and
// kind (a real cluster; it fails, saying why, where Docker, kind and kubectl do not answer) side by
// side: both spend most of their time waiting on grace periods, and the kind suite's output is
// prefixed `[kind] `. Prints one closing summary line with the test counts and the time of each
// phase. A skipped test fails the run: a suite that passes with skips has not checked what it
// claims. The fault simulator (test/sim) runs beside e2e and kind at the lowest CPU priority.
// Usage: node scripts/test-all.mjs [--skip-e2e] [--skip-kind] [--skip-sim] (each an explicit
// partial run, and the summary says so) [--serial] (one phase after another).
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';

const skipE2e = process.argv.includes('--skip-e2e');
const skipKind = process.argv.includes('--skip-kind');
const skipSim = process.argv.includes('--skip-sim');
const serial = process.argv.includes('--serial');
const started = Date.now();
mkdirSync('.tmp', { recursive: true });
for (const f of readdirSync('.tmp')) if (/^sim-[a-z-]+\.json$/.test(f)) rmSync(`.tmp/${f}`);

// Seconds per phase, for the closing SUMMARY line (CI's log then shows where the time went).
// Provisioning happens before this script (.ci/run passes its time in NLC_PROVISION_SECONDS).
const phases = {};
const provisioned = Number(process.env.NLC_PROVISION_SECONDS);
if (Number.isFinite(provisioned) && provisioned >= 0) phases.provisioning = provisioned;
const counts = {};

/** The simulator's figures (its budget files write .tmp/sim-<family>.json): seeds, simulated hours, wall time. */
let simLine;
function simFigures() {
  let seeds = 0;
  let hours = 0;
  let wall = 0;
  let families = 0;
  for (const f of readdirSync('.tmp').filter((n) => /^sim-[a-z-]+\.json$/.test(n))) {
    const r = JSON.parse(readFileSync(`.tmp/${f}`, 'utf8'));
    seeds += r.seeds;
    hours += r.simulatedHours;
    wall = Math.max(wall, r.wallSeconds);
    families++;
  }
  simLine = () => {
    // The guard checks are counted once their run settled (after this is computed).
    const guards = counts['sim-guards'];
    return `sim budget: ${hours.toFixed(0)} simulated hours, ${seeds} seeds in ${families} families, ${phases.sim?.toFixed(0) ?? '?'}s; guards: ${guards ? guards.passed : 0} checks`;
  };
}

function summary(status) {
  const parts = Object.entries(counts).map(
    ([p, c]) => `${p}: ${c.passed} passed, ${c.failed} failed, ${c.skipped} skipped`,
  );
  if (simLine) parts.push(simLine());
  const mins = ((Date.now() - started) / 60000).toFixed(1);
  const times = Object.entries(phases)
    .map(([p, secs]) => `${p} ${Math.round(secs)}s`)
    .join(', ');
  console.log(`\nSUMMARY ${status} | ${parts.join(' | ') || 'no tests ran'} | ${mins} min | ${times}`);
}

function fail(name, secs, how) {
  console.log(`\n=== ${name} FAILED after ${secs}s (${how})`);
  summary(`FAILED at ${name}`);
  process.exit(1);
}

/** Runs one step to its end, its output inline; its time counts in `phase`. */
function step(phase, name, cmd, args) {
  const t = Date.now();
  console.log(`\n=== ${name}: ${cmd} ${args.join(' ')}`);
  const r = spawnSync(cmd, args, { stdio: 'inherit' });
  phases[phase] = (phases[phase] ?? 0) + (Date.now() - t) / 1000;
  const secs = ((Date.now() - t) / 1000).toFixed(1);
  if (r.status !== 0) fail(name, secs, `exit ${r.status ?? r.signal}`);
  console.log(`=== ${name} ok in ${secs}s`);
}

const vitestArgs = (project) => [
  'vitest',
  'run',
  '--project',
  project,
  '--reporter=default',
  '--reporter=json',
  `--outputFile.json=.tmp/vitest-${project}.json`,
];

function countsOf(project) {
  const r = JSON.parse(readFileSync(`.tmp/vitest-${project}.json`, 'utf8'));
  counts[project] = {
    passed: r.numPassedTests,
    failed: r.numFailedTests,
    skipped: r.numPendingTests + r.numTodoTests,
  };
}

/**
 * Runs the vitest project in the background; its lines are printed as they come, prefixed with
 * `prefix` (none: inline). Resolves with how it ended and its time.
 */
function vitestAsync(project, prefix, { nice = false } = {}) {
  const t = Date.now();
  const [cmd, args] = nice
    ? ['nice', ['-n', '19', 'npx', ...vitestArgs(project)]]
    : ['npx', vitestArgs(project)];
  console.log(`\n=== ${project} tests: ${cmd} ${args.join(' ')}`);
  const child = spawn(cmd, args, { stdio: prefix ? ['ignore', 'pipe', 'pipe'] : 'inherit' });
  if (prefix) {
    for (const stream of [child.stdout, child.stderr]) {
      let rest = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk) => {
        const lines = (rest + chunk).split('\n');
        rest = lines.pop() ?? '';
        for (const line of lines) process.stdout.write(`${prefix}${line}\n`);
      });
      stream.on('end', () => {
        if (rest) process.stdout.write(`${prefix}${rest}\n`);
      });
    }
  }
  return new Promise((resolve) => {
    child.on('close', (code, signal) => {
      phases[project] = (Date.now() - t) / 1000;
      resolve({ project, code, signal, secs: ((Date.now() - t) / 1000).toFixed(1) });
    });
  });
}

/** Both projects' results; a project that failed fails the run (after both ended). */
async function settle(runs) {
  const results = (await Promise.all(runs)).flat();
  for (const r of results) {
    try {
      countsOf(r.project);
    } catch {
      /* no report: it failed before writing one */
    }
  }
  for (const r of results) {
    if (r.code !== 0) fail(`${r.project} tests`, r.secs, `exit ${r.code ?? r.signal}`);
    console.log(`=== ${r.project} tests ok in ${r.secs}s`);
  }
}

step('lint+typecheck+build', 'lint', 'npx', ['biome', 'check', '.']);
step('lint+typecheck+build', 'typecheck', 'npx', ['tsc', '-p', 'tsconfig.json']);
step('lint+typecheck+build', 'build', 'npm', ['run', 'build']);
// kubectl renders the manifests in unit and e2e tests; kube-apiserver and etcd are the e2e's, and
// kube-controller-manager runs beside ours in test/e2e/companion.test.ts.
step('tools', 'control-plane binaries', 'bash', [
  'scripts/build-control-plane.sh',
  '--with-kubectl',
  '--with-kcm',
]);
// helm lints and renders the chart in the unit tests (test/unit/chart.test.ts).
step('tools', 'helm binary', 'bash', ['scripts/build-helm.sh']);
await settle([vitestAsync('unit')]);
if (!skipE2e) step('tools', 'prometheus binaries', 'bash', ['scripts/build-prometheus.sh']);
// The kind suite's release rehearsal: an OCI registry and cosign (scripts/release.sh).
if (!skipKind) {
  step('tools', 'registry binary', 'bash', ['scripts/build-registry.sh']);
  step('tools', 'cosign binary', 'bash', ['scripts/build-cosign.sh']);
}
const e2eAndKind = Date.now();
// The fault simulator (test/sim, docs/guarantees.md): its budget of seeds, then each safety guard
// removed in turn, which must make its recorded seed find a violation. CPU-bound and judged in
// virtual time, it runs beside e2e and kind at the lowest priority (nice 19): they spend most of
// their time waiting on grace periods, and their latency bounds never wait for it.
const sim = async () => {
  const budget = await vitestAsync('sim', '[sim] ', { nice: true });
  const runs =
    budget.code === 0 ? [budget, await vitestAsync('sim-guards', '[sim] ', { nice: true })] : [budget];
  simFigures();
  return runs;
};
if (serial) {
  if (!skipSim) await settle([sim()]);
  if (!skipE2e) await settle([vitestAsync('e2e')]);
  if (!skipE2e) await settle([vitestAsync('e2e-timing')]);
  if (!skipKind) await settle([vitestAsync('kind')]);
} else {
  // The e2e files with latency claims (project e2e-timing) run one at a time after the others,
  // beside nothing but the kind suite's tail.
  const e2e = async () => {
    const all = await vitestAsync('e2e');
    return all.code === 0 ? [all, await vitestAsync('e2e-timing')] : [all];
  };
  await settle([
    ...(skipE2e ? [] : [e2e()]),
    ...(skipKind ? [] : [vitestAsync('kind', skipE2e ? undefined : '[kind] ')]),
    ...(skipSim ? [] : [sim()]),
  ]);
}
if (!skipE2e && !skipKind) phases['e2e+kind wall'] = (Date.now() - e2eAndKind) / 1000;
const skipped = Object.entries(counts).filter(([, c]) => c.skipped > 0);
if (skipped.length > 0) {
  const which = skipped.map(([p, c]) => `${c.skipped} in ${p}`).join(', ');
  console.log(`\n=== skipped tests (${which}): every test must run; see the SKIP lines above`);
  summary(`FAILED: skipped tests (${which})`);
  process.exit(1);
}
const partial = [
  skipE2e && 'e2e not run (--skip-e2e)',
  skipKind && 'kind not run (--skip-kind)',
  skipSim && 'simulator not run (--skip-sim)',
].filter(Boolean);
summary(partial.length ? `PASSED, partial run: ${partial.join(', ')}` : 'PASSED');
