import type { Registry } from 'prom-client';
import type { Clock } from '../../clock/clock.js';
import { formatDuration } from '../../clock/duration.js';
import { type Config, configWarnings } from '../../config/index.js';
import { KubeClient, type RequestObserver } from '../../kube/client.js';
import type { Credentials } from '../../kube/credentials.js';
import {
  homeDirectory,
  type KubeconfigEnv,
  type KubeconfigResolution,
  resolveKubeconfig,
} from '../../kube/kubeconfig.js';
import type { ProxyEnv } from '../../kube/proxy.js';
import { RequestRateLimiter } from '../../kube/rate-limit.js';
import type { Logger } from '../../log/logger.js';
import type { Runnable } from '../../manager/manager.js';
import { createApiRequestMetrics } from '../../metrics/registry.js';
/** The component's name and the Events' source component (src/names defines both once). */
import { COMPONENT_NAME as COMPONENT, EVENT_SOURCE_COMPONENT as EVENT_COMPONENT } from '../../names/index.js';
import type { BuildInfo } from '../build-info.js';

export { COMPONENT, EVENT_COMPONENT };

/**
 * Connections to the API server for node, lease and pod requests (watches included). client-go
 * multiplexes everything over one HTTP/2 connection; over HTTP/1.1 each request in flight holds a
 * TLS connection of its own, about 0.2 MiB each that the process keeps after a burst (a probe of
 * 1,000 writes: 64 connections peaked at 83 MiB, 8 at 70 MiB; docs/benchmarks.md). The reconcile
 * workers (64, most of them waiting for a token in a mass failure) open no more than the tokens
 * they get; 16 bounds what any burst can open and still carries --kube-api-qps=50 while requests
 * take up to ~250 ms.
 */
export const API_MAX_SOCKETS = 16;
/** Leader election's own connections: the lock watch, renewals, identity leases. */
export const ELECTION_MAX_SOCKETS = 4;

export interface KubeconfigOptions {
  config: Pick<Config, 'kubeconfig'>;
  logger: Logger;
  env: KubeconfigEnv;
  /** Environment an exec credential plugin (kubeconfig user.exec) inherits. */
  processEnv?: NodeJS.ProcessEnv;
  /** HTTPS_PROXY, HTTP_PROXY, NO_PROXY (and lower case): honoured as client-go does. */
  proxyEnv?: ProxyEnv;
  /** Where ~/.kube/config is looked for (default: the user's home directory). */
  homeDir?: string | undefined;
}

/** Finds the kubeconfig (flag, KUBECONFIG, in-cluster, home) and says which one: `Using kubeconfig`. */
export function openKubeconfig(o: KubeconfigOptions): KubeconfigResolution {
  const kube = resolveKubeconfig({
    flag: o.config.kubeconfig,
    env: o.env,
    homeDir: 'homeDir' in o ? o.homeDir : homeDirectory(),
    processEnv: o.processEnv,
    proxyEnv: o.proxyEnv,
    logger: o.logger,
  });
  o.logger.info('Using kubeconfig', {
    source: kube.source,
    paths: kube.paths,
    server: kube.server,
    auth: kube.auth,
    proxy: kube.proxy?.url ?? 'none',
    ...(kube.proxy ? { proxyFrom: kube.proxy.from } : {}),
  });
  return kube;
}

/** The `Starting` line (what runs, and the settings that shape it), then the configuration's warnings. */
export function logStart(config: Config, build: BuildInfo, log: Logger): void {
  log.info('Starting', {
    version: build.version,
    revision: build.revision,
    nodejs: build.nodejsVersion,
    identity: config.leaderElection.identity,
    dryRun: config.dryRun,
    leaderElect: config.leaderElection.enabled,
    mode: config.mode,
    ...(config.mode === 'companion'
      ? {
          companionTaintKey: config.companion.taintKey,
          companionEvictAfter: formatDuration(config.companion.evictAfterMs),
          companionMarkPodsNotReady: config.companion.markPodsNotReady,
        }
      : {}),
    coordinatedLeaderElection: config.leaderElection.enabled && config.leaderElection.coordinated,
    nodeMonitorGracePeriod: formatDuration(config.health.monitorGraceMs),
    watchSilenceThreshold: formatDuration(config.health.watchSilenceThresholdMs),
    watchReadInterval: formatDuration(config.health.watchReadIntervalMs),
    nodeStartupGracePeriod: formatDuration(config.health.startupGraceMs),
  });
  for (const w of configWarnings(config)) log.warn(w.msg, w.fields);
}

export interface ApiClients {
  credentials: Credentials;
  /** Counts every request (nlc_api_requests_total and its latency). */
  observer: RequestObserver;
  userAgent: string;
  /** The one client-side rate limiter of `client` (reads and writes alike). */
  limiter: RequestRateLimiter;
  /** Node, lease and pod work: reads, writes and watches. */
  client: KubeClient;
  /** Leader election's: its own limiter and connections. */
  electionClient: KubeClient;
  /** Group process: closes both clients when the process stops. */
  runnable: Runnable;
}

/**
 * The API clients: one for the controller's work, one for leader election (kube-controller-manager
 * gives it its own client: lock renewals never queue behind a burst of node and pod requests,
 * neither for a rate-limiter token nor for a free connection).
 */
export async function connectApi(o: {
  kube: Pick<KubeconfigResolution, 'credentials'>;
  config: Pick<Config, 'kubeApi' | 'leaderElection'>;
  build: Pick<BuildInfo, 'version'>;
  registry: Registry;
  clock: Pick<Clock, 'scheduler'>;
}): Promise<ApiClients> {
  const { qps, burst } = o.config.kubeApi;
  const credentials = await o.kube.credentials();
  const observer = createApiRequestMetrics(o.registry);
  const userAgent = `${COMPONENT}/${o.build.version} (${o.config.leaderElection.identity})`;
  // One client-side rate limiter for every request but watches, reads and writes alike (client-go).
  const limiter = new RequestRateLimiter(qps, burst, o.clock.scheduler);
  const client = await KubeClient.fromCredentials(credentials, {
    observer,
    userAgent,
    defaultTimeoutMs: 30_000,
    rateLimiter: limiter,
    maxSockets: API_MAX_SOCKETS,
  });
  const electionClient = await KubeClient.fromCredentials(credentials, {
    observer,
    userAgent,
    defaultTimeoutMs: 30_000,
    rateLimiter: new RequestRateLimiter(qps, burst, o.clock.scheduler),
    maxSockets: ELECTION_MAX_SOCKETS,
  });
  const runnable: Runnable = {
    name: 'api-clients',
    group: 'process',
    stop: {
      close: () => {
        client.close();
        electionClient.close();
      },
    },
  };
  return { credentials, observer, userAgent, limiter, client, electionClient, runnable };
}
