import { formatDuration } from '../clock/duration.js';
import type { Logger } from '../log/logger.js';
import { type WatchHealth, watchBlindness } from '../watch/index.js';
import type { LeaseRecheck } from './lease-recheck.js';
import type { ControllerMetrics } from './metrics.js';
import {
  blindGauge,
  type SightChange,
  type SightConfig,
  SightMachine,
  type WatchSightStep,
} from './sight.js';

/** What the controller asks of leader election (LeaderElector implements it). */
export interface LeadershipControl {
  /**
   * A replica that cannot see should not acquire the lease (it may keep it: see stepDown). `why`:
   * what it cannot see (with eligible = false), for the log.
   */
  setEligible(eligible: boolean, why?: string): void;
  /** Give leadership up (release the lease) without exiting. */
  stepDown(reason: string): void;
}

export interface SightDriverOptions {
  log: Logger;
  metrics: ControllerMetrics;
  /** Told whether we may lead, and asked to step down. Absent without leader election. */
  election: LeadershipControl | undefined;
  /** The storage's sight: told when the lease watch loses and regains sight, and when a spell begins. */
  recheckLease: LeaseRecheck;
}

/**
 * Drives the SightMachine (pure) and carries out what it decides that is not about nodes: leader
 * election (eligibility, step-down), the storage's sight (lease-recheck.ts), metrics (nlc_blind,
 * nlc_blind_seconds_total, nlc_blind_step_downs_total, nlc_leading) and log lines. What a change
 * means for the nodes (fresh grace or moved deadlines, the deadline timer) is the caller's: it gets
 * the change back.
 */
export class SightDriver {
  readonly machine: SightMachine;
  private readonly silenceMs: number;

  constructor(
    private readonly o: SightDriverOptions,
    cfg: Omit<SightConfig, 'election'>,
    startedAt: number,
  ) {
    this.machine = new SightMachine({ ...cfg, election: o.election !== undefined }, startedAt);
    this.silenceMs = cfg.watchSilenceThresholdMs;
  }

  /** Leadership changed (from the elector). Returns false when it did not. */
  setLeading(leading: boolean): boolean {
    if (!this.machine.setLeading(leading)) return false;
    this.o.metrics.leading.set(leading ? 1 : 0);
    this.o.log.info(leading ? 'Started leading: reconciling nodes' : 'Stopped leading: no more writes');
    return true;
  }

  /**
   * Sight at `now` from both watches' health: the watches' decisions carried out first (a step-down
   * may end leadership at once, and setLeading(false) evaluate again), then whether we act, judged
   * with leadership as it is after them. Returns the change of whether we act, if any.
   */
  evaluate(now: number, nodes: WatchHealth, leases: WatchHealth): SightChange | undefined {
    this.watches(this.machine.see({ now, nodes, leases }), () => this.cannotSee(now, nodes, leases));
    const change = this.machine.judge(now);
    if (change) this.changed(change);
    return change;
  }

  /** What this replica cannot see, in words (the node watch first, as the machine judges). */
  private cannotSee(now: number, nodes: WatchHealth, leases: WatchHealth): string {
    const words = { unsynced: 'not synced yet', disconnected: 'disconnected', silent: 'silent' } as const;
    const n = watchBlindness(nodes, now, Number.POSITIVE_INFINITY);
    if (n) return `the node watch is ${words[n]}`;
    const l = watchBlindness(leases, now, this.silenceMs);
    if (l === 'silent')
      return `the lease watch is silent (nothing for longer than --watch-silence-threshold=${formatDuration(this.silenceMs)})`;
    return l ? `the lease watch is ${words[l]}` : 'the watches cannot be trusted';
  }

  private watches(step: WatchSightStep, cannotSee: () => string): void {
    const { recheckLease, election } = this.o;
    if (step.leaseWatch === 'lost') recheckLease.leaseWatchLost();
    // The spell moves deadlines by its time: a silence of renewals within it is not counted again.
    else if (step.leaseWatch === 'sees') recheckLease.leaseWatchSees();
    if (step.eligible === true) election?.setEligible(true);
    if (step.eligible === false) election?.setEligible(false, cannotSee());
    if (step.stepDown) this.stepDown(step.stepDown);
  }

  /** A leader blind for --blind-step-down-after steps down so that a replica that sees can lead. */
  private stepDown(s: NonNullable<WatchSightStep['stepDown']>): void {
    const blindFor = formatDuration(s.blindForMs);
    this.o.log.warn('Blind for too long while leading: stepping down so that a replica that can see leads', {
      reason: s.reason,
      blindFor,
      blindStepDownAfter: formatDuration(s.limitMs),
    });
    this.o.metrics.stepDowns.inc({ reason: s.reason });
    this.o.election?.stepDown(`blind (${s.reason}) for ${blindFor} while leading`);
  }

  private changed(c: SightChange): void {
    const { log, metrics } = this.o;
    for (const [reason, v] of blindGauge(c.kind === 'blind' ? c.reason : undefined))
      metrics.blind.set({ reason }, v);
    if (c.kind === 'blind') {
      // An outage of the API server's storage in progress ends where the spell begins.
      if (c.spellBegan !== undefined) this.o.recheckLease.spellBegan(c.spellBegan, c.reason);
      if (c.reason === 'not_leader') log.info('Not leading: marking nothing');
      else
        log.warn('Blind: the lease watch is not healthy, marking nothing', { reason: c.reason, was: c.was });
      return;
    }
    if (!c.freshGrace) metrics.blindSeconds.inc(c.blindMs / 1000);
    log.info('Acting: watches healthy and leading', {
      after: c.was,
      blindFor: formatDuration(Math.round(c.blindMs)),
      ...(c.freshGrace ? {} : { deadlinesMovedBy: formatDuration(Math.round(c.leaseBlindMs)) }),
      freshGrace: c.freshGrace,
    });
  }
}
