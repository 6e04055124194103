import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { Logger } from '../log/logger.js';

/** A named check: returns undefined when healthy, or the reason it is not. */
export interface Check {
  name: string;
  check: () => string | undefined;
}

export interface ServerAddress {
  host: string;
  port: number;
}

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

async function listen(server: http.Server, addr: ServerAddress): Promise<ServerAddress> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(addr.port, addr.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const a = server.address() as AddressInfo;
  return { host: a.address, port: a.port };
}

export interface HttpServers {
  metrics: ServerAddress | undefined;
  probes: ServerAddress | undefined;
  close(): Promise<void>;
}

/**
 * /metrics on its own port; /healthz (liveness) and /readyz (readiness) on the probe port, in the
 * Kubernetes healthz format ("[+]name ok" lines with ?verbose, or on failure).
 */
export async function startHttpServers(opts: {
  metrics: { address: ServerAddress | undefined; registry: Registry };
  probes: {
    address: ServerAddress | undefined;
    healthz: () => readonly Check[];
    readyz: () => readonly Check[];
  };
  logger: Logger;
}): Promise<HttpServers> {
  const servers: http.Server[] = [];
  let metricsAddr: ServerAddress | undefined;
  let probesAddr: ServerAddress | undefined;
  if (opts.metrics.address) {
    const registry = opts.metrics.registry;
    const server = http.createServer((req, res) => {
      if (req.method !== 'GET' || !req.url?.startsWith('/metrics')) {
        res.writeHead(404).end('not found\n');
        return;
      }
      registry
        .metrics()
        .then((text) => {
          res.writeHead(200, { 'content-type': registry.contentType });
          res.end(text);
        })
        .catch((err: Error) => {
          res.writeHead(500).end(`metrics collection failed: ${err.message}\n`);
        });
    });
    metricsAddr = await listen(server, opts.metrics.address);
    servers.push(server);
    opts.logger.info('Serving metrics', { address: `${metricsAddr.host}:${metricsAddr.port}` });
  }
  if (opts.probes.address) {
    const healthz = checksHandler(opts.probes.healthz);
    const readyz = checksHandler(opts.probes.readyz);
    const server = http.createServer((req, res) => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      if (path === '/healthz' || path === '/livez') healthz(req, res);
      else if (path === '/readyz') readyz(req, res);
      else res.writeHead(404).end('not found\n');
    });
    probesAddr = await listen(server, opts.probes.address);
    servers.push(server);
    opts.logger.info('Serving health probes', { address: `${probesAddr.host}:${probesAddr.port}` });
  }
  return {
    metrics: metricsAddr,
    probes: probesAddr,
    async close() {
      await Promise.all(
        servers.map(
          (s) =>
            new Promise<void>((r) => {
              s.close(() => r());
              s.closeAllConnections();
            }),
        ),
      );
    },
  };
}
