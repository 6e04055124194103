import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../clock/clock.js';
import { loadConfig } from '../../config/index.js';
import { type StubServer, startStubServer } from '../../kube/testing.js';
import { memoryLogger } from '../../log/logger.js';
import { createRegistry } from '../../metrics/registry.js';
import {
  API_MAX_SOCKETS,
  type ApiClients,
  connectApi,
  ELECTION_MAX_SOCKETS,
  logStart,
  openKubeconfig,
} from './api-clients.js';

const BUILD = { version: '1.2.3', revision: 'abc', nodejsVersion: 'v24.0.0' };

function kubeconfigFile(dir: string, server: string): string {
  const p = path.join(dir, 'kubeconfig.yaml');
  writeFileSync(
    p,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: c, cluster: {server: "${server}", insecure-skip-tls-verify: true}}]`,
      'users: [{name: u, user: {token: t}}]',
      'contexts: [{name: x, context: {cluster: c, user: u}}]',
      'current-context: x',
    ].join('\n'),
  );
  return p;
}

const configOf = (flags: string[]) =>
  loadConfig(flags, { POD_NAME: 'nlc-0', POD_NAMESPACE: 'nlc-system' }, 'host-0').config;

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'nlc-api-clients-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('openKubeconfig and logStart', () => {
  it('says which kubeconfig is used: source, files, server, auth, proxy (and where the proxy comes from)', () => {
    const file = kubeconfigFile(dir, 'https://api.example:6443');
    const log = memoryLogger();
    const direct = openKubeconfig({ config: { kubeconfig: file }, logger: log, env: {}, homeDir: undefined });
    expect(direct.server).toBe('https://api.example:6443');
    expect(log.lines).toEqual([
      expect.objectContaining({
        msg: 'Using kubeconfig',
        source: 'flag',
        paths: [file],
        server: 'https://api.example:6443',
        auth: 'token',
        proxy: 'none',
      }),
    ]);
    expect(log.lines[0]).not.toHaveProperty('proxyFrom');

    const viaProxy = memoryLogger();
    openKubeconfig({
      config: { kubeconfig: file },
      logger: viaProxy,
      env: {},
      homeDir: undefined,
      proxyEnv: { HTTPS_PROXY: 'http://proxy.example:3128' },
    });
    expect(viaProxy.lines[0]).toMatchObject({ proxy: 'http://proxy.example:3128', proxyFrom: 'HTTPS_PROXY' });
  });

  it('Starting names the build and the settings that shape the run (the companion ones in companion mode), then the warnings', () => {
    const log = memoryLogger();
    logStart(configOf(['--node-monitor-grace-period=20s']), BUILD, log);
    expect(log.lines.map((l) => l.msg)).toEqual([
      'Starting',
      '--node-monitor-grace-period is 45s or less: live nodes will be marked Unknown',
    ]);
    expect(log.lines[0]).toEqual(
      expect.objectContaining({
        version: '1.2.3',
        revision: 'abc',
        nodejs: 'v24.0.0',
        identity: 'nlc-0',
        dryRun: false,
        leaderElect: true,
        mode: 'upstream',
        coordinatedLeaderElection: false,
        nodeMonitorGracePeriod: '20s',
        watchSilenceThreshold: '15s',
        watchReadInterval: '0s',
        nodeStartupGracePeriod: '1m0s',
      }),
    );
    expect(log.lines[0]).not.toHaveProperty('companionTaintKey');

    const companion = memoryLogger();
    logStart(configOf(['--mode=companion']), BUILD, companion);
    expect(companion.lines.map((l) => l.msg)).toEqual(['Starting']);
    expect(companion.lines[0]).toHaveProperty('companionTaintKey');
    expect(companion.lines[0]).toHaveProperty('companionEvictAfter');
    expect(companion.lines[0]).toHaveProperty('companionMarkPodsNotReady');
  });
});

describe('connectApi', () => {
  let stub: StubServer;
  /** Requests as they arrive: path, user agent, the socket they came on. */
  const seen: { path: string; agent: string | undefined; socket: unknown }[] = [];
  const held: http.ServerResponse[] = [];
  let hold = false;
  let api: ApiClients | undefined;
  beforeAll(async () => {
    stub = await startStubServer((req, res) => {
      seen.push({ path: req.url ?? '', agent: req.headers['user-agent'], socket: req.socket });
      if (hold) held.push(res);
      else res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  afterEach(() => {
    for (const r of held.splice(0)) r.writeHead(200).end('{}');
    hold = false;
    seen.length = 0;
    api?.runnable.stop?.close?.();
    api = undefined;
  });
  afterAll(() => stub.close());

  async function connect(flags: string[] = []): Promise<ApiClients> {
    const file = kubeconfigFile(dir, stub.url);
    const config = configOf([`--kubeconfig=${file}`, ...flags]);
    const kube = openKubeconfig({ config, logger: memoryLogger(), env: {}, homeDir: undefined });
    api = await connectApi({ kube, config, build: BUILD, registry: createRegistry(), clock: systemClock });
    return api;
  }

  const get = (c: ApiClients['client'], p: string) => c.request({ method: 'GET', path: p });
  const until = async (cond: () => boolean) => {
    for (let i = 0; i < 200 && !cond(); i++) await new Promise((r) => setTimeout(r, 10));
  };

  it('both clients name this controller, its version and identity in the user agent', async () => {
    const { client, electionClient, userAgent } = await connect();
    await get(client, '/api/v1/nodes');
    await get(electionClient, '/apis/coordination.k8s.io/v1/namespaces/nlc-system/leases/x');
    expect(userAgent).toBe('node-lifecycle-controller/1.2.3 (nlc-0)');
    expect(seen.map((s) => s.agent)).toEqual([userAgent, userAgent]);
  });

  it("leader election has its own rate limiter: a lease request does not wait behind the controller's", async () => {
    const { client, electionClient } = await connect(['--kube-api-qps=2', '--kube-api-burst=1']);
    const a = get(client, '/api/v1/nodes/a');
    const b = get(client, '/api/v1/nodes/b'); // waits ~500 ms for a token
    await until(() => seen.length === 1);
    const lease = get(electionClient, '/apis/coordination.k8s.io/v1/namespaces/nlc-system/leases/x');
    await Promise.all([a, b, lease]);
    expect(seen.map((s) => s.path.split('?')[0])).toEqual([
      '/api/v1/nodes/a',
      '/apis/coordination.k8s.io/v1/namespaces/nlc-system/leases/x',
      '/api/v1/nodes/b',
    ]);
  });

  it(`connections: at most ${API_MAX_SOCKETS} for the controller's work, ${ELECTION_MAX_SOCKETS} for leader election`, async () => {
    const { client, electionClient } = await connect(['--kube-api-qps=1000', '--kube-api-burst=1000']);
    hold = true;
    const work = Array.from({ length: API_MAX_SOCKETS + 4 }, (_, i) => get(client, `/api/v1/nodes/n${i}`));
    await until(() => seen.length === API_MAX_SOCKETS);
    await new Promise((r) => setTimeout(r, 100));
    expect(seen).toHaveLength(API_MAX_SOCKETS);
    const leases = Array.from({ length: ELECTION_MAX_SOCKETS + 2 }, (_, i) =>
      get(electionClient, `/apis/coordination.k8s.io/v1/namespaces/nlc-system/leases/l${i}`),
    );
    await until(() => seen.length === API_MAX_SOCKETS + ELECTION_MAX_SOCKETS);
    await new Promise((r) => setTimeout(r, 100));
    expect(seen).toHaveLength(API_MAX_SOCKETS + ELECTION_MAX_SOCKETS);
    hold = false;
    for (const r of held.splice(0)) r.writeHead(200).end('{}');
    await Promise.all([...work, ...leases]);
  });

  it('the runnable (group process) closes both clients: their pooled connections end', async () => {
    const { client, electionClient, runnable } = await connect();
    await get(client, '/api/v1/nodes');
    await get(electionClient, '/apis/coordination.k8s.io/v1/namespaces/nlc-system/leases/x');
    const sockets = seen.map((s) => s.socket as import('node:net').Socket);
    expect(new Set(sockets).size).toBe(2);
    expect(sockets.every((s) => !s.destroyed)).toBe(true);
    const closed = sockets.map((s) => new Promise((r) => s.once('close', r)));
    expect(runnable).toMatchObject({ name: 'api-clients', group: 'process' });
    await runnable.stop?.close?.();
    // At once, not after the server's keep-alive timeout (5 s).
    const late = new Promise((r) => setTimeout(() => r('late'), 1_000));
    expect(await Promise.race([Promise.all(closed), late])).not.toBe('late');
    api = undefined;
  });
});
