import type { ApiWriter, StillWanted, WriteOutcome } from '../apply/writer.js';
import type { Clock } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import { type DisruptionController, isExcludedFromDisruption, zoneKeyOf } from '../disruption/index.js';
import { type EventRecord, type NodeHealthTracker, underMaintenance } from '../health/index.js';
import type { KubeClient } from '../kube/client.js';
import type { Node } from '../kube/types.js';
import type { Logger } from '../log/logger.js';
import type { MarkingPolicy, NodeView, StatusWrite } from '../policy/index.js';
import type { OutOfServiceSettings } from '../remediation/index.js';
import type { Store } from '../watch/index.js';
import type { LeaseRecheck } from './lease-recheck.js';
import type { ControllerMetrics } from './metrics.js';
import { OUT_OF_SERVICE_QUEUE_PREFIX, OutOfServiceStep } from './out-of-service.js';
import { NOT_ACTING, PodStep } from './pods.js';
import { RecentWrites } from './recent-writes.js';
import { TaintStep } from './taints.js';

/**
 * How long a node our write returned may stand in for the watch cache's older copy. The cache
 * normally shows the write within milliseconds; this only bounds an entry the cache never catches
 * up with (a resourceVersion that went backwards, e.g. after an etcd restore).
 */
const RECENT_WRITE_TTL_MS = 60_000;

/** Sends a health Event (on a Node or a Pod) through the writer. */
export async function emitEvent(writer: ApiWriter, e: EventRecord): Promise<void> {
  const ref = e.involvedObject;
  await writer.event({
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

/** The earliest of the steps' requeue delays (undefined: none wants one). */
function earliest(...due: (number | undefined)[]): number | undefined {
  const set = due.filter((d): d is number => d !== undefined);
  return set.length === 0 ? undefined : Math.min(...set);
}

/** Counts the node in its zone as the policy judges it (ready or not). */
export function observeZone(disruption: DisruptionController, policy: MarkingPolicy, node: Node): void {
  disruption.observe({
    name: node.metadata.name,
    zone: zoneKeyOf(node.metadata.labels),
    ready: policy.zoneReady(node),
    // A node taken out of service on purpose (KEP-5683's maintenance and drain conditions) does not
    // count in its zone: its silence is planned, not the zone failing.
    excluded: isExcludedFromDisruption(node.metadata.labels) || underMaintenance(node),
  });
}

export interface NodeReconcilerOptions {
  clock: Clock;
  log: Logger;
  metrics: ControllerMetrics;
  client: KubeClient;
  writer: ApiWriter;
  tracker: NodeHealthTracker;
  disruption: DisruptionController;
  policy: MarkingPolicy;
  /** The node watch's store. */
  nodes: Store<Node>;
  recheckLease: LeaseRecheck;
  /** Aborted on stop: a pod list in flight ends at once. */
  reads: AbortSignal;
  podRecheckMs: number;
  podRecheckMaxMs: number;
  /** Why we do not act now (undefined: we act). */
  blind: () => string | undefined;
  /** A NoExecute admission was requested: the zone pass should run soon. */
  admissionRequested: () => void;
  /** --out-of-service: the taint for a node known to be down (absent: off). */
  outOfService?: OutOfServiceSettings | undefined;
  /** --second-opinion: what the node's kubelet probes say (absent: off). */
  secondOpinion?: SecondOpinionView | undefined;
}

/** What the reconciler asks of the second opinion (src/controller/second-opinion.ts). */
export interface SecondOpinionView {
  /** How long more the node's NoExecute is held (ms), or undefined: not held. */
  heldFor(name: string, now: number): number | undefined;
  /** Its kubelet answered its newest probe in this silence (vetoes the out-of-service taint). */
  answers(name: string, now: number): boolean;
  /** What confirmed the node down before its grace, for the Ready message (undefined: not). */
  confirmedNote(name: string, now: number): string | undefined;
  forget(name: string): void;
}

/**
 * The reconcile of one node, as the policy says: its status when its deadline passed (confirmed
 * against the API server first) or it renewed, its taints (TaintStep), its pods (PodStep). Keeps
 * what it needs per node: the nodes our writes returned, dry-run marks, when a node entered its
 * rate-limited step.
 */
export class NodeReconciler {
  /** Nodes as our last write returned them, until the watch cache shows that version or newer. */
  private readonly writtenNodes = new RecentWrites<Node>(RECENT_WRITE_TTL_MS);
  private readonly dryRunMarked = new Set<string>();
  /** Nodes in their rate-limited step (companion: evicting) since when, on our clock. */
  private readonly stepSince = new Map<string, number>();
  /**
   * Nodes flipped from Ready while a second opinion held them (their kubelet answers): their pods
   * are looked at as flipped once the hold ends (--mark-pods-not-ready=upstream marks only then).
   */
  private readonly flippedWhileHeld = new Set<string>();
  private readonly pods: PodStep;
  private readonly taints: TaintStep;
  private readonly outOfService: OutOfServiceStep | undefined;

  constructor(private readonly o: NodeReconcilerOptions) {
    this.pods = new PodStep({ ...o, emit: (e) => this.emit(e) });
    this.outOfService = o.outOfService
      ? new OutOfServiceStep({
          ...o,
          settings: o.outOfService,
          silent: (name) => o.tracker.isTimedOut(name, this.now()),
          ...(o.secondOpinion
            ? { kubeletAnswers: (name: string) => o.secondOpinion!.answers(name, this.now()) }
            : {}),
          dryRunMarked: (name) => this.dryRunMarked.has(name),
          observeFresh: (node) => this.observeFresh(node),
          written: (name, node) => this.writtenNodes.remember(name, node, this.now()),
          emit: (e) => this.emit(e),
        })
      : undefined;
    this.taints = new TaintStep({
      ...o,
      writtenNodes: this.writtenNodes,
      view: (name, now) => this.view(name, now),
      observeFresh: (node) => this.observeFresh(node),
    });
  }

  private now(): number {
    return this.o.clock.scheduler.now();
  }

  emit(e: EventRecord): Promise<void> {
    return emitEvent(this.o.writer, e);
  }

  /**
   * The zone pass admitted this node's rate-limited step (its taint write settles it), or its
   * out-of-service taint. Returns the node to reconcile.
   */
  admit(name: string): string {
    if (!name.startsWith(OUT_OF_SERVICE_QUEUE_PREFIX)) {
      this.taints.admit(name);
      return name;
    }
    const node = name.slice(OUT_OF_SERVICE_QUEUE_PREFIX.length);
    this.outOfService?.admit(node);
    return node;
  }

  /** Every copy of a node the watch delivers. */
  observed(node: Node): void {
    this.outOfService?.observe(node);
  }

  /** A copy of the node read after a 409, newer than the watch's: its heartbeat counts as the watch's would. */
  private observeFresh(node: Node): void {
    if (this.o.tracker.observeNode(node, this.now()).refreshed) this.renewed(node.metadata.name, true);
  }

  /**
   * The node renewed (a lease or a heartbeat): a dry-run mark no longer stands. `seen`: a change we
   * saw (a watch event, a fresh read), not the first sight of it in a list.
   */
  renewed(name: string, seen: boolean): void {
    this.dryRunMarked.delete(name);
    this.flippedWhileHeld.delete(name);
    if (seen) this.outOfService?.renewed(name);
  }

  /** The node was deleted. */
  forget(name: string): void {
    this.taints.forget(name);
    this.pods.forget(name);
    this.outOfService?.forget(name);
    this.stepSince.delete(name);
    this.dryRunMarked.delete(name);
    this.flippedWhileHeld.delete(name);
    this.writtenNodes.forget(name);
    this.o.secondOpinion?.forget(name);
  }

  private acting(): boolean {
    return this.o.blind() === undefined;
  }

  /**
   * Brings one node in line (while we act: the runner's gate): status, taints, pods. Returns a
   * requeue delay, or undefined. Throws to be retried.
   */
  async reconcile(name: string): Promise<number | undefined> {
    const cached = this.writtenNodes.current(name, this.o.nodes.get(name), this.now());
    if (!cached) return undefined;
    // 1. Status: a lost node marked, a renewed one cleared.
    const status = await this.status(name, cached);
    if (!status) return undefined;
    const { node, flipped } = status;

    // 2. Taints: a write that adds NoExecute to a node lost now, or to one our mark of a lost node
    // is on (its unreachable taint), needs it lost on our clock after its waits: a node whose lease
    // renewed since (even during our own mark's write) is not tainted for it.
    const lost = this.o.tracker.isTimedOut(name, this.now()) || this.o.policy.markedLost(node);
    const taintsDue = await this.taints.run(name, node, (addsNoExecute) =>
      this.stillWanted(name, lost && addsNoExecute)(),
    );
    if (taintsDue === 'fenced') return undefined;
    const oosDue = await this.outOfService?.run(
      name,
      this.writtenNodes.current(name, this.o.nodes.get(name), this.now()) ?? node,
    );
    if (oosDue === 'fenced') return undefined;

    // 3. Pods. A node our mark of a lost node is on that is not lost on our clock (a fresh grace
    // since we started acting, or a renewal since the mark) waits until it is: its pods are looked
    // at then (at its deadline), not listed now only to be withdrawn.
    if (this.o.policy.markedLost(node) && !this.o.tracker.isTimedOut(name, this.now())) {
      const deadline = this.o.tracker.health(name)?.deadline;
      return earliest(
        taintsDue,
        oosDue,
        deadline === undefined ? undefined : Math.max(1, deadline - this.now()),
      );
    }
    // Its kubelet still answers (a second opinion holds it): its pods are left as they are, serving
    // behind their Services, until the hold ends (two failed probes, or --cut-off-hold).
    const heldMs = this.view(name, this.now()).heldMs;
    if (heldMs !== undefined) {
      if (flipped) this.flippedWhileHeld.add(name);
      return earliest(taintsDue, oosDue, heldMs);
    }
    const flippedBefore = this.flippedWhileHeld.delete(name);
    // How long the node has been in its rate-limited step (companion: evicting), on our clock.
    const since = this.o.policy.inRateLimitedStep(node)
      ? (this.stepSince.get(name) ?? this.now())
      : undefined;
    if (since === undefined) this.stepSince.delete(name);
    else this.stepSince.set(name, since);
    const podsDue = await this.pods.run(
      name,
      node,
      flipped || flippedBefore,
      {
        master: this.o.disruption.masterDisruptionActive,
        ...(since !== undefined ? { evictingForMs: this.now() - since } : {}),
      },
      this.podsStillWanted(name, node),
    );
    return earliest(taintsDue, oosDue, podsDue);
  }

  /**
   * Step 1: the node's status as the policy wants it. Returns the node as it is now (after our
   * write) and whether we flipped it from Ready, or undefined: nothing more to do for it now.
   */
  private async status(name: string, node: Node): Promise<{ node: Node; flipped: boolean } | undefined> {
    const { tracker, writer, policy } = this.o;
    const write = policy.status(node, this.view(name, this.now()), this.o.clock.wall());
    if (!write) return { node, flipped: false };
    if (write.kind === 'lost' && !(await this.o.recheckLease.confirmStale(name))) return undefined;
    if (!this.acting()) return undefined;
    const deadline = write.kind === 'lost' ? tracker.health(name)?.deadline : undefined;
    const out = await writer.patchNodeStatus(
      name,
      node,
      (current) => {
        if (current === node) return write.patch;
        // Someone changed the node since our copy: judge it again from the fresh object.
        const t = this.now();
        this.observeFresh(current);
        const again = policy.status(current, this.view(name, t), this.o.clock.wall());
        return again?.kind === write.kind ? again.patch : undefined;
      },
      this.stillWanted(name, write.kind === 'lost'),
    );
    if (this.failedWrite(out) || out.kind === 'withdrawn' || out.kind === 'gone') return undefined;
    if (out.kind === 'applied' || out.kind === 'dry-run') return this.written(name, write, out, deadline);
    // Unchanged: the fresh copy showed a heartbeat, nothing to mark.
    return {
      node: this.writtenNodes.current(name, this.o.nodes.get(name), this.now()) ?? node,
      flipped: false,
    };
  }

  /** A status write applied (or, dry-run, decided): counted, logged, its Events sent. */
  private written(
    name: string,
    write: StatusWrite,
    out: Extract<WriteOutcome, { kind: 'applied' | 'dry-run' }>,
    deadline: number | undefined,
  ): { node: Node; flipped: boolean } {
    const { tracker, metrics } = this.o;
    const now = this.now();
    if (write.unknown) tracker.noteMarkedUnknown(write.unknown, now);
    metrics.transitions.inc({ kind: write.transition });
    if (deadline !== undefined) metrics.detectionLatency.observe(Math.max(0, now - deadline) / 1000);
    this.o.log.info(out.kind === 'dry-run' ? write.said.dryRun : write.said.applied, {
      node: name,
      readyBefore: write.readyBefore,
      afterDeadline: deadline === undefined ? undefined : formatDuration(Math.round(now - deadline)),
    });
    for (const e of write.events) void this.emit(e);
    if (out.kind === 'dry-run' && write.kind === 'lost') this.dryRunMarked.add(name);
    if (out.kind === 'applied') this.writtenNodes.remember(name, out.object as Node | undefined, now);
    const node = out.kind === 'applied' && out.object ? (out.object as Node) : write.after;
    // Count it in its zone now, before our own taint request can spend a token: a mass
    // failure must change the zone state first (the watch echo of our write comes later).
    if (out.kind === 'applied') observeZone(this.o.disruption, this.o.policy, node);
    return { node, flipped: write.flippedFromTrue };
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
      const blind = this.o.blind();
      if (blind !== undefined) return `${NOT_ACTING} (${blind})`;
      if (lost && !this.o.tracker.isTimedOut(name, this.now())) return 'node renewed';
      return undefined;
    };
  }

  /**
   * As stillWanted, and the node, if it changed since `decided`, still wants its pods looked at. A
   * node lost now, or one our mark of a lost node is on, needs to be lost on our clock when its pods
   * are marked: one whose lease renewed since is not judged by a mark its kubelet has not replaced
   * yet.
   */
  private podsStillWanted(name: string, decided: Node): StillWanted {
    const lost = this.o.tracker.isTimedOut(name, this.now()) || this.o.policy.markedLost(decided);
    const base = this.stillWanted(name, lost);
    return () => {
      const why = base();
      if (why !== undefined) return why;
      if (this.view(name, this.now()).heldMs !== undefined) return 'its kubelet still answers (pods held)';
      const node = this.writtenNodes.current(name, this.o.nodes.get(name), this.now());
      if (!node) return 'node deleted';
      if (node.metadata.resourceVersion === decided.metadata.resourceVersion) return undefined;
      return this.o.policy.podsWanted(node, false, true)
        ? undefined
        : 'node no longer wants its pods looked at';
    };
  }

  /** The tracker's view of one node at `now`, for the policy. */
  view(name: string, now: number): NodeView {
    const h = this.o.tracker.health(name);
    const timedOut = this.o.tracker.isTimedOut(name, now) && !this.dryRunMarked.has(name);
    const second = this.o.secondOpinion;
    const heldMs = timedOut ? second?.heldFor(name, now) : undefined;
    const confirmedDown = timedOut ? second?.confirmedNote(name, now) : undefined;
    return {
      timedOut,
      lastRenewal: h?.lastSeenRenewTime ?? h?.lastSeenReadyHeartbeat,
      graceMs: h?.graceMs ?? 0,
      overdueMs: timedOut && h?.deadline !== undefined ? now - h.deadline : undefined,
      ...(heldMs !== undefined ? { heldMs } : {}),
      ...(confirmedDown !== undefined ? { confirmedDown } : {}),
    };
  }
}
