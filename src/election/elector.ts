import { type Clock, timerDelay } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import type { Lease } from '../kube/types.js';
import type { Logger } from '../log/logger.js';
import type { Observable, Subscription } from '../rx/index.js';
import { JITTER_FACTOR, type LeaderElectionConfig, leaderlessLimitMs } from './config.js';
import {
  type ElectionEvent,
  type LeaderCallbacks,
  LeadershipSignals,
  type LostLeadership,
  type StopReason,
} from './leadership-signals.js';
import { isConflict, type KubeRequester, LeaseApi } from './lease-api.js';
import { type ApiAccess, LockObservation } from './lock-observation.js';
import {
  attemptFinished,
  attemptStarted,
  canWrite,
  decide,
  type ElectionState,
  fenceDeadline,
  healthCheck,
  initialState,
  liveUntil,
  lose,
  type MachineConfig,
  observe,
  observedHolder,
  planWrite,
  preemptedBy,
  recordLeaseMs,
  releaseSpec,
  setEligible,
  stepDown,
  stop,
  type WritePlan,
  writeSucceeded,
} from './machine.js';
import type { LeaderElectionMetrics } from './metrics.js';
import { recordOf } from './record.js';

export type { ElectionEvent, LeaderCallbacks, LostLeadership, StopReason } from './leadership-signals.js';
export { type ApiAccess, LOCK_WARNING_INTERVAL_MS, lockFailureCause } from './lock-observation.js';

export type ReleaseResult = 'released' | 'not-holder' | 'failed';

export interface LeaderElectorOptions {
  config: LeaderElectionConfig;
  client: KubeRequester;
  clock: Clock;
  logger: Logger;
  metrics: LeaderElectionMetrics;
  /**
   * Observed changes of the lock Lease (undefined = deleted), e.g. from a watch. Optional: without
   * it the elector polls like client-go. Leases with another name are ignored. Must not error;
   * if it does, the elector logs and keeps polling.
   */
  lockUpdates$?: Observable<Lease | undefined>;
  /** Labels put on the lock Lease when we create it. */
  labels?: Record<string, string>;
  callbacks?: LeaderCallbacks;
  /** Uniform [0,1) for poll jitter; injectable for tests. */
  random?: () => number;
  /**
   * Coordinated leader election (KEP-4355): the coordinator in kube-apiserver names the holder; we
   * never create or take the lock, renew it while it names us, and step down when its
   * preferredHolder names another replica. See useOrdinaryElection() for the fall-back.
   */
  coordinated?: boolean;
  /**
   * Resolves when no guarded write is on the wire: awaited before the lock is released when the
   * coordinator preempts us (the controller passes the writer's idle()).
   */
  drained?: () => Promise<void>;
}

export class NotLeaderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NotLeaderError';
  }
}

/**
 * Lease-based leader election with client-go's semantics (see machine.ts for the rules). This class
 * is the I/O loop: one request in flight at a time, a timer for the next decision, and the
 * injected lock-updates stream for fast reaction.
 */
export class LeaderElector {
  private cfg: MachineConfig;
  private readonly opts: LeaderElectorOptions;
  private readonly api: LeaseApi;
  private readonly log: Logger;
  private readonly requestTimeoutMs: number;
  /** What we say about leadership: streams, callbacks, edge logs and metrics. */
  private readonly signals: LeadershipSignals;
  /** What we have seen of the lock apart from the lock: answers, warnings, leaderless time. */
  private readonly seen: LockObservation;
  private s: ElectionState;
  private running = false;
  private busy = false;
  private timer: Subscription | undefined;
  private watchSub: Subscription | undefined;
  private inflight: AbortController | undefined;

  constructor(opts: LeaderElectorOptions) {
    const c = opts.config;
    this.opts = opts;
    this.cfg = {
      identity: c.identity,
      leaseDurationMs: c.leaseDurationMs,
      renewDeadlineMs: c.renewDeadlineMs,
      retryPeriodMs: c.retryPeriodMs,
      fenceSafetyMarginMs: c.fenceSafetyMarginMs,
      coordinated: opts.coordinated === true,
    };
    this.api = new LeaseApi(opts.client, c.namespace, 'critical');
    this.log = opts.logger.with({
      component: 'leader-election',
      lock: `${c.namespace}/${c.name}`,
      identity: c.identity,
    });
    // Each request gets at most half the renew deadline, so a hung request leaves time for a retry.
    this.requestTimeoutMs = Math.max(1, Math.floor(c.renewDeadlineMs / 2));
    this.s = initialState(this.now());
    this.signals = new LeadershipSignals({
      name: c.name,
      identity: c.identity,
      log: this.log,
      metrics: opts.metrics,
      callbacks: opts.callbacks,
    });
    this.seen = new LockObservation({
      log: this.log,
      namespace: c.namespace,
      // The longest gap between two answered lock reads of a campaigning candidate, plus a timeout.
      observeGapMs: c.leaseDurationMs + c.retryPeriodMs * (1 + JITTER_FACTOR) + this.requestTimeoutMs,
      since: this.now(),
    });
    opts.metrics.coordinated.set({ name: c.name }, this.cfg.coordinated ? 1 : 0);
  }

  get identity(): string {
    return this.opts.config.identity;
  }

  get name(): string {
    return this.opts.config.name;
  }

  get namespace(): string {
    return this.opts.config.namespace;
  }

  /** Every leadership event, in order. */
  get events$(): Observable<ElectionEvent> {
    return this.signals.events$;
  }

  /** true while leading (replays the current value). */
  get leading$(): Observable<boolean> {
    return this.signals.leading$;
  }

  /** The observed holder identity, '' for none (replays the current value). */
  get leader$(): Observable<string> {
    return this.signals.leader$;
  }

  /** Emits once if leadership is lost (not on release()/stop()). Replays to late subscribers. */
  get lost$(): Observable<LostLeadership> {
    return this.signals.lost$;
  }

  /** Whether this elector runs coordinated leader election (after any fall-back). */
  get coordinated(): boolean {
    return this.cfg.coordinated === true;
  }

  /**
   * Run ordinary leader election although coordinated was asked for (the API server has no
   * LeaseCandidate API or no coordinator): before start(), or later while a candidate (the
   * fall-back after nobody led the lock for long, see CoordinationWatchdog). A candidate in
   * coordinated mode never wrote the lock, so from here on it campaigns by the ordinary rules at
   * once (a lock whose holder's lease ran out, or one missing for a lease duration, is taken).
   * Returns false, changing nothing, when this replica leads or leader election has ended.
   */
  useOrdinaryElection(): boolean {
    if (this.s.phase !== 'candidate') return false;
    if (!this.cfg.coordinated) return true;
    this.cfg = { ...this.cfg, coordinated: false };
    this.opts.metrics.coordinated.set({ name: this.name }, 0);
    if (this.running) {
      this.log.info('Switched to ordinary leader election: campaigning for the lock ourselves');
      // Our polls so far did not try to take a free lock (as after setEligible(true)): try at once.
      this.s = { ...this.s, lastAttempt: undefined };
      this.tick();
    }
    return true;
  }

  /**
   * How long nobody has led the lock as this replica observes it, or undefined when a leader is
   * live (we lead, or the lock names a holder whose lease has not run out by our observation) or
   * when this replica cannot tell: it is not campaigning (not started, stopped, lost), or its reads
   * of the lock are not answered (an API server outage: the api-access and lock-access probes
   * judge that). Counted from the latest of: the end of the last live lease observed, our start,
   * and the start of the current run of answered lock reads (so an outage does not count as time
   * without a leader). Whether this replica may lead (eligible) does not matter here.
   */
  leaderlessFor(now: number = this.now()): number | undefined {
    if (!this.running || this.s.phase !== 'candidate') return undefined;
    return this.seen.leaderlessFor(now);
  }

  /**
   * Liveness (with check()): an Error when nobody has led the lock for more than `limitMs`
   * (default leaderlessLimitMs(leaseDuration): 10 lease durations, at least 2 minutes) as this
   * replica observes it (leaderlessFor), while it is eligible: it could lead, and nobody does. A
   * standby that sees another replica lead is healthy; so is a replica that cannot see (not
   * eligible: readiness says so, and a blind replica must not lead) or cannot reach the API server.
   * A replica that becomes eligible after a long blind spell is judged at once; it takes a free
   * lock at once (ordinary) or answers the coordinator's pending ping, so that lasts seconds.
   */
  checkLeaderless(
    limitMs: number = leaderlessLimitMs(this.cfg.leaseDurationMs),
    now: number = this.now(),
  ): Error | undefined {
    if (!this.s.eligible) return undefined;
    const idle = this.leaderlessFor(now);
    if (idle === undefined || idle <= limitMs) return undefined;
    const lock = this.s.lock;
    const seen =
      lock.kind === 'absent'
        ? 'the lock is missing'
        : lock.kind === 'present' && lock.record.holderIdentity !== ''
          ? `its holder ${lock.record.holderIdentity} stopped renewing`
          : 'the lock names no holder';
    const mode = this.cfg.coordinated
      ? 'coordinated leader election: the coordinator has named nobody'
      : `ordinary leader election: this replica could not take it${this.seen.lastError() ? ` (last error: ${this.seen.lastError()})` : ''}`;
    return new Error(
      `nobody has led the lock ${this.namespace}/${this.name} for ${formatDuration(Math.round(idle / 100) * 100)} ` +
        `(limit ${formatDuration(limitMs)}): ${seen}; ${mode}`,
    );
  }

  /** Starts campaigning. Idempotent; cannot restart after stop()/release()/loss. */
  start(): void {
    if (this.running || this.s.phase === 'stopped' || this.s.phase === 'lost') return;
    this.running = true;
    this.seen.started(this.now());
    this.log.info('Attempting to acquire leader lease');
    this.watchSub = this.opts.lockUpdates$?.subscribe({
      next: (lease) => this.onWatch(lease),
      error: (err: unknown) => this.log.warn('Lock updates stream failed; relying on polling', { err }),
    });
    this.tick();
  }

  /**
   * Stops at once WITHOUT releasing the lease (others take over when it expires). The fence closes
   * immediately. For a crash-like stop or when release is not wanted.
   */
  stop(): void {
    this.halt('stopped', 'stopped');
  }

  /**
   * Graceful shutdown, to be called only after all guarded work has stopped: stops campaigning,
   * closes the fence, and if we hold the lease writes it with no holder and leaseDurationSeconds 1
   * (client-go's ReleaseOnCancel) so another replica takes it at once. Gives up after `budgetMs`
   * (default: the renew deadline). "We hold it": the lock as we last saw it names us, also when we
   * no longer lead because a step-down is still waiting for its writes to drain (a preemption just
   * before the shutdown): halting cuts that step-down's own release short.
   */
  async release(budgetMs: number = this.cfg.renewDeadlineMs): Promise<ReleaseResult> {
    const held = this.s.phase === 'leader' || this.s.phase === 'candidate' ? this.s.lock : undefined;
    this.halt('released', 'released');
    if (held?.kind !== 'present' || held.record.holderIdentity !== this.identity) return 'not-holder';
    return await this.writeRelease(held.lease, this.now() + budgetMs);
  }

  /**
   * Whether we may acquire the lock: a replica that cannot see should not lead. A candidate that is
   * not eligible keeps reading the lock but does not take it; a leader is not affected (see
   * stepDown). Becoming eligible acts at once if the lock is free.
   */
  setEligible(eligible: boolean, why?: string): void {
    if (this.s.eligible === eligible) return;
    if (eligible) this.log.info('Eligible to lead');
    else
      this.log.info(
        'Not eligible to lead: not acquiring the lease',
        why === undefined ? {} : { reason: why },
      );
    this.apply(setEligible(this.s, eligible));
    this.tick();
  }

  /**
   * Gives leadership up without exiting (a leader that has been blind too long, so that a replica
   * that can see leads): the fence closes at once, we become a candidate that is not eligible
   * (setEligible(true) lets it campaign again), and once `drained` resolves (no write of ours on
   * the wire; they end by the fence deadline at the latest) the lease is released like release()
   * does, so another replica takes it at once.
   */
  async stepDown(
    reason: string,
    drained: () => Promise<void> = async () => {},
    keepEligible = false,
  ): Promise<ReleaseResult> {
    if (this.s.phase !== 'leader' || !this.running) return 'not-holder';
    const held = this.s.lock;
    // A renewal on the wire would make us holder again on the server; its answer is ignored
    // (writeSucceeded keeps a candidate that is not eligible a candidate; in coordinated mode a
    // preempted lock is never renewed) and the release below works from a fresh copy on conflict.
    this.inflight?.abort();
    this.log.warn('Stepping down', { reason });
    this.apply(stepDown(this.cfg, this.s, this.now(), keepEligible), 'stepped-down', reason);
    this.tick();
    await drained();
    if (!this.running || this.s.phase === 'leader') return 'not-holder';
    const current =
      this.s.lock.kind === 'present' ? this.s.lock.lease : held.kind === 'present' ? held.lease : undefined;
    return await this.writeRelease(current, this.now() + this.cfg.renewDeadlineMs);
  }

  /** Writes the lock with no holder (releaseSpec) if it is still ours, retrying until `deadline`. */
  private async writeRelease(from: Lease | undefined, deadline: number): Promise<ReleaseResult> {
    let base: Lease | undefined = from;
    for (;;) {
      const timeoutMs = Math.min(this.requestTimeoutMs, deadline - this.now());
      if (timeoutMs <= 0) break;
      try {
        if (!base || recordOf(base).holderIdentity !== this.identity) {
          base = await this.api.get(this.name, { timeoutMs });
          if (!base || recordOf(base).holderIdentity !== this.identity) {
            this.log.info('Lease no longer ours; nothing to release');
            return 'not-holder';
          }
          continue;
        }
        const written = await this.api.update(
          { ...base, spec: releaseSpec(recordOf(base), this.opts.clock.wall(), this.cfg.coordinated) },
          { timeoutMs },
        );
        this.log.info('Released leader lease');
        if (this.running) this.apply(observe(this.cfg, this.s, written, this.now(), 'get'));
        this.signals.observedLeader(recordOf(written).holderIdentity, this.now());
        return 'released';
      } catch (err) {
        if (isConflict(err)) {
          this.log.debug(4, 'Conflict when releasing lease, retrying');
          base = undefined;
          continue;
        }
        this.log.error('Failed to release lease', { err });
        base = undefined;
        await new Promise<void>((resolve) => {
          this.opts.clock.scheduler.schedule(
            () => resolve(),
            timerDelay(Math.min(this.cfg.retryPeriodMs, deadline - this.now())),
          );
        });
      }
    }
    this.log.error('Giving up releasing lease: out of time');
    return 'failed';
  }

  /** What the answers to our lock requests say about our access to the API server (probes). */
  apiAccess(): ApiAccess {
    return this.seen.apiAccess();
  }

  isLeader(): boolean {
    return this.s.phase === 'leader';
  }

  /** Last observed holder, '' for none. */
  getLeader(): string {
    return this.signals.currentLeader();
  }

  /**
   * The writer's fence: true only while we hold the lease and `now` (monotonic) is less than
   * leaseDuration - fenceSafetyMargin (and at most renewDeadline) after the last successful
   * renewal was sent. Checks the clock itself, so it is right even if our timers run late.
   */
  canWrite(now: number = this.now()): boolean {
    return canWrite(this.cfg, this.s, now);
  }

  /** Throws NotLeaderError unless canWrite(now). */
  fence(now: number = this.now()): void {
    if (!canWrite(this.cfg, this.s, now)) {
      throw new NotLeaderError(`not the leader of ${this.namespace}/${this.name} (phase ${this.s.phase})`);
    }
  }

  /** Monotonic instant the fence closes unless renewed; undefined when closed. Bound write timeouts by it. */
  fenceDeadline(): number | undefined {
    return fenceDeadline(this.cfg, this.s);
  }

  /** client-go's Check: an Error when we lead but have not renewed within leaseDuration + tolerance. */
  check(toleranceMs: number, now: number = this.now()): Error | undefined {
    const msg = healthCheck(this.cfg, this.s, now, toleranceMs);
    return msg === undefined ? undefined : new Error(`${msg} (lease ${this.namespace}/${this.name})`);
  }

  /** The machine's state (read-only), for diagnostics and tests. */
  snapshot(): ElectionState {
    return this.s;
  }

  private now(): number {
    return this.opts.clock.scheduler.now();
  }

  private ended(): boolean {
    return !this.running || this.s.phase === 'lost' || this.s.phase === 'stopped';
  }

  private onWatch(lease: Lease | undefined): void {
    if (!this.running) return;
    if (
      lease &&
      (lease.metadata.name !== this.name || (lease.metadata.namespace ?? this.namespace) !== this.namespace)
    ) {
      return;
    }
    this.apply(observe(this.cfg, this.s, lease, this.now(), 'watch'));
    this.tick();
  }

  private halt(reason: 'stopped' | 'released', detail: string): void {
    this.teardown();
    this.apply(stop(this.s, detail), reason);
  }

  /** Ends the loop: no timer, no watch, no request in flight. */
  private teardown(): void {
    this.running = false;
    this.cancelTimer();
    this.watchSub?.unsubscribe();
    this.watchSub = undefined;
    this.inflight?.abort();
    this.inflight = undefined;
  }

  private cancelTimer(): void {
    this.timer?.unsubscribe();
    this.timer = undefined;
  }

  private schedule(atMonotonic: number): void {
    this.cancelTimer();
    // tick() decides again: a timer cut short by timerDelay (an expiry beyond ~24.8 days, from
    // another holder's leaseDurationSeconds) just waits again.
    this.timer = this.opts.clock.scheduler.schedule(
      () => {
        this.timer = undefined;
        this.tick();
      },
      timerDelay(atMonotonic - this.now()),
    );
  }

  private tick(): void {
    if (!this.running) return;
    const now = this.now();
    const d = decide(this.cfg, this.s, now);
    if (d.kind === 'idle') {
      this.cancelTimer();
      return;
    }
    if (d.kind === 'lose') {
      this.teardown();
      this.apply(lose(this.s, d.reason));
      return;
    }
    if (this.busy) {
      // The next decision comes when the request in flight ends; only the renew deadline cannot wait.
      if (this.s.phase === 'leader' && this.s.renewedAt !== undefined) {
        this.schedule(this.s.renewedAt + this.cfg.renewDeadlineMs);
      }
      return;
    }
    if (d.kind === 'wait') {
      this.schedule(d.until);
      return;
    }
    this.busy = true;
    this.cancelTimer();
    if (this.s.phase === 'leader' && this.s.renewedAt !== undefined) {
      this.schedule(this.s.renewedAt + this.cfg.renewDeadlineMs);
    }
    void this.attempt(d.read, d.why).finally(() => {
      this.busy = false;
      this.tick();
    });
  }

  /** One tryAcquireOrRenew: fast path from our copy, or GET first (slow path / poll). */
  private async attempt(read: boolean, why: string): Promise<void> {
    const ac = new AbortController();
    this.inflight = ac;
    const req = { timeoutMs: this.requestTimeoutMs, signal: ac.signal };
    const leaderAtStart = this.s.phase === 'leader';
    this.apply(attemptStarted(this.s, this.now()));
    let failed = false;
    try {
      let readFirst = read;
      for (let round = 0; round < 2; round++) {
        const next = await this.attemptRound(
          round,
          readFirst,
          req,
          leaderAtStart ? 'renewed' : 'acquired',
          why,
        );
        if (next === 'done') return;
        readFirst = true;
      }
      this.finishAttempt();
    } catch (err) {
      failed = true;
      this.seen.answered(this.now(), err);
      if (this.ended()) return;
      if (this.s.phase === 'leader') {
        this.opts.metrics.renewErrors.inc({ name: this.name });
        this.log.warn('Failed to renew lease', { err });
      } else if (isConflict(err)) {
        // Another replica was faster: part of the normal race.
        this.log.debug(2, 'Failed to acquire lease', { err: 'conflict' });
      } else {
        this.seen.warnFailure(this.now(), err);
      }
      this.finishAttempt();
    } finally {
      if (this.inflight === ac) this.inflight = undefined;
      if (!failed && !this.ended()) this.seen.succeeded();
    }
  }

  /**
   * One round of an attempt: read the lock first if asked (or never seen), plan, write. 'read' asks
   * for a second round that reads first (our copy was stale: client-go's slow path); errors other
   * than those are thrown to attempt().
   */
  private async attemptRound(
    round: number,
    read: boolean,
    req: { timeoutMs: number; signal: AbortSignal },
    success: 'renewed' | 'acquired',
    why: string,
  ): Promise<'done' | 'read'> {
    const readFirst = read || this.s.lock.kind === 'unknown';
    if (readFirst) {
      const lease = await this.api.get(this.name, req);
      this.seen.answered(this.now());
      if (this.ended()) return 'done';
      this.apply(observe(this.cfg, this.s, lease, this.now(), 'get'));
      if (this.ended()) return 'done';
    }
    const plan = planWrite(this.cfg, this.s, this.now(), this.opts.clock.wall());
    if (plan.kind === 'read') return 'read';
    if (
      plan.kind === 'held' ||
      plan.kind === 'ineligible' ||
      plan.kind === 'await-coordinator' ||
      plan.kind === 'preempted'
    ) {
      this.sayNotWriting(plan);
      this.finishAttempt();
      return 'done';
    }
    if (this.s.phase === 'leader' && readFirst) this.opts.metrics.slowpath.inc({ name: this.name });
    const sentAt = this.now();
    try {
      const written =
        plan.kind === 'create'
          ? await this.api.create(
              { metadata: { name: this.name, labels: { ...this.opts.labels } }, spec: plan.spec },
              req,
            )
          : await this.api.update(plan.body, req);
      this.seen.answered(this.now());
      if (this.ended()) return 'done';
      this.apply(writeSucceeded(this.cfg, this.s, written, sentAt, this.now()));
      this.log.debug(5, `Successfully ${success} lease`, { why });
      return 'done';
    } catch (err) {
      this.seen.answered(this.now(), err);
      if (this.ended()) return 'done';
      // Our copy was stale (409), the leader's optimistic update failed in any way, or someone
      // created the lock first: read the lock and decide again, once (client-go's slow path).
      const slowPath =
        plan.kind === 'create'
          ? isConflict(err)
          : !readFirst && (isConflict(err) || this.s.phase === 'leader');
      if (round === 0 && slowPath) {
        this.log.debug(2, 'Failed to update lease optimistically, falling back to slow path', { err });
        return 'read';
      }
      throw err;
    }
  }

  /** Why an attempt writes nothing, at debug level (a lock held by another, or the coordinator's). */
  private sayNotWriting(plan: WritePlan): void {
    const lock = this.s.lock.kind === 'absent' ? 'missing' : 'present';
    if (plan.kind === 'held') {
      this.log.debug(4, 'Lease is held and has not yet expired', {
        holder: plan.holder === '' ? '<not seen>' : plan.holder,
        lock,
        expiresIn: formatDuration(Math.round(plan.until - this.now())),
      });
    } else if (plan.kind === 'await-coordinator') {
      this.log.debug(4, 'Waiting for the coordinator to name us holder', {
        holder: plan.holder === '' ? '<none>' : plan.holder,
        lock,
      });
    }
  }

  /** The attempt is over: the machine schedules the next one (with jitter). */
  private finishAttempt(): void {
    this.apply(attemptFinished(this.cfg, this.s, this.now(), (this.opts.random ?? Math.random)()));
  }

  /** Installs a new state and publishes what changed. */
  private apply(
    next: ElectionState,
    stopReason?: 'stopped' | 'released' | 'stepped-down',
    why?: string,
  ): void {
    const prev = this.s;
    this.s = next;
    const at = this.now();
    this.seen.leaderLiveUntil(liveUntil(this.cfg, next));
    const holder = observedHolder(next);
    // A leader about to create its deleted lock again has not handed anything over.
    const recreating = next.phase === 'leader' && next.lock.kind === 'absent';
    if (holder !== undefined && !recreating) this.signals.observedLeader(holder, at);
    if (prev.phase !== 'leader' && next.phase === 'leader') {
      const transitions = next.lock.kind === 'present' ? next.lock.record.leaseTransitions : undefined;
      this.signals.startedLeading(at, transitions);
    } else if (prev.phase === 'leader' && next.phase !== 'leader') {
      const reason: StopReason = next.phase === 'lost' ? 'lost' : (stopReason ?? 'stopped');
      const detail = next.endReason ?? why ?? reason;
      this.signals.stoppedLeading(reason, detail, at, () => {
        if (this.running) this.teardown();
      });
    }
    if (prev.lock.kind === 'unknown' && next.lock.kind === 'absent' && next.lock.heldUntil !== undefined) {
      // A fresh cluster, or a lock deleted under a leader we never saw: see machine.ts absentSince.
      // The moment on our wall clock (which stamps the renewTime we would create it with).
      const createAt = new Date(this.opts.clock.wall() + (next.lock.heldUntil - this.now()));
      if (this.cfg.coordinated) {
        // Only the coordinator creates it; a holder we never saw may still write until then.
        this.log.info(
          'Lock not found; leading, if the coordinator names us, no earlier than one lease duration from now',
          {
            // From our first look (the lock's `since`), not from this line: under load the two differ.
            notBeforeIn: formatDuration(Math.round(next.lock.heldUntil - next.lock.since)),
            notBeforeAt: createAt.toISOString(),
          },
        );
      } else {
        this.log.info('Lock not found; creating it after one lease duration unless a leader shows up', {
          createIn: formatDuration(Math.round(next.lock.heldUntil - next.lock.since)),
          createAt: createAt.toISOString(),
        });
      }
    }
    if (prev.lock.kind === 'unknown' && next.lock.kind === 'present' && next.lock.heldUntil !== undefined) {
      // Coordinated: our first look shows the coordinator's hand-over to us from a holder we never
      // saw (machine.ts handedOver).
      this.log.info(
        'Lock names us at our first look (the coordinator handed it over); leading no earlier than one lease duration from now',
        {
          notBeforeIn: formatDuration(Math.round(next.lock.heldUntil - next.lock.since)),
          notBeforeAt: new Date(this.opts.clock.wall() + (next.lock.heldUntil - this.now())).toISOString(),
        },
      );
    }
    if (prev.phase === 'candidate' && next.phase === 'candidate' && next.lock.kind === 'present') {
      const r = next.lock.record;
      if (r.holderIdentity !== '' && r.holderIdentity !== this.identity && next.lock !== prev.lock) {
        this.log.debug(6, 'Observed lease', {
          holder: r.holderIdentity,
          expiresIn: formatDuration(Math.round(next.lock.since + recordLeaseMs(this.cfg, r) - at)),
        });
      }
    }
    if (next.lock !== prev.lock) this.signals.lockSeen(this.lockStrategy());
    const by = this.running ? preemptedBy(this.cfg, this.s) : undefined;
    if (by !== undefined) {
      // The coordinator prefers another replica (an older version during an upgrade): the fence
      // closes now, and the lock is released once our writes on the wire are over, so that the
      // coordinator names the preferred replica at once. We stay a candidate.
      void this.stepDown(`preempted: the coordinator prefers ${by}`, this.opts.drained, true).then((result) =>
        this.log.info('Leader lease release after preemption', { result }),
      );
    }
  }

  /** The lock's strategy and preferred holder as this replica last saw them (also for the status view). */
  lockStrategy(): { strategy: string; preferredHolder: string } | undefined {
    const lock = this.s.lock;
    if (lock.kind !== 'present') return undefined;
    return { strategy: lock.record.strategy ?? '', preferredHolder: lock.record.preferredHolder ?? '' };
  }
}
