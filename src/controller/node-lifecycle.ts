import type { ApiWriter, StillWanted, WriteOutcome } from '../apply/writer.js';
import { type Clock, timerDelay } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import { everyOnTicks, type Ticker } from '../clock/ticker.js';
import {
  type DisruptionController,
  type DisruptionUpdate,
  isExcludedFromDisruption,
  zoneDisplay,
  zoneKeyOf,
} from '../disruption/index.js';
import {
  type Anomaly,
  type EventRecord,
  type NodeHealthTracker,
  type ObservationResult,
  readyStatus,
} from '../health/index.js';
import type { KubeClient } from '../kube/client.js';
import type { Lease, Node } from '../kube/types.js';
import type { Logger } from '../log/logger.js';
import { type MarkingPolicy, type NodeView, upstreamPolicy } from '../policy/index.js';
import type { Subscription } from '../rx/index.js';
import type { Reflector } from '../watch/reflector.js';
import { watchBlindness } from '../watch/status.js';
import type { WatchEvent, WatchHealth } from '../watch/types.js';
import { AnomalyReporter } from './anomalies.js';
import { LeaseRecheck } from './lease-recheck.js';
import type { ControllerMetrics } from './metrics.js';
import { PodStep } from './pods.js';
import { WorkQueue } from './queue.js';
import { RecentWrites } from './recent-writes.js';
import { TaintStep } from './taints.js';

/** The work queue's `name` in workqueue_* (upstream's node lifecycle controller's node queue). */
export const WORK_QUEUE_NAME = 'node_lifecycle_controller';

/** Why the controller is not acting right now (undefined: it sees and leads). */
export type BlindReason = 'not_leader' | 'disconnected' | 'unsynced' | 'silent';
/** Why the watches cannot be trusted right now, leadership aside. */
export type WatchBlindReason = Exclude<BlindReason, 'not_leader'>;

/** What the controller asks of leader election (LeaderElector implements it). */
export interface LeadershipControl {
  /** A replica that cannot see should not acquire the lease (it may keep it: see stepDown). */
  setEligible(eligible: boolean): void;
  /** Give leadership up (release the lease) without exiting. */
  stepDown(reason: string): void;
}
/**
 * How long a node our write returned may stand in for the watch cache's older copy. The cache
 * normally shows the write within milliseconds; this only bounds an entry the cache never catches
 * up with (a resourceVersion that went backwards, e.g. after an etcd restore).
 */
const RECENT_WRITE_TTL_MS = 60_000;

const BLIND_REASONS: readonly BlindReason[] = ['not_leader', 'disconnected', 'unsynced', 'silent'];

export interface NodeLifecycleOptions {
  clock: Clock;
  logger: Logger;
  metrics: ControllerMetrics;
  client: KubeClient;
  writer: ApiWriter;
  tracker: NodeHealthTracker;
  disruption: DisruptionController;
  leases: Reflector<Lease>;
  nodes: Reflector<Node>;
  /** A lease watch silent (no event, bookmark or reconnect) for longer than this counts as blind. */
  watchSilenceThresholdMs: number;
  /** Safety-net full re-check period (--node-monitor-period). */
  monitorPeriodMs: number;
  /**
   * The process's periodic tick (EventLoopSampler). When given, the 1 s sight check and the
   * safety net run on its ticks instead of timers of their own (fewer wake-ups); absent, or coarser
   * than a period, they use the clock's scheduler.
   */
  ticker?: Ticker;
  /** What is written for a lost or recovered node (default: upstream's, with markPodsNotReady). */
  policy?: MarkingPolicy;
  /** The default policy's --mark-pods-not-ready. */
  markPodsNotReady?: 'always' | 'upstream';
  /**
   * While a node is not Ready its pods are re-listed (newly bound pods get marked): first after this
   * long, then at doubling intervals up to podRecheckMaxMs while a re-list finds nothing to mark.
   */
  podRecheckMs?: number;
  podRecheckMaxMs?: number;
  /**
   * Leader election, told when this replica can see (eligible to lead) and asked to step down when
   * it has led blind for `blindStepDownMs`. Absent without leader election.
   */
  election?: LeadershipControl;
  /** A leader whose watches have been blind this long steps down (0 or absent: never). */
  blindStepDownMs?: number;
  workers?: number;
  /** Called for each lease or node event before it is processed (benchmarks, tests). */
  onObservation?: (kind: 'lease' | 'node', result: ObservationResult) => void;
}

/** Node ready state as exported in nlc_nodes. */
function stateOf(node: Node): 'ready' | 'not_ready' | 'unknown' | 'no_condition' {
  switch (readyStatus(node)) {
    case 'True':
      return 'ready';
    case 'False':
      return 'not_ready';
    case undefined:
      return 'no_condition';
    default:
      return 'unknown';
  }
}

/**
 * The node lifecycle reconciler: feeds watch events to the pure health tracker and disruption
 * controller, arms ONE timer for the earliest deadline, and reconciles due or changed nodes with a
 * small pool of workers through the fenced writer. It acts only while it leads and sees: a lease
 * watch that is disconnected, unsynced or silent makes it blind, and blind it marks nothing.
 */
export class NodeLifecycleController {
  private readonly o: Required<
    Omit<NodeLifecycleOptions, 'onObservation' | 'election' | 'ticker' | 'markPodsNotReady'>
  > &
    Pick<NodeLifecycleOptions, 'onObservation' | 'election' | 'ticker'>;
  private readonly log: Logger;
  private readonly queue: WorkQueue<string>;
  private readonly anomalies: AnomalyReporter;
  private readonly subs: { unsubscribe(): void }[] = [];
  private leading = false;
  private blindReason: BlindReason | undefined = 'not_leader';
  /** Start of the current blind spell: when sight was lost (a silent watch: its last contact). */
  private blindSince: number;
  /** The spell began or passed through not leading / not synced: fresh grace when it ends. */
  private spellFresh = true;
  /**
   * The lease watch's own blindness within the current spell: since when it cannot see renewals
   * (undefined: it can), and how long it could not before that. Only this time moves deadlines: a
   * spell in which the node watch alone was down saw every renewal.
   */
  private leaseBlindSince: number | undefined;
  private leaseBlindMs = 0;
  /** Whether the watches can be trusted, leadership aside, and since when they cannot. */
  private watchBlind: { reason: WatchBlindReason; since: number } | undefined = {
    reason: 'unsynced',
    since: 0,
  };
  private eligible: boolean | undefined;
  private steppingDown = false;
  private deadlineTimer: { at: number; sub: Subscription } | undefined;
  private disruptionTimer: { at: number; sub: Subscription } | undefined;
  private disruptionTickPending = false;
  private readonly dryRunMarked = new Set<string>();
  private readonly pods: PodStep;
  /** Nodes in their rate-limited step (companion: evicting) since when, on our clock. */
  private readonly stepSince = new Map<string, number>();
  private readonly nodeStates = new Map<string, ReturnType<typeof stateOf>>();
  /** Nodes as our last write returned them, until the watch cache shows that version or newer. */
  private readonly writtenNodes = new RecentWrites<Node>(RECENT_WRITE_TTL_MS);
  private readonly recheckLease: LeaseRecheck;
  private readonly taints: TaintStep;
  private readonly workerLoops: Promise<void>[] = [];
  /**
   * Aborted by stop(): the reads in flight (lease re-reads, pod lists) end at once. A shutdown
   * waits for the writes on the wire only (the writer's idle()); the fence refuses new ones.
   */
  private readonly reads = new AbortController();
  /** Which watches delivered their first complete list (leases without nodes are judged after both). */
  private readonly listed = { nodes: false, leases: false };
  private stopped = false;
  /** The safety-net pass being timed: the nodes it queued that are not reconciled yet. */
  private pass: { started: number; pending: Set<string> } | undefined;

  constructor(opts: NodeLifecycleOptions) {
    this.o = {
      podRecheckMs: 30_000,
      podRecheckMaxMs: 5 * 60_000,
      workers: 8,
      blindStepDownMs: 0,
      ...opts,
      policy: opts.policy ?? upstreamPolicy({ markPodsNotReady: opts.markPodsNotReady ?? 'always' }),
    };
    this.log = opts.logger.with({ component: 'node-lifecycle' });
    this.anomalies = new AnomalyReporter(this.log, opts.metrics.anomalies);
    this.queue = new WorkQueue(opts.clock.scheduler, {
      baseDelayMs: 50,
      maxDelayMs: 60_000,
      metrics: opts.metrics.workqueue.forQueue(WORK_QUEUE_NAME, () => opts.clock.scheduler.now()),
    });
    this.blindSince = this.now();
    this.watchBlind = { reason: 'unsynced', since: this.blindSince };
    this.pods = new PodStep({
      ...this.o,
      log: this.log,
      reads: this.reads.signal,
      emit: (e) => this.emit(e),
    });
    this.recheckLease = new LeaseRecheck({
      ...this.o,
      log: this.log,
      reads: this.reads.signal,
      acting: () => this.acting(),
      stopped: () => this.stopped,
      noteAnomalies: (a) => this.noteAnomalies(a),
      deadlinesMoved: () => this.armDeadlineTimer(),
    });
    this.taints = new TaintStep({
      ...this.o,
      log: this.log,
      writtenNodes: this.writtenNodes,
      view: (name, now) => this.view(name, now),
      admissionRequested: () => this.scheduleDisruptionTick(),
    });
  }

  private now(): number {
    return this.o.clock.scheduler.now();
  }

  /** Subscribes to the watch streams (start them after this) and starts the workers. */
  start(): void {
    const { nodes, leases } = this.o;
    this.subs.push(nodes.events$.subscribe((ev) => this.onNodeEvent(ev)));
    this.subs.push(leases.events$.subscribe((ev) => this.onLeaseEvent(ev)));
    for (const r of [nodes, leases]) {
      this.subs.push(r.health$.subscribe((h: WatchHealth) => this.onHealth(h)));
    }
    // Time-based parts of sight (silence), and the safety net.
    this.every(1000, () => this.evaluateSight());
    this.every(this.o.monitorPeriodMs, () => this.recheck('now'));
    for (let i = 0; i < this.o.workers; i++) this.workerLoops.push(this.worker());
  }

  private every(ms: number, fn: () => void): void {
    const ticker = this.o.ticker;
    if (ticker && ticker.intervalMs <= ms) {
      this.subs.push({ unsubscribe: everyOnTicks(ticker, () => this.now(), ms, fn) });
      return;
    }
    this.subs.push(
      this.o.clock.scheduler.schedule(function repeat(this: {
        schedule(state?: unknown, delay?: number): void;
      }) {
        fn();
        this.schedule(undefined, timerDelay(ms));
      }, timerDelay(ms)),
    );
  }

  /** Leadership changes from the elector. Becoming leader gives every node a fresh grace period. */
  setLeading(leading: boolean): void {
    if (this.leading === leading) return;
    this.leading = leading;
    if (!leading) this.steppingDown = false;
    this.o.metrics.leading.set(leading ? 1 : 0);
    this.log.info(leading ? 'Started leading: reconciling nodes' : 'Stopped leading: no more writes');
    this.evaluateSight();
  }

  /**
   * Stops timers and workers and aborts the reads in flight; resolves when the workers are done.
   * A write on the wire is not aborted (it may land anyway): the caller waits for the writer.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const s of this.subs.splice(0)) s.unsubscribe();
    this.deadlineTimer?.sub.unsubscribe();
    this.disruptionTimer?.sub.unsubscribe();
    this.reads.abort();
    this.queue.shutDown();
    await Promise.all(this.workerLoops);
  }

  /** What the controller would say about itself (status view, probes, tests). */
  get sight(): {
    blind: BlindReason | undefined;
    leading: boolean;
    queued: number;
    /** The watches' own state, leadership aside: why they cannot be trusted, and since when. */
    watch: { reason: WatchBlindReason; since: number } | undefined;
  } {
    return {
      blind: this.blindReason,
      leading: this.leading,
      queued: this.queue.length,
      watch: this.watchBlind,
    };
  }

  // ---------------------------------------------------------------------------------------------
  // Observations

  private noteAnomalies(anomalies: readonly Anomaly[]): void {
    this.anomalies.note(anomalies);
  }

  /** A watch delivered a complete list: once both have, leases without a node are anomalies. */
  private listDone(which: 'nodes' | 'leases'): void {
    if (this.listed[which]) return;
    this.listed[which] = true;
    if (this.listed.nodes && this.listed.leases) this.noteAnomalies(this.o.tracker.listsSynced());
  }

  private onLeaseEvent(ev: WatchEvent<Lease>): void {
    if (ev.type === 'InitDone') {
      this.anomalies.leasesSynced();
      this.listDone('leases');
    }
    if (ev.type === 'Init' || ev.type === 'InitDone') return;
    const now = this.now();
    const lease = ev.object;
    // A write the storage accepted: it works (again).
    if (ev.type === 'Apply') this.recheckLease.writeSeen(lease);
    if (ev.type === 'Delete') {
      this.o.tracker.forgetLease(lease.metadata.name);
    } else {
      const r = this.o.tracker.observeLease(lease, now);
      this.noteAnomalies(r.anomalies);
      if (r.refreshed) this.dryRunMarked.delete(r.name);
      // A node reported due that renewed; or one whose marks only a renewal removes (companion mode:
      // no kubelet write tells it, and a restart does not report the nodes it had marked).
      const node = r.refreshed ? this.o.nodes.store.get(r.name) : undefined;
      // A recovered node's marks come off ahead of bookkeeping, as a lost node's go on.
      if (r.recovered) this.queue.addUrgent(r.name);
      else if (node && this.o.policy.renewalMatters(node)) this.queue.add(r.name);
      this.o.onObservation?.('lease', r);
    }
    this.armDeadlineTimer();
  }

  private onNodeEvent(ev: WatchEvent<Node>): void {
    if (ev.type === 'InitDone') this.listDone('nodes');
    if (ev.type === 'Init' || ev.type === 'InitDone') return;
    const now = this.now();
    const node = ev.object;
    const name = node.metadata.name;
    if (ev.type === 'Delete') {
      if (this.o.tracker.forgetNode(name) && this.acting()) this.nodeEvent('removing', node);
      this.o.disruption.forget(name);
      this.taints.forget(name);
      this.pods.forget(name);
      this.stepSince.delete(name);
      this.dryRunMarked.delete(name);
      this.writtenNodes.forget(name);
      this.setNodeState(name, undefined);
    } else {
      const r = this.o.tracker.observeNode(node, now);
      this.noteAnomalies(r.anomalies);
      if (r.refreshed) this.dryRunMarked.delete(name);
      // RegisteredNode only for nodes that appear while we watch (upstream also emits it for every
      // node it lists at start: 1,000 Events on each failover of a 1,000-node cluster).
      if (r.registered && ev.type === 'Apply' && this.acting()) this.nodeEvent('registered', node);
      this.observeZone(node);
      this.setNodeState(name, stateOf(node));
      this.o.onObservation?.('node', r);
      // Level-based: any node change may need taints or pods brought in line.
      this.queue.add(name);
      this.scheduleDisruptionTick();
    }
    this.armDeadlineTimer();
  }

  private nodeEvent(kind: 'registered' | 'removing', node: Node): void {
    const e = this.o.policy.nodeEvent(kind, node.metadata.name, node.metadata.uid);
    if (e) void this.emit(e);
  }

  private observeZone(node: Node): void {
    this.o.disruption.observe({
      name: node.metadata.name,
      zone: zoneKeyOf(node.metadata.labels),
      ready: this.o.policy.zoneReady(node),
      excluded: isExcludedFromDisruption(node.metadata.labels),
    });
  }

  private setNodeState(name: string, state: ReturnType<typeof stateOf> | undefined): void {
    const prev = this.nodeStates.get(name);
    if (prev === state) return;
    if (prev) this.o.metrics.nodes.dec({ state: prev });
    if (state) {
      this.o.metrics.nodes.inc({ state });
      this.nodeStates.set(name, state);
    } else this.nodeStates.delete(name);
  }

  /** Re-resolves every node's grace (pool config reloaded). */
  refreshGrace(): void {
    const now = this.now();
    for (const node of this.o.nodes.store.values()) this.o.tracker.observeNode(node, now);
    this.armDeadlineTimer();
    this.recheck();
  }

  // ---------------------------------------------------------------------------------------------
  // Sight and leadership

  private onHealth(_h: WatchHealth): void {
    this.evaluateSight();
  }

  /** Both watches' blindness (the node watch's first), and the lease watch's own. */
  private computeWatchBlindness(now: number): {
    watch: WatchBlindReason | undefined;
    leases: WatchBlindReason | undefined;
  } {
    const nodes = watchBlindness(this.o.nodes.health(), now, Number.POSITIVE_INFINITY);
    const leases = watchBlindness(this.o.leases.health(), now, this.o.watchSilenceThresholdMs);
    return { watch: nodes ?? leases, leases };
  }

  /** Keeps the lease watch's own blind time (leaseBlindSince / leaseBlindMs) up to date. */
  private trackLeaseSight(now: number, blind: WatchBlindReason | undefined): void {
    if (blind !== undefined && this.leaseBlindSince === undefined) {
      this.leaseBlindSince = this.spellStart(blind, now);
      this.recheckLease.leaseWatchLost();
    } else if (blind === undefined && this.leaseBlindSince !== undefined) {
      this.leaseBlindMs += Math.max(0, now - this.leaseBlindSince);
      this.leaseBlindSince = undefined;
      // The spell moves deadlines by its time: a silence of renewals within it is not counted again.
      this.recheckLease.leaseWatchSees();
    }
  }

  /** When a spell that begins now began: a silent lease watch has been unseen since its last contact. */
  private spellStart(reason: BlindReason, now: number): number {
    const contact = this.o.leases.health().lastContactAt;
    return reason === 'silent' && contact !== undefined ? Math.min(now, contact) : now;
  }

  /**
   * The watches' sight, leadership aside: tells leader election whether we may lead, and makes a
   * leader that has been blind for blindStepDownMs step down so that a replica that sees can lead.
   */
  private evaluateWatchSight(now: number, watch: WatchBlindReason | undefined): void {
    if (watch === undefined) this.watchBlind = undefined;
    else if (this.watchBlind === undefined)
      this.watchBlind = { reason: watch, since: this.spellStart(watch, now) };
    else if (this.watchBlind.reason !== watch) this.watchBlind = { ...this.watchBlind, reason: watch };
    const eligible = watch === undefined;
    if (eligible !== this.eligible) {
      this.eligible = eligible;
      this.o.election?.setEligible(eligible);
    }
    const limit = this.o.blindStepDownMs;
    if (
      this.leading &&
      this.watchBlind !== undefined &&
      limit > 0 &&
      !this.steppingDown &&
      this.o.election &&
      now - this.watchBlind.since >= limit
    ) {
      this.steppingDown = true;
      const blindFor = formatDuration(now - this.watchBlind.since);
      this.log.warn('Blind for too long while leading: stepping down so that a replica that can see leads', {
        reason: this.watchBlind.reason,
        blindFor,
        blindStepDownAfter: formatDuration(limit),
      });
      this.o.metrics.stepDowns.inc({ reason: this.watchBlind.reason });
      this.o.election.stepDown(`blind (${this.watchBlind.reason}) for ${blindFor} while leading`);
    }
  }

  private computeBlindness(watch: WatchBlindReason | undefined): BlindReason | undefined {
    return this.leading ? watch : 'not_leader';
  }

  private acting(): boolean {
    return this.blindReason === undefined;
  }

  private evaluateSight(): void {
    if (this.stopped) return;
    const now = this.now();
    const { watch, leases } = this.computeWatchBlindness(now);
    this.trackLeaseSight(now, leases);
    this.evaluateWatchSight(now, watch);
    const reason = this.computeBlindness(watch);
    if (reason === this.blindReason) return;
    const was = this.blindReason;
    this.blindReason = reason;
    for (const r of BLIND_REASONS) this.o.metrics.blind.set({ reason: r }, r === reason ? 1 : 0);
    if (reason !== undefined) {
      if (was === undefined) {
        // A spell begins. A silent lease watch has been unseen since its last contact, not just
        // since the threshold passed.
        this.blindSince = this.spellStart(reason, now);
        this.spellFresh = false;
        this.leaseBlindMs = 0;
        // An outage of the API server's storage in progress ends where the spell begins.
        this.recheckLease.spellBegan(this.blindSince, reason);
      }
      if (reason === 'not_leader' || reason === 'unsynced') this.spellFresh = true;
      if (reason === 'not_leader') this.log.info('Not leading: marking nothing');
      else this.log.warn('Blind: the lease watch is not healthy, marking nothing', { reason, was });
      this.deadlineTimer?.sub.unsubscribe();
      this.deadlineTimer = undefined;
      return;
    }
    const blindMs = Math.max(0, now - this.blindSince);
    // Acting means the lease watch sees, so leaseBlindSince is undefined here.
    const leaseBlindMs = this.leaseBlindMs;
    this.leaseBlindMs = 0;
    if (this.spellFresh) {
      // We start, became leader, or synced for the first time: we know nothing about how long the
      // nodes have been silent, so every node gets a fresh grace period.
      this.o.tracker.resetAll(now);
    } else {
      // Back from a blind spell while leading: the time the lease watch could not see does not
      // count against any node (kubelets may not have been able to renew through the same outage),
      // but the grace that had already run out stays run out. A flapping watch delays marking by
      // its blind time, never for ever. Time in which only the node watch was down does not move
      // deadlines: every renewal of it was seen, and a node past its grace is marked as soon as
      // both watches see again.
      this.o.tracker.extendAll(leaseBlindMs, now);
      this.o.metrics.blindSeconds.inc(blindMs / 1000);
    }
    this.log.info('Acting: watches healthy and leading', {
      after: was,
      blindFor: formatDuration(Math.round(blindMs)),
      ...(this.spellFresh ? {} : { deadlinesMovedBy: formatDuration(Math.round(leaseBlindMs)) }),
      freshGrace: this.spellFresh,
    });
    for (const name of this.o.nodes.store.keys()) this.queue.add(name);
    this.armDeadlineTimer();
    this.recheck();
  }

  // ---------------------------------------------------------------------------------------------
  // Deadlines: one timer for the earliest one.

  private armDeadlineTimer(): void {
    if (this.stopped || !this.acting()) return;
    const next = this.o.tracker.nextDeadline();
    if (next === undefined) {
      this.deadlineTimer?.sub.unsubscribe();
      this.deadlineTimer = undefined;
      return;
    }
    // A timer armed EARLIER than the next deadline is kept: it wakes, finds nothing due and re-arms.
    // Renewals mostly push the earliest deadline later, so this saves a timer swap per renewal.
    if (this.deadlineTimer && this.deadlineTimer.at <= next) return;
    this.deadlineTimer?.sub.unsubscribe();
    // A grace beyond what a timer takes (720h, ~24.8 days at most): it fires early, finds nothing
    // due and arms again.
    const sub = this.o.clock.scheduler.schedule(
      () => {
        this.deadlineTimer = undefined;
        this.onDeadline();
      },
      timerDelay(next - this.now()),
    );
    this.deadlineTimer = { at: next, sub };
  }

  private onDeadline(): void {
    const now = this.now();
    // Sight may have changed since the last 1 s tick: look again before acting.
    this.evaluateSight();
    if (!this.acting()) {
      this.o.metrics.blindSkipped.inc();
      return;
    }
    // A lost node's mark goes ahead of every ordinary key: a fresh fleet's start-up writes (1,000
    // not-ready taints lifted through a 20 QPS client) must not hold it for 50 s.
    for (const name of this.o.tracker.popDue(now)) this.queue.addUrgent(name);
    this.armDeadlineTimer();
  }

  /**
   * Safety net: every timed-out node, found by a full pass. `zones`: 'now' runs the zone pass in
   * this turn (the periodic pass, already a turn of its own), 'soon' after the turn's other events.
   */
  private recheck(zones: 'now' | 'soon' = 'soon'): void {
    if (this.stopped || !this.acting()) return;
    const now = this.now();
    const due = this.o.tracker.recheckAll(now);
    for (const name of due) this.queue.addUrgent(name);
    if (!this.pass) {
      if (due.length === 0) this.o.metrics.updateAllNodesHealthDuration.observe((this.now() - now) / 1000);
      else this.pass = { started: now, pending: new Set(due) };
    }
    this.armDeadlineTimer();
    // A 0 ms timer would be one more wake-up every period for what can run now.
    if (zones === 'now' && !this.disruptionTickPending) this.disruptionTick();
    else this.scheduleDisruptionTick();
  }

  /** A node the timed pass queued has been reconciled; the last one ends the pass. */
  private passDone(name: string): void {
    const p = this.pass;
    if (!p?.pending.delete(name) || p.pending.size > 0) return;
    this.pass = undefined;
    this.o.metrics.updateAllNodesHealthDuration.observe((this.now() - p.started) / 1000);
  }

  // ---------------------------------------------------------------------------------------------
  // Disruption: zone states, admission of new NoExecute taints.

  private scheduleDisruptionTick(): void {
    if (this.disruptionTickPending || this.stopped) return;
    this.disruptionTickPending = true;
    this.o.clock.scheduler.schedule(() => {
      this.disruptionTickPending = false;
      this.disruptionTick();
    }, 0);
  }

  private disruptionTick(): void {
    if (this.stopped) return;
    const now = this.now();
    const update = this.o.disruption.evaluate(now);
    this.onDisruptionUpdate(update, now);
    if (this.acting()) {
      const { admitted, events } = this.o.disruption.admit(now);
      for (const a of admitted) {
        this.taints.admit(a.name);
        this.queue.add(a.name);
      }
      for (const e of events) void this.emit(e as unknown as EventRecord);
    }
    const wake = this.o.disruption.nextWakeup(now);
    if (wake === undefined) {
      this.disruptionTimer?.sub.unsubscribe();
      this.disruptionTimer = undefined;
    } else if (!this.disruptionTimer || this.disruptionTimer.at !== wake) {
      this.disruptionTimer?.sub.unsubscribe();
      const sub = this.o.clock.scheduler.schedule(
        () => {
          this.disruptionTimer = undefined;
          this.disruptionTick();
        },
        timerDelay(wake - now),
      );
      this.disruptionTimer = { at: wake, sub };
    }
  }

  private onDisruptionUpdate(update: DisruptionUpdate, now: number): void {
    for (const t of update.transitions) {
      this.log.info('Zone state changed', {
        zone: zoneDisplay(t.zone),
        from: t.from,
        to: t.to,
        size: t.size,
        notReady: t.notReady,
        rate: t.rate,
      });
    }
    for (const d of update.decisions) {
      if (d.kind === 'RemoveAllNoExecuteTaints') {
        this.log.warn(
          'Master disruption: every zone is fully disrupted; removing NoExecute taints, tainting nothing',
        );
        for (const name of this.o.nodes.store.keys()) this.queue.add(name);
      } else if (d.kind === 'ResetAllProbeTimestamps') {
        this.log.info('Master disruption over: fresh grace period for every node');
        this.o.tracker.resetAll(now);
        this.armDeadlineTimer();
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Workers

  private async worker(): Promise<void> {
    for (;;) {
      const name = await this.queue.get();
      if (name === undefined) return;
      const started = this.now();
      try {
        const requeueAfter = await this.reconcile(name);
        this.queue.forget(name);
        if (requeueAfter !== undefined) this.queue.addAfter(name, requeueAfter);
        this.o.metrics.reconciles.inc({ result: requeueAfter === undefined ? 'success' : 'requeue' });
      } catch (err) {
        if (this.stopped) {
          // A read aborted by stop(), or a reconcile that failed on its way out: nothing to retry.
          this.log.debug(2, 'Reconcile ended by stop', { node: name, err });
          continue;
        }
        const delay = this.queue.addRateLimited(name);
        this.o.metrics.reconciles.inc({ result: 'error' });
        this.log.error('Reconcile failed, will retry', { node: name, retryIn: formatDuration(delay), err });
      } finally {
        this.queue.done(name);
        this.o.metrics.updateNodeHealthDuration.observe((this.now() - started) / 1000);
        this.passDone(name);
      }
    }
  }

  private async emit(e: EventRecord): Promise<void> {
    const ref = e.involvedObject;
    await this.o.writer.event({
      involved: {
        kind: ref.kind === 'Pod' ? 'Pod' : 'Node',
        name: ref.name,
        namespace: ref.namespace,
        uid: ref.uid,
        apiVersion: 'v1',
      },
      type: e.type,
      reason: e.reason,
      message: e.message,
    });
  }

  private failedWrite(out: WriteOutcome): boolean {
    if (out.kind === 'failed') throw out.error;
    return out.kind === 'fenced';
  }

  /**
   * Whether a write decided now still holds after its waits (a token, a backoff): we still act,
   * and a node past its grace when it was decided (`lost`) has not renewed since. A renewal does
   * not change the Node, so no resourceVersion precondition would catch it.
   */
  private stillWanted(name: string, lost: boolean): StillWanted {
    return () => {
      if (!this.acting()) return `not acting (${this.blindReason})`;
      if (lost && !this.o.tracker.isTimedOut(name, this.now())) return 'node renewed';
      return undefined;
    };
  }

  /** As stillWanted, and the node, if it changed since `decided`, still wants its pods looked at. */
  private podsStillWanted(name: string, decided: Node): StillWanted {
    const base = this.stillWanted(name, this.o.tracker.isTimedOut(name, this.now()));
    return () => {
      const why = base();
      if (why !== undefined) return why;
      const node = this.writtenNodes.current(name, this.o.nodes.store.get(name), this.now());
      if (!node) return 'node deleted';
      if (node.metadata.resourceVersion === decided.metadata.resourceVersion) return undefined;
      return this.o.policy.podsWanted(node, false, true)
        ? undefined
        : 'node no longer wants its pods looked at';
    };
  }

  /** The tracker's view of one node at `now`, for the policy. */
  private view(name: string, now: number): NodeView {
    const h = this.o.tracker.health(name);
    const timedOut = this.o.tracker.isTimedOut(name, now) && !this.dryRunMarked.has(name);
    return {
      timedOut,
      lastRenewal: h?.lastSeenRenewTime ?? h?.lastSeenReadyHeartbeat,
      graceMs: h?.graceMs ?? 0,
      overdueMs: timedOut && h?.deadline !== undefined ? now - h.deadline : undefined,
    };
  }

  /**
   * Brings one node in line, as the policy says: its status when its deadline passed (confirmed
   * against the API server first) or it renewed, taints, pods. Returns a requeue delay, or undefined.
   */
  private async reconcile(name: string): Promise<number | undefined> {
    if (!this.acting()) return undefined;
    let node = this.writtenNodes.current(name, this.o.nodes.store.get(name), this.now());
    if (!node) return undefined;
    const { tracker, writer, metrics, policy } = this.o;
    let now = this.now();
    let flipped = false;

    // 1. Status: a lost node marked, a renewed one cleared.
    const write = policy.status(node, this.view(name, now), this.o.clock.wall());
    if (write) {
      if (write.kind === 'lost' && !(await this.recheckLease.confirmStale(name))) return undefined;
      if (!this.acting()) return undefined;
      const deadline = write.kind === 'lost' ? tracker.health(name)?.deadline : undefined;
      const out = await writer.patchNodeStatus(
        name,
        node,
        (current) => {
          if (current === node) return write.patch;
          // Someone changed the node since our copy: judge it again from the fresh object.
          const t = this.now();
          tracker.observeNode(current, t);
          const again = policy.status(current, this.view(name, t), this.o.clock.wall());
          return again?.kind === write.kind ? again.patch : undefined;
        },
        this.stillWanted(name, write.kind === 'lost'),
      );
      if (this.failedWrite(out) || out.kind === 'withdrawn') return undefined;
      now = this.now();
      if (out.kind === 'applied' || out.kind === 'dry-run') {
        if (write.unknown) tracker.noteMarkedUnknown(write.unknown, now);
        metrics.transitions.inc({ kind: write.transition });
        if (deadline !== undefined) metrics.detectionLatency.observe(Math.max(0, now - deadline) / 1000);
        flipped = write.flippedFromTrue;
        this.log.info(out.kind === 'dry-run' ? write.said.dryRun : write.said.applied, {
          node: name,
          readyBefore: write.readyBefore,
          afterDeadline: deadline === undefined ? undefined : formatDuration(Math.round(now - deadline)),
        });
        for (const e of write.events) void this.emit(e);
        if (out.kind === 'dry-run' && write.kind === 'lost') this.dryRunMarked.add(name);
        if (out.kind === 'applied') this.writtenNodes.remember(name, out.object as Node | undefined, now);
        node = out.kind === 'applied' && out.object ? (out.object as Node) : write.after;
        // Count it in its zone now, before our own taint request can spend a token: a mass
        // failure must change the zone state first (the watch echo of our write comes later).
        if (out.kind === 'applied') this.observeZone(node);
      } else if (out.kind === 'unchanged') {
        // The fresh copy showed a heartbeat: nothing to mark.
        node = this.writtenNodes.current(name, this.o.nodes.store.get(name), now) ?? node;
      } else if (out.kind === 'gone') {
        return undefined;
      }
    }

    // 2. Taints.
    const taintsDue = await this.taints.run(
      name,
      node,
      this.stillWanted(name, this.o.tracker.isTimedOut(name, this.now())),
    );
    if (taintsDue === 'fenced') return undefined;

    // 3. Pods. How long the node has been in its rate-limited step (companion: evicting), on our clock.
    const since = policy.inRateLimitedStep(node) ? (this.stepSince.get(name) ?? this.now()) : undefined;
    if (since === undefined) this.stepSince.delete(name);
    else this.stepSince.set(name, since);
    const podsDue = await this.pods.run(
      name,
      node,
      flipped,
      {
        master: this.o.disruption.masterDisruptionActive,
        ...(since !== undefined ? { evictingForMs: this.now() - since } : {}),
      },
      this.podsStillWanted(name, node),
    );
    return taintsDue === undefined || podsDue === undefined
      ? (taintsDue ?? podsDue)
      : Math.min(taintsDue, podsDue);
  }
}
