import { systemClock } from '../clock/clock.js';
import type { Config } from '../config/index.js';
import type { KubeconfigEnv } from '../kube/kubeconfig.js';
import type { ProxyEnv } from '../kube/proxy.js';
import type { Logger } from '../log/logger.js';
import { createBuildInfoMetric } from '../metrics/build-info.js';
import { createRegistry } from '../metrics/registry.js';
import { connectApi, logStart, openKubeconfig } from './assemble/api-clients.js';
import { assembleController } from './assemble/controller.js';
import { httpServing, secureMetricsServing } from './assemble/serving.js';
import { ProcessSignals } from './assemble/signals.js';
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
  const api = await connectApi({ kube, config, build, registry, clock });
  const security = await secureMetricsServing({
    ...{ config, logger, registry, credentials: api.credentials },
    ...{ observer: api.observer, userAgent: api.userAgent },
  });
  const { manager, health } = await assembleController({
    ...{ config, logger, clock, build, registry, api },
    exit: o.exit,
  });
  const serving = httpServing({
    ...{ config, registry, security, logger, clock },
    healthz: () => manager.healthChecks(),
    readyz: () => manager.readyChecks(),
  });
  const pools = health.pools;
  // Group serving, after the runnables assembleController registered (the start order is by group).
  manager.add(serving.runnable);
  manager.add(
    signals.runnable({
      stop: (why) => manager.stop(why),
      reload: pools && (() => void pools.reload('SIGHUP')),
    }),
  );
  await manager.start();
  const at = serving.addresses();
  return {
    metricsPort: at?.metrics?.port,
    metricsScheme: at?.metricsScheme,
    probesPort: at?.probes?.port,
    shutdown: (reason) => manager.stop(reason),
  };
}
