import type { Registry } from 'prom-client';
import { ApiWriter, createWriterMetrics } from '../../apply/writer.js';
import type { Clock } from '../../clock/clock.js';
import type { Ticker } from '../../clock/ticker.js';
import { type Config, FlagError, PoolConfigLoader } from '../../config/index.js';
import {
  ConcurrentControllerCheck,
  createConcurrentControllerMetrics,
  EVIDENCE_WINDOW_MS,
  fixFor,
  KCM_MANAGER,
} from '../../controller/concurrent-controller.js';
import { RegisteredNodeSign } from '../../controller/kcm-registered.js';
import type { ControllerMetrics } from '../../controller/metrics.js';
import { type LeadershipControl, NodeLifecycleController } from '../../controller/node-lifecycle.js';
import { livenessChecks, readinessChecks } from '../../controller/probes.js';
import type { Probe } from '../../controller/second-opinion.js';
import {
  DisruptionController,
  type DisruptionMetrics,
  GraceResolver,
  PoolConfigError,
} from '../../disruption/index.js';
import type { LeaderElector } from '../../election/index.js';
import { NodeHealthTracker } from '../../health/index.js';
import type { KubeClient } from '../../kube/client.js';
import type { RequestRateLimiter } from '../../kube/rate-limit.js';
import type { Lease, Node } from '../../kube/types.js';
import type { Logger } from '../../log/logger.js';
import type { Runnable } from '../../manager/manager.js';
import { drainWrites } from '../../manager/shutdown.js';
import { companionPolicy, upstreamPolicy } from '../../policy/index.js';
import { filter, type Subscription } from '../../rx/index.js';
import type { Reflector } from '../../watch/index.js';
import { writeFence } from '../write-fence.js';
import { COMPONENT, EVENT_COMPONENT } from './api-clients.js';

/**
 * Opens the --node-pool-config file. A missing, unreadable or invalid file at start is a usage
 * error like a bad flag value (FlagError: exit 2), naming the flag, the file and every problem.
 */
export async function openPoolConfig(
  path: string,
  opts: Omit<Parameters<typeof PoolConfigLoader.open>[0], 'path'>,
): Promise<PoolConfigLoader> {
  try {
    return await PoolConfigLoader.open({ path, ...opts });
  } catch (err) {
    if (!(err instanceof PoolConfigError)) throw err;
    throw new FlagError(
      `invalid value ${JSON.stringify(path)} for flag --node-pool-config (accepted: a readable JSON ` +
        'file of node pools, {"pools": [{"name", "selector", "nodeMonitorGracePeriod", ' +
        `"nodeStartupGracePeriod"}]}): ${err.errors.map((e) => e.text).join('; ')}`,
    );
  }
}

/** What judges the nodes: per-pool grace, the health tracker, the disruption controller. */
export interface NodeHealth {
  grace: GraceResolver;
  /** The --node-pool-config file (reloaded on change or SIGHUP), if any. */
  pools: PoolConfigLoader | undefined;
  tracker: NodeHealthTracker;
  disruption: DisruptionController;
}

export async function assembleNodeHealth(o: {
  config: Pick<Config, 'health' | 'nodePoolConfigPath' | 'disruption'> &
    Partial<Pick<Config, 'secondOpinion'>>;
  clock: Pick<Clock, 'scheduler'>;
  logger: Logger;
  metrics: DisruptionMetrics;
}): Promise<NodeHealth> {
  const { health, disruption: d } = o.config;
  const defaults = { monitorGraceMs: health.monitorGraceMs, startupGraceMs: health.startupGraceMs };
  const grace = new GraceResolver({ defaults, metrics: o.metrics });
  const pools = o.config.nodePoolConfigPath
    ? await openPoolConfig(o.config.nodePoolConfigPath, {
        scheduler: o.clock.scheduler,
        logger: o.logger,
        metrics: o.metrics,
        graceBounds: {
          watchSilenceThresholdMs: health.watchSilenceThresholdMs,
          ...(o.config.secondOpinion
            ? {
                confirmDownMs:
                  o.config.secondOpinion.confirmAfterMs +
                  o.config.secondOpinion.retryMs +
                  o.config.secondOpinion.timeoutMs,
              }
            : {}),
        },
      })
    : undefined;
  if (pools) grace.setConfig(pools.current);
  const tracker = new NodeHealthTracker({
    grace: defaults,
    graceFor: (node) => grace.track(node.metadata.name, node.metadata.labels),
  });
  const disruption = new DisruptionController(
    {
      nodeEvictionRate: d.evictionRate,
      secondaryNodeEvictionRate: d.secondaryEvictionRate,
      largeClusterSizeThreshold: d.largeClusterSizeThreshold,
      unhealthyZoneThreshold: d.unhealthyZoneThreshold,
      cap: {
        maxNodes: d.capMaxNodes || undefined,
        maxPercent: d.capMaxPercent || undefined,
        windowMs: d.capWindowMs,
      },
    },
    { logger: o.logger, metrics: o.metrics },
  );
  return { grace, pools, tracker, disruption };
}

/**
 * Group subscribers, after the reconciler: a deleted node leaves the per-pool grace's counts, and
 * a new pool file (a change or SIGHUP) gives every node its grace again.
 */
export function poolGrace(o: {
  health: Pick<NodeHealth, 'grace' | 'pools'>;
  nodes: Pick<Reflector<Node>, 'events$'>;
  controller: Pick<NodeLifecycleController, 'refreshGrace'>;
}): Runnable {
  const { grace, pools } = o.health;
  let nodeDeletes: Subscription | undefined;
  let poolSub: Subscription | undefined;
  return {
    name: 'pool-grace',
    group: 'subscribers',
    start: () => {
      nodeDeletes = o.nodes.events$
        .pipe(filter((ev) => ev.type === 'Delete'))
        .subscribe((ev) =>
          grace.untrack((ev as { object: { metadata: { name: string } } }).object.metadata.name),
        );
      poolSub = pools?.config$.subscribe((c) => {
        grace.setConfig(c);
        o.controller.refreshGrace();
      });
    },
    stop: {
      close: () => {
        poolSub?.unsubscribe();
        pools?.close();
        nodeDeletes?.unsubscribe();
      },
    },
  };
}

export interface NodeLifecycleOptions {
  config: Pick<Config, 'health' | 'mode' | 'companion' | 'concurrentController' | 'dryRun' | 'kubeApi'> &
    Partial<Pick<Config, 'outOfService' | 'secondOpinion'>> & {
      leaderElection: Pick<Config['leaderElection'], 'identity' | 'leaseDurationMs' | 'blindStepDownMs'>;
    };
  clock: Clock;
  logger: Logger;
  registry: Registry;
  metrics: ControllerMetrics;
  client: KubeClient;
  /** The client's one rate limiter: the writer takes its tokens there too. */
  limiter: RequestRateLimiter;
  health: Pick<NodeHealth, 'tracker' | 'disruption'>;
  nodes: Reflector<Node>;
  leases: Reflector<Lease>;
  ticker: Ticker;
  /** Leader election (absent without): the fence, the fence deadline, the lock access for /readyz. */
  elector: LeaderElector | undefined;
  /** What the reconciler tells leader election (eligible when it sees; step down when blind). */
  election: LeadershipControl | undefined;
  /** True once the shutdown began: no write starts after that. */
  stopping(): boolean;
  /** --second-opinion's kubelet probe (default: the real one). */
  kubeletProbe?: Probe;
}

export interface NodeLifecycle {
  controller: NodeLifecycleController;
  writer: ApiWriter;
  /** Upstream mode: another node-lifecycle controller seen (absent in companion mode and dry-run). */
  rival: ConcurrentControllerCheck | undefined;
  /** Group subscribers, leader-bound: the reconciler, and the probes that judge its sight. */
  reconciler: Runnable;
  /** Group watches, before the node watch (it reads the node events): the rival check, if any. */
  rivalCheck: Runnable | undefined;
}

/**
 * The reconciler and the writer (fenced by leadership, the shutdown and another node-lifecycle
 * controller). It acts while this replica leads and nothing refuses it (another node-lifecycle
 * controller seen, or not yet looked for); after the shutdown began never again.
 */
export function assembleNodeLifecycle(o: NodeLifecycleOptions): NodeLifecycle {
  const rival = concurrentControllerCheck(o);
  // Each time this replica starts acting (it starts leading, or leads again after a refusal): a
  // write decided while acting before is never sent now.
  let term = 0;
  const writer = nodeWriter(o, rival, () => term);
  const controller = reconcilerOf(o, writer);
  let elected = false;
  let acting = false;
  const update = () => {
    const act = !o.stopping() && elected && (rival?.mayAct() ?? true);
    if (act && !acting) term++;
    acting = act;
    controller.setLeading(act);
  };
  rival?.onChange(update);
  const reconciler: Runnable = {
    name: 'node-lifecycle',
    group: 'subscribers',
    needLeaderElection: true,
    start: () => controller.start(),
    setLeading: (leading) => {
      elected = leading;
      update();
    },
    ...probes(o),
    stop: { drain: () => drainWrites(controller, writer), inFlight: () => writer.inFlight },
  };
  return { controller, writer, rival, reconciler, rivalCheck: rival && rivalRunnable(rival, o.nodes) };
}

/**
 * Upstream mode: another node-lifecycle controller (kube-controller-manager's left on) setting the
 * nodes' Ready condition means two controllers marking the same nodes; this replica then writes
 * nothing (unless allowed) and says why. Its reads share the one rate limiter (they count against
 * --kube-api-qps like every request) at low priority: they never take a token a mark or a lease
 * re-read waits for.
 */
function concurrentControllerCheck(o: NodeLifecycleOptions): ConcurrentControllerCheck | undefined {
  if (!o.config.concurrentController.check) return undefined;
  const { allow } = o.config.concurrentController;
  return new ConcurrentControllerCheck({
    client: o.client,
    clock: o.clock,
    logger: o.logger,
    metrics: createConcurrentControllerMetrics(o.registry),
    // The API server names a manager after the user agent up to its first '/'.
    ours: COMPONENT,
    allow,
    // Seen before kube-controller-manager marks anything: its RegisteredNode Events, dated by its lock.
    registered: new RegisteredNodeSign({
      client: o.client,
      clock: o.clock,
      logger: o.logger,
      windowMs: EVIDENCE_WINDOW_MS,
      allow,
      fix: fixFor(KCM_MANAGER),
    }),
  });
}

function rivalRunnable(rival: ConcurrentControllerCheck, nodes: Reflector<Node>): Runnable {
  return {
    name: 'concurrent-controller-check',
    group: 'watches',
    start: () => rival.start(nodes.events$),
    readyz: [{ name: 'concurrent-node-lifecycle', check: () => rival.readiness() }],
    stop: { close: () => rival.stop() },
  };
}

function nodeWriter(
  o: NodeLifecycleOptions,
  rival: ConcurrentControllerCheck | undefined,
  term: () => number,
): ApiWriter {
  const { config, elector } = o;
  return new ApiWriter({
    client: o.client,
    fence: writeFence({
      stopping: o.stopping,
      elector,
      refusal: rival ? () => rival.refusal() : undefined,
    }),
    fenceDeadline: elector ? () => elector.fenceDeadline() : undefined,
    term,
    dryRun: config.dryRun,
    logger: o.logger,
    metrics: createWriterMetrics(o.registry),
    clock: o.clock,
    qps: config.kubeApi.qps,
    burst: config.kubeApi.burst,
    limiter: o.limiter,
    // Companion mode records its own Events under its own name, never as upstream's node-controller.
    component: config.mode === 'companion' ? COMPONENT : EVENT_COMPONENT,
    instance: config.leaderElection.identity,
  });
}

/**
 * Nodes reconciled at once. A worker holds its node from the mark through its taints to its pods,
 * and waits for the client's tokens in their lanes (src/kube/rate-limit.ts): in a mass failure the
 * pod work of the nodes marked first waits behind the marks for up to AGING_MS, so the workers must
 * outnumber every node lost in that time, or a new mark waits for a worker instead of a token
 * (with 64, 300 of 1,000 lost at once were marked up to 21.5 s late; docs/benchmarks-history.md).
 * The limiter is the real bound: a waiting worker costs a promise, requests in flight stay bounded
 * by --kube-api-qps and API_MAX_SOCKETS.
 */
export const RECONCILE_WORKERS = 1024;

/**
 * Of those, how many take ordinary keys (start-up, resyncs, renewals, admitted taints) at once: the
 * rest stand ready for urgent ones (a node past its deadline, one back). A thousand start-up writes
 * all in flight at once, each holding its node and patch while it waits for a token, cost 5-10 MiB
 * of peak RSS at 1,000 nodes for nothing: they go no faster than the limiter lets them.
 */
export const ORDINARY_WORKERS = 64;

function reconcilerOf(o: NodeLifecycleOptions, writer: ApiWriter): NodeLifecycleController {
  const { config } = o;
  return new NodeLifecycleController({
    clock: o.clock,
    logger: o.logger,
    metrics: o.metrics,
    workers: RECONCILE_WORKERS,
    ordinaryWorkers: ORDINARY_WORKERS,
    client: o.client,
    writer,
    tracker: o.health.tracker,
    disruption: o.health.disruption,
    leases: o.leases,
    nodes: o.nodes,
    watchSilenceThresholdMs: config.health.watchSilenceThresholdMs,
    monitorPeriodMs: config.health.monitorPeriodMs,
    ticker: o.ticker,
    policy:
      config.mode === 'companion'
        ? companionPolicy({ ...config.companion, identity: config.leaderElection.identity })
        : upstreamPolicy({ markPodsNotReady: config.health.markPodsNotReady }),
    // A replica that cannot see does not acquire the lease; a leader blind for too long releases
    // it (once its writes on the wire are over) so that one that can see leads.
    election: o.election,
    blindStepDownMs: o.election ? config.leaderElection.blindStepDownMs : 0,
    ...(config.outOfService ? { outOfService: config.outOfService } : {}),
    ...(config.secondOpinion
      ? {
          secondOpinion: {
            settings: config.secondOpinion,
            ...(o.kubeletProbe ? { probe: o.kubeletProbe } : {}),
          },
        }
      : {}),
  });
}

/** /healthz and /readyz from the reconciler's sight (src/controller/probes.ts). */
function probes(o: NodeLifecycleOptions): Pick<Runnable, 'healthz' | 'readyz'> {
  const { elector, clock } = o;
  const sources = {
    now: () => clock.scheduler.now(),
    nodes: () => o.nodes.health(),
    leases: () => o.leases.health(),
    access: elector ? () => elector.apiAccess() : undefined,
    startedAt: clock.scheduler.now(),
  };
  const options = {
    watchSilenceThresholdMs: o.config.health.watchSilenceThresholdMs,
    lockAccessMs: o.config.leaderElection.leaseDurationMs,
  };
  return { healthz: livenessChecks(sources, options), readyz: readinessChecks(sources, options) };
}
