#!/usr/bin/env node
// The whole test suite, in order: lint, typecheck, build, unit, e2e (loopback API server), kind (a real
// cluster; skipped with its reason where Docker, kind and kubectl are missing). Prints one closing
// summary line with the test counts. Usage: node scripts/test-all.mjs [--skip-e2e] [--skip-kind]
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';

const skipE2e = process.argv.includes('--skip-e2e');
const skipKind = process.argv.includes('--skip-kind');
const started = Date.now();
mkdirSync('.tmp', { recursive: true });

function step(name, cmd, args) {
  const t = Date.now();
  console.log(`\n=== ${name}: ${cmd} ${args.join(' ')}`);
  const r = spawnSync(cmd, args, { stdio: 'inherit' });
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
  console.log(`\nSUMMARY ${status} | ${parts.join(' | ') || 'no tests ran'} | ${mins} min`);
}

step('lint', 'npx', ['biome', 'check', '.']);
step('typecheck', 'npx', ['tsc', '-p', 'tsconfig.json']);
step('build', 'npm', ['run', 'build']);
vitest('unit');
if (!skipE2e) {
  step('control-plane binaries', 'bash', ['scripts/build-control-plane.sh']);
  step('prometheus binaries', 'bash', ['scripts/build-prometheus.sh']);
  vitest('e2e');
}
if (!skipKind) vitest('kind');
summary('PASSED');
