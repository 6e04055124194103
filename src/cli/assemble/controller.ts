import type { Registry } from 'prom-client';
import type { Clock } from '../../clock/clock.js';
import type { Config } from '../../config/index.js';
import { createControllerMetrics } from '../../controller/metrics.js';
import type { Probe } from '../../controller/second-opinion.js';
import { createDisruptionMetrics } from '../../disruption/index.js';
import type { KubeClient } from '../../kube/client.js';
import type { RequestRateLimiter } from '../../kube/rate-limit.js';
import type { Logger } from '../../log/logger.js';
import { Manager, type Runnable } from '../../manager/manager.js';
import { createWatchMetrics } from '../../watch/index.js';
import type { BuildInfo } from '../build-info.js';
import { Election } from './election.js';
import {
  assembleNodeHealth,
  assembleNodeLifecycle,
  type NodeHealth,
  type NodeLifecycle,
  poolGrace,
} from './node-lifecycle.js';
import { processTicker } from './ticker.js';
import { assembleWatches, type Watches } from './watches.js';

/** What `Shutting down` says of a stop that came before the node list was in (nothing acted yet). */
const DURING_START_UP = 'start-up: before the node list synced; nothing was written';

/** The API clients the controller works through (src/cli/assemble/api-clients.ts gives them). */
export interface ControllerApi {
  /** Node, lease and pod work: reads, writes and watches. */
  client: KubeClient;
  /** The one client-side rate limiter of `client`. */
  limiter: RequestRateLimiter;
  /** Leader election's own client. */
  electionClient: KubeClient;
  /** Group process: closes the clients at the stop. */
  runnable: Runnable;
}

/** The controller assembled: its manager (not started) and the parts the composition root serves. */
export interface AssembledController {
  manager: Manager;
  health: NodeHealth;
  watches: Watches;
  election: Election;
  lifecycle: NodeLifecycle;
}

/**
 * Everything the controller does, on the API clients it is given: the ticker, the node health
 * (tracker, disruption controller, pools), the watches, leader election and the node lifecycle,
 * registered with a new Manager in their start order. src/cli/run.ts adds the HTTP serving and the
 * signal handling, then starts it; the fault simulator (test/sim) starts it as it is, on its
 * simulated API server, so that both run the same wiring.
 */
export async function assembleController(o: {
  config: Config;
  logger: Logger;
  clock: Clock;
  build: Pick<BuildInfo, 'version'>;
  registry: Registry;
  api: ControllerApi;
  /** Process exit (the manager's, on a lost lease). */
  exit: (code: number) => void;
  /**
   * The process's tick when --watch-read-interval is not set (default 100 ms). The fault simulator
   * ticks at 1 s: in virtual time every wake-up costs real time, and nothing it checks runs more
   * often than once a second.
   */
  tickIntervalMs?: number;
  /** --second-opinion's kubelet probe (the fault simulator's stands in for the node network). */
  kubeletProbe?: Probe;
}): Promise<AssembledController> {
  const { config, logger, clock, registry, api } = o;
  const tick = processTicker(registry, config, o.tickIntervalMs);
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
    ...{ config, build: o.build, clock, logger, registry, watchMetrics, client: api.electionClient },
    leadership: manager,
    writesIdle: () => lifecycle.writer.idle(),
  });
  const lifecycle = assembleNodeLifecycle({
    ...{ config, clock, logger, registry, metrics, health, ticker },
    ...{ client: api.client, limiter: api.limiter, nodes: watches.nodes, leases: watches.leases },
    elector: election.elector,
    election: election.control,
    ...(o.kubeletProbe ? { kubeletProbe: o.kubeletProbe } : {}),
    stopping: () => manager.stopRequested,
  });
  for (const r of [
    api.runnable,
    tick.runnable,
    lifecycle.reconciler,
    poolGrace({ health, nodes: watches.nodes, controller: lifecycle.controller }),
    ...(lifecycle.rivalCheck ? [lifecycle.rivalCheck] : []),
    watches.nodesRunnable,
    watches.leasesRunnable,
    election.runnable,
  ]) {
    manager.add(r);
  }
  return { manager, health, watches, election, lifecycle };
}
