#!/usr/bin/env node
// The whole test suite: lint, typecheck, build, the control-plane binaries, kubectl and helm (built
// once from the Go module proxy, cached outside the repo), unit, then e2e (loopback API server) and
// kind (a real cluster; it fails, saying why, where Docker, kind and kubectl do not answer) side by
// side: both spend most of their time waiting on grace periods, and the kind suite's output is
// prefixed `[kind] `. Prints one closing summary line with the test counts and the time of each
// phase. A skipped test fails the run: a suite that passes with skips has not checked what it
// claims. Usage: node scripts/test-all.mjs [--skip-e2e] [--skip-kind] (each an explicit partial
// run, and the summary says so) [--serial] (kind after e2e, not beside it).
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';

const skipE2e = process.argv.includes('--skip-e2e');
const skipKind = process.argv.includes('--skip-kind');
const serial = process.argv.includes('--serial');
const started = Date.now();
mkdirSync('.tmp', { recursive: true });

// Seconds per phase, for the closing SUMMARY line (CI's log then shows where the time went).
// Provisioning happens before this script (.ci/run passes its time in NLC_PROVISION_SECONDS).
const phases = {};
const provisioned = Number(process.env.NLC_PROVISION_SECONDS);
if (Number.isFinite(provisioned) && provisioned >= 0) phases.provisioning = provisioned;
const counts = {};

function summary(status) {
  const parts = Object.entries(counts).map(
    ([p, c]) => `${p}: ${c.passed} passed, ${c.failed} failed, ${c.skipped} skipped`,
  );
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
function vitestAsync(project, prefix) {
  const t = Date.now();
  console.log(`\n=== ${project} tests: npx ${vitestArgs(project).join(' ')}`);
  const child = spawn('npx', vitestArgs(project), { stdio: prefix ? ['ignore', 'pipe', 'pipe'] : 'inherit' });
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
const e2eAndKind = Date.now();
if (serial) {
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
const partial = [skipE2e && 'e2e not run (--skip-e2e)', skipKind && 'kind not run (--skip-kind)'].filter(
  Boolean,
);
summary(partial.length ? `PASSED, partial run: ${partial.join(', ')}` : 'PASSED');
