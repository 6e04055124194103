import type { Registry } from 'prom-client';
import { ApiWriter, createWriterMetrics } from '../apply/writer.js';
import { systemClock } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import { type Config, configWarnings } from '../config/config.js';
import { FlagError } from '../config/flags.js';
import {
  ConcurrentControllerCheck,
  createConcurrentControllerMetrics,
} from '../controller/concurrent-controller.js';
import { createControllerMetrics } from '../controller/metrics.js';
import { NodeLifecycleController } from '../controller/node-lifecycle.js';
import { LIVENESS_NO_API_ACCESS_MS, livenessChecks, readinessChecks } from '../controller/probes.js';
import {
  createDisruptionMetrics,
  DisruptionController,
  GraceResolver,
  PoolConfigError,
  PoolConfigLoader,
} from '../disruption/index.js';
import {
  CHECK_STOPPED,
  CoordinationWatchdog,
  candidateVersions,
  checkCoordinatedElection,
  type LeaseCandidate,
  LeaseCandidatePublisher,
  watchCandidate,
} from '../election/candidate.js';
import { coordinatedRecheckMs } from '../election/config.js';
import { LeaderElector } from '../election/elector.js';
import { LeaderHealthzAdaptor, type PendingDecision, undecidedTooLong } from '../election/healthz.js';
import { IdentityLeases } from '../election/identity.js';
import { lockUpdates, namedUpdates, watchLock } from '../election/lock-watch.js';
import { createLeaderElectionMetrics } from '../election/metrics.js';
import { NodeHealthTracker } from '../health/index.js';
import { createHttpConnectionMetrics } from '../http/connections.js';
import { createDelegatedAuthMetrics, DelegatedAuth, REVIEW_SOCKETS } from '../http/delegated-auth.js';
import {
  type Check,
  createMetricsServerMetrics,
  type MetricsServing,
  startHttpServers,
} from '../http/server.js';
import { createServingCertMetrics, ServingCertificate } from '../http/serving-cert.js';
import { KubeClient, type RequestObserver } from '../kube/client.js';
import type { Credentials } from '../kube/credentials.js';
import { homeDirectory, type KubeconfigEnv, resolveKubeconfig } from '../kube/kubeconfig.js';
import type { ProxyEnv } from '../kube/proxy.js';
import { RequestRateLimiter } from '../kube/rate-limit.js';
import type { Lease } from '../kube/types.js';
import type { Logger } from '../log/logger.js';
import { drainWrites, runShutdown, shutdownBudget } from '../manager/shutdown.js';
import { createBuildInfoMetric } from '../metrics/build-info.js';
import { EVENT_LOOP_SAMPLE_MS, EventLoopSampler } from '../metrics/event-loop.js';
import { createApiRequestMetrics, createRegistry } from '../metrics/registry.js';
import { companionPolicy, upstreamPolicy } from '../policy/index.js';
import { filter } from '../rx/index.js';
import {
  createWatchMetrics,
  type Reflector,
  ServerRewindSignal,
  WatchReadPacer,
  watchNodeLeases,
  watchNodes,
} from '../watch/index.js';
import type { BuildInfo } from './build-info.js';
import { writeFence } from './write-fence.js';

export const COMPONENT = 'node-lifecycle-controller';
/** Source component on Events, as upstream's node lifecycle controller records them. */
export const EVENT_COMPONENT = 'node-controller';

/**
 * Connections to the API server for node, lease and pod requests (watches included). client-go
 * multiplexes everything over one HTTP/2 connection; over HTTP/1.1 each request in flight holds a
 * TLS connection of its own, about 0.2 MiB each that the process keeps after a burst (a probe of
 * 1,000 writes: 64 connections peaked at 83 MiB, 8 at 70 MiB; docs/benchmarks.md). The reconcile
 * workers (8) keep today's bursts near that anyway; 16 bounds what any burst can open and still
 * carries --kube-api-qps=50 while requests take up to ~250 ms.
 */
export const API_MAX_SOCKETS = 16;
/** Leader election's own connections: the lock watch, renewals, identity leases. */
export const ELECTION_MAX_SOCKETS = 4;

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
 * Opens the --node-pool-config file. A missing, unreadable or invalid file at start is a usage
 * error like a bad flag value (FlagError: exit 2), naming the flag, the file and every problem.
 */
async function openPoolConfig(
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

/** Wires config -> clients -> watches -> election -> reconciler -> HTTP -> signals. */
export async function runController(o: RunOptions): Promise<RunningController> {
  const { config, logger: log } = o;
  const clock = systemClock;
  // Signals are ours from the first moment: one that comes while the clients and servers are being
  // made is kept and acted on (the shutdown below, logged as always) as soon as that can run; the
  // default action would end the process without a word. A second one exits at once, as later.
  const signals = o.signals;
  const early: string[] = [];
  let onSignal = (sig: string) => {
    if (early.length > 0) {
      log.warn('Second signal: exiting now', { signal: sig });
      o.exit(1);
      return;
    }
    early.push(sig);
  };
  let onHangup = () => log.info('SIGHUP: no --node-pool-config to reload');
  signals?.on('SIGTERM', () => onSignal('SIGTERM'));
  signals?.on('SIGINT', () => onSignal('SIGINT'));
  signals?.on('SIGHUP', () => onHangup());
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
    version: o.build.version,
    revision: o.build.revision,
    nodejs: o.build.nodejsVersion,
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

  const registry = createRegistry();
  createBuildInfoMetric(registry, o.build);
  // The process's one periodic timer: event-loop samples, and paced watch reads when configured.
  const eventLoop = new EventLoopSampler(registry, config.health.watchReadIntervalMs || EVENT_LOOP_SAMPLE_MS);
  eventLoop.start();
  const credentials = await kube.credentials();
  const apiObserver = createApiRequestMetrics(registry);
  const userAgent = `${COMPONENT}/${o.build.version} (${config.leaderElection.identity})`;
  // One client-side rate limiter for every request but watches, reads and writes alike (client-go).
  const limiter = new RequestRateLimiter(config.kubeApi.qps, config.kubeApi.burst, clock.scheduler);
  const client = await KubeClient.fromCredentials(credentials, {
    observer: apiObserver,
    userAgent,
    defaultTimeoutMs: 30_000,
    rateLimiter: limiter,
    maxSockets: API_MAX_SOCKETS,
  });
  // Leader election has its own limiter and its own connections, as kube-controller-manager gives
  // it its own client: lock renewals never queue behind a burst of node and pod requests, neither
  // for a rate-limiter token nor for a free connection.
  const electionClient = await KubeClient.fromCredentials(credentials, {
    observer: apiObserver,
    userAgent,
    defaultTimeoutMs: 30_000,
    rateLimiter: new RequestRateLimiter(config.kubeApi.qps, config.kubeApi.burst, clock.scheduler),
    maxSockets: ELECTION_MAX_SOCKETS,
  });
  const metricsServing = await secureMetricsServing(o, credentials, apiObserver, userAgent, registry);
  const metrics = createControllerMetrics(registry);
  const disruptionMetrics = createDisruptionMetrics(registry);
  const watchMetrics = createWatchMetrics(registry);

  // Per-pool grace.
  const grace = new GraceResolver({
    defaults: { monitorGraceMs: config.health.monitorGraceMs, startupGraceMs: config.health.startupGraceMs },
    metrics: disruptionMetrics,
  });
  const pools = config.nodePoolConfigPath
    ? await openPoolConfig(config.nodePoolConfigPath, {
        scheduler: clock.scheduler,
        logger: log,
        metrics: disruptionMetrics,
        graceBounds: { watchSilenceThresholdMs: config.health.watchSilenceThresholdMs },
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

  // The lease and node watches may be read on a cadence (--watch-read-interval), driven by the
  // process's one periodic timer, which samples the event loop too. The leader election lock's
  // watch never is (a handover waits on it).
  const readPacer =
    config.health.watchReadIntervalMs > 0
      ? new WatchReadPacer({
          onUnsupported: (why) =>
            log.warn('Cannot pace watch reads on this runtime; reading as events arrive', { why }),
        })
      : undefined;
  if (readPacer) eventLoop.onTick(() => readPacer.tick());
  // A watch that finds the API server behind its resourceVersion (etcd restored) makes the others ask.
  const rewind = new ServerRewindSignal();
  const watchDeps = { client, clock, logger: log, metrics: watchMetrics, readPacer, rewind };
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
  let candidate: LeaseCandidatePublisher | undefined;
  let candidateWatch: Reflector<LeaseCandidate> | undefined;
  const healthz = new LeaderHealthzAdaptor(20_000);
  /** Set while the coordinated-election decision waits for a real answer from the API server. */
  let coordinationPending: PendingDecision | undefined;
  if (le.enabled && le.coordinated) {
    let versions: ReturnType<typeof candidateVersions>;
    try {
      versions = candidateVersions(o.build.version, le.emulatedVersion || undefined);
    } catch (err) {
      throw new FlagError(`--feature-gates=CoordinatedLeaderElection=true: ${(err as Error).message}`);
    }
    candidateWatch = watchCandidate(
      { client: electionClient, clock, logger: log, metrics: watchMetrics },
      le.namespace,
      le.identity,
    );
    candidate = new LeaseCandidatePublisher({
      client: electionClient,
      clock,
      logger: log,
      metrics: electionMetrics,
      namespace: le.namespace,
      name: le.identity,
      leaseName: le.name,
      ...versions,
      updates$: namedUpdates(candidateWatch, le.identity),
    });
  }
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
      coordinated: candidate !== undefined,
      // Preempted by the coordinator: the lock is released once no write of ours is on the wire.
      drained: () => writer.idle(),
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
  // Upstream mode: another node-lifecycle controller (kube-controller-manager's left on) setting
  // the nodes' Ready condition means two controllers marking the same nodes; this replica then
  // writes nothing (unless allowed) and says why. Its reads share the one rate limiter (they count
  // against --kube-api-qps like every request) at low priority: they never take a token a mark or
  // a lease re-read waits for.
  const rival = config.concurrentController.check
    ? new ConcurrentControllerCheck({
        client,
        clock,
        logger: log,
        metrics: createConcurrentControllerMetrics(registry),
        // The API server names a manager after the user agent up to its first '/'.
        ours: COMPONENT,
        allow: config.concurrentController.allow,
      })
    : undefined;

  // Set at SIGTERM: no write starts after that (writes on the wire are left to finish).
  let stopping = false;
  const fence = writeFence({
    stopping: () => stopping,
    elector,
    refusal: rival ? () => rival.refusal() : undefined,
  });

  // Each time this replica starts acting (it starts leading, or leads again after a refusal: see
  // updateLeading below): a write decided while acting before is never sent now.
  let leadershipTerm = 0;
  const writer = new ApiWriter({
    client,
    fence,
    fenceDeadline: elector ? () => elector.fenceDeadline() : undefined,
    term: () => leadershipTerm,
    dryRun: config.dryRun,
    logger: log,
    metrics: createWriterMetrics(registry),
    clock,
    qps: config.kubeApi.qps,
    burst: config.kubeApi.burst,
    limiter,
    // Companion mode records its own Events under its own name, never as upstream's node-controller.
    component: config.mode === 'companion' ? COMPONENT : EVENT_COMPONENT,
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
    ticker: eventLoop,
    policy:
      config.mode === 'companion'
        ? companionPolicy({ ...config.companion, identity: le.identity })
        : upstreamPolicy({ markPodsNotReady: config.health.markPodsNotReady }),
    // A replica that cannot see does not acquire the lease; a leader blind for too long releases
    // it (once its writes on the wire are over) so that one that can see leads.
    election: elector
      ? {
          setEligible: (eligible) => {
            elector.setEligible(eligible);
            candidate?.setEligible(eligible);
          },
          stepDown: (reason) => {
            void elector
              .stepDown(reason, () => writer.idle())
              .then((result) => log.info('Leader lease release after stepping down', { result }));
          },
        }
      : undefined,
    blindStepDownMs: elector ? le.blindStepDownMs : 0,
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

  const probeSources = {
    now: () => clock.scheduler.now(),
    nodes: () => nodes.health(),
    leases: () => leases.health(),
    access: elector ? () => elector.apiAccess() : undefined,
    startedAt: clock.scheduler.now(),
  };
  const probeOptions = {
    watchSilenceThresholdMs: config.health.watchSilenceThresholdMs,
    lockAccessMs: le.leaseDurationMs,
  };
  const healthChecks: Check[] = [
    { name: 'ping', check: () => undefined },
    ...livenessChecks(probeSources, probeOptions),
  ];
  if (elector) {
    healthChecks.push({
      name: 'leaderElection',
      check: () =>
        healthz.check()?.message ??
        undecidedTooLong(
          coordinationPending,
          clock.scheduler.now(),
          `${le.namespace}/${le.name}`,
          LIVENESS_NO_API_ACCESS_MS,
        ),
    });
  }
  const readyChecks: Check[] = readinessChecks(probeSources, probeOptions);
  if (rival) readyChecks.push({ name: 'concurrent-node-lifecycle', check: () => rival.readiness() });
  const http = await startHttpServers({
    metrics: { address: config.metricsAddress, registry, ...metricsServing.serving },
    probes: { address: config.probeAddress, healthz: () => healthChecks, readyz: () => readyChecks },
    logger: log,
    clock,
    connections: createHttpConnectionMetrics(registry),
  });

  let shuttingDown: Promise<void> | undefined;
  /** Until the wait for the node list below is over (nothing acts before that). */
  let startingUp = true;
  /** Resolves when the shutdown starts (ends the wait for the node list below). */
  let shutdownStarted = () => {};
  const shutdownRequested = new Promise<void>((r) => {
    shutdownStarted = r;
  });
  /** The candidate's deletion, started as the shutdown starts (before the lock is released). */
  let candidateGone: Promise<void> | undefined;
  const coordinationCheck = new AbortController();
  let watchdog: CoordinationWatchdog | undefined;
  const shutdown = (reason: string): Promise<void> => {
    shutdownStarted();
    shuttingDown ??= (async () => {
      const started = performance.now();
      const budget = shutdownBudget(config.shutdownGracePeriodMs);
      log.info('Shutting down', {
        reason,
        budget: formatDuration(budget.totalMs),
        ...(startingUp ? { during: 'start-up: before the node list synced; nothing was written' } : {}),
      });
      const result = await runShutdown(
        {
          stopActing: () => {
            stopping = true;
            controller.setLeading(false);
            nodes.stop();
            leases.stop();
            readPacer?.close();
            coordinationCheck.abort();
            watchdog?.stop();
            // Withdrawn first, so that the coordinator does not name this replica again when the
            // lock is released.
            candidateGone = candidate?.shutdown(Math.floor(budget.tailMs / 2));
          },
          // Writes only (the fence refuses new ones since stopActing); reads are aborted.
          drain: () => drainWrites(controller, writer),
          inFlight: () => writer.inFlight,
          release: elector
            ? async (ms) => {
                const started = clock.scheduler.now();
                await candidateGone;
                // Only after all guarded work has stopped: another replica leads at once.
                const released = await elector.release(Math.max(1, ms - (clock.scheduler.now() - started)));
                log.info('Leader lease release', { result: released });
                elector.stop();
                return released;
              }
            : undefined,
          abandon: elector ? () => elector.stop() : undefined,
          tail: async (ms) => {
            await identity?.shutdown(Math.floor(ms / 2)).catch(() => undefined);
          },
          close: async () => {
            elector?.stop();
            lock?.stop();
            identity?.stop();
            candidate?.stop();
            candidateWatch?.stop();
            rival?.stop();
            poolSub?.unsubscribe();
            pools?.close();
            nodeDeletes.unsubscribe();
            await http.close();
            metricsServing.close();
            eventLoop.stop();
            client.close();
            electionClient.close();
          },
        },
        budget,
        clock.scheduler,
        log,
      );
      log.info('Stopped', {
        took: formatDuration(Math.round(performance.now() - started)),
        drained: result.drained,
        lease: result.released ?? 'none',
      });
    })();
    return shuttingDown;
  };

  let count = 0;
  onSignal = (sig: string) => {
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
  onHangup = () => {
    if (!pools) {
      log.info('SIGHUP: no --node-pool-config to reload');
      return;
    }
    void pools.reload('SIGHUP');
  };
  for (const sig of early.splice(0)) onSignal(sig);

  // Nodes first, so that leases find their nodes. (A lease without a node is judged only once both
  // lists are complete, so a slow node list does not make every lease look like one.)
  rival?.start(nodes.events$);
  nodes.start();
  let syncWait: NodeJS.Timeout | undefined;
  await Promise.race([
    nodes.whenSynced(),
    shutdownRequested,
    new Promise((r) => {
      syncWait = setTimeout(r, 30_000);
    }),
  ]);
  clearTimeout(syncWait);
  startingUp = false;
  const running: RunningController = {
    metricsPort: http.metrics?.port,
    metricsScheme: http.metricsScheme,
    probesPort: http.probes?.port,
    shutdown,
  };
  // A signal before the node list came in: the shutdown runs; nothing more starts.
  if (shuttingDown) return running;
  leases.start();

  // The reconciler acts while this replica leads and nothing refuses it (another node-lifecycle
  // controller seen, or not yet looked for); after SIGTERM never again.
  let elected = elector === undefined;
  let acting = false;
  const updateLeading = () => {
    const act = !stopping && elected && (rival?.mayAct() ?? true);
    if (act && !acting) leadershipTerm++;
    acting = act;
    controller.setLeading(act);
  };
  rival?.onChange(updateLeading);
  if (elector && lock && identity) {
    elector.events$.subscribe((ev) => {
      if (ev.type === 'started-leading') elected = true;
      else if (ev.type === 'stopped-leading') elected = false;
      updateLeading();
    });
    elector.lost$.subscribe((lost) => {
      // Fenced already; exit non-zero so Kubernetes restarts us clean (controller-runtime does the same).
      elected = false;
      controller.setLeading(false);
      log.error('Leadership lost: exiting', { reason: lost.reason });
      o.exit(1);
    });
    const campaign = () => {
      lock.start();
      elector.start();
      identity.start();
    };
    const publisher = candidate;
    if (publisher && candidateWatch) {
      const w = candidateWatch;
      // Coordinated leader election, if the API server has the LeaseCandidate API and a
      // coordinator; else ordinary leader election, said in one line. Decided on real answers
      // only: while the API server answers with failures the replica stays undecided (each failure
      // logged) and does not campaign.
      coordinationPending = { since: clock.scheduler.now() };
      void checkCoordinatedElection({
        client: electionClient,
        clock,
        logger: log,
        signal: coordinationCheck.signal,
        onFailure: (cause) => {
          if (coordinationPending) coordinationPending.lastError = cause;
        },
      }).then((support) => {
        coordinationPending = undefined;
        if (shuttingDown || (!support.ok && support.reason === CHECK_STOPPED)) return;
        if (support.ok) {
          log.info(
            'Coordinated leader election: publishing a LeaseCandidate; the coordinator names the leader',
            {
              ...(support.note ? { note: support.note } : {}),
            },
          );
          w.start();
          publisher.start();
          // Nobody leads for long: is the coordinator still there? If not, ordinary election.
          watchdog = new CoordinationWatchdog({
            elector,
            clock,
            logger: log,
            recheckAfterMs: coordinatedRecheckMs(le.leaseDurationMs),
            check: (signal) =>
              checkCoordinatedElection({
                client: electionClient,
                clock,
                logger: log,
                signal: AbortSignal.any([signal, coordinationCheck.signal]),
              }),
            withdraw: async () => {
              const c = candidate;
              candidate = candidateWatch = undefined;
              await c?.shutdown();
              w.stop();
            },
          });
          watchdog.start();
        } else {
          log.warn('Coordinated leader election unavailable: using ordinary leader election', {
            reason: support.reason,
          });
          candidate = candidateWatch = undefined;
          elector.useOrdinaryElection();
        }
        campaign();
      });
    } else {
      campaign();
    }
  } else {
    log.warn('Leader election disabled: this process acts alone; never run two like this');
    updateLeading();
  }

  return running;
}

/**
 * HTTPS and delegated authentication/authorization for /metrics (unless --metrics-secure=false):
 * the serving certificate (files, or self-signed), and the reviews on a client of their own, so
 * that a slow review never holds a socket the controller's work needs.
 */
async function secureMetricsServing(
  o: RunOptions,
  credentials: Credentials,
  observer: RequestObserver,
  userAgent: string,
  registry: Registry,
): Promise<{ serving: Pick<MetricsServing, 'secure' | 'requests'>; close(): void }> {
  const { config, logger: log } = o;
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
  const reviewClient = await KubeClient.fromCredentials(credentials, {
    observer,
    userAgent: `${userAgent} metrics-auth`,
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
