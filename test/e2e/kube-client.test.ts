import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { startConnectProxy, type TestProxy } from '../../src/kube/testing/connect-proxy.js';
import { type Issued, issue } from '../../src/kube/testing/pki.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import {
  type ControllerProcess,
  exitWithin,
  runCli,
  startController,
} from '../support/controller-process.js';
import { FlakyTcpProxy } from '../support/flaky-tcp-proxy.js';
import { type AuditEvent, ClusterObserver, readAuditLog } from '../support/observer.js';
import { sleep, waitUntil } from '../support/wait.js';

/**
 * The API client of the built controller against the real kube-apiserver: proxies (kubeconfig
 * proxy-url and HTTPS_PROXY through a real CONNECT proxy on loopback), exec-plugin credentials
 * recovering from a 401, client certificate files rotating, the shared rate limiter and
 * watch-cache pod re-lists (counted in the API server's audit log), and a fatal exit on an
 * unhandled rejection or exception.
 */

const GRACE_MS = 5000;
const UR_NE = 'node.kubernetes.io/unreachable:NoExecute';
const HERE = path.dirname(fileURLToPath(import.meta.url));
const FAULT_INJECTOR = path.resolve(HERE, '..', 'support', 'fault-injector.mjs');

let cluster: TestCluster;
let fleet: SimulatedFleet;
let observer: ClusterObserver;
let dir: string;
let clientCa: Issued;
const running: ControllerProcess[] = [];

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'nlc-e2e-kube-'));
  // Client certificates signed by a CA of ours, which the API server trusts.
  clientCa = issue({ cn: 'nlc-e2e-client-ca', ca: true });
  writeFileSync(path.join(dir, 'client-ca.crt'), clientCa.cert);
  cluster = await startCluster({
    audit: true,
    auditReads: true,
    apiserverArgs: [`--client-ca-file=${path.join(dir, 'client-ca.crt')}`],
  });
  fleet = await SimulatedFleet.start(cluster.admin, {
    nodes: 12,
    podsPerNode: 1,
    timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 1000 },
  });
  observer = await ClusterObserver.start(cluster.admin);
});

afterAll(async () => {
  for (const c of running) await c.kill('SIGKILL');
  observer?.stop();
  fleet?.stop();
  await cluster?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const caData = () => readFileSync(path.join(cluster.cp.dir, 'certs', 'apiserver.crt')).toString('base64');

function kubeconfig(name: string, cluster_: string, user: string): string {
  const p = path.join(dir, `${name}.kubeconfig`);
  writeFileSync(
    p,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: c, cluster: {${cluster_}}}]`,
      `users: [{name: u, user: {${user}}}]`,
      'contexts: [{name: x, context: {cluster: c, user: u}}]',
      'current-context: x',
    ].join('\n'),
    { mode: 0o600 },
  );
  return p;
}

const baseFlags = (kc: string, extra: string[] = []) => [
  `--kubeconfig=${kc}`,
  '--leader-elect=false',
  `--node-monitor-grace-period=${GRACE_MS / 1000}s`,
  '--node-startup-grace-period=10s',
  '--watch-silence-threshold=3s',
  ...extra,
];

async function start(
  name: string,
  flags: string[],
  env: Record<string, string> = {},
): Promise<ControllerProcess> {
  const c = await startController(flags, { env: { POD_NAME: name, ...env }, name });
  running.push(c);
  onTestFailed(() => console.log(`--- ${name} log summary:\n${c.summary()}`));
  return c;
}

/** Requests the controller with this POD_NAME sent, by the audit log (watches included). */
function requestsOf(name: string): AuditEvent[] {
  return readAuditLog(cluster.cp.auditLogPath!).filter(
    (e) => (e.userAgent ?? '').includes(`(${name})`) && e.stage !== 'RequestReceived',
  );
}

async function markedUnreachable(node: string, since: number): Promise<void> {
  await waitUntil(() => observer.taintsAt(node, [UR_NE], since), {
    timeoutMs: GRACE_MS + 15_000,
    what: `${node} tainted unreachable:NoExecute`,
  });
}

describe('API client of the built controller against the real kube-apiserver', () => {
  it('kubeconfig proxy-url: everything, watches included, goes through the CONNECT proxy', async () => {
    const proxy: TestProxy = await startConnectProxy();
    try {
      const kc = kubeconfig(
        'proxy-url',
        `server: "${cluster.cp.server}", certificate-authority-data: ${caData()}, proxy-url: "${proxy.url}"`,
        `token: ${cluster.cp.adminToken}`,
      );
      const ctl = await start('nlc-e2e-proxy-url', baseFlags(kc));
      const using = await ctl.waitForLog('Using kubeconfig', 10_000);
      expect(using).toMatchObject({ proxy: proxy.url, proxyFrom: 'kubeconfig proxy-url' });
      await ctl.waitForLog('Acting: watches healthy and leading', 20_000);
      expect(proxy.tunnels.length).toBeGreaterThanOrEqual(1);
      expect(new Set(proxy.tunnels)).toEqual(new Set([cluster.cp.server.replace('https://', '')]));
      const node = 'sim-zone-a-000';
      const t0 = performance.now();
      fleet.node(node).pauseHeartbeats();
      try {
        await markedUnreachable(node, t0);
      } finally {
        fleet.node(node).resumeHeartbeats();
      }
      // Cut the proxy: the controller loses its watches, so it goes blind.
      await proxy.close();
      await ctl.waitForLog('Blind: the lease watch is not healthy, marking nothing', 15_000);
      await ctl.kill();
    } finally {
      await proxy.close();
    }
  });

  it('HTTPS_PROXY: a server name only the proxy can resolve; NO_PROXY for it means direct (and unreachable)', async () => {
    const port = new URL(cluster.cp.server).port;
    const proxy = await startConnectProxy({ hosts: { 'api.nlc.test': '127.0.0.1' } });
    try {
      // The API server's certificate names "kubernetes"; the proxy knows where api.nlc.test is.
      const kc = kubeconfig(
        'https-proxy',
        `server: "https://api.nlc.test:${port}", tls-server-name: kubernetes, certificate-authority-data: ${caData()}`,
        `token: ${cluster.cp.adminToken}`,
      );
      const env = {
        PATH: process.env.PATH ?? '',
        HOME: dir,
        HTTPS_PROXY: proxy.url,
        NO_PROXY: '10.0.0.0/8,.cluster.local',
      };
      const ok = await runCli(['status', `--kubeconfig=${kc}`], { env });
      expect(ok.stderr).toBe('');
      expect(ok.code).toBe(0);
      expect(ok.stdout).toContain('sim-zone-b-000');
      expect(proxy.tunnels).toContain(`api.nlc.test:${port}`);
      const tunnels = proxy.tunnels.length;
      // Direct, the name does not resolve: status keeps retrying; it gets 8 s.
      const direct = await runCli(['status', `--kubeconfig=${kc}`], {
        env: { ...env, NO_PROXY: 'nlc.test' },
        timeoutMs: 8_000,
      });
      expect(direct.code).not.toBe(0);
      expect(proxy.tunnels.length).toBe(tunnels);
      // A SOCKS5 proxy is refused at start, by name.
      const socks = await runCli([`--kubeconfig=${kc}`], {
        env: { ...env, HTTPS_PROXY: 'socks5://127.0.0.1:1080' },
      });
      expect(socks.code).toBe(2);
      expect(socks.stderr + socks.stdout).toMatch(
        /HTTPS_PROXY: socks5:\/\/127\.0\.0\.1:1080: SOCKS5 proxies are not supported/,
      );
    } finally {
      await proxy.close();
    }
  });

  it('exec plugin: a token the server refuses makes it run again, and the request is retried', async () => {
    const runs = path.join(dir, 'exec-runs');
    const plugin = path.join(dir, 'plugin.mjs');
    // First run: a token the API server does not know; later runs: the admin token.
    writeFileSync(
      plugin,
      `import { appendFileSync, existsSync, readFileSync } from 'node:fs';
const n = existsSync(${JSON.stringify(runs)}) ? readFileSync(${JSON.stringify(runs)}, 'utf8').length : 0;
appendFileSync(${JSON.stringify(runs)}, 'x');
const token = n === 0 ? 'not-a-valid-token' : ${JSON.stringify(cluster.cp.adminToken)};
process.stdout.write(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status: { token } }));
`,
    );
    const kc = kubeconfig(
      'exec',
      `server: "${cluster.cp.server}", certificate-authority-data: ${caData()}`,
      `exec: {apiVersion: client.authentication.k8s.io/v1, command: "${process.execPath}", args: ["${plugin}"]}`,
    );
    const ctl = await start('nlc-e2e-exec', baseFlags(kc));
    await ctl.waitForLog('Acting: watches healthy and leading', 20_000);
    expect(readFileSync(runs, 'utf8')).toBe('xx');
    const refused = requestsOf('nlc-e2e-exec').filter((e) => e.responseStatus?.code === 401);
    expect(refused.length).toBeGreaterThanOrEqual(1);
    const node = 'sim-zone-b-001';
    const t0 = performance.now();
    fleet.node(node).pauseHeartbeats();
    try {
      await markedUnreachable(node, t0);
    } finally {
      fleet.node(node).resumeHeartbeats();
    }
    expect(readFileSync(runs, 'utf8')).toBe('xx');
    await ctl.kill();
  });

  it('client certificate files rotated on disk: new requests authenticate with the new pair within seconds', async () => {
    const certFile = path.join(dir, 'client.crt');
    const keyFile = path.join(dir, 'client.key');
    const write = (cn: string) => {
      const pair = issue({ cn, orgs: ['system:masters'], usage: ['client'] }, clientCa);
      writeFileSync(`${certFile}.new`, pair.cert);
      writeFileSync(`${keyFile}.new`, pair.key, { mode: 0o600 });
      renameSync(`${certFile}.new`, certFile);
      renameSync(`${keyFile}.new`, keyFile);
    };
    write('nlc-e2e-cert-1');
    const kc = kubeconfig(
      'certs',
      `server: "${cluster.cp.server}", certificate-authority-data: ${caData()}`,
      `client-certificate: "${certFile}", client-key: "${keyFile}"`,
    );
    const ctl = await start('nlc-e2e-certs', baseFlags(kc));
    await ctl.waitForLog('Acting: watches healthy and leading', 20_000);
    const users = () => new Set(requestsOf('nlc-e2e-certs').map((e) => e.user.username));
    expect(users()).toEqual(new Set(['nlc-e2e-cert-1']));
    const rotatedAt = Date.now();
    write('nlc-e2e-cert-2');
    // Requests go on (lease watch re-opens, node re-checks); within the 5 s check they switch.
    const node = 'sim-zone-c-001';
    fleet.node(node).pauseHeartbeats();
    try {
      await waitUntil(() => users().has('nlc-e2e-cert-2'), {
        timeoutMs: 20_000,
        what: 'a request as nlc-e2e-cert-2',
      });
    } finally {
      fleet.node(node).resumeHeartbeats();
    }
    const after = requestsOf('nlc-e2e-certs').filter(
      (e) => Date.parse(e.requestReceivedTimestamp ?? '') > rotatedAt + 10_000 && e.verb !== 'watch',
    );
    // Once noticed, no new request uses the old pair (watches opened before may run on).
    expect(after.filter((e) => e.user.username !== 'nlc-e2e-cert-2')).toEqual([]);
    await ctl.waitForLog('Client certificate reloaded', 1000);
    await ctl.kill();
  });

  it('one rate limiter for reads and writes (--kube-api-qps/--kube-api-burst); pod lists are served from the watch cache', async () => {
    const qps = 5;
    const burst = 5;
    const name = 'nlc-e2e-budget';
    const ctl = await start(
      name,
      baseFlags(cluster.cp.kubeconfigPath, [`--kube-api-qps=${qps}`, `--kube-api-burst=${burst}`]),
    );
    await ctl.waitForLog('Acting: watches healthy and leading', 20_000);
    const failing = [
      'sim-zone-a-002',
      'sim-zone-b-002',
      'sim-zone-c-002',
      'sim-zone-a-003',
      'sim-zone-b-003',
      'sim-zone-c-003',
    ];
    for (const n of failing) fleet.node(n).pauseHeartbeats();
    try {
      await waitUntil(() => failing.every((n) => observer.podReadyStatus(`default/${n}-pod-0`) === 'False'), {
        timeoutMs: GRACE_MS + 40_000,
        what: 'the failed nodes and their pods marked',
      });
      const podLists = (node: string) =>
        requestsOf(name).filter(
          (e) =>
            e.verb === 'list' &&
            e.objectRef?.resource === 'pods' &&
            new URL(e.requestURI ?? '/', 'https://x').searchParams.get('fieldSelector') ===
              `spec.nodeName=${node}`,
        );
      // The first re-list comes 30 s after the first list.
      await waitUntil(() => failing.every((n) => podLists(n).length >= 2), {
        timeoutMs: 50_000,
        what: 'a second pod list for every failed node',
      });
      for (const n of failing) {
        const [first, second] = podLists(n).map((e) => ({
          at: Date.parse(e.requestReceivedTimestamp ?? ''),
          q: new URL(e.requestURI ?? '/', 'https://x').searchParams,
        }));
        // First: from the watch cache (resourceVersion=0, never an etcd read of every pod in the
        // cluster on a server without consistent reads from the cache). Re-list: not older than it.
        expect(first!.q.get('resourceVersion'), n).toBe('0');
        expect(first!.q.get('resourceVersionMatch'), n).toBeNull();
        expect(second!.q.get('resourceVersion'), n).toMatch(/^\d+$/);
        expect(second!.q.get('resourceVersionMatch'), n).toBe('NotOlderThan');
        // 30 s after the first list was due; that one may have waited a few seconds for a token.
        expect(second!.at - first!.at, n).toBeGreaterThanOrEqual(20_000);
      }
      // No stretch of time saw more requests (watches excepted) than the bucket allows. The server
      // stamps a request when it reads it, not when the limiter let it go: 1 s of allowance for a
      // loaded machine where the API server may read a few requests late and then at once.
      const times = requestsOf(name)
        .filter((e) => e.verb !== 'watch')
        .map((e) => Date.parse(e.requestReceivedTimestamp ?? ''))
        .sort((a, b) => a - b);
      expect(times.length).toBeGreaterThan(6 * 4);
      let worst = { excess: Number.NEGATIVE_INFINITY, count: 0, seconds: 0 };
      for (let i = 0; i < times.length; i++) {
        for (let j = i; j < times.length; j++) {
          const seconds = (times[j]! - times[i]!) / 1000;
          const count = j - i + 1;
          const excess = count - (burst + qps * (seconds + 1));
          if (excess > worst.excess) worst = { excess, count, seconds };
        }
      }
      console.log(`rate limit: ${times.length} requests; tightest window ${JSON.stringify(worst)}`);
      expect(worst.excess).toBeLessThanOrEqual(0);
      // client-go's name (and the deprecated nlc_ one, kept for one release).
      expect(await ctl.metric('rest_client_rate_limiter_duration_seconds_count')).toBeGreaterThan(0);
      expect(await ctl.metric('nlc_api_rate_limiter_duration_seconds_count')).toBeGreaterThan(0);
    } finally {
      for (const n of failing) fleet.node(n).resumeHeartbeats();
    }
    await ctl.kill();
  });

  it.each([
    [
      'an unhandled promise rejection',
      'rejection',
      'Unhandled promise rejection: exiting',
      'injected unhandled rejection',
    ],
    ['an uncaught exception', 'exception', 'Uncaught exception: exiting', 'injected uncaught exception'],
  ])('exits 1 after logging %s', async (_what, fault, msg, err) => {
    const ctl = await start(`nlc-e2e-fatal-${fault}`, baseFlags(cluster.cp.kubeconfigPath), {
      NODE_OPTIONS: `--import=${FAULT_INJECTOR}`,
      NLC_TEST_FAULT: fault,
    });
    await ctl.waitForLog('Acting: watches healthy and leading', 20_000);
    ctl.child.kill('SIGUSR2');
    const exit = await exitWithin(ctl, 10_000);
    expect(exit.code).toBe(1);
    const line = ctl.logs.find((l) => l.msg === msg);
    expect(line).toMatchObject({ level: 'error', err });
  });
  it('network not ready at start: its first connections hang, fail after the 10 s TLS handshake bound and the retry syncs (not after the 1m0s list timeout)', async () => {
    // The kind case: a replica restarted before pod networking works; its first connections to the
    // API server hang for good. New connections work once the network is up, 2 s later here.
    const proxy = await FlakyTcpProxy.start({
      host: '127.0.0.1',
      port: Number(new URL(cluster.cp.server).port),
    });
    try {
      const kc = path.join(dir, 'net-not-ready.kubeconfig');
      proxy.writeKubeconfig(cluster.cp.kubeconfigPath, kc);
      proxy.blackhole(true);
      const t0 = performance.now();
      const ctl = await start('nlc-e2e-net-not-ready', baseFlags(kc));
      await waitUntil(() => proxy.counts.blackholed >= 1, { timeoutMs: 10_000, what: 'a first connection' });
      await sleep(2000);
      proxy.blackhole(false);
      await ctl.waitForLog('Acting: watches healthy and leading', 60_000);
      const readyAfter = (performance.now() - t0) / 1000;
      console.log(`net-not-ready: acting ${readyAfter.toFixed(1)} s after start`);
      const failed = ctl.logs.filter((l) => l.msg === 'watch failed');
      expect(failed.length).toBeGreaterThanOrEqual(1);
      expect(JSON.stringify(failed[0])).toMatch(/TLS handshake with 127\.0\.0\.1:\d+: no answer within 10s/);
      // 10 s for the handshake, the first backoff (0.8 s +-20%), then a list; it was 61 s.
      expect(readyAfter).toBeLessThan(20);
      await ctl.kill();
    } finally {
      await proxy.close();
    }
  });
});
