import type { Registry } from 'prom-client';
import type { Clock } from '../../clock/clock.js';
import type { Config } from '../../config/index.js';
import { FlagError } from '../../config/index.js';
import type { LeadershipControl } from '../../controller/node-lifecycle.js';
import { LIVENESS_NO_API_ACCESS_MS } from '../../controller/probes.js';
import {
  CHECK_STOPPED,
  type CoordinationSupport,
  CoordinationWatchdog,
  candidateVersions,
  checkCoordinatedElection,
  coordinatedRecheckMs,
  createLeaderElectionMetrics,
  IdentityLeases,
  type LeaderElectionMetrics,
  LeaderElector,
  LeaderHealthzAdaptor,
  type LeaseCandidate,
  LeaseCandidatePublisher,
  lockUpdates,
  namedUpdates,
  type PendingDecision,
  type ReleaseResult,
  undecidedTooLong,
  watchCandidate,
  watchLock,
} from '../../election/index.js';
import type { Check } from '../../http/server.js';
import type { KubeClient } from '../../kube/client.js';
import type { Lease } from '../../kube/types.js';
import type { Logger } from '../../log/logger.js';
import type { Leadership, Runnable } from '../../manager/manager.js';
import type { ShutdownBudget } from '../../manager/shutdown.js';
import type { Reflector, WatchMetrics } from '../../watch/index.js';
import type { BuildInfo } from '../build-info.js';

export interface ElectionOptions {
  config: Pick<Config, 'leaderElection'>;
  build: Pick<BuildInfo, 'version'>;
  /** Leader election's own client (its own limiter and connections). */
  client: KubeClient;
  clock: Clock;
  logger: Logger;
  registry: Registry;
  watchMetrics: WatchMetrics;
  /** Told when this replica leads, stops leading, or lost the lease (the manager). */
  leadership: Leadership;
  /** Resolves when no write of ours is on the wire (a step-down or preemption waits for it). */
  writesIdle(): Promise<void>;
}

/**
 * Leader election: the lock (a Lease, watched), the elector, the identity lease, and with
 * --feature-gates=CoordinatedLeaderElection=true a LeaseCandidate. Without --leader-elect the
 * replica acts alone (said in a warning) once its runnable starts.
 */
export class Election {
  /** Absent without leader election. */
  readonly elector: LeaderElector | undefined;
  /** What the reconciler tells leader election (absent without it). */
  readonly control: LeadershipControl | undefined;
  /** Group election: campaigns (coordinated or not) and hands the edges to the manager; the lease at the stop. */
  readonly runnable: Runnable;
  private readonly o: ElectionOptions;
  private readonly le: Config['leaderElection'];
  private readonly lock: Reflector<Lease> | undefined;
  private readonly identity: IdentityLeases | undefined;
  private candidate: LeaseCandidatePublisher | undefined;
  private candidateWatch: Reflector<LeaseCandidate> | undefined;
  private watchdog: CoordinationWatchdog | undefined;
  /** Set while the coordinated-election decision waits for a real answer from the API server. */
  private pending: PendingDecision | undefined;
  /** The candidate's deletion, started as the shutdown starts (before the lock is released). */
  private candidateGone: Promise<unknown> | undefined;

  constructor(o: ElectionOptions) {
    this.o = o;
    this.le = o.config.leaderElection;
    const metrics = createLeaderElectionMetrics(o.registry);
    const healthz = new LeaderHealthzAdaptor(20_000);
    if (this.le.enabled && this.le.coordinated) this.publishCandidate(metrics);
    if (this.le.enabled) {
      this.lock = watchLock(this.watchDeps(), this.le.namespace, this.le.name);
      this.elector = this.newElector(this.lock, metrics);
      healthz.setLeaderElection(this.elector);
      this.identity = this.newIdentity(this.elector, metrics);
      this.control = this.leadershipControl(this.elector);
    }
    this.runnable = this.elector ? this.electing(this.elector, healthz) : this.alone();
  }

  private watchDeps() {
    const { client, clock, logger, watchMetrics } = this.o;
    return { client, clock, logger, metrics: watchMetrics };
  }

  private publishCandidate(metrics: LeaderElectionMetrics): void {
    const { le, o } = this;
    let versions: ReturnType<typeof candidateVersions>;
    try {
      versions = candidateVersions(o.build.version, le.emulatedVersion || undefined);
    } catch (err) {
      throw new FlagError(`--feature-gates=CoordinatedLeaderElection=true: ${(err as Error).message}`);
    }
    this.candidateWatch = watchCandidate(this.watchDeps(), le.namespace, le.identity);
    this.candidate = new LeaseCandidatePublisher({
      client: o.client,
      clock: o.clock,
      logger: o.logger,
      metrics,
      namespace: le.namespace,
      name: le.identity,
      leaseName: le.name,
      ...versions,
      updates$: namedUpdates(this.candidateWatch, le.identity),
    });
  }

  private newElector(lock: Reflector<Lease>, metrics: LeaderElectionMetrics): LeaderElector {
    const { o } = this;
    return new LeaderElector({
      config: this.le,
      client: o.client,
      clock: o.clock,
      logger: o.logger,
      metrics,
      lockUpdates$: lockUpdates(lock, this.le.name),
      coordinated: this.candidate !== undefined,
      // Preempted by the coordinator: the lock is released once no write of ours is on the wire.
      drained: () => o.writesIdle(),
    });
  }

  private newIdentity(elector: LeaderElector, metrics: LeaderElectionMetrics): IdentityLeases {
    const { o, le } = this;
    return new IdentityLeases({
      client: o.client,
      clock: o.clock,
      logger: o.logger,
      metrics,
      namespace: le.namespace,
      hostname: le.hostname,
      holderIdentity: le.identity,
      gcAgeMs: le.identityLeaseGcAgeMs,
      elector,
    });
  }

  /** A replica that cannot see does not acquire the lease; a leader blind for too long releases it. */
  private leadershipControl(elector: LeaderElector): LeadershipControl {
    return {
      setEligible: (eligible, why) => {
        elector.setEligible(eligible, why);
        this.candidate?.setEligible(eligible);
      },
      stepDown: (reason) => {
        void elector
          .stepDown(reason, () => this.o.writesIdle())
          .then((result) => this.o.logger.info('Leader lease release after stepping down', { result }));
      },
    };
  }

  private alone(): Runnable {
    return {
      name: 'leader-election',
      group: 'election',
      start: () => {
        this.o.logger.warn('Leader election disabled: this process acts alone; never run two like this');
        this.o.leadership.elected(true);
      },
    };
  }

  private electing(elector: LeaderElector, healthz: LeaderHealthzAdaptor): Runnable {
    return {
      name: 'leader-election',
      group: 'election',
      start: (signal) => this.start(elector, signal),
      healthz: [this.healthCheck(healthz)],
      stop: {
        halt: (budget) => this.halt(budget),
        lease: { release: (ms) => this.release(elector, ms), abandon: () => elector.stop() },
        tail: async (ms) => {
          await this.identity?.shutdown(Math.floor(ms / 2)).catch(() => undefined);
        },
        close: () => this.close(),
      },
    };
  }

  private healthCheck(healthz: LeaderHealthzAdaptor): Check {
    const lock = `${this.le.namespace}/${this.le.name}`;
    return {
      name: 'leaderElection',
      check: () =>
        healthz.check()?.message ??
        undecidedTooLong(this.pending, this.o.clock.scheduler.now(), lock, LIVENESS_NO_API_ACCESS_MS),
    };
  }

  private start(elector: LeaderElector, signal: AbortSignal): void {
    const { leadership } = this.o;
    elector.events$.subscribe((ev) => {
      if (ev.type === 'started-leading') leadership.elected(true);
      else if (ev.type === 'stopped-leading') leadership.elected(false);
    });
    // Fenced already; exit non-zero so Kubernetes restarts us clean (controller-runtime does the same).
    elector.lost$.subscribe((lost) => leadership.lost(lost.reason));
    if (this.candidate) this.decide(elector, signal);
    else this.campaign(elector);
  }

  private campaign(elector: LeaderElector): void {
    this.lock?.start();
    elector.start();
    this.identity?.start();
  }

  /**
   * Coordinated leader election, if the API server has the LeaseCandidate API and a coordinator;
   * else ordinary leader election, said in one line. Decided on real answers only: while the API
   * server answers with failures the replica stays undecided (each failure logged) and does not
   * campaign.
   */
  private decide(elector: LeaderElector, signal: AbortSignal): void {
    const { client, clock, logger } = this.o;
    const pending: PendingDecision = { since: clock.scheduler.now() };
    this.pending = pending;
    void checkCoordinatedElection({
      client,
      clock,
      logger,
      signal,
      onFailure: (cause) => {
        pending.lastError = cause;
      },
    }).then((support) => {
      this.pending = undefined;
      if (signal.aborted || (!support.ok && support.reason === CHECK_STOPPED)) return;
      if (support.ok) this.coordinated(elector, support, signal);
      else this.ordinary(elector, support.reason);
      this.campaign(elector);
    });
  }

  private coordinated(elector: LeaderElector, support: { note?: string }, signal: AbortSignal): void {
    const { client, clock, logger } = this.o;
    logger.info(
      'Coordinated leader election: publishing a LeaseCandidate; the coordinator names the leader',
      {
        ...(support.note ? { note: support.note } : {}),
      },
    );
    const w = this.candidateWatch;
    const candidate = this.candidate;
    w?.start();
    candidate?.start();
    // Nobody leads for long: is the coordinator still there? If not, ordinary election.
    this.watchdog = new CoordinationWatchdog({
      elector,
      clock,
      logger,
      recheckAfterMs: coordinatedRecheckMs(this.le.leaseDurationMs),
      check: (s): Promise<CoordinationSupport> =>
        checkCoordinatedElection({ client, clock, logger, signal: AbortSignal.any([s, signal]) }),
      // Before ordinary election (the watchdog waits for it, bounded): no ping is answered from
      // here on, and the candidate is deleted (its GET and DELETE share the bound).
      withdraw: async (ms) => {
        this.candidate = this.candidateWatch = undefined;
        w?.stop();
        return (await candidate?.shutdown(Math.floor(ms / 2))) ?? true;
      },
      // Named by the coordinator meanwhile: a candidate again, so that it can be named again.
      reinstate: () => {
        this.candidate = candidate;
        this.candidateWatch = w;
        w?.start();
        candidate?.start();
      },
    });
    this.watchdog.start();
  }

  private ordinary(elector: LeaderElector, reason: string): void {
    this.o.logger.warn('Coordinated leader election unavailable: using ordinary leader election', { reason });
    this.candidate = this.candidateWatch = undefined;
    elector.useOrdinaryElection();
  }

  /** At once as the shutdown starts: the candidate is withdrawn first, so the coordinator does not name this replica again. */
  private halt(budget: ShutdownBudget): void {
    this.watchdog?.stop();
    this.candidateGone = this.candidate?.shutdown(Math.floor(budget.tailMs / 2));
  }

  /** Only after all guarded work has stopped (a clean drain): another replica leads at once. */
  private async release(elector: LeaderElector, ms: number): Promise<ReleaseResult> {
    const now = () => this.o.clock.scheduler.now();
    const started = now();
    await this.candidateGone;
    const released = await elector.release(Math.max(1, ms - (now() - started)));
    this.o.logger.info('Leader lease release', { result: released });
    elector.stop();
    return released;
  }

  private close(): void {
    this.elector?.stop();
    this.lock?.stop();
    this.identity?.stop();
    this.candidate?.stop();
    this.candidateWatch?.stop();
  }
}
