import { type WatchHealth, watchBlindness } from '../watch/index.js';

/** Why the controller is not acting right now (undefined: it sees and leads). */
export type BlindReason = 'not_leader' | 'disconnected' | 'unsynced' | 'silent';
/** Why the watches cannot be trusted right now, leadership aside. */
export type WatchBlindReason = Exclude<BlindReason, 'not_leader'>;

export const BLIND_REASONS: readonly BlindReason[] = ['not_leader', 'disconnected', 'unsynced', 'silent'];

/** nlc_blind{reason}: 1 for the reason we do not act for, 0 for every other (all 0 while acting). */
export function blindGauge(reason: BlindReason | undefined): Array<[BlindReason, 0 | 1]> {
  return BLIND_REASONS.map((r) => [r, r === reason ? 1 : 0]);
}

export interface SightConfig {
  /** A lease watch silent (no event, bookmark or reconnect) for longer than this counts as blind. */
  watchSilenceThresholdMs: number;
  /** A leader whose watches have been blind this long steps down (0: never). */
  blindStepDownMs: number;
  /** Whether there is a leader election to step down from. */
  election: boolean;
}

/** Both watches' health, as their snapshots say at `now` (monotonic ms). */
export interface WatchesSeen {
  now: number;
  nodes: WatchHealth;
  leases: WatchHealth;
}

/** What the watches' own sight (leadership aside) decided: `see` returns it. */
export interface WatchSightStep {
  /**
   * The lease watch lost sight ('lost': a silence of lease writes is not the fleet's) or sees again
   * ('sees': its blind time moves deadlines, a storage outage must not count it again).
   */
  leaseWatch?: 'lost' | 'sees';
  /** Tell leader election: may this replica acquire the lease (its first value, then each change). */
  eligible?: boolean;
  /** The leader has been blind for blindStepDownMs: step down (once, until it leads again). */
  stepDown?: { reason: WatchBlindReason; blindForMs: number; limitMs: number };
}

/** A change of whether, and why not, the controller acts: `judge` returns it. */
export type SightChange =
  | {
      kind: 'blind';
      reason: BlindReason;
      was: BlindReason | undefined;
      /** A spell began (we acted until now) at this time: a storage outage in progress ends there. */
      spellBegan: number | undefined;
    }
  | {
      kind: 'acting';
      was: BlindReason;
      /** The whole spell (nlc_blind_seconds_total when deadlines are moved). */
      blindMs: number;
      /**
       * True: the spell began or passed through not leading / not synced, every node gets a fresh
       * grace. False: deadlines move by the lease watch's own blind time within the spell.
       */
      freshGrace: boolean;
      leaseBlindMs: number;
    };

/**
 * Sight as a state machine (pure: health snapshots, leadership and monotonic times in; decisions as
 * data out). The controller acts only while it leads and both watches can be trusted: synced,
 * connected, and (the lease watch) in contact within the silence threshold.
 *
 * A blind spell starts when sight is lost (a silent lease watch: at its last contact). When sight
 * returns, a spell that began or passed through not leading / not synced gives every node a fresh
 * grace; otherwise deadlines move by the time the LEASE watch was blind within it (a spell in which
 * the node watch alone was down saw every renewal). Leadership aside, the watches' sight says
 * whether this replica is eligible to lead, and a leader blind for blindStepDownMs steps down.
 *
 * Two steps per evaluation, in this order: `see` (the watches), whose decisions the caller carries
 * out (a step-down may end leadership at once: setLeading(false) then evaluates again), then
 * `judge` (whether we act), which reads leadership as it is after them.
 */
export class SightMachine {
  private leading = false;
  private reason: BlindReason | undefined = 'not_leader';
  /** Start of the current blind spell: when sight was lost (a silent watch: its last contact). */
  private blindSince: number;
  /** The spell began or passed through not leading / not synced: fresh grace when it ends. */
  private spellFresh = true;
  /**
   * The lease watch's own blindness within the current spell: since when it cannot see renewals
   * (undefined: it can), and how long it could not before that. Only this time moves deadlines.
   */
  private leaseBlindSince: number | undefined;
  private leaseBlindMs = 0;
  /** The lease watch's last contact, as last seen: a silent spell began then. */
  private leaseContactAt: number | undefined;
  /** Whether the watches can be trusted, leadership aside, and since when they cannot. */
  private watchBlind: { reason: WatchBlindReason; since: number } | undefined;
  private eligible: boolean | undefined;
  private steppingDown = false;

  /** @param startedAt When the controller started (monotonic ms): unsynced and not leading since then. */
  constructor(
    private readonly cfg: SightConfig,
    startedAt: number,
  ) {
    this.blindSince = startedAt;
    this.watchBlind = { reason: 'unsynced', since: startedAt };
  }

  /** Why we do not act (undefined: we act). */
  get blind(): BlindReason | undefined {
    return this.reason;
  }
  get isLeading(): boolean {
    return this.leading;
  }
  /** The watches' own state, leadership aside: why they cannot be trusted, and since when. */
  get watch(): { reason: WatchBlindReason; since: number } | undefined {
    return this.watchBlind;
  }

  /** Leadership changed (false: a step-down in progress is over). Returns false when it did not. */
  setLeading(leading: boolean): boolean {
    if (this.leading === leading) return false;
    this.leading = leading;
    if (!leading) this.steppingDown = false;
    return true;
  }

  /** When a spell that begins at `now` for `reason` began: a silent lease watch, at its last contact. */
  private spellStart(reason: BlindReason, now: number): number {
    const contact = this.leaseContactAt;
    return reason === 'silent' && contact !== undefined ? Math.min(now, contact) : now;
  }

  /** The watches' sight at `seen.now`, leadership aside (the node watch's reason first). */
  see(seen: WatchesSeen): WatchSightStep {
    const { now } = seen;
    this.leaseContactAt = seen.leases.lastContactAt;
    const leases = watchBlindness(seen.leases, now, this.cfg.watchSilenceThresholdMs);
    const watch = watchBlindness(seen.nodes, now, Number.POSITIVE_INFINITY) ?? leases;
    const step: WatchSightStep = {};
    const leaseWatch = this.trackLeaseSight(now, leases);
    if (leaseWatch) step.leaseWatch = leaseWatch;
    if (watch === undefined) this.watchBlind = undefined;
    else if (this.watchBlind === undefined)
      this.watchBlind = { reason: watch, since: this.spellStart(watch, now) };
    else if (this.watchBlind.reason !== watch) this.watchBlind = { ...this.watchBlind, reason: watch };
    const eligible = watch === undefined;
    if (eligible !== this.eligible) {
      this.eligible = eligible;
      step.eligible = eligible;
    }
    const stepDown = this.stepDownDue(now);
    if (stepDown) step.stepDown = stepDown;
    return step;
  }

  /** Keeps the lease watch's own blind time up to date; says when it is lost or sees again. */
  private trackLeaseSight(now: number, blind: WatchBlindReason | undefined): 'lost' | 'sees' | undefined {
    if (blind !== undefined && this.leaseBlindSince === undefined) {
      this.leaseBlindSince = this.spellStart(blind, now);
      return 'lost';
    }
    if (blind === undefined && this.leaseBlindSince !== undefined) {
      this.leaseBlindMs += Math.max(0, now - this.leaseBlindSince);
      this.leaseBlindSince = undefined;
      return 'sees';
    }
    return undefined;
  }

  private stepDownDue(now: number): WatchSightStep['stepDown'] {
    const limit = this.cfg.blindStepDownMs;
    const w = this.watchBlind;
    if (!this.leading || w === undefined || !(limit > 0) || this.steppingDown || !this.cfg.election)
      return undefined;
    if (now - w.since < limit) return undefined;
    this.steppingDown = true;
    return { reason: w.reason, blindForMs: now - w.since, limitMs: limit };
  }

  /** Whether we act at `now`, leadership as it is now and the watches as `see` last found them. */
  judge(now: number): SightChange | undefined {
    const reason: BlindReason | undefined = this.leading ? this.watchBlind?.reason : 'not_leader';
    if (reason === this.reason) return undefined;
    const was = this.reason;
    this.reason = reason;
    if (reason !== undefined) {
      let spellBegan: number | undefined;
      if (was === undefined) {
        spellBegan = this.blindSince = this.spellStart(reason, now);
        this.spellFresh = false;
        this.leaseBlindMs = 0;
      }
      if (reason === 'not_leader' || reason === 'unsynced') this.spellFresh = true;
      return { kind: 'blind', reason, was, spellBegan };
    }
    // Acting means the lease watch sees, so leaseBlindSince is undefined here.
    const leaseBlindMs = this.leaseBlindMs;
    this.leaseBlindMs = 0;
    return {
      kind: 'acting',
      was: was as BlindReason,
      blindMs: Math.max(0, now - this.blindSince),
      freshGrace: this.spellFresh,
      leaseBlindMs,
    };
  }
}
