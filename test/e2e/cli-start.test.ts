import { execFileSync } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net, { type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { buildInfo } from '../../src/cli/build-info.js';
import { runController } from '../../src/cli/run.js';
import { loadConfig } from '../../src/config/config.js';
import { type SilentListener, silentListener } from '../../src/kube/testing/dead-listeners.js';
import { memoryLogger } from '../../src/log/logger.js';
import { exitWithin, runCli, startController } from '../support/controller-process.js';
import { sleep, waitUntil } from '../support/wait.js';

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

describe('the controller: a signal before its watches synced', () => {
  it('SIGTERM a second after start, against a server that never answers: the shutdown is logged and the exit code is 0', async () => {
    const kc = kubeconfigFor('controller-silent.yaml', `https://127.0.0.1:${silent.port}`);
    const cp = await startController(
      [`--kubeconfig=${kc}`, '--leader-elect-lease-duration=4s', '--leader-elect-renew-deadline=3s'],
      { env: { POD_NAME: 'cli-start-0', POD_NAMESPACE: 'nlc-e2e-cli-start' }, name: 'cli-start-0' },
    );
    onTestFailed(() => console.log(`--- log summary:\n${cp.summary()}`));
    await sleep(1_000);
    expect(cp.logs.some((l) => String(l.msg).startsWith('Acting'))).toBe(false);
    const t0 = performance.now();
    cp.child.kill('SIGTERM');
    const e = await exitWithin(cp, 15_000);
    const shutting = cp.logs.find((l) => l.msg === 'Shutting down');
    console.log(
      `SIGTERM before sync -> exit ${e.code} (signal ${e.signal}) after ${(e.at - t0).toFixed(0)} ms; ` +
        `${JSON.stringify(shutting)} ${JSON.stringify(cp.logs.find((l) => l.msg === 'Stopped'))}`,
    );
    expect(e).toMatchObject({ code: 0, signal: null });
    expect(shutting).toMatchObject({ level: 'info', reason: 'SIGTERM' });
    expect(String(shutting?.during)).toContain('before the node list synced');
    expect(cp.logs.some((l) => l.msg === 'Stopped')).toBe(true);
    expect(cp.logs.filter((l) => l.level === 'error')).toEqual([]);
  });

  it('in process: a SIGTERM while it is still starting (before its servers are up) is kept, and the shutdown runs as soon as it can', async () => {
    const kc = kubeconfigFor('in-process-silent.yaml', `https://127.0.0.1:${silent.port}`);
    const { config } = loadConfig(
      [
        `--kubeconfig=${kc}`,
        '--metrics-bind-address=127.0.0.1:0',
        '--metrics-secure=false',
        '--health-probe-bind-address=127.0.0.1:0',
      ],
      { POD_NAME: 'cli-start-1', POD_NAMESPACE: 'nlc-e2e-cli-start' },
      os.hostname(),
    );
    const logger = memoryLogger(0);
    const exits: number[] = [];
    const signals = new EventEmitter();
    const t0 = performance.now();
    const starting = runController({
      config,
      logger,
      env: {},
      build: buildInfo(),
      exit: (c) => exits.push(c),
      signals,
    });
    // runController runs up to its first await (the credentials) before this line.
    signals.emit('SIGTERM');
    await starting;
    const returned = performance.now() - t0;
    await waitUntil(() => exits.length > 0, { timeoutMs: 15_000, what: 'the exit after the shutdown' });
    const msgs = logger.lines.map((l) => l.msg);
    console.log(
      `in process: runController returned after ${returned.toFixed(0)} ms; exits ${JSON.stringify(exits)}; ${JSON.stringify(msgs)}`,
    );
    expect(exits).toEqual([0]);
    expect(logger.lines.find((l) => l.msg === 'Shutting down')).toMatchObject({ reason: 'SIGTERM' });
    expect(msgs.indexOf('Shutting down')).toBeGreaterThan(msgs.indexOf('Serving health probes'));
    expect(msgs).toContain('Stopped');
    // It did not wait for the node list (up to 30 s) before returning.
    expect(returned).toBeLessThan(10_000);
  });
});

describe('the controller: values it accepts but warns about', () => {
  const GRACE_WARNING = '--node-monitor-grace-period is 45s or less: live nodes will be marked Unknown';

  async function startLogs(name: string, flags: string[]): Promise<Record<string, unknown>[]> {
    const kc = kubeconfigFor(`${name}.yaml`, `https://127.0.0.1:${silent.port}`);
    const cp = await startController([`--kubeconfig=${kc}`, ...flags], {
      env: { POD_NAME: name, POD_NAMESPACE: 'nlc-e2e-cli-start' },
      name,
    });
    cp.child.kill('SIGTERM');
    expect((await exitWithin(cp, 15_000)).code).toBe(0);
    return cp.logs;
  }

  it('--node-monitor-grace-period of 45s or less in upstream mode: one warning at start naming the flag, the value and why; none in companion mode or at the default', async () => {
    const short = await startLogs('cli-start-grace', ['--node-monitor-grace-period=20s']);
    const warned = short.filter((l) => l.msg === GRACE_WARNING);
    console.log(`upstream, grace 20s -> ${JSON.stringify(warned)}`);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: 'warn', flag: '--node-monitor-grace-period', value: '20s' });
    expect(String(warned[0]!.why)).toContain('HTTP/2 health check (30s idle + 15s ping timeout)');

    const companion = await startLogs('cli-start-companion', [
      '--mode=companion',
      '--node-monitor-grace-period=20s',
    ]);
    expect(companion.find((l) => l.msg === 'Starting')).toMatchObject({ mode: 'companion' });
    expect(companion.filter((l) => l.msg === GRACE_WARNING)).toEqual([]);

    const defaults = await startLogs('cli-start-default', []);
    expect(defaults.find((l) => l.msg === 'Starting')).toMatchObject({ nodeMonitorGracePeriod: '50s' });
    expect(defaults.filter((l) => l.msg === GRACE_WARNING)).toEqual([]);
  });
});
