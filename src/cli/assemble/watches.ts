import type { Clock } from '../../clock/clock.js';
import type { Config } from '../../config/index.js';
import type { KubeClient } from '../../kube/client.js';
import type { Lease, Node } from '../../kube/types.js';
import type { Logger } from '../../log/logger.js';
import type { Runnable } from '../../manager/manager.js';
import type { SchedulerLike } from '../../rx/index.js';
import {
  type Reflector,
  ServerRewindSignal,
  type WatchMetrics,
  WatchReadPacer,
  type WatchTransport,
  watchNodeLeases,
  watchNodes,
} from '../../watch/index.js';

/** How long the start waits for the node list before it goes on without it. */
export const NODE_LIST_WAIT_MS = 30_000;

export interface Watches {
  nodes: Reflector<Node>;
  leases: Reflector<Lease>;
  /** Reads both watches on the process's tick (--watch-read-interval), if set. */
  readPacer: WatchReadPacer | undefined;
  /**
   * Group watches: the node watch first, so that leases find their nodes (a lease without a node is
   * judged only once both lists are complete, so a slow node list does not make every lease look
   * like one); its start waits for the node list (at most {@link NODE_LIST_WAIT_MS}, or until the
   * stop began).
   */
  nodesRunnable: Runnable;
  leasesRunnable: Runnable;
}

export function assembleWatches(o: {
  config: Pick<Config, 'health'> & Partial<Pick<Config, 'secondOpinion'>>;
  client: KubeClient;
  clock: Pick<Clock, 'scheduler'>;
  logger: Logger;
  metrics: WatchMetrics;
  /** The process's periodic tick: paces the watch reads when --watch-read-interval is set. */
  ticker: { onTick(fn: () => void): unknown };
  /** Tests: the watches' transport (default: the client's). */
  transport?: (resource: 'nodes' | 'leases') => WatchTransport;
}): Watches {
  const { health } = o.config;
  // Read on a cadence (--watch-read-interval) by the process's one periodic timer, which samples
  // the event loop too. The leader election lock's watch never is (a handover waits on it).
  const readPacer =
    health.watchReadIntervalMs > 0
      ? new WatchReadPacer({
          onUnsupported: (why) =>
            o.logger.warn('Cannot pace watch reads on this runtime; reading as events arrive', { why }),
        })
      : undefined;
  if (readPacer) o.ticker.onTick(() => readPacer.tick());
  // A watch that finds the API server behind its resourceVersion (etcd restored) makes the others ask.
  const deps = {
    client: o.client,
    clock: o.clock,
    logger: o.logger,
    metrics: o.metrics,
    readPacer,
    rewind: new ServerRewindSignal(),
  };
  const transport = o.transport;
  // --second-opinion probes the kubelet endpoint the Node reports: its node watch keeps it.
  const nodes = watchNodes(
    { ...deps, ...(transport && { wrapTransport: () => transport('nodes') }) },
    { kubeletEndpoint: o.config.secondOpinion !== undefined },
  );
  // A quiet lease watch reconnects well before it would count as silent (blind).
  const leases = watchNodeLeases({
    ...deps,
    ...(transport && { wrapTransport: () => transport('leases') }),
    tuning: { idleTimeoutMs: Math.max(1000, Math.floor((health.watchSilenceThresholdMs * 2) / 3)) },
  });
  const nodesRunnable: Runnable = {
    name: 'node-watch',
    group: 'watches',
    start: (signal) => {
      nodes.start();
      return nodeListWait(nodes, signal, o.clock.scheduler);
    },
    stop: {
      halt: () => {
        nodes.stop();
        readPacer?.close();
      },
    },
  };
  const leasesRunnable: Runnable = {
    name: 'lease-watch',
    group: 'watches',
    start: () => {
      leases.start();
    },
    stop: { halt: () => leases.stop() },
  };
  return { nodes, leases, readPacer, nodesRunnable, leasesRunnable };
}

/** Resolves when the node list is in, after {@link NODE_LIST_WAIT_MS}, or when `signal` aborts. */
export function nodeListWait(
  nodes: Pick<Reflector<Node>, 'whenSynced'>,
  signal: AbortSignal,
  scheduler: SchedulerLike,
): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      timer.unsubscribe();
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = scheduler.schedule(done, NODE_LIST_WAIT_MS);
    signal.addEventListener('abort', done, { once: true });
    if (signal.aborted) done();
    void nodes.whenSynced().then(done);
  });
}
