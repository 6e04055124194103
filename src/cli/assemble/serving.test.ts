import { afterEach, describe, expect, it } from 'vitest';
import { systemClock } from '../../clock/clock.js';
import { loadConfig } from '../../config/index.js';
import type { Check } from '../../http/server.js';
import type { Credentials } from '../../kube/credentials.js';
import { memoryLogger } from '../../log/logger.js';
import { createRegistry } from '../../metrics/registry.js';
import { httpServing, type MetricsSecurity, type Serving, secureMetricsServing } from './serving.js';

const configOf = (flags: string[]) =>
  loadConfig(flags, { POD_NAME: 'nlc-0', POD_NAMESPACE: 'nlc-system' }, 'host-0').config;

/** Credentials for the review client (never used: nothing is scraped with a token here). */
const credentials: Credentials = {
  server: new URL('http://127.0.0.1:9'),
  tls: {},
  auth: async () => ({ headers: {} }),
  unauthorized: async () => false,
};

const LOCAL = ['--metrics-bind-address=127.0.0.1:0', '--health-probe-bind-address=127.0.0.1:0'];

async function security(flags: string[], log = memoryLogger()) {
  const registry = createRegistry();
  const sec = await secureMetricsServing({
    config: configOf(flags),
    logger: log,
    credentials,
    observer: () => {},
    userAgent: 'node-lifecycle-controller/1.2.3 (nlc-0)',
    registry,
  });
  return { sec, log, registry };
}

describe('secureMetricsServing', () => {
  const opened: MetricsSecurity[] = [];
  afterEach(() => {
    for (const s of opened.splice(0)) s.close();
  });

  it('HTTPS by default: a self-signed certificate for localhost, the host, loopback and the bind address; reviews on', async () => {
    const { sec, log } = await security(['--metrics-bind-address=10.1.2.3:8443']);
    opened.push(sec);
    expect(sec.serving.secure?.certificate).toBeDefined();
    expect(sec.serving.secure?.auth).toBeDefined();
    expect(sec.serving.requests).toBeDefined();
    expect(log.lines).toEqual([
      expect.objectContaining({
        msg: 'Metrics server certificate',
        source: 'self-signed',
        hosts: ['localhost', 'nlc-0', '127.0.0.1', '::1', '10.1.2.3'],
      }),
    ]);
    // A wildcard bind address is no name of the server.
    const any = await security(['--metrics-bind-address=0.0.0.0:8443']);
    opened.push(any.sec);
    expect(any.log.lines[0]).toMatchObject({ hosts: ['localhost', 'nlc-0', '127.0.0.1', '::1'] });
  });

  it('--metrics-secure=false: plain HTTP, said in a warning; no /metrics at all: nothing said', async () => {
    const plain = await security([...LOCAL, '--metrics-secure=false']);
    expect(plain.sec.serving.secure).toBeUndefined();
    expect(plain.sec.serving.requests).toBeDefined();
    expect(plain.log.lines).toEqual([
      expect.objectContaining({
        level: 'warn',
        msg: 'Serving /metrics over plain HTTP without authentication (--metrics-secure=false)',
      }),
    ]);
    const none = await security(['--metrics-bind-address=0']);
    expect(none.sec.serving.secure).toBeUndefined();
    expect(none.log.lines).toEqual([]);
  });
});

describe('httpServing', () => {
  let serving: Serving | undefined;
  afterEach(async () => {
    await serving?.runnable.stop?.close?.();
    serving = undefined;
  });

  it('listens at its start (group serving): /metrics, and /healthz and /readyz asking the checks at each request', async () => {
    const { sec, registry } = await security([...LOCAL, '--metrics-secure=false']);
    let ready: Check[] = [];
    serving = httpServing({
      config: configOf(LOCAL),
      registry,
      security: sec,
      logger: memoryLogger(),
      clock: systemClock,
      healthz: () => [{ name: 'ping', check: () => undefined }],
      readyz: () => ready,
    });
    expect(serving.runnable).toMatchObject({ name: 'http-servers', group: 'serving' });
    expect(serving.addresses()).toBeUndefined();
    expect(registry.getSingleMetric('nlc_http_open_connections')).toBeUndefined();
    await serving.runnable.start?.(new AbortController().signal);
    const at = serving.addresses();
    expect(at?.metricsScheme).toBe('http');
    const probes = `http://127.0.0.1:${at?.probes?.port}`;
    expect(await (await fetch(`${probes}/healthz`)).text()).toBe('ok');
    expect((await fetch(`${probes}/readyz`)).status).toBe(200);
    ready = [{ name: 'nodes-watch', check: () => 'node watch not synced' }];
    const r = await fetch(`${probes}/readyz`);
    expect(r.status).toBe(500);
    expect(await r.text()).toContain('[-]nodes-watch failed: node watch not synced');
    const metrics = await (await fetch(`http://127.0.0.1:${at?.metrics?.port}/metrics`)).text();
    expect(metrics).toContain('nlc_http_open_connections');
  });

  it('the stop closes the servers and the metrics security', async () => {
    const { sec, registry } = await security([...LOCAL, '--metrics-secure=false']);
    let closed = 0;
    serving = httpServing({
      config: configOf(LOCAL),
      registry,
      security: { ...sec, close: () => closed++ },
      logger: memoryLogger(),
      clock: systemClock,
      healthz: () => [],
      readyz: () => [],
    });
    await serving.runnable.start?.(new AbortController().signal);
    const port = serving.addresses()?.probes?.port;
    await serving.runnable.stop?.close?.();
    expect(closed).toBe(1);
    await expect(fetch(`http://127.0.0.1:${port}/healthz`)).rejects.toThrow();
    // Never started: only the security is closed.
    const idle = httpServing({
      config: configOf(LOCAL),
      registry: createRegistry(),
      security: { ...sec, close: () => closed++ },
      logger: memoryLogger(),
      clock: systemClock,
      healthz: () => [],
      readyz: () => [],
    });
    await idle.runnable.stop?.close?.();
    expect(closed).toBe(2);
    serving = undefined;
  });
});
