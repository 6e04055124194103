import type { Registry } from 'prom-client';
import { type Clock, systemClock } from '../../clock/clock.js';
import type { Config } from '../../config/index.js';
import { createHttpConnectionMetrics } from '../../http/connections.js';
import { createDelegatedAuthMetrics, DelegatedAuth, REVIEW_SOCKETS } from '../../http/delegated-auth.js';
import {
  type Check,
  createMetricsServerMetrics,
  type HttpServers,
  type MetricsServing,
  startHttpServers,
} from '../../http/server.js';
import { createServingCertMetrics, ServingCertificate } from '../../http/serving-cert.js';
import { KubeClient, type RequestObserver } from '../../kube/client.js';
import type { Credentials } from '../../kube/credentials.js';
import type { Logger } from '../../log/logger.js';
import type { Runnable } from '../../manager/manager.js';

export interface MetricsSecurity {
  serving: Pick<MetricsServing, 'secure' | 'requests'>;
  close(): void;
}

/**
 * HTTPS and delegated authentication/authorization for /metrics (unless --metrics-secure=false):
 * the serving certificate (files, or self-signed), and the reviews on a client of their own, so
 * that a slow review never holds a socket the controller's work needs.
 */
export async function secureMetricsServing(o: {
  config: Pick<Config, 'metricsAddress' | 'metricsSecurity' | 'leaderElection'>;
  logger: Logger;
  credentials: Credentials;
  observer: RequestObserver;
  userAgent: string;
  registry: Registry;
}): Promise<MetricsSecurity> {
  const { config, logger: log, registry } = o;
  const requests = createMetricsServerMetrics(registry);
  const sec = config.metricsSecurity;
  if (!config.metricsAddress || !sec.secure) {
    if (config.metricsAddress) {
      log.warn('Serving /metrics over plain HTTP without authentication (--metrics-secure=false)');
    }
    return { serving: { requests }, close() {} };
  }
  const certMetrics = createServingCertMetrics(registry);
  const hosts = ['localhost', config.leaderElection.hostname, '127.0.0.1', '::1'];
  const bind = config.metricsAddress.host;
  if (bind !== '0.0.0.0' && bind !== '::' && bind !== '') hosts.push(bind);
  const certificate =
    sec.certFile && sec.keyFile
      ? await ServingCertificate.fromFiles({
          certFile: sec.certFile,
          keyFile: sec.keyFile,
          clock: systemClock,
          logger: log,
          metrics: certMetrics,
        })
      : ServingCertificate.selfSigned({ hosts, now: systemClock.wall(), metrics: certMetrics });
  const reviewClient = await KubeClient.fromCredentials(o.credentials, {
    observer: o.observer,
    userAgent: `${o.userAgent} metrics-auth`,
    defaultTimeoutMs: 5_000,
    maxSockets: REVIEW_SOCKETS,
  });
  const auth = new DelegatedAuth({
    client: reviewClient,
    clock: systemClock,
    logger: log.with({ component: 'metrics-auth' }),
    metrics: createDelegatedAuthMetrics(registry),
    staleIfErrorMs: sec.staleIfErrorMs,
  });
  log.info('Metrics server certificate', {
    source: certificate.source,
    ...(certificate.source === 'self-signed' ? { hosts } : { certFile: sec.certFile }),
  });
  return {
    serving: { requests, secure: { certificate, auth } },
    close() {
      certificate.close();
      reviewClient.close();
    },
  };
}

export interface Serving {
  /** Group serving: listens at its start; closes the servers (and the metrics security) at the stop. */
  runnable: Runnable;
  /** Where it listens, once started. */
  addresses(): Pick<HttpServers, 'metrics' | 'metricsScheme' | 'probes'> | undefined;
}

/** /metrics and the probes (/healthz, /livez: `healthz`; /readyz: `readyz`) on their ports. */
export function httpServing(o: {
  config: Pick<Config, 'metricsAddress' | 'probeAddress'>;
  registry: Registry;
  security: MetricsSecurity;
  logger: Logger;
  clock: Clock;
  healthz: () => readonly Check[];
  readyz: () => readonly Check[];
}): Serving {
  let http: HttpServers | undefined;
  const runnable: Runnable = {
    name: 'http-servers',
    group: 'serving',
    start: async () => {
      http = await startHttpServers({
        metrics: { address: o.config.metricsAddress, registry: o.registry, ...o.security.serving },
        probes: { address: o.config.probeAddress, healthz: o.healthz, readyz: o.readyz },
        logger: o.logger,
        clock: o.clock,
        connections: createHttpConnectionMetrics(o.registry),
      });
    },
    stop: {
      close: async () => {
        await http?.close();
        o.security.close();
      },
    },
  };
  return { runnable, addresses: () => http };
}
