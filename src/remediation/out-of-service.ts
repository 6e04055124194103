import {
  applyTaintChanges,
  conditionTrue,
  findCondition,
  formatTime,
  hasTaintKey,
  isTaint,
  NodeLifecycleCondition,
  nodeConditions,
  rawTaints,
  readyStatus,
} from '../health/index.js';
import type { Node, Taint } from '../kube/types.js';

/**
 * PURE: the out-of-service taint (non-graceful node shutdown, KEP-2268) for a node known to be
 * down. With it, kube-controller-manager's pod garbage collector force-deletes the node's
 * terminating pods and the attach-detach controller detaches their volumes at once, instead of
 * after its 6-minute wait. Applied only to a node this controller marked lost, whose lease is
 * silent AND for which a fence signal says the machine is down, once that has held for a delay;
 * never on lease silence alone (a partitioned node may still run its pods and write its disks).
 * Removed once the node is back, and only if we put it there: it renews and is Ready again, or we
 * saw it renew and no signal says it is down any more (a node whose Ready waits for a DaemonSet
 * pod that does not tolerate the taint, e.g. its CNI agent, never says Ready while it is on).
 */

/** The taint (its key, value and effect are the ones the Kubernetes documentation gives). */
export const OUT_OF_SERVICE_TAINT: Readonly<Taint> = Object.freeze({
  key: 'node.kubernetes.io/out-of-service',
  value: 'nodeshutdown',
  effect: 'NoExecute',
});

/** The cloud provider's taint on a node whose instance is shut down (cloud-controller-manager). */
export const CLOUD_SHUTDOWN_TAINT_KEY = 'node.cloudprovider.kubernetes.io/shutdown';

/**
 * An operator's or a fencing agent's word that the machine is powered off or isolated from its
 * storage: the annotation with the value `true` (any other value is not a fence).
 */
export const FENCED_ANNOTATION = 'node-lifecycle-controller.io/fenced';

/**
 * Set with the taint: the signal that allowed it. Tells our taint from one an operator put there
 * (which we never remove).
 */
export const APPLIED_ANNOTATION = 'node-lifecycle-controller.io/out-of-service';

/**
 * What the kubelet's graceful node shutdown manager puts in the Ready condition (False) while the
 * machine shuts down; the condition's message joins it with any other error.
 */
export const KUBELET_SHUTDOWN_MESSAGE = 'node is shutting down';

export const FENCE_SIGNALS = ['cloud-shutdown-taint', 'kubelet-shutdown', 'fence-annotation'] as const;
export type FenceSignal = (typeof FENCE_SIGNALS)[number];

/** --out-of-service-*: which signals are trusted, and how long a fenced node waits. */
export interface OutOfServiceSettings {
  signals: readonly FenceSignal[];
  /** How long a node must have been marked, silent and fenced (our clock) before the taint. */
  afterMs: number;
  /**
   * --out-of-service=dry-run: every decision made, logged and counted, nothing written and no zone
   * token taken (a live install's NoExecute taints share those tokens).
   */
  dryRun?: boolean;
}

/**
 * What the wiring knows about one copy of a node (the one a decision was made on, or a fresher one
 * read after a wait or a 409).
 */
export interface OutOfServiceCheck {
  node: Node;
  /** This controller marked it lost (the policy's mark is on the node). */
  marked: boolean;
  /** Its lease is past its grace now, on our clock. */
  silent: boolean;
  /** Why we do not act (blind, not leading), or undefined: we act. */
  blind: string | undefined;
  /**
   * A second opinion (--second-opinion=kubelet) heard its kubelet answer in this silence: the
   * machine is up, so it vetoes the taint whatever the signals say.
   */
  kubeletAnswers?: boolean;
}

/** What the wiring knows about one node when it asks for a decision. */
export interface OutOfServiceFacts extends OutOfServiceCheck {
  /** The zone pass admitted this node's taint (zone rates, blast-radius cap, master disruption). */
  admitted: boolean;
  /** Our wall clock (ms): the taint's timeAdded. */
  wallNow: number;
}

export type OutOfServiceDecision =
  /**
   * Nothing to do; `why` when a fenced node is held (blind, not leading) or a request dropped
   * (`cancel`: the fence signal is gone, or the node is back).
   */
  | { kind: 'none'; why?: string; cancel?: boolean }
  /** Fenced, the delay not over: look again in `inMs`. */
  | { kind: 'wait'; signal: FenceSignal; inMs: number }
  /** Delay over: ask the zone pass for an admission. */
  | { kind: 'request'; signal: FenceSignal }
  /** Admitted: write `taints` and the annotation naming the signal. */
  | { kind: 'apply'; signal: FenceSignal; patch: Record<string, unknown> | undefined }
  /** Back (see `back`): our taint and the fence annotation come off. */
  | { kind: 'remove'; patch: Record<string, unknown>; ours: boolean };

/**
 * The patch that adds the taint to this copy of the node (every other taint kept) with the
 * annotation naming the signal, or undefined: it carries the taint already. The taint's timeAdded
 * is `wallNow` (as our NoExecute taints'): a replica that starts leading counts it against the
 * blast-radius cap and its zone's rate from then.
 */
export function outOfServicePatch(
  node: Node,
  signal: FenceSignal,
  wallNow: number,
): Record<string, unknown> | undefined {
  if (hasTaintKey(node, OUT_OF_SERVICE_TAINT.key)) return undefined;
  const taint: Taint = { ...OUT_OF_SERVICE_TAINT, timeAdded: formatTime(wallNow) };
  const taints = applyTaintChanges(rawTaints(node), [taint], []);
  return { metadata: { annotations: { [APPLIED_ANNOTATION]: signal } }, spec: { taints } };
}

/** This copy of the node carries our out-of-service taint (the taint, and the annotation that says it is ours). */
export function carriesOurTaint(node: Node): boolean {
  return (
    hasTaintKey(node, OUT_OF_SERVICE_TAINT.key) &&
    node.metadata.annotations?.[APPLIED_ANNOTATION] !== undefined
  );
}

/**
 * The timeAdded of our out-of-service taint on this copy of the node, as written; undefined when it
 * carries none of ours (or one we wrote before we dated it).
 */
export function ourTaintAddedAt(node: Node): string | undefined {
  if (!carriesOurTaint(node)) return undefined;
  const t = rawTaints(node).find((x) => isTaint(x) && x.key === OUT_OF_SERVICE_TAINT.key) as Taint;
  return typeof t.timeAdded === 'string' ? t.timeAdded : undefined;
}

/**
 * This copy of the node announces a shutdown: the kubelet's Ready=False with its message, or
 * KEP-5683's GracefulNodeShutdownInProgress=True (the same fact, as its own condition).
 */
export function announcesShutdown(node: Node): boolean {
  const ready = findCondition(nodeConditions(node), 'Ready');
  if (ready?.status === 'False' && (ready.message ?? '').includes(KUBELET_SHUTDOWN_MESSAGE)) return true;
  return conditionTrue(node, NodeLifecycleCondition.GracefulNodeShutdownInProgress);
}

/**
 * The decision core: keeps, per node, whether the kubelet announced a shutdown before it went
 * silent (our own mark overwrites Ready in upstream mode, so the announcement must be remembered
 * from the watch) and since when it has been fenced. Time comes in as `now` (monotonic ms).
 */
export class OutOfServiceCore {
  /** Nodes whose kubelet announced a shutdown and has not been Ready since. */
  private readonly announced = new Set<string>();
  /** Nodes marked, silent and fenced: since when (our clock). */
  private readonly fencedSince = new Map<string, number>();
  /** Nodes we saw renew (a change on the watch, not a list) since a decision last found them silent. */
  private readonly renewals = new Set<string>();

  constructor(private readonly s: OutOfServiceSettings) {}

  /**
   * Every copy of a node the watch delivers: a shutdown announcement is kept until the kubelet posts
   * a Ready condition without it (True, or False for another reason: it runs again). Unknown is a
   * node-lifecycle controller's mark, ours included, and keeps it.
   */
  observe(node: Node): void {
    const name = node.metadata.name;
    const ready = readyStatus(node);
    if (announcesShutdown(node)) this.announced.add(name);
    else if (ready === 'True' || ready === 'False') this.announced.delete(name);
  }

  /**
   * We saw the node renew (its lease or its heartbeat changed on the watch, or on a fresh read):
   * a list at start (or a relist) is no renewal, so a dead node is not taken for one back.
   */
  renewed(name: string): void {
    this.renewals.add(name);
  }

  forget(name: string): void {
    this.announced.delete(name);
    this.fencedSince.delete(name);
    this.renewals.delete(name);
  }

  /** The first trusted signal that says this node is down, or undefined. */
  signal(node: Node): FenceSignal | undefined {
    for (const s of this.s.signals) {
      if (s === 'cloud-shutdown-taint' && hasTaintKey(node, CLOUD_SHUTDOWN_TAINT_KEY)) return s;
      if (s === 'fence-annotation' && node.metadata.annotations?.[FENCED_ANNOTATION] === 'true') return s;
      if (s === 'kubelet-shutdown' && (this.announced.has(node.metadata.name) || announcesShutdown(node)))
        return s;
    }
    return undefined;
  }

  decide(f: OutOfServiceFacts, now: number): OutOfServiceDecision {
    // Blind or not leading: nothing is decided, no delay starts (the runner does not even ask).
    if (f.blind !== undefined) return { kind: 'none', why: f.blind };
    const name = f.node.metadata.name;
    const tainted = hasTaintKey(f.node, OUT_OF_SERVICE_TAINT.key);
    if (f.silent) this.renewals.delete(name);
    if (this.back(f)) {
      // Back before the taint went on: a request made (or an admission held) is dropped.
      const had = this.fencedSince.delete(name);
      const d = this.removal(f.node, tainted);
      return d.kind === 'none' && had ? { kind: 'none', why: 'node back', cancel: true } : d;
    }
    const signal = this.warranted(f);
    if (signal === undefined) {
      // Lease silence alone, or not our mark: never. A request already made is dropped.
      const had = this.fencedSince.delete(name);
      const why = f.kubeletAnswers === true ? 'its kubelet answers (second opinion)' : 'fence signal gone';
      return had ? { kind: 'none', why, cancel: true } : { kind: 'none' };
    }
    if (tainted) return { kind: 'none' };
    const since = this.fencedSince.get(name) ?? now;
    this.fencedSince.set(name, since);
    const left = since + this.s.afterMs - now;
    if (left > 0) return { kind: 'wait', signal, inMs: left };
    if (!f.admitted) return { kind: 'request', signal };
    return { kind: 'apply', signal, patch: outOfServicePatch(f.node, signal, f.wallNow) };
  }

  /**
   * The question that decides the taint, asked the same way on every copy of the node: the one the
   * decision was made on, and any fresher one after a wait or a 409 (its heartbeat observed first,
   * so a kubelet back is no longer silent). We act, we marked it lost (upstream: Ready Unknown, so
   * not Ready), its lease is silent on our clock, and a trusted signal says it is down: that signal,
   * else undefined. (Ready as the copy shows it is no test of its own: a dry run never writes the
   * mark, and a dead kubelet's last Ready=True stays on the node.)
   */
  warranted(f: OutOfServiceCheck): FenceSignal | undefined {
    if (f.blind !== undefined || !f.marked || !f.silent || f.kubeletAnswers === true) return undefined;
    return this.signal(f.node);
  }

  /**
   * The node is back (the question that removes our taint): we act, its lease is not silent on our
   * clock, and its kubelet says Ready, or we saw it renew since it was last found silent and no
   * trusted signal says it is down any more (its Ready may wait for a pod the taint keeps off).
   */
  back(f: OutOfServiceCheck): boolean {
    if (f.blind !== undefined || f.silent) return false;
    if (readyStatus(f.node) === 'True') return true;
    return this.renewals.has(f.node.metadata.name) && this.signal(f.node) === undefined;
  }

  /**
   * The removal's patch for this copy of the node (the one decided on, or a fresher one after a
   * 409), asked the question that decided it: undefined when the node is not back on it, or
   * nothing of ours is left on it.
   */
  removalPatch(f: OutOfServiceCheck): Record<string, unknown> | undefined {
    if (!this.back(f)) return undefined;
    const d = this.removal(f.node, hasTaintKey(f.node, OUT_OF_SERVICE_TAINT.key));
    return d.kind === 'remove' ? d.patch : undefined;
  }

  /**
   * Back: our taint comes off, with the annotation that says it was ours and the fence
   * annotation (a fence is about one outage). A node we never tainted is left as it is: an agent may
   * annotate a machine it is about to fence before its lease runs out.
   */
  private removal(node: Node, tainted: boolean): OutOfServiceDecision {
    const annotations = node.metadata.annotations ?? {};
    if (annotations[APPLIED_ANNOTATION] === undefined) return { kind: 'none' };
    const fence = annotations[FENCED_ANNOTATION] !== undefined;
    const patch: Record<string, unknown> = {
      metadata: {
        annotations: { [APPLIED_ANNOTATION]: null, ...(fence ? { [FENCED_ANNOTATION]: null } : {}) },
      },
    };
    if (tainted) {
      const taints = rawTaints(node).filter((t) => !(isTaint(t) && t.key === OUT_OF_SERVICE_TAINT.key));
      patch.spec = { taints };
    }
    return { kind: 'remove', patch, ours: tainted };
  }
}
