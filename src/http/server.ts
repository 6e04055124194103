import http from 'node:http';
import https from 'node:https';
import { Counter, type Registry } from 'prom-client';
import type { Clock } from '../clock/clock.js';
import type { Logger } from '../log/logger.js';
import { ConnectionLimiter, type ConnectionLimits, type HttpConnectionMetrics } from './connections.js';
import type { AuthDecision } from './delegated-auth.js';
import { createBinder, joinHostPort, type ServerAddress } from './listen.js';
import type { ServingCertificate } from './serving-cert.js';

/** A named check: returns undefined when healthy, or the reason it is not. */
export interface Check {
  name: string;
  check: () => string | undefined;
}

export type { ServerAddress } from './listen.js';

function checksHandler(checks: () => readonly Check[]) {
  return (req: http.IncomingMessage, res: http.ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const results = checks().map((c) => {
      let reason: string | undefined;
      try {
        reason = c.check();
      } catch (err) {
        reason = `check threw: ${(err as Error).message}`;
      }
      return { name: c.name, reason };
    });
    const failed = results.filter((r) => r.reason !== undefined);
    const verbose = url.searchParams.has('verbose') || failed.length > 0;
    const body = verbose
      ? `${results.map((r) => (r.reason === undefined ? `[+]${r.name} ok` : `[-]${r.name} failed: ${r.reason}`)).join('\n')}\n${
          failed.length ? `${url.pathname.slice(1)} check failed` : `${url.pathname.slice(1)} check passed`
        }\n`
      : 'ok';
    res.writeHead(failed.length ? 500 : 200, { 'content-type': 'text/plain; charset=utf-8' });
    res.end(body);
  };
}

export interface HttpServers {
  metrics: ServerAddress | undefined;
  /** 'https' with authentication and authorization, or 'http' (--metrics-secure=false). */
  metricsScheme: 'https' | 'http' | undefined;
  probes: ServerAddress | undefined;
  close(): Promise<void>;
}

/** Responses of the metrics server by HTTP code (401 and 403 are refused scrapes). */
export function createMetricsServerMetrics(registry: Registry): Counter<'code'> {
  return new Counter({
    name: 'nlc_metrics_requests_total',
    help: 'Requests to the metrics server by response code (401: no or invalid token, 403: not allowed to get /metrics, 429: too many reviews in flight or per second, or the API server throttled them, 503: the API server could not review the token).',
    labelNames: ['code'] as const,
    registers: [registry],
  });
}

export interface MetricsServing {
  address: ServerAddress | undefined;
  registry: Registry;
  /**
   * HTTPS, every request authenticated and authorized (TokenReview + SubjectAccessReview). Without
   * it /metrics is plain, open HTTP (--metrics-secure=false, for local use).
   */
  secure?: {
    certificate: Pick<ServingCertificate, 'current' | 'onChange'>;
    auth: { check(authorization: string | undefined, path: string, verb?: string): Promise<AuthDecision> };
  };
  requests?: Counter<'code'>;
  /** Connections open at once (default 64): see ConnectionLimiter for what happens at the limit. */
  maxConnections?: number;
}

/**
 * Metrics port: 64 connections; 10 s without a request in flight (TLS handshake and headers
 * included, and between requests) closes a connection.
 */
export const METRICS_CONNECTIONS: ConnectionLimits = { maxConnections: 64, idleTimeoutMs: 10_000 };
/**
 * Probe port: 32 connections, 5 s. The kubelet opens a connection per probe and sends its request
 * at once (its probes time out after 1 s by default); nothing else needs this port.
 */
export const PROBE_CONNECTIONS: ConnectionLimits = { maxConnections: 32, idleTimeoutMs: 5_000 };

function metricsHandler(m: MetricsServing, logger: Logger): http.RequestListener {
  const { registry } = m;
  const reply = (
    res: http.ServerResponse,
    code: number,
    body: string,
    headers: http.OutgoingHttpHeaders = {},
  ) => {
    m.requests?.inc({ code: String(code) });
    res.writeHead(code, { 'content-type': 'text/plain; charset=utf-8', ...headers }).end(body);
  };
  return (req, res) => {
    let path: string;
    try {
      path = new URL(req.url ?? '/', 'http://x').pathname;
    } catch {
      reply(res, 400, 'bad request\n');
      return;
    }
    if (path !== '/metrics') {
      reply(res, 404, 'not found\n');
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      reply(res, 405, 'method not allowed\n', { allow: 'GET, HEAD' });
      return;
    }
    const serve = () =>
      registry
        .metrics()
        .then((text) => {
          m.requests?.inc({ code: '200' });
          res.writeHead(200, { 'content-type': registry.contentType });
          res.end(req.method === 'HEAD' ? undefined : text);
        })
        .catch((err: Error) => reply(res, 500, `metrics collection failed: ${err.message}\n`));
    if (!m.secure) {
      void serve();
      return;
    }
    m.secure.auth
      .check(req.headers.authorization, path, 'get')
      .then((d) => {
        if (d.code === 200) return serve();
        logger.debug(2, 'Refused a metrics request', { code: d.code, reason: d.reason, user: d.user });
        const headers: http.OutgoingHttpHeaders =
          d.code === 429 || d.code === 503 ? { 'retry-after': '1' } : {};
        if (d.code === 401) headers['www-authenticate'] = 'Bearer';
        reply(res, d.code, `${http.STATUS_CODES[d.code]}: ${d.reason}\n`, headers);
        return undefined;
      })
      .catch((err: Error) => reply(res, 500, `authorization failed: ${err.message}\n`));
  };
}

/**
 * The /metrics server: HTTPS with the serving certificate (reloaded when it changes: the cleanup
 * goes into `cleanups`) when `m.secure` is set, else plain HTTP.
 */
function metricsServer(
  m: MetricsServing,
  idleTimeoutMs: number,
  logger: Logger,
  cleanups: (() => void)[],
): http.Server | https.Server {
  const handler = metricsHandler(m, logger);
  // Node's own timeouts stay as a second line (its header timeout is checked every 30 s only).
  const serverOpts: http.ServerOptions = { headersTimeout: idleTimeoutMs, requestTimeout: 30_000 };
  if (!m.secure) return http.createServer(serverOpts, handler);
  const tlsServer = https.createServer(
    {
      ...serverOpts,
      ...m.secure.certificate.current(),
      minVersion: 'TLSv1.2',
      handshakeTimeout: idleTimeoutMs,
    },
    handler,
  );
  cleanups.push(m.secure.certificate.onChange((pair) => tlsServer.setSecureContext(pair)));
  return tlsServer;
}

/** The probe server: /healthz and /livez (liveness), /readyz (readiness), plain HTTP. */
function probesServer(probes: {
  healthz: () => readonly Check[];
  readyz: () => readonly Check[];
}): http.Server {
  const healthz = checksHandler(probes.healthz);
  const readyz = checksHandler(probes.readyz);
  return http.createServer(
    { headersTimeout: PROBE_CONNECTIONS.idleTimeoutMs, requestTimeout: 10_000 },
    (req, res) => {
      let path: string;
      try {
        path = new URL(req.url ?? '/', 'http://x').pathname;
      } catch {
        // An unparsable request target must not throw out of the handler (that ends the process).
        res.writeHead(400).end('bad request\n');
        return;
      }
      if (path === '/healthz' || path === '/livez') healthz(req, res);
      else if (path === '/readyz') readyz(req, res);
      else res.writeHead(404).end('not found\n');
    },
  );
}

/**
 * /metrics on its own port (HTTPS with delegated authentication and authorization unless
 * `metrics.secure` is unset); /healthz and /livez (liveness) and /readyz (readiness) on the plain
 * HTTP probe port, in the Kubernetes healthz format ("[+]name ok" lines with ?verbose, or on failure).
 */
export async function startHttpServers(opts: {
  metrics: MetricsServing;
  probes: {
    address: ServerAddress | undefined;
    healthz: () => readonly Check[];
    readyz: () => readonly Check[];
  };
  logger: Logger;
  /** Times the idle timeouts of connections. */
  clock: Clock;
  connections?: HttpConnectionMetrics;
}): Promise<HttpServers> {
  const servers: { server: http.Server | https.Server; limiter: ConnectionLimiter }[] = [];
  const cleanups: (() => void)[] = [];
  let metricsAddr: ServerAddress | undefined;
  let probesAddr: ServerAddress | undefined;
  const m = opts.metrics;
  const listen = createBinder(opts.logger);
  if (m.address) {
    const limits = {
      ...METRICS_CONNECTIONS,
      maxConnections: m.maxConnections ?? METRICS_CONNECTIONS.maxConnections,
    };
    const server = metricsServer(m, limits.idleTimeoutMs, opts.logger, cleanups);
    const limiter = new ConnectionLimiter(server, 'metrics', limits, opts.clock, opts.connections);
    metricsAddr = await listen(server, m.address);
    servers.push({ server, limiter });
    opts.logger.info('Serving metrics', {
      address: joinHostPort(metricsAddr.host, metricsAddr.port),
      scheme: m.secure ? 'https' : 'http',
      authorization: m.secure ? 'TokenReview + SubjectAccessReview' : 'none',
    });
  }
  if (opts.probes.address) {
    const server = probesServer(opts.probes);
    const limiter = new ConnectionLimiter(server, 'probes', PROBE_CONNECTIONS, opts.clock, opts.connections);
    probesAddr = await listen(server, opts.probes.address);
    servers.push({ server, limiter });
    opts.logger.info('Serving health probes', { address: joinHostPort(probesAddr.host, probesAddr.port) });
  }
  return {
    metrics: metricsAddr,
    metricsScheme: metricsAddr ? (m.secure ? 'https' : 'http') : undefined,
    probes: probesAddr,
    async close() {
      for (const c of cleanups) c();
      await Promise.all(
        servers.map(
          ({ server, limiter }) =>
            new Promise<void>((r) => {
              server.close(() => r());
              // Also the sockets the HTTP layer does not know yet (no TLS handshake).
              limiter.destroyAll();
              server.closeAllConnections();
            }),
        ),
      );
    },
  };
}
