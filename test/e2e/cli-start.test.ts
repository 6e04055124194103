import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../support/controller-process.js';

/**
 * The built CLI (`node dist/main.js`) where a new user first meets it, before any API server
 * answers: `--version`, `status` with a kubeconfig that is missing or broken or points where
 * nothing answers, and a SIGTERM before the controller's watches synced. What is judged is what
 * the user sees: stdout, stderr, the exit code. (test/e2e/cli.test.ts: the same binary against a
 * real kube-apiserver.)
 */

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
const PACKAGE_VERSION = (
  JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }
).version;

describe('--version', () => {
  it('`npm run build` in a git checkout: the tsc output names the commit it was built from', async () => {
    const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim();
    const r = await runCli(['--version']);
    console.log(`--version -> ${r.stdout.trim()} (HEAD ${head})`);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    const v = PACKAGE_VERSION.replace(/[.]/g, '\\.');
    expect(r.stdout).toMatch(
      new RegExp(
        `^node-lifecycle-controller ${v} \\(revision ${head}(-dirty)?, Node\\.js ${process.version}\\)\\n$`,
      ),
    );
  });
});
