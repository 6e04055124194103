import { systemClock } from '../clock/clock.js';
import type { Config } from '../config/index.js';
import { createControllerMetrics } from '../controller/metrics.js';
import { createDisruptionMetrics } from '../disruption/index.js';
import type { KubeconfigEnv } from '../kube/kubeconfig.js';
import type { ProxyEnv } from '../kube/proxy.js';
import type { Logger } from '../log/logger.js';
import { Manager } from '../manager/manager.js';
import { createBuildInfoMetric } from '../metrics/build-info.js';
import { createRegistry } from '../metrics/registry.js';
import { createWatchMetrics } from '../watch/index.js';
import { connectApi, logStart, openKubeconfig } from './assemble/api-clients.js';
import { Election } from './assemble/election.js';
import { assembleNodeHealth, assembleNodeLifecycle, poolGrace } from './assemble/node-lifecycle.js';
import { httpServing, secureMetricsServing } from './assemble/serving.js';
import { ProcessSignals } from './assemble/signals.js';
import { processTicker } from './assemble/ticker.js';
import { assembleWatches } from './assemble/watches.js';
import type { BuildInfo } from './build-info.js';

export interface RunOptions {
  config: Config;
  logger: Logger;
  env: KubeconfigEnv;
  /** Environment an exec credential plugin (kubeconfig user.exec) inherits. */
  processEnv?: NodeJS.ProcessEnv;
  /** HTTPS_PROXY, HTTP_PROXY, NO_PROXY (and lower case): honoured as client-go does. */
  proxyEnv?: ProxyEnv;
  /** What this build is: logged at start, exported as nlc_build_info, in the user agent. */
  build: BuildInfo;
  /** Process exit (injected so tests and the demo can run the controller in-process). */
  exit: (code: number) => void;
  /** Signals to handle; the CLI passes the process, tests may pass an EventEmitter. */
  signals?: NodeJS.EventEmitter;
}

export interface RunningController {
  metricsPort: number | undefined;
  metricsScheme: 'https' | 'http' | undefined;
  probesPort: number | undefined;
  /** Graceful shutdown: stop watches and workers, finish in-flight writes, release the lease. */
  shutdown(reason: string): Promise<void>;
}

/** What `Shutting down` says of a stop that came before the node list was in (nothing acted yet). */
const DURING_START_UP = 'start-up: before the node list synced; nothing was written';

/**
 * The composition root: config -> clients -> assemblies -> the manager, which starts them in its
 * order (docs/architecture.md, "the manager's start/stop order") and stops them in reverse.
 */
export async function runController(o: RunOptions): Promise<RunningController> {
  const { config, logger, build } = o;
  const clock = systemClock;
  // Ours from the first moment; acted on once the shutdown can run (after the HTTP servers).
  const signals = new ProcessSignals({ signals: o.signals, logger, exit: o.exit });
  const kube = openKubeconfig({ ...o, config });
  logStart(config, build, logger);
  const registry = createRegistry();
  createBuildInfoMetric(registry, build);
  const tick = processTicker(registry, config);
  const api = await connectApi({ kube, config, build, registry, clock });
  const security = await secureMetricsServing({
    ...{ config, logger, registry, credentials: api.credentials },
    ...{ observer: api.observer, userAgent: api.userAgent },
  });
  const metrics = createControllerMetrics(registry);
  const disruptionMetrics = createDisruptionMetrics(registry);
  const watchMetrics = createWatchMetrics(registry);
  const health = await assembleNodeHealth({ config, clock, logger, metrics: disruptionMetrics });
  const { ticker } = tick;
  const watches = assembleWatches({
    config,
    client: api.client,
    clock,
    logger,
    metrics: watchMetrics,
    ticker,
  });
  const manager = new Manager({
    scheduler: clock.scheduler,
    logger,
    shutdownGracePeriodMs: config.shutdownGracePeriodMs,
    exit: o.exit,
    duringStartUp: DURING_START_UP,
  });
  const election = new Election({
    ...{ config, build, clock, logger, registry, watchMetrics, client: api.electionClient },
    leadership: manager,
    writesIdle: () => lifecycle.writer.idle(),
  });
  const lifecycle = assembleNodeLifecycle({
    ...{ config, clock, logger, registry, metrics, health, ticker },
    ...{ client: api.client, limiter: api.limiter, nodes: watches.nodes, leases: watches.leases },
    elector: election.elector,
    election: election.control,
    stopping: () => manager.stopRequested,
  });
  const serving = httpServing({
    ...{ config, registry, security, logger, clock },
    healthz: () => manager.healthChecks(),
    readyz: () => manager.readyChecks(),
  });
  const pools = health.pools;
  for (const r of [
    api.runnable,
    tick.runnable,
    lifecycle.reconciler,
    poolGrace({ health, nodes: watches.nodes, controller: lifecycle.controller }),
    serving.runnable,
    signals.runnable({
      stop: (why) => manager.stop(why),
      reload: pools && (() => void pools.reload('SIGHUP')),
    }),
    ...(lifecycle.rivalCheck ? [lifecycle.rivalCheck] : []),
    watches.nodesRunnable,
    watches.leasesRunnable,
    election.runnable,
  ]) {
    manager.add(r);
  }
  await manager.start();
  const at = serving.addresses();
  return {
    metricsPort: at?.metrics?.port,
    metricsScheme: at?.metricsScheme,
    probesPort: at?.probes?.port,
    shutdown: (reason) => manager.stop(reason),
  };
}
