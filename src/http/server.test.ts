import { X509Certificate } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls, { type TLSSocket } from 'node:tls';
import { Counter, type Registry } from 'prom-client';
import { VirtualTimeScheduler } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import { type Clock, systemClock } from '../clock/clock.js';
import { buildConfig } from '../config/config.js';
import { parseArgs } from '../config/flags.js';
import { KubeClient } from '../kube/client.js';
import { loopbackServer } from '../kube/testing.js';
import { silentLogger } from '../log/logger.js';
import { createRegistry } from '../metrics/registry.js';
import { createHttpConnectionMetrics } from './connections.js';
import { type AuthDecision, createDelegatedAuthMetrics, DelegatedAuth } from './delegated-auth.js';
import { createMetricsServerMetrics, type HttpServers, startHttpServers } from './server.js';
import { createServingCertMetrics, ServingCertificate } from './serving-cert.js';
import { connects } from './testing.js';
import { selfSignedCert } from './x509.js';

let servers: HttpServers | undefined;
const closers: (() => unknown)[] = [];
afterEach(async () => {
  await servers?.close();
  servers = undefined;
  for (const c of closers.splice(0)) await c();
});

describe('bind addresses as Go binds them', () => {
  it('the default flags (":port") serve both ports on ::1 and on 127.0.0.1; explicit loopbacks only their own family', async () => {
    // The defaults, with port 0 instead of 8080/8081 (other processes may hold those here).
    const cfg = buildConfig(
      parseArgs(['--metrics-bind-address=:0', '--health-probe-bind-address=:0']),
      {},
      'host',
    );
    expect(parseArgs([]).values['metrics-bind-address']).toBe(':8080');
    expect(parseArgs([]).values['health-probe-bind-address']).toBe(':8081');
    servers = await startHttpServers({
      metrics: { address: cfg.metricsAddress, registry: createRegistry({ defaultMetrics: false }) },
      probes: {
        address: cfg.probeAddress,
        healthz: () => [{ name: 'ping', check: () => undefined }],
        readyz: () => [],
      },
      logger: silentLogger,
      clock: systemClock,
    });
    for (const port of [servers.metrics!.port, servers.probes!.port]) {
      expect(await connects('::1', port), `[::1]:${port}`).toBe(true);
      expect(await connects('127.0.0.1', port), `127.0.0.1:${port}`).toBe(true);
    }
    expect((await fetch(`http://[::1]:${servers.probes!.port}/healthz`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${servers.probes!.port}/healthz`)).status).toBe(200);
    expect((await fetch(`http://[::1]:${servers.metrics!.port}/metrics`)).status).toBe(200);
    await servers.close();
    servers = undefined;

    // Explicit addresses bind what they name.
    servers = await startHttpServers({
      metrics: {
        address: { host: '127.0.0.1', port: 0 },
        registry: createRegistry({ defaultMetrics: false }),
      },
      probes: { address: { host: '::1', port: 0 }, healthz: () => [], readyz: () => [] },
      logger: silentLogger,
      clock: systemClock,
    });
    expect(await connects('127.0.0.1', servers.metrics!.port)).toBe(true);
    expect(await connects('::1', servers.metrics!.port)).toBe(false);
    expect(await connects('::1', servers.probes!.port)).toBe(true);
    expect(await connects('127.0.0.1', servers.probes!.port)).toBe(false);
  });
});

describe('http servers', () => {
  it('serves /metrics from the injected registry and healthz/readyz in the Kubernetes format', async () => {
    const registry = createRegistry({ defaultMetrics: false });
    new Counter({ name: 'nlc_test_total', help: 'test', registers: [registry] }).inc(3);
    let leaderHealthy: string | undefined;
    servers = await startHttpServers({
      metrics: { address: { host: '127.0.0.1', port: 0 }, registry },
      probes: {
        address: { host: '127.0.0.1', port: 0 },
        healthz: () => [{ name: 'leader-election', check: () => leaderHealthy }],
        readyz: () => [{ name: 'informer-sync', check: () => undefined }],
      },
      logger: silentLogger,
      clock: systemClock,
    });
    const base = (p: number) => `http://127.0.0.1:${p}`;
    const metrics = await fetch(`${base(servers.metrics!.port)}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('nlc_test_total 3');
    // Probes are not on the metrics port and vice versa.
    expect((await fetch(`${base(servers.metrics!.port)}/healthz`)).status).toBe(404);
    expect((await fetch(`${base(servers.probes!.port)}/metrics`)).status).toBe(404);

    const ok = await fetch(`${base(servers.probes!.port)}/healthz`);
    expect(ok.status).toBe(200);
    expect(await ok.text()).toBe('ok');
    const verbose = await (await fetch(`${base(servers.probes!.port)}/readyz?verbose`)).text();
    expect(verbose).toContain('[+]informer-sync ok');

    leaderHealthy = 'not renewed for 40s';
    const bad = await fetch(`${base(servers.probes!.port)}/healthz`);
    expect(bad.status).toBe(500);
    expect(await bad.text()).toContain('[-]leader-election failed: not renewed for 40s');
  });
});

/** GET over TLS (the self-signed certificate is not verified here: its content is checked instead). */
async function httpsGet(
  port: number,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string; fingerprint: string }> {
  return await new Promise((resolve, reject) => {
    const req = https.request(
      { host: '127.0.0.1', port, path, headers, rejectUnauthorized: false, agent: false },
      (res) => {
        let body = '';
        res.on('data', (c: Buffer) => {
          body += c.toString();
        });
        res.on('end', () => {
          const sock = res.socket as TLSSocket;
          resolve({
            status: res.statusCode ?? 0,
            body,
            fingerprint: sock.getPeerCertificate().fingerprint256,
          });
        });
      },
    );
    req.on('error', reject);
    req.end();
  });
}

/** GET over plain HTTP on a connection of its own. */
async function httpGet(port: number, path: string): Promise<{ status: number; body: string }> {
  return await new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => {
        body += c.toString();
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

const leafFingerprint = (pem: string) => new X509Certificate(pem).fingerprint256;

describe('metrics server robustness', () => {
  it('answers an unparsable request target with 400 on both ports and keeps serving', async () => {
    const registry = createRegistry({ defaultMetrics: false });
    const requests = createMetricsServerMetrics(registry);
    servers = await startHttpServers({
      metrics: { address: { host: '127.0.0.1', port: 0 }, registry, requests },
      probes: {
        address: { host: '127.0.0.1', port: 0 },
        healthz: () => [{ name: 'ping', check: () => undefined }],
        readyz: () => [],
      },
      logger: silentLogger,
      clock: systemClock,
    });
    const port = servers.metrics!.port;
    const probes = servers.probes!.port;
    const statusLine = (p: number) =>
      new Promise<string>((resolve, reject) => {
        const sock = net.connect(p, '127.0.0.1', () =>
          sock.write('GET http://[zz HTTP/1.1\r\nHost: x\r\n\r\n'),
        );
        sock.once('data', (d) => {
          resolve(d.toString().split('\r\n')[0]!);
          sock.destroy();
        });
        sock.once('error', reject);
      });
    expect(await statusLine(port)).toBe('HTTP/1.1 400 Bad Request');
    expect(await statusLine(probes)).toBe('HTTP/1.1 400 Bad Request');
    expect((await fetch(`http://127.0.0.1:${port}/metrics`)).status).toBe(200);
    expect((await fetch(`http://127.0.0.1:${probes}/healthz`)).status).toBe(200);
    expect((await requests.get()).values.map((v) => `${v.labels.code}=${v.value}`).sort()).toEqual([
      '200=1',
      '400=1',
    ]);
  });
});

describe('secure metrics server', () => {
  it('serves /metrics over HTTPS only, 200/401/403/429/503 as the auth decides, counted by code; probes stay plain HTTP', async () => {
    const registry = createRegistry({ defaultMetrics: false });
    new Counter({ name: 'nlc_test_total', help: 'test', registers: [registry] }).inc(7);
    const requests = createMetricsServerMetrics(registry);
    const certificate = ServingCertificate.selfSigned({ hosts: ['localhost', '127.0.0.1'], now: Date.now() });
    const decisions: Record<string, AuthDecision> = {
      'Bearer good': { code: 200, reason: 'allowed' },
      'Bearer no-role': { code: 403, reason: 'user "x" cannot get path "/metrics"' },
      'Bearer busy': { code: 429, reason: 'too many' },
      'Bearer down': { code: 503, reason: 'tokenreview failed' },
    };
    const seen: string[] = [];
    servers = await startHttpServers({
      metrics: {
        address: { host: '127.0.0.1', port: 0 },
        registry,
        requests,
        secure: {
          certificate,
          auth: {
            check: async (h, path, verb) => {
              seen.push(`${h} ${path} ${verb}`);
              return decisions[h ?? ''] ?? { code: 401, reason: 'a bearer token is required' };
            },
          },
        },
      },
      probes: {
        address: { host: '127.0.0.1', port: 0 },
        healthz: () => [{ name: 'ping', check: () => undefined }],
        readyz: () => [],
      },
      logger: silentLogger,
      clock: systemClock,
    });
    expect(servers.metricsScheme).toBe('https');
    const port = servers.metrics!.port;
    const ok = await httpsGet(port, '/metrics', { authorization: 'Bearer good' });
    expect(ok.status).toBe(200);
    expect(ok.body).toContain('nlc_test_total 7');
    expect(ok.fingerprint).toBe(leafFingerprint(certificate.current().cert));
    const none = await httpsGet(port, '/metrics');
    expect(none.status).toBe(401);
    expect(none.body).not.toContain('nlc_test_total');
    expect((await httpsGet(port, '/metrics', { authorization: 'Bearer no-role' })).status).toBe(403);
    expect((await httpsGet(port, '/metrics', { authorization: 'Bearer busy' })).status).toBe(429);
    const down = await httpsGet(port, '/metrics', { authorization: 'Bearer down' });
    expect(down.status).toBe(503);
    expect(down.body).toContain('tokenreview failed');
    // Other paths: 404 without a review.
    expect((await httpsGet(port, '/healthz', { authorization: 'Bearer good' })).status).toBe(404);
    expect(seen).toEqual([
      'Bearer good /metrics get',
      'undefined /metrics get',
      'Bearer no-role /metrics get',
      'Bearer busy /metrics get',
      'Bearer down /metrics get',
    ]);
    const byCode = Object.fromEntries(
      (await requests.get()).values.map((v) => [String(v.labels.code), v.value]),
    );
    expect(byCode).toEqual({ '200': 1, '401': 1, '403': 1, '404': 1, '429': 1, '503': 1 });
    // Plain HTTP on the TLS port gets no metrics.
    const plain = await fetch(`http://127.0.0.1:${port}/metrics`, {
      headers: { authorization: 'Bearer good' },
    }).then(
      async (r) => ({ status: r.status, body: await r.text() }),
      () => ({ status: 0, body: '' }),
    );
    expect(plain.body).not.toContain('nlc_test_total');
    expect(plain.status).not.toBe(200);
    // Probes: plain HTTP, no token.
    expect((await fetch(`http://127.0.0.1:${servers.probes!.port}/healthz`)).status).toBe(200);
  });

  it('serves the new pair after --tls-cert-file/--tls-private-key-file change; a bad pair keeps the old one and is counted', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nlc-tls-'));
    try {
      const certFile = join(dir, 'tls.crt');
      const keyFile = join(dir, 'tls.key');
      const write = (c: { certPem: string; keyPem: string }) => {
        writeFileSync(certFile, c.certPem);
        writeFileSync(keyFile, c.keyPem);
      };
      const first = selfSignedCert({ hosts: ['localhost'], commonName: 'first', now: Date.now() });
      write(first);
      const registry = createRegistry({ defaultMetrics: false });
      const metrics = createServingCertMetrics(registry);
      const certificate = await ServingCertificate.fromFiles({
        certFile,
        keyFile,
        clock: systemClock,
        logger: silentLogger,
        metrics,
        pollMs: 50,
      });
      closers.push(() => certificate.close());
      servers = await startHttpServers({
        metrics: {
          address: { host: '127.0.0.1', port: 0 },
          registry,
          secure: { certificate, auth: { check: async () => ({ code: 200, reason: 'allowed' }) } },
        },
        probes: { address: undefined, healthz: () => [], readyz: () => [] },
        logger: silentLogger,
        clock: systemClock,
      });
      const port = servers.metrics!.port;
      const served = async () => (await httpsGet(port, '/metrics')).fingerprint;
      expect(await served()).toBe(leafFingerprint(first.certPem));

      const second = selfSignedCert({ hosts: ['localhost'], commonName: 'second', now: Date.now() });
      write(second);
      await waitFor(async () => (await served()) === leafFingerprint(second.certPem));
      expect((await metrics.reloads.get()).values).toEqual([{ labels: { result: 'success' }, value: 1 }]);
      const notAfter = (await metrics.notAfter.get()).values[0]!.value;
      expect(notAfter * 1000).toBe(new Date(new X509Certificate(second.certPem).validTo).getTime());

      // A certificate with someone else's key: not served, counted, the second pair stays.
      const third = selfSignedCert({ hosts: ['localhost'], commonName: 'third', now: Date.now() });
      writeFileSync(certFile, third.certPem);
      await waitFor(async () =>
        (await metrics.reloads.get()).values.some((v) => v.labels.result === 'error' && v.value === 1),
      );
      expect(await served()).toBe(leafFingerprint(second.certPem));
      // The matching key arrives (a rotation written in two steps): served.
      writeFileSync(keyFile, third.keyPem);
      await waitFor(async () => (await served()) === leafFingerprint(third.certPem));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('refuses to start with an unusable --tls-cert-file, naming both flags', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'nlc-tls-'));
    try {
      const a = selfSignedCert({ hosts: ['localhost'], commonName: 'a', now: Date.now() });
      const b = selfSignedCert({ hosts: ['localhost'], commonName: 'b', now: Date.now() });
      writeFileSync(join(dir, 'tls.crt'), a.certPem);
      writeFileSync(join(dir, 'tls.key'), b.keyPem);
      const open = (certFile: string) =>
        ServingCertificate.fromFiles({
          certFile,
          keyFile: join(dir, 'tls.key'),
          clock: systemClock,
          logger: silentLogger,
        });
      await expect(open(join(dir, 'tls.crt'))).rejects.toThrow(/--tls-cert-file=.*--tls-private-key-file=.*/);
      await expect(open(join(dir, 'missing.crt'))).rejects.toThrow(/ENOENT/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a TokenReview that never answers blocks neither the probes nor the controller’s own API requests', async () => {
    // The API server: reviews hang forever; everything else answers at once.
    const hanging: http.ServerResponse[] = [];
    const api = await loopbackServer((req, res) => {
      if (req.url?.includes('tokenreviews')) {
        hanging.push(res);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"kind":"NodeList","items":[]}');
    });
    closers.push(() => {
      for (const r of hanging) r.destroy();
      return api.close();
    });
    // Reviews use a client of their own (own sockets), as run.ts wires it.
    const reviewClient = await KubeClient.fromCredentials(
      {
        server: new URL(api.client.server),
        tls: {},
        auth: async () => ({ headers: { Authorization: 'Bearer x' } }),
        unauthorized: async () => false,
      },
      { maxSockets: 8 },
    );
    closers.push(() => reviewClient.close());
    const registry = createRegistry({ defaultMetrics: false });
    const requests = createMetricsServerMetrics(registry);
    const auth = new DelegatedAuth({
      client: reviewClient,
      clock: systemClock,
      logger: silentLogger,
      metrics: createDelegatedAuthMetrics(registry),
      reviewTimeoutMs: 1500,
      maxInFlight: 4,
      staleIfErrorMs: 0,
    });
    servers = await startHttpServers({
      metrics: {
        address: { host: '127.0.0.1', port: 0 },
        registry,
        requests,
        secure: {
          certificate: ServingCertificate.selfSigned({ hosts: ['localhost'], now: Date.now() }),
          auth,
        },
      },
      probes: {
        address: { host: '127.0.0.1', port: 0 },
        healthz: () => [{ name: 'ping', check: () => undefined }],
        readyz: () => [{ name: 'synced', check: () => undefined }],
      },
      logger: silentLogger,
      clock: systemClock,
    });
    const port = servers.metrics!.port;
    const t0 = performance.now();
    const scrapes = Array.from({ length: 12 }, (_, i) =>
      httpsGet(port, '/metrics', { authorization: `Bearer token-${i}` }).then((r) => ({
        ...r,
        ms: performance.now() - t0,
      })),
    );
    // While the reviews hang: probes and the controller's client answer promptly.
    await waitFor(async () => hanging.length === 4);
    const controllerClient = api.client;
    for (let i = 0; i < 5; i++) {
      const p0 = performance.now();
      expect((await fetch(`http://127.0.0.1:${servers.probes!.port}/readyz`)).status).toBe(200);
      const list = await controllerClient.raw({ method: 'GET', path: '/api/v1/nodes' });
      expect(list.status).toBe(200);
      // Far below the review timeout: nothing waited for the hanging reviews.
      expect(performance.now() - p0).toBeLessThan(500);
    }
    const out = await Promise.all(scrapes);
    const codes = out.map((o) => o.status).sort();
    expect(codes).toEqual([429, 429, 429, 429, 429, 429, 429, 429, 503, 503, 503, 503]);
    // The refused ones did not wait; the reviewed ones ended at the review timeout (1.5 s).
    for (const o of out.filter((x) => x.status === 429)) expect(o.ms).toBeLessThan(1000);
    for (const o of out.filter((x) => x.status === 503)) expect(o.ms).toBeGreaterThanOrEqual(1400);
    expect(hanging).toHaveLength(4);
  });
});

/** A client socket that sends nothing (or `send`), and whether the server has closed it. */
interface IdleSocket {
  socket: net.Socket;
  closed: () => boolean;
}

async function openIdle(port: number, send?: string, tlsHandshake = false): Promise<IdleSocket> {
  let closed = false;
  const socket = await new Promise<net.Socket>((resolve, reject) => {
    const s = tlsHandshake
      ? tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => resolve(s))
      : net.connect({ host: '127.0.0.1', port }, () => resolve(s));
    s.once('error', (err) => (closed ? undefined : reject(err)));
  });
  socket.on('error', () => undefined);
  socket.resume(); // read (and drop) what the server sends, so that its close is seen
  socket.once('close', () => {
    closed = true;
  });
  if (send) socket.write(send);
  closers.push(() => socket.destroy());
  return { socket, closed: () => closed };
}

const openGauge = async (registry: Registry, server: string) =>
  (await registry.getSingleMetric('nlc_http_open_connections')?.get())?.values.find(
    (v) => v.labels.server === server,
  )?.value;

const closedCount = async (registry: Registry, server: string, reason: string) =>
  (await registry.getSingleMetric('nlc_http_connections_closed_total')?.get())?.values.find(
    (v) => v.labels.server === server && v.labels.reason === reason,
  )?.value ?? 0;

describe('connection limits of the metrics and probe servers', () => {
  async function start(
    opts: {
      secure?: { auth: (h: string | undefined) => Promise<AuthDecision> };
      clock?: Clock;
      maxConnections?: number;
    } = {},
  ) {
    const registry = createRegistry({ defaultMetrics: false });
    new Counter({ name: 'nlc_test_total', help: 'test', registers: [registry] }).inc(5);
    servers = await startHttpServers({
      metrics: {
        address: { host: '127.0.0.1', port: 0 },
        registry,
        ...(opts.maxConnections ? { maxConnections: opts.maxConnections } : {}),
        ...(opts.secure
          ? {
              secure: {
                certificate: ServingCertificate.selfSigned({ hosts: ['localhost'], now: Date.now() }),
                auth: { check: (h: string | undefined) => opts.secure!.auth(h) },
              },
            }
          : {}),
      },
      probes: {
        address: { host: '127.0.0.1', port: 0 },
        healthz: () => [{ name: 'ping', check: () => undefined }],
        readyz: () => [],
      },
      logger: silentLogger,
      clock: opts.clock ?? systemClock,
      connections: createHttpConnectionMetrics(registry),
    });
    return { registry, metrics: servers.metrics!.port, probes: servers.probes!.port };
  }

  it('limit-many idle sockets on the metrics port do not shut a scrape out: the longest-idle one makes room (HTTP and HTTPS)', async () => {
    for (const secure of [false, true]) {
      const s = await start(
        secure ? { secure: { auth: async () => ({ code: 200, reason: 'allowed' }) } } : {},
      );
      // 64 sockets that never send a byte (no TLS handshake either), then 64 more connections: for
      // HTTPS these finish the handshake and then send nothing.
      const idle: IdleSocket[] = [];
      for (let i = 0; i < 64; i++) idle.push(await openIdle(s.metrics));
      await settle(); // the server has accepted them all
      // A new connection per scrape (an idle keep-alive connection may be the one making room).
      const scrape = async () => (await (secure ? httpsGet : httpGet)(s.metrics, '/metrics')).status;
      expect(await scrape()).toBe(200);
      // The first socket opened, idle the longest, made room; the others are still open.
      await waitFor(() => idle[0]!.closed());
      expect(idle.slice(1).filter((x) => x.closed())).toEqual([]);
      for (let i = 0; i < 64; i++) idle.push(await openIdle(s.metrics, undefined, secure));
      expect(await scrape()).toBe(200);
      expect(await scrape()).toBe(200);
      await waitFor(async () => (await openGauge(s.registry, 'metrics'))! <= 64);
      expect(await closedCount(s.registry, 'metrics', 'evicted')).toBeGreaterThanOrEqual(65);
      expect(await closedCount(s.registry, 'metrics', 'refused')).toBe(0);
      await servers!.close();
      servers = undefined;
    }
  });

  it('a connection with a request in flight is never closed to make room; with every one busy, a new connection is refused', async () => {
    const release: (() => void)[] = [];
    const s = await start({
      maxConnections: 3,
      secure: {
        auth: () => new Promise((r) => release.push(() => r({ code: 200, reason: 'allowed' }))),
      },
    });
    const busy = [1, 2, 3].map(() => httpsGet(s.metrics, '/metrics'));
    await waitFor(() => release.length === 3);
    const extra = await openIdle(s.metrics);
    await waitFor(() => extra.closed());
    expect(await closedCount(s.registry, 'metrics', 'refused')).toBe(1);
    expect(await closedCount(s.registry, 'metrics', 'evicted')).toBe(0);
    for (const r of release) r();
    expect((await Promise.all(busy)).map((r) => r.status)).toEqual([200, 200, 200]);
  });

  it('close() ends at once even with a connection that never began its TLS handshake', async () => {
    const s = await start({ secure: { auth: async () => ({ code: 200, reason: 'allowed' }) } });
    const idle = [await openIdle(s.metrics), await openIdle(s.probes)];
    await settle();
    const t0 = performance.now();
    await servers!.close();
    servers = undefined;
    expect(performance.now() - t0).toBeLessThan(1000);
    await waitFor(() => idle.every((x) => x.closed()));
  });

  it('hundreds of idle sockets on the probe port: at most 32 stay open, and /healthz answers', async () => {
    const s = await start();
    const idle: IdleSocket[] = [];
    for (let i = 0; i < 300; i++) idle.push(await openIdle(s.probes));
    await waitFor(() => idle.filter((x) => !x.closed()).length <= 32);
    expect(idle.slice(-32).every((x) => !x.closed())).toBe(true);
    const t0 = performance.now();
    expect((await fetch(`http://127.0.0.1:${s.probes}/healthz`)).status).toBe(200);
    expect(performance.now() - t0).toBeLessThan(1000);
    expect(await openGauge(s.registry, 'probes')).toBeLessThanOrEqual(32);
    expect(await closedCount(s.registry, 'probes', 'evicted')).toBeGreaterThanOrEqual(268);
  });

  it('a connection without a request in flight is closed after the idle timeout: 5s on the probe port, 10s on the metrics port (virtual time)', async () => {
    const scheduler = new VirtualTimeScheduler();
    const s = await start({ clock: { scheduler, wall: () => Date.now() } });
    const advance = (ms: number) => {
      scheduler.schedule(() => undefined, ms); // virtual time only moves with an action
      scheduler.maxFrames = scheduler.now() + ms;
      scheduler.flush();
    };
    // Nothing sent; half a request; a keep-alive connection after its response.
    const probeIdle = await openIdle(s.probes);
    const probeHalf = await openIdle(s.probes, 'GET /healthz HTTP/1.1\r\nHost: x\r\n');
    const probeKept = await openIdle(s.probes, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    const metricsIdle = await openIdle(s.metrics);
    const metricsHalf = await openIdle(s.metrics, 'GET /metr');
    const probes = [probeIdle, probeHalf, probeKept];
    const metrics = [metricsIdle, metricsHalf];
    await settle(); // accepted, and the kept connection's response written
    advance(4_999);
    await settle();
    expect([...probes, ...metrics].map((x) => x.closed())).toEqual([false, false, false, false, false]);
    advance(1);
    await waitFor(() => probes.every((x) => x.closed()));
    expect(await closedCount(s.registry, 'probes', 'idle_timeout')).toBe(3);
    advance(4_999);
    await settle();
    expect(metrics.map((x) => x.closed())).toEqual([false, false]);
    advance(1);
    await waitFor(() => metrics.every((x) => x.closed()));
    expect(await closedCount(s.registry, 'metrics', 'idle_timeout')).toBe(2);
  });
});

/** Lets the servers' I/O run (real time; the idle timeouts under test run on a virtual clock). */
const settle = () => new Promise((r) => setTimeout(r, 100));

async function waitFor(pred: () => Promise<boolean> | boolean, timeoutMs = 5000): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (performance.now() < end) {
    if (await pred()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('condition not met in time');
}
