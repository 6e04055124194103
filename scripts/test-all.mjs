#!/usr/bin/env node
// The whole test suite, in order: lint, typecheck, build, the control-plane binaries, kubectl and
// helm (built once from the Go module proxy, cached outside the repo), unit, e2e (loopback API server),
// kind (a real cluster; it fails, saying why, where Docker, kind and kubectl do not answer). Prints
// one closing summary line with the test counts. A skipped test fails the run: a suite that passes
// with skips has not checked what it claims. Usage: node scripts/test-all.mjs [--skip-e2e]
// [--skip-kind] (each an explicit partial run, and the summary says so).
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';

const skipE2e = process.argv.includes('--skip-e2e');
const skipKind = process.argv.includes('--skip-kind');
const started = Date.now();
mkdirSync('.tmp', { recursive: true });

// Seconds per phase, for the closing SUMMARY line (CI's log then shows where the time went).
// Provisioning happens before this script (.ci/run passes its time in NLC_PROVISION_SECONDS).
const phases = {};
const provisioned = Number(process.env.NLC_PROVISION_SECONDS);
if (Number.isFinite(provisioned) && provisioned >= 0) phases.provisioning = provisioned;
let phase = 'checks';

function step(name, cmd, args) {
  const t = Date.now();
  console.log(`\n=== ${name}: ${cmd} ${args.join(' ')}`);
  const r = spawnSync(cmd, args, { stdio: 'inherit' });
  phases[phase] = (phases[phase] ?? 0) + (Date.now() - t) / 1000;
  const secs = ((Date.now() - t) / 1000).toFixed(1);
  if (r.status !== 0) {
    console.log(`\n=== ${name} FAILED after ${secs}s (exit ${r.status ?? r.signal})`);
    summary(`FAILED at ${name}`);
    process.exit(1);
  }
  console.log(`=== ${name} ok in ${secs}s`);
}

const counts = {};
function vitest(project) {
  const out = `.tmp/vitest-${project}.json`;
  step(`${project} tests`, 'npx', [
    'vitest',
    'run',
    '--project',
    project,
    '--reporter=default',
    '--reporter=json',
    `--outputFile.json=${out}`,
  ]);
  const r = JSON.parse(readFileSync(out, 'utf8'));
  counts[project] = {
    passed: r.numPassedTests,
    failed: r.numFailedTests,
    skipped: r.numPendingTests + r.numTodoTests,
  };
}

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

phase = 'lint+typecheck+build';
step('lint', 'npx', ['biome', 'check', '.']);
step('typecheck', 'npx', ['tsc', '-p', 'tsconfig.json']);
step('build', 'npm', ['run', 'build']);
// kubectl renders the manifests in unit and e2e tests; kube-apiserver and etcd are the e2e's, and
// kube-controller-manager runs beside ours in test/e2e/companion.test.ts.
phase = 'tools';
step('control-plane binaries', 'bash', ['scripts/build-control-plane.sh', '--with-kubectl', '--with-kcm']);
// helm lints and renders the chart in the unit tests (test/unit/chart.test.ts).
step('helm binary', 'bash', ['scripts/build-helm.sh']);
phase = 'unit';
vitest('unit');
if (!skipE2e) {
  phase = 'tools';
  step('prometheus binaries', 'bash', ['scripts/build-prometheus.sh']);
  phase = 'e2e';
  vitest('e2e');
}
phase = 'kind';
if (!skipKind) vitest('kind');
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
