import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SilentListener, silentListener } from '../../src/kube/testing/dead-listeners.js';
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

let dir: string;
let silent: SilentListener;

/** A kubeconfig for `server` (a token, the certificate not checked: nothing gets that far). */
function kubeconfigFor(name: string, server: string): string {
  const file = path.join(dir, name);
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: c, cluster: {server: "${server}", insecure-skip-tls-verify: true}}]`,
      'users: [{name: u, user: {token: t}}]',
      'contexts: [{name: x, context: {cluster: c, user: u}}]',
      'current-context: x',
    ].join('\n'),
  );
  return file;
}

/** A loopback port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as AddressInfo).port;
  await new Promise((r) => srv.close(r));
  return port;
}

/** stderr is exactly one line, and no stack trace anywhere. */
function oneLine(r: { stdout: string; stderr: string }): string {
  expect(r.stderr.endsWith('\n'), JSON.stringify(r.stderr)).toBe(true);
  expect(r.stderr.trimEnd().split('\n'), JSON.stringify(r.stderr)).toHaveLength(1);
  expect(r.stdout + r.stderr).not.toMatch(/^\s+at /m);
  return r.stderr.trimEnd();
}

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'nlc-cli-start-'));
  silent = await silentListener();
});

afterAll(async () => {
  await silent?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

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

describe('status: kubeconfig problems (exit 2, one line naming the file and the problem)', () => {
  it('a --kubeconfig that does not exist', async () => {
    const missing = path.join(dir, 'no-such-dir', 'kubeconfig');
    const r = await runCli(['status', `--kubeconfig=${missing}`]);
    const line = oneLine(r);
    console.log(`status, missing kubeconfig -> exit ${r.code}: ${line}`);
    expect(r.code).toBe(2);
    expect(line).toBe(`error: --kubeconfig ${missing}: file does not exist`);
    expect(r.stdout).toBe('');
  });

  it('a kubeconfig that is not YAML', async () => {
    const broken = path.join(dir, 'broken.yaml');
    writeFileSync(broken, 'apiVersion: v1\nclusters: [\n');
    const r = await runCli(['status', `--kubeconfig=${broken}`]);
    const line = oneLine(r);
    console.log(`status, malformed kubeconfig -> exit ${r.code}: ${line}`);
    expect(r.code).toBe(2);
    expect(line).toMatch(new RegExp(`^error: kubeconfig ${broken}: not valid YAML: .+ at line 3, column 1$`));
  });

  it('$KUBECONFIG naming files that do not exist', async () => {
    const r = await runCli(['status'], {
      env: { PATH: process.env.PATH ?? '', HOME: dir, KUBECONFIG: path.join(dir, 'nope.yaml') },
    });
    const line = oneLine(r);
    expect(r.code).toBe(2);
    expect(line).toBe(`error: $KUBECONFIG=${path.join(dir, 'nope.yaml')}: none of its files exist`);
  });
});

describe('status: credentials that cannot be had (exit 1, one line)', () => {
  it('an exec credential plugin that fails', async () => {
    const file = path.join(dir, 'exec.yaml');
    writeFileSync(
      file,
      [
        'apiVersion: v1',
        'kind: Config',
        'clusters: [{name: c, cluster: {server: "https://127.0.0.1:1", insecure-skip-tls-verify: true}}]',
        'users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/false, interactiveMode: Never}}}]',
        'contexts: [{name: x, context: {cluster: c, user: u}}]',
        'current-context: x',
      ].join('\n'),
    );
    const r = await runCli(['status', `--kubeconfig=${file}`]);
    const line = oneLine(r);
    console.log(`status, failing exec plugin -> exit ${r.code}: ${line}`);
    expect(r.code).toBe(1);
    expect(line).toMatch(/^error: .*false/);
  });
});

describe('status: an API server that cannot be reached (exit 1, one line naming it and the cause)', () => {
  it('nothing listens at the address: connection refused, at once', async () => {
    const port = await closedPort();
    const kc = kubeconfigFor('refused.yaml', `https://127.0.0.1:${port}`);
    const t0 = performance.now();
    const r = await runCli(['status', `--kubeconfig=${kc}`]);
    const took = performance.now() - t0;
    const line = oneLine(r);
    console.log(`status, closed port -> exit ${r.code} after ${took.toFixed(0)} ms: ${line}`);
    expect(r.code).toBe(1);
    expect(line).toContain(`error: cannot reach the API server https://127.0.0.1:${port}`);
    expect(line).toContain('connection refused');
    expect(took).toBeLessThan(5_000);
  });

  it('something accepts the connection and never answers: gives up within --timeout (15s by default), saying it timed out', async () => {
    // https: the TLS handshake's own bound (10 s, as client-go's) ends it first.
    const kc = kubeconfigFor('silent.yaml', `https://127.0.0.1:${silent.port}`);
    const t0 = performance.now();
    const r = await runCli(['status', `--kubeconfig=${kc}`], { timeoutMs: 40_000 });
    const took = performance.now() - t0;
    const line = oneLine(r);
    console.log(`status, silent https server -> exit ${r.code} after ${took.toFixed(0)} ms: ${line}`);
    expect(r.signal).toBeNull(); // not the test's kill after 40 s
    expect(r.code).toBe(1);
    expect(line).toMatch(
      new RegExp(`^error: cannot reach the API server https://127\\.0\\.0\\.1:${silent.port}: timed out \\(`),
    );
    expect(took).toBeLessThan(16_000);

    // http: the request's own deadline, --timeout.
    const plain = kubeconfigFor('silent-http.yaml', `http://127.0.0.1:${silent.port}`);
    const t1 = performance.now();
    const short = await runCli(['status', `--kubeconfig=${plain}`, '--timeout=3s']);
    const tookShort = performance.now() - t1;
    const shortLine = oneLine(short);
    console.log(
      `status, silent http server, --timeout=3s -> exit ${short.code} after ${tookShort.toFixed(0)} ms: ${shortLine}`,
    );
    expect(short.code).toBe(1);
    expect(shortLine).toBe(
      `error: cannot reach the API server http://127.0.0.1:${silent.port}: no answer within 3s (timed out)`,
    );
    expect(tookShort).toBeGreaterThan(2_900);
    expect(tookShort).toBeLessThan(8_000);
  });

  it('--help of status says how long it waits', async () => {
    const r = await runCli(['status', '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/--timeout duration\n\s+How long to wait for the API server.*\(default 15s\)/);
  });
});
