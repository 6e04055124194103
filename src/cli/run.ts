import { ApiWriter, createWriterMetrics } from '../apply/writer.js';
import { systemClock } from '../clock/clock.js';
import type { Config } from '../config/config.js';
import { createControllerMetrics } from '../controller/metrics.js';
import { NodeLifecycleController } from '../controller/node-lifecycle.js';
import {
  createDisruptionMetrics,
  DisruptionController,
  GraceResolver,
  PoolConfigLoader,
} from '../disruption/index.js';
import { LeaderElector } from '../election/elector.js';
import { LeaderHealthzAdaptor } from '../election/healthz.js';
import { IdentityLeases } from '../election/identity.js';
import { lockUpdates, watchLock } from '../election/lock-watch.js';
import { createLeaderElectionMetrics } from '../election/metrics.js';
import { NodeHealthTracker } from '../health/index.js';
import { type Check, startHttpServers } from '../http/server.js';
import { KubeClient } from '../kube/client.js';
import { homeDirectory, type KubeconfigEnv, resolveKubeconfig } from '../kube/kubeconfig.js';
import type { ProxyEnv } from '../kube/proxy.js';
import { RequestRateLimiter } from '../kube/rate-limit.js';
import type { Lease } from '../kube/types.js';
import type { Logger } from '../log/logger.js';
import { createApiRequestMetrics, createRegistry } from '../metrics/registry.js';
import { filter } from '../rx/index.js';
import { createWatchMetrics, type Reflector, watchNodeLeases, watchNodes } from '../watch/index.js';

export const COMPONENT = 'node-lifecycle-controller';
/** Source component on Events, as upstream's node lifecycle controller records them. */
export const EVENT_COMPONENT = 'node-controller';

export interface RunOptions {
  config: Config;
  logger: Logger;
  env: KubeconfigEnv;
  /** Environment an exec credential plugin (kubeconfig user.exec) inherits. */
  processEnv?: NodeJS.ProcessEnv;
  /** HTTPS_PROXY, HTTP_PROXY, NO_PROXY (and lower case): honoured as client-go does. */
  proxyEnv?: ProxyEnv;
  version: string;
  /** Process exit (injected so tests and the demo can run the controller in-process). */
  exit: (code: number) => void;
  /** Signals to handle; the CLI passes the process, tests may pass an EventEmitter. */
  signals?: NodeJS.EventEmitter;
}

export interface RunningController {
  metricsPort: number | undefined;
  probesPort: number | undefined;
  /** Graceful shutdown: stop watches and workers, finish in-flight writes, release the lease. */
  shutdown(reason: string): Promise<void>;
}

/** Wires config -> clients -> watches -> election -> reconciler -> HTTP -> signals. */
export async function runController(o: RunOptions): Promise<RunningController> {
  const { config, logger: log } = o;
  const clock = systemClock;
  const kube = resolveKubeconfig({
    flag: config.kubeconfig,
    env: o.env,
    homeDir: homeDirectory(),
    processEnv: o.processEnv,
    proxyEnv: o.proxyEnv,
    logger: log,
  });
  log.info('Using kubeconfig', {
    source: kube.source,
    paths: kube.paths,
    server: kube.server,
    auth: kube.auth,
    proxy: kube.proxy?.url ?? 'none',
    ...(kube.proxy ? { proxyFrom: kube.proxy.from } : {}),
  });
  log.info('Starting', {
    version: o.version,
    identity: config.leaderElection.identity,
    dryRun: config.dryRun,
    leaderElect: config.leaderElection.enabled,
    nodeMonitorGracePeriod: `${config.health.monitorGraceMs}ms`,
    watchSilenceThreshold: `${config.health.watchSilenceThresholdMs}ms`,
    nodeStartupGracePeriod: `${config.health.startupGraceMs}ms`,
  });

  const registry = createRegistry();
  // One client-side rate limiter for every request but watches, reads and writes alike (client-go).
  const limiter = new RequestRateLimiter(config.kubeApi.qps, config.kubeApi.burst, clock.scheduler);
  const client = await KubeClient.fromCredentials(await kube.credentials(), {
    observer: createApiRequestMetrics(registry),
    userAgent: `${COMPONENT}/${o.version} (${config.leaderElection.identity})`,
    defaultTimeoutMs: 30_000,
    rateLimiter: limiter,
  });
  // Leader election has its own limiter on the same connections, as kube-controller-manager gives
  // it its own client: lock renewals never queue behind a burst of node and pod requests.
  const electionClient = client.derive({
    rateLimiter: new RequestRateLimiter(config.kubeApi.qps, config.kubeApi.burst, clock.scheduler),
  });
  const metrics = createControllerMetrics(registry);
  const disruptionMetrics = createDisruptionMetrics(registry);
  const watchMetrics = createWatchMetrics(registry);

  // Per-pool grace.
  const grace = new GraceResolver({
    defaults: { monitorGraceMs: config.health.monitorGraceMs, startupGraceMs: config.health.startupGraceMs },
    metrics: disruptionMetrics,
  });
  const pools = config.nodePoolConfigPath
    ? await PoolConfigLoader.open({
        path: config.nodePoolConfigPath,
        scheduler: clock.scheduler,
        logger: log,
        metrics: disruptionMetrics,
      })
    : undefined;
  if (pools) grace.setConfig(pools.current);

  const tracker = new NodeHealthTracker({
    grace: { monitorGraceMs: config.health.monitorGraceMs, startupGraceMs: config.health.startupGraceMs },
    graceFor: (node) => grace.track(node.metadata.name, node.metadata.labels),
  });
  const disruption = new DisruptionController(
    {
      nodeEvictionRate: config.disruption.evictionRate,
      secondaryNodeEvictionRate: config.disruption.secondaryEvictionRate,
      largeClusterSizeThreshold: config.disruption.largeClusterSizeThreshold,
      unhealthyZoneThreshold: config.disruption.unhealthyZoneThreshold,
      cap: {
        maxNodes: config.disruption.capMaxNodes || undefined,
        maxPercent: config.disruption.capMaxPercent || undefined,
        windowMs: config.disruption.capWindowMs,
      },
    },
    { logger: log, metrics: disruptionMetrics },
  );

  const watchDeps = { client, clock, logger: log, metrics: watchMetrics };
  const nodes = watchNodes(watchDeps);
  // A quiet lease watch reconnects well before it would count as silent (blind).
  const leases = watchNodeLeases({
    ...watchDeps,
    tuning: { idleTimeoutMs: Math.max(1000, Math.floor((config.health.watchSilenceThresholdMs * 2) / 3)) },
  });

  // Leader election.
  const le = config.leaderElection;
  const electionMetrics = createLeaderElectionMetrics(registry);
  let lock: Reflector<Lease> | undefined;
  let elector: LeaderElector | undefined;
  let identity: IdentityLeases | undefined;
  const healthz = new LeaderHealthzAdaptor(20_000);
  if (le.enabled) {
    lock = watchLock(
      { client: electionClient, clock, logger: log, metrics: watchMetrics },
      le.namespace,
      le.name,
    );
    elector = new LeaderElector({
      config: le,
      client: electionClient,
      clock,
      logger: log,
      metrics: electionMetrics,
      lockUpdates$: lockUpdates(lock, le.name),
    });
    healthz.setLeaderElection(elector);
    identity = new IdentityLeases({
      client: electionClient,
      clock,
      logger: log,
      metrics: electionMetrics,
      namespace: le.namespace,
      hostname: le.hostname,
      holderIdentity: le.identity,
      gcAgeMs: le.identityLeaseGcAgeMs,
      elector,
    });
  }
  const fence = elector
    ? () =>
        elector.canWrite()
          ? undefined
          : elector.isLeader()
            ? 'leader lease not fresh enough'
            : 'not the leader'
    : () => undefined;

  const writer = new ApiWriter({
    client,
    fence,
    dryRun: config.dryRun,
    logger: log,
    metrics: createWriterMetrics(registry),
    clock,
    qps: config.kubeApi.qps,
    burst: config.kubeApi.burst,
    limiter,
    component: EVENT_COMPONENT,
    instance: le.identity,
  });

  const controller = new NodeLifecycleController({
    clock,
    logger: log,
    metrics,
    client,
    writer,
    tracker,
    disruption,
    leases,
    nodes,
    watchSilenceThresholdMs: config.health.watchSilenceThresholdMs,
    monitorPeriodMs: config.health.monitorPeriodMs,
    markPodsNotReady: config.health.markPodsNotReady,
  });
  controller.start();
  const nodeDeletes = nodes.events$
    .pipe(filter((ev) => ev.type === 'Delete'))
    .subscribe((ev) =>
      grace.untrack((ev as { object: { metadata: { name: string } } }).object.metadata.name),
    );
  const poolSub = pools?.config$.subscribe((c) => {
    grace.setConfig(c);
    controller.refreshGrace();
  });

  const healthChecks: Check[] = [{ name: 'ping', check: () => undefined }];
  if (elector) healthChecks.push({ name: 'leaderElection', check: () => healthz.check()?.message });
  const readyChecks: Check[] = [
    { name: 'nodes-synced', check: () => (nodes.store.isSynced ? undefined : 'node watch not synced') },
    { name: 'leases-synced', check: () => (leases.store.isSynced ? undefined : 'lease watch not synced') },
  ];
  const http = await startHttpServers({
    metrics: { address: config.metricsAddress, registry },
    probes: { address: config.probeAddress, healthz: () => healthChecks, readyz: () => readyChecks },
    logger: log,
  });

  // Nodes first, so that leases find their nodes (no spurious lease-without-node at start).
  nodes.start();
  await Promise.race([nodes.whenSynced(), new Promise((r) => setTimeout(r, 30_000))]);
  leases.start();

  let shuttingDown: Promise<void> | undefined;
  const shutdown = (reason: string): Promise<void> => {
    shuttingDown ??= (async () => {
      const started = performance.now();
      log.info('Shutting down', { reason });
      // Stop acting, stop the watches, let in-flight writes finish (bounded).
      controller.setLeading(false);
      nodes.stop();
      leases.stop();
      const drained = await Promise.race([
        controller.stop().then(() => true),
        new Promise<boolean>((r) => setTimeout(() => r(false), config.shutdownGracePeriodMs)),
      ]);
      if (!drained) log.warn('In-flight writes did not finish within the shutdown grace period');
      // Only after all guarded work has stopped: release the lock so another replica leads at once.
      if (elector) {
        const released = await elector.release();
        log.info('Leader lease release', { result: released });
        elector.stop();
      }
      lock?.stop();
      await identity?.shutdown(2_000).catch(() => undefined);
      poolSub?.unsubscribe();
      pools?.close();
      nodeDeletes.unsubscribe();
      await http.close();
      client.close();
      log.info('Stopped', { seconds: Math.round(performance.now() - started) / 1000 });
    })();
    return shuttingDown;
  };

  if (elector && lock && identity) {
    elector.events$.subscribe((ev) => {
      if (ev.type === 'started-leading') controller.setLeading(true);
      else if (ev.type === 'stopped-leading') controller.setLeading(false);
      else if (ev.type === 'new-leader') log.info('New leader observed', { leader: ev.identity || '<none>' });
    });
    elector.lost$.subscribe((lost) => {
      // Fenced already; exit non-zero so Kubernetes restarts us clean (controller-runtime does the same).
      controller.setLeading(false);
      log.error('Leadership lost: exiting', { reason: lost.reason });
      o.exit(1);
    });
    lock.start();
    elector.start();
    identity.start();
  } else {
    log.warn('Leader election disabled: this process acts alone; never run two like this');
    controller.setLeading(true);
  }

  const signals = o.signals;
  if (signals) {
    let count = 0;
    const onSignal = (sig: string) => {
      count++;
      if (count > 1) {
        log.warn('Second signal: exiting now', { signal: sig });
        o.exit(1);
        return;
      }
      void shutdown(sig).then(
        () => o.exit(0),
        (err: unknown) => {
          log.error('Shutdown failed', { err });
          o.exit(1);
        },
      );
    };
    signals.on('SIGTERM', () => onSignal('SIGTERM'));
    signals.on('SIGINT', () => onSignal('SIGINT'));
    signals.on('SIGHUP', () => {
      if (!pools) {
        log.info('SIGHUP: no --node-pool-config to reload');
        return;
      }
      void pools.reload('SIGHUP');
    });
  }

  return { metricsPort: http.metrics?.port, probesPort: http.probes?.port, shutdown };
}
