import type { ApiWriter } from '../apply/writer.js';
import type { Clock } from '../clock/clock.js';
import { type DisruptionController, zoneKeyOf } from '../disruption/index.js';
import { taintsPatch } from '../health/index.js';
import type { Node, Taint } from '../kube/types.js';
import type { Logger } from '../log/logger.js';
import type { MarkingPolicy, NodeView } from '../policy/index.js';
import type { ControllerMetrics } from './metrics.js';
import type { RecentWrites } from './recent-writes.js';

/** Whether `taints` has a NoExecute taint (by key) that `node` does not carry. */
function introducesNoExecute(node: Node, taints: readonly Taint[] | undefined): boolean {
  if (!taints) return false;
  const carried = new Set(
    (node.spec?.taints ?? []).filter((t) => t.effect === 'NoExecute').map((t) => t.key),
  );
  return taints.some((t) => t.effect === 'NoExecute' && !carried.has(t.key));
}

export interface TaintStepOptions {
  clock: Clock;
  log: Logger;
  metrics: ControllerMetrics;
  writer: ApiWriter;
  policy: MarkingPolicy;
  disruption: DisruptionController;
  /** Nodes as our last write returned them (a taint write's answer is remembered there). */
  writtenNodes: RecentWrites<Node>;
  /** The tracker's view of one node, for the policy. */
  view: (name: string, now: number) => NodeView;
  /** A NoExecute admission was requested: the zone pass should run soon. */
  admissionRequested: () => void;
  /** A copy of the node read after a 409 (newer than the watch's): observed as the watch's is. */
  observeFresh: (node: Node) => void;
}

/**
 * A node's taints brought in line with the policy, and the zone rate limiter's side of it: a node
 * the policy wants in its rate-limited step (upstream: NoExecute) asks for an admission, and a
 * node admitted by the zone pass (`admit`) has that admission settled by its next taint write.
 */
/**
 * The longest an admission waits for its node's run to use it (normally milliseconds; a run held
 * back by a blind spell waits longer): then it is given back and asked for again.
 */
export const ADMISSION_TTL_MS = 20_000;

export class TaintStep {
  /** Nodes the zone pass admitted whose taint write has not run yet, and when (our clock). */
  private readonly admitted = new Map<string, number>();
  /**
   * Nodes the policy wants in their rate-limited step (upstream: NoExecute), until it asks for it
   * no more (the step is on, or not wanted: 'cancel'): their last renewal as we saw it when the
   * step was last asked for. One seen renewed since (while it waited for its zone's token or its
   * write's) is not lost on our clock: until it is again, it is not asked for (a pending ask is
   * dropped) and its write is withdrawn.
   */
  private readonly wanted = new Map<string, string | null | undefined>();

  constructor(private readonly o: TaintStepOptions) {}

  private now(): number {
    return this.o.clock.scheduler.now();
  }

  /** The zone pass admitted this node's rate-limited step. */
  admit(name: string): void {
    this.admitted.set(name, this.now());
  }

  forget(name: string): void {
    this.admitted.delete(name);
    this.wanted.delete(name);
  }

  /** The node renewed since its rate-limited step was asked for, and is not lost again since. */
  private renewedSince(name: string, view: NodeView): boolean {
    return this.wanted.has(name) && this.wanted.get(name) !== view.lastRenewal && !view.timedOut;
  }

  /** Why a write adding the rate-limited step is no longer wanted (asked after its waits). */
  private renewedSinceWanted(name: string): string | undefined {
    const view = this.o.view(name, this.now());
    if (view.heldMs !== undefined) return 'its kubelet still answers (NoExecute held)';
    return this.renewedSince(name, view) ? 'node renewed since its NoExecute taint was asked for' : undefined;
  }

  /** The policy asks for the rate-limited step: asked of the zone, unless the node renewed since. */
  private request(name: string, node: Node, view: NodeView): void {
    if (this.renewedSince(name, view)) {
      this.o.disruption.cancel(name);
      return;
    }
    this.wanted.set(name, view.lastRenewal);
    this.o.disruption.requestNoExecute(name, zoneKeyOf(node.metadata.labels), this.now());
    this.o.admissionRequested();
  }

  /**
   * Returns 'fenced', or when the rate-limited step comes due (ms). `stillWanted` is asked after
   * every wait of the write, each attempt's decision in hand: whether it adds the rate-limited
   * step (NoExecute), which also needs the node still lost (not renewed since); every taint write
   * needs us still acting. A write that adds the step is also withdrawn if the node renewed since
   * the step was asked for and is not lost again (e.g. while it waited for its zone's token).
   */
  async run(
    name: string,
    node: Node,
    stillWanted?: (addsNoExecute: boolean) => string | undefined,
  ): Promise<'fenced' | number | undefined> {
    const { disruption, writer, policy } = this.o;
    // An admission that arrives while this reconcile is in flight belongs to the next run (the
    // queue re-runs a key added during processing): decide and settle only with what we had now.
    let admittedAt = this.admitted.get(name);
    if (admittedAt !== undefined && this.now() - admittedAt > ADMISSION_TTL_MS) {
      // An admission is for a write now: one this node's run could not use in time (a blind spell
      // held the run back) goes back to its zone (its cap slot refunded, the request queued again)
      // and the taint waits for a fresh token, as upstream takes one only as it writes.
      this.admitted.delete(name);
      disruption.settle(name, 'failed', this.now());
      admittedAt = undefined;
    }
    const ctx = {
      view: this.o.view(name, this.now()),
      admitted: admittedAt !== undefined,
      master: disruption.masterDisruptionActive,
    };
    // An admitted NoExecute taint is dated when its zone admitted it (its token, its cap slot), not
    // when its write got through: a new leader counts it from then (seed), and so can an observer.
    const wall = () =>
      this.o.clock.wall() - (admittedAt === undefined ? 0 : Math.max(0, this.now() - admittedAt));
    const first = policy.taints(node, wall(), ctx);
    if (first.admission === 'request') this.request(name, node, ctx.view);
    else if (first.admission === 'cancel') {
      this.wanted.delete(name);
      disruption.cancel(name);
    }
    if (!first.taints) {
      if (ctx.admitted && this.admitted.delete(name)) disruption.settle(name, 'dropped', this.now());
      return first.recheckInMs;
    }
    let added = false;
    // A NoExecute taint the node does not carry yet, new or a swap of one for the other (a swap to
    // unreachable is a judgement that the node is lost, written at once): it needs the node lost.
    let introduces = false;
    const before = node.spec?.taints ?? [];
    const out = await writer.patchNode(
      name,
      node,
      (current) => {
        // A copy read after a 409 is newer than the watch's: what it shows (a heartbeat) counts
        // before it is judged, and before the steps after this one ask whether the node is lost.
        if (current !== node) this.o.observeFresh(current);
        const t =
          current === node
            ? first
            : policy.taints(current, wall(), { ...ctx, view: this.o.view(name, this.now()) });
        added = t.addsNoExecute;
        introduces = added || introducesNoExecute(current, t.taints);
        return t.taints ? (taintsPatch(t.taints) as unknown as Record<string, unknown>) : undefined;
      },
      // Asked after this attempt's mutate (the writer's contract): `added` is this attempt's.
      () => stillWanted?.(introduces) ?? (added ? this.renewedSinceWanted(name) : undefined),
    );
    if (ctx.admitted && this.admitted.delete(name)) {
      const ok = (out.kind === 'applied' || out.kind === 'dry-run') && added;
      disruption.settle(name, ok ? 'applied' : out.kind === 'failed' ? 'failed' : 'dropped', this.now());
    }
    if (out.kind === 'applied')
      this.o.writtenNodes.remember(name, out.object as Node | undefined, this.now());
    if (out.kind === 'applied' || out.kind === 'dry-run') {
      const after =
        out.kind === 'applied' ? ((out.object as Node | undefined)?.spec?.taints ?? []) : first.taints;
      this.countChanges(name, before, after, out.kind === 'dry-run');
    }
    if (out.kind === 'fenced') return 'fenced';
    if (out.kind === 'failed') throw out.error;
    return first.recheckInMs;
  }

  private countChanges(
    name: string,
    before: readonly Taint[],
    after: readonly Taint[],
    dryRun: boolean,
  ): void {
    const key = (t: Taint) => `${t.key}:${t.effect}`;
    const had = new Set(before.map(key));
    const has = new Set(after.map(key));
    for (const t of after) {
      if (had.has(key(t))) continue;
      this.o.metrics.transitions.inc({
        kind: t.effect === 'NoExecute' ? 'noexecute_taint_added' : 'noschedule_taint_added',
      });
      this.o.log.info(dryRun ? 'Dry run: would add taint' : 'Added taint', { node: name, taint: key(t) });
    }
    for (const t of before) {
      if (has.has(key(t))) continue;
      this.o.metrics.transitions.inc({ kind: 'taint_removed' });
      this.o.log.info(dryRun ? 'Dry run: would remove taint' : 'Removed taint', {
        node: name,
        taint: key(t),
      });
    }
  }
}
