import type { Logger } from '../log/logger.js';
import { BehaviorSubject, type Observable, ReplaySubject, Subject } from '../rx/index.js';
import type { LeaderElectionMetrics } from './metrics.js';

export type StopReason = 'lost' | 'released' | 'stopped' | 'stepped-down';

export type ElectionEvent =
  | { readonly type: 'started-leading'; readonly identity: string; readonly at: number }
  | {
      readonly type: 'stopped-leading';
      readonly reason: StopReason;
      readonly detail: string;
      readonly at: number;
    }
  /** The observed holder changed ('' = nobody holds the lock). Includes our own acquisition. */
  | { readonly type: 'new-leader'; readonly identity: string; readonly at: number };

/** Emitted once when leadership ends involuntarily: stop guarded writes and exit non-zero. */
export interface LostLeadership {
  readonly reason: string;
  /** Monotonic time of the decision. */
  readonly at: number;
}

export interface LeaderCallbacks {
  onStartedLeading?: () => void;
  onStoppedLeading?: (reason: StopReason, detail: string) => void;
  onNewLeader?: (identity: string) => void;
}

/**
 * What an elector tells the rest of the process about leadership, and only that: the streams
 * (events, leading, leader, lost), the callbacks, the log lines of each edge and the metrics that
 * follow them (master status, transitions, the lock's strategy). The elector decides; this says.
 */
export class LeadershipSignals {
  /** Every leadership event, in order. */
  readonly events$: Observable<ElectionEvent>;
  /** true while leading (replays the current value). */
  readonly leading$: Observable<boolean>;
  /** The observed holder identity, '' for none (replays the current value). */
  readonly leader$: Observable<string>;
  /** Emits once if leadership is lost (not on release()/stop()). Replays to late subscribers. */
  readonly lost$: Observable<LostLeadership>;
  private readonly events = new Subject<ElectionEvent>();
  private readonly leading = new BehaviorSubject<boolean>(false);
  private readonly leader = new BehaviorSubject<string>('');
  private readonly lost = new ReplaySubject<LostLeadership>(1);
  private readonly ctx: {
    name: string;
    identity: string;
    log: Logger;
    metrics: LeaderElectionMetrics;
    callbacks: LeaderCallbacks | undefined;
  };
  /** Holder seen at the first observation: not counted as a transition. */
  private lastHolderSeen: string | undefined;
  /** The lock's strategy and preferredHolder as last exported (nlc_leader_election_lock_info). */
  private lockInfo: { strategy: string; preferred_holder: string } | undefined;

  constructor(ctx: LeadershipSignals['ctx']) {
    this.ctx = ctx;
    this.events$ = this.events.asObservable();
    this.leading$ = this.leading.asObservable();
    this.leader$ = this.leader.asObservable();
    this.lost$ = this.lost.asObservable();
    const { metrics, name } = ctx;
    metrics.masterStatus.set({ name }, 0);
    for (const counter of [metrics.slowpath, metrics.transitions, metrics.renewErrors]) {
      counter.inc({ name }, 0);
    }
  }

  /** Last observed holder, '' for none. */
  currentLeader(): string {
    return this.leader.value;
  }

  /** The holder observed at `at` ('' for none); said only when it changed. */
  observedLeader(holder: string, at: number): void {
    if (holder === this.leader.value) return;
    const first = this.lastHolderSeen === undefined;
    this.leader.next(holder);
    if (holder !== '') {
      if (!first) this.ctx.metrics.transitions.inc({ name: this.ctx.name });
      this.lastHolderSeen = holder;
    }
    this.ctx.log.info('New leader observed', { leader: holder === '' ? '<none>' : holder });
    this.events.next({ type: 'new-leader', identity: holder, at });
    this.safe(() => this.ctx.callbacks?.onNewLeader?.(holder));
  }

  startedLeading(at: number, leaseTransitions: number | undefined): void {
    this.ctx.metrics.masterStatus.set({ name: this.ctx.name }, 1);
    this.ctx.log.info('Successfully acquired lease', { leaseTransitions });
    this.leading.next(true);
    this.events.next({ type: 'started-leading', identity: this.ctx.identity, at });
    this.safe(() => this.ctx.callbacks?.onStartedLeading?.());
  }

  /**
   * The edge out of leadership, in order: metrics, log, leading$ and events$; then `ended` (the
   * elector's own teardown of a lost term), lost$ for a loss, and the callback last.
   */
  stoppedLeading(reason: StopReason, detail: string, at: number, ended: () => void): void {
    this.ctx.metrics.masterStatus.set({ name: this.ctx.name }, 0);
    if (reason === 'lost') this.ctx.log.error('Leader election lost', { reason: detail });
    else this.ctx.log.info('Stopped leading', { reason: detail });
    this.leading.next(false);
    this.events.next({ type: 'stopped-leading', reason, detail, at });
    if (reason === 'lost') {
      ended();
      this.lost.next({ reason: detail, at });
    }
    this.safe(() => this.ctx.callbacks?.onStoppedLeading?.(reason, detail));
  }

  /** The lock's strategy and preferred holder as last seen (undefined: no lock seen), as a metric. */
  lockSeen(seen: { strategy: string; preferredHolder: string } | undefined): void {
    const labels = seen ? { strategy: seen.strategy, preferred_holder: seen.preferredHolder } : undefined;
    const prev = this.lockInfo;
    if (prev?.strategy === labels?.strategy && prev?.preferred_holder === labels?.preferred_holder) return;
    const name = this.ctx.name;
    if (prev) this.ctx.metrics.lockInfo.remove({ name, ...prev });
    if (labels) this.ctx.metrics.lockInfo.set({ name, ...labels }, 1);
    this.lockInfo = labels;
  }

  private safe(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.ctx.log.error('Leader election callback threw', { err });
    }
  }
}
