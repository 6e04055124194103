import type { Lease, Node } from '../kube/types.js';
import type { Logger } from '../log/logger.js';
import { upstreamPolicy } from '../policy/index.js';
import { SecondOpinion } from '../second-opinion/index.js';
import type { WatchEvent } from '../watch/index.js';
import { AnomalyReporter } from './anomalies.js';
import { LeaseRecheck } from './lease-recheck.js';
import type { NodeLifecycleOptions } from './node-lifecycle-options.js';
import { NodeReconciler, observeZone } from './node-reconcile.js';
import { NodeStateGauge } from './node-states.js';
import { outOfServiceHeld } from './out-of-service.js';
import { ReconcileRunner } from './reconcile-runner.js';
import { SecondOpinionDriver } from './second-opinion.js';
import type { BlindReason, SightChange, WatchBlindReason } from './sight.js';
import { SightDriver } from './sight-driver.js';
import { taintsInPlace } from './taints-in-place.js';
import { ZoneTicks } from './zone-ticks.js';

export type { NodeLifecycleOptions } from './node-lifecycle-options.js';
export type { BlindReason, WatchBlindReason } from './sight.js';
export type { LeadershipControl } from './sight-driver.js';

/** The work queue's `name` in workqueue_* (upstream's node lifecycle controller's node queue). */
export const WORK_QUEUE_NAME = 'node_lifecycle_controller';

type Options = Required<
  Omit<
    NodeLifecycleOptions,
    | 'onObservation'
    | 'election'
    | 'ticker'
    | 'markPodsNotReady'
    | 'outOfService'
    | 'ordinaryWorkers'
    | 'secondOpinion'
  >
> &
  Pick<
    NodeLifecycleOptions,
    'onObservation' | 'election' | 'ticker' | 'outOfService' | 'ordinaryWorkers' | 'secondOpinion'
  >;

/**
 * The node lifecycle reconciler: feeds watch events to the pure health tracker and disruption
 * controller, and reconciles due or changed nodes (NodeReconciler: status, taints, pods) through a
 * ReconcileRunner (work queue, workers, ONE timer for the earliest deadline). It acts only while it
 * leads and sees (SightMachine, driven by SightDriver): a lease watch that is disconnected, unsynced
 * or silent makes it blind, and blind it marks nothing.
 */
export class NodeLifecycleController {
  private readonly o: Options;
  private readonly log: Logger;
  private readonly anomalies: AnomalyReporter;
  private readonly subs: { unsubscribe(): void }[] = [];
  private readonly runner: ReconcileRunner<string>;
  private readonly sightDriver: SightDriver;
  private readonly nodeReconciler: NodeReconciler;
  private readonly recheckLease: LeaseRecheck;
  private readonly zones: ZoneTicks;
  private readonly nodeStates: NodeStateGauge;
  private readonly secondOpinion: SecondOpinionDriver | undefined;
  /**
   * Aborted by stop(): the reads in flight (lease re-reads, pod lists) end at once. A shutdown
   * waits for the writes on the wire only (the writer's idle()); the fence refuses new ones.
   */
  private readonly reads = new AbortController();
  /** Which watches delivered their first complete list (leases without nodes are judged after both). */
  private readonly listed = { nodes: false, leases: false };
  /** The safety-net pass being timed: the nodes it queued that are not reconciled yet. */
  private pass: { started: number; pending: Set<string> } | undefined;

  constructor(opts: NodeLifecycleOptions) {
    const o: Options = {
      podRecheckMs: 30_000,
      podRecheckMaxMs: 5 * 60_000,
      workers: 8,
      blindStepDownMs: 0,
      ...opts,
      policy: opts.policy ?? upstreamPolicy({ markPodsNotReady: opts.markPodsNotReady ?? 'always' }),
    };
    this.o = o;
    const log = opts.logger.with({ component: 'node-lifecycle' });
    this.log = log;
    this.anomalies = new AnomalyReporter(log, opts.metrics.anomalies);
    this.nodeStates = new NodeStateGauge(opts.metrics.nodes);
    this.runner = this.newRunner();
    const acting = () => this.acting();
    const stopped = () => this.runner.stopped;
    const reads = this.reads.signal;
    this.recheckLease = new LeaseRecheck({
      ...o,
      log,
      reads,
      acting,
      stopped,
      noteAnomalies: (a) => this.anomalies.note(a),
      deadlinesMoved: () => this.armDeadlineTimer(),
    });
    this.sightDriver = new SightDriver(
      { log, metrics: o.metrics, election: o.election, recheckLease: this.recheckLease },
      { watchSilenceThresholdMs: o.watchSilenceThresholdMs, blindStepDownMs: opts.blindStepDownMs ?? 0 },
      this.now(),
    );
    this.secondOpinion = o.secondOpinion
      ? new SecondOpinionDriver({
          clock: o.clock,
          log,
          metrics: o.metrics.secondOpinion,
          tracker: o.tracker,
          nodes: o.nodes.store,
          opinion: new SecondOpinion(o.secondOpinion.settings),
          leading: () => this.sightDriver.machine.isLeading,
          acting,
          reads,
          deadlinesMoved: () => this.armDeadlineTimer(),
          reconcile: (name) => this.runner.addUrgent(name),
          emit: (e) => void this.nodeReconciler.emit(e),
          ...(o.secondOpinion.probe ? { probe: o.secondOpinion.probe } : {}),
        })
      : undefined;
    this.nodeReconciler = new NodeReconciler({
      ...o,
      log,
      nodes: o.nodes.store,
      recheckLease: this.recheckLease,
      reads,
      blind: () => this.sightDriver.machine.blind,
      admissionRequested: () => this.zones.soon(),
      secondOpinion: this.secondOpinion,
    });
    this.zones = this.newZoneTicks(acting, stopped);
  }

  private newRunner(): ReconcileRunner<string> {
    const { clock, metrics } = this.o;
    return new ReconcileRunner<string>({
      scheduler: clock.scheduler,
      log: this.log,
      keyField: 'node',
      reconcile: (name) => this.nodeReconciler.reconcile(name),
      canAct: () => this.acting(),
      onWake: () => this.onDeadline(),
      onDone: (name) => this.passDone(name),
      workers: this.o.workers,
      ...(this.o.ordinaryWorkers !== undefined ? { ordinaryWorkers: this.o.ordinaryWorkers } : {}),
      metrics: {
        reconciles: metrics.reconciles,
        duration: metrics.updateNodeHealthDuration,
        queue: metrics.workqueue.forQueue(WORK_QUEUE_NAME, () => clock.scheduler.now()),
      },
      baseDelayMs: 50,
      maxDelayMs: 60_000,
      ticker: this.o.ticker,
    });
  }

  private newZoneTicks(acting: () => boolean, stopped: () => boolean): ZoneTicks {
    return new ZoneTicks({
      ...this.o,
      log: this.log,
      acting,
      stopped,
      admitted: (name) => this.runner.add(this.nodeReconciler.admit(name)),
      reconcileAll: () => this.reconcileAll(),
      freshGrace: (now) => {
        this.o.tracker.resetAll(now);
        this.armDeadlineTimer();
      },
      emit: (e) => void this.nodeReconciler.emit(outOfServiceHeld(e)),
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
    for (const r of [nodes, leases]) this.subs.push(r.health$.subscribe(() => this.evaluateSight()));
    // Time-based parts of sight (silence), and the safety net.
    this.runner.every(1000, () => {
      this.evaluateSight();
      this.secondOpinion?.tick();
    });
    this.runner.every(this.o.monitorPeriodMs, () => this.recheck('now'));
    this.runner.start();
  }

  /** Leadership changes from the elector. Becoming leader gives every node a fresh grace period. */
  setLeading(leading: boolean): void {
    if (this.sightDriver.setLeading(leading)) this.evaluateSight();
  }

  /**
   * Stops timers and workers and aborts the reads in flight; resolves when the workers are done.
   * A write on the wire is not aborted (it may land anyway): the caller waits for the writer.
   */
  async stop(): Promise<void> {
    if (this.runner.stopped) return;
    const workersDone = this.runner.stop();
    for (const s of this.subs.splice(0)) s.unsubscribe();
    this.zones.stop();
    this.reads.abort();
    await workersDone;
  }

  /** What the controller would say about itself (status view, probes, tests). */
  get sight(): {
    blind: BlindReason | undefined;
    leading: boolean;
    queued: number;
    /** The watches' own state, leadership aside: why they cannot be trusted, and since when. */
    watch: { reason: WatchBlindReason; since: number } | undefined;
  } {
    const m = this.sightDriver.machine;
    return { blind: m.blind, leading: m.isLeading, queued: this.runner.queued, watch: m.watch };
  }

  private acting(): boolean {
    return this.sightDriver.machine.blind === undefined;
  }

  private reconcileAll(): void {
    for (const name of this.o.nodes.store.keys()) this.runner.add(name);
  }

  // ---------------------------------------------------------------------------------------------
  // Observations

  /** A watch delivered a complete list: once both have, leases without a node are anomalies. */
  private listDone(which: 'nodes' | 'leases'): void {
    if (this.listed[which]) return;
    this.listed[which] = true;
    if (this.listed.nodes && this.listed.leases) this.anomalies.note(this.o.tracker.listsSynced());
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
      this.anomalies.note(r.anomalies);
      if (r.refreshed) this.nodeReconciler.renewed(r.name, ev.type === 'Apply');
      // A node reported due that renewed; or one whose marks only a renewal removes (companion mode:
      // no kubelet write tells it, and a restart does not report the nodes it had marked).
      const node = r.refreshed ? this.o.nodes.store.get(r.name) : undefined;
      // A recovered node's marks come off ahead of bookkeeping, as a lost node's go on.
      if (r.recovered) this.runner.addUrgent(r.name);
      else if (node && this.o.policy.renewalMatters(node)) this.runner.add(r.name);
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
      this.nodeReconciler.forget(name);
      this.nodeStates.set(name, undefined);
    } else {
      const r = this.o.tracker.observeNode(node, now);
      this.anomalies.note(r.anomalies);
      this.nodeReconciler.observed(node);
      if (r.refreshed) this.nodeReconciler.renewed(name, ev.type === 'Apply');
      // RegisteredNode only for nodes that appear while we watch (upstream also emits it for every
      // node it lists at start: 1,000 Events on each failover of a 1,000-node cluster).
      if (r.registered && ev.type === 'Apply' && this.acting()) this.nodeEvent('registered', node);
      observeZone(this.o.disruption, this.o.policy, node);
      this.nodeStates.set(name, node);
      this.o.onObservation?.('node', r);
      // Level-based: any node change may need taints or pods brought in line.
      this.runner.add(name);
      this.zones.soon();
    }
    this.armDeadlineTimer();
  }

  private nodeEvent(kind: 'registered' | 'removing', node: Node): void {
    const e = this.o.policy.nodeEvent(kind, node.metadata.name, node.metadata.uid);
    if (e) void this.nodeReconciler.emit(e);
  }

  /** Re-resolves every node's grace (pool config reloaded). */
  refreshGrace(): void {
    const now = this.now();
    for (const node of this.o.nodes.store.values()) this.o.tracker.observeNode(node, now);
    this.armDeadlineTimer();
    this.recheck();
  }

  // ---------------------------------------------------------------------------------------------
  // Sight: what a change of it means for the nodes (SightDriver carries out the rest).

  private evaluateSight(): void {
    if (this.runner.stopped) return;
    const now = this.now();
    const change = this.sightDriver.evaluate(now, this.o.nodes.health(), this.o.leases.health());
    if (change?.kind === 'blind') this.runner.cancelWake();
    else if (change?.kind === 'acting') this.actAgain(change, now);
  }

  private actAgain(c: Extract<SightChange, { kind: 'acting' }>, now: number): void {
    this.countTaintsInPlace(now);
    if (c.freshGrace) {
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
      this.o.tracker.extendBlind(c.leaseBlindMs, now);
    }
    this.reconcileAll();
    this.armDeadlineTimer();
    this.recheck();
  }

  /**
   * Before anything is admitted in this term: the NoExecute taints of ours on the nodes count
   * against the blast-radius cap and their zones' rates at their timeAdded. The leaders before us
   * (another replica, or this one before a blind spell) kept their grants and tokens in memory only.
   */
  private countTaintsInPlace(now: number): void {
    const taints = taintsInPlace(this.o.nodes.store.values(), this.o.policy);
    const r = this.o.disruption.seed(taints, now, this.o.clock.wall());
    if (r.capUsed > 0 || r.zonesWaiting > 0) {
      this.log.info('Counted the NoExecute taints in place against the cap and the zone rates', {
        taints: taints.length,
        capUsed: r.capUsed,
        zonesWaiting: r.zonesWaiting,
      });
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Deadlines: the runner's one timer for the earliest one.

  private armDeadlineTimer(): void {
    this.runner.wakeAt(this.o.tracker.nextDeadline());
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
    for (const name of this.o.tracker.popDue(now)) this.runner.addUrgent(name);
    this.armDeadlineTimer();
  }

  /**
   * Safety net: every timed-out node, found by a full pass. `zones`: 'now' runs the zone pass in
   * this turn (the periodic pass, already a turn of its own), 'soon' after the turn's other events.
   */
  private recheck(zones: 'now' | 'soon' = 'soon'): void {
    if (this.runner.stopped || !this.acting()) return;
    const now = this.now();
    const due = this.o.tracker.recheckAll(now);
    for (const name of due) this.runner.addUrgent(name);
    if (!this.pass) {
      if (due.length === 0) this.o.metrics.updateAllNodesHealthDuration.observe((this.now() - now) / 1000);
      else this.pass = { started: now, pending: new Set(due) };
    }
    this.armDeadlineTimer();
    if (zones === 'now') this.zones.now();
    else this.zones.soon();
  }

  /** A node the timed pass queued has been reconciled; the last one ends the pass. */
  private passDone(name: string): void {
    const p = this.pass;
    if (!p?.pending.delete(name) || p.pending.size > 0) return;
    this.pass = undefined;
    this.o.metrics.updateAllNodesHealthDuration.observe((this.now() - p.started) / 1000);
  }
}
