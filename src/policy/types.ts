import type { ReadyStatus } from '../disruption/index.js';
import type {
  EventRecord,
  NodeStatusDecision,
  PodMarkingTrigger,
  PodNotReadyDecision,
} from '../health/index.js';
import type { Node, Pod, Taint } from '../kube/types.js';

/** Which policy runs: kube-controller-manager's writes, or our own beside a live provider's. */
export type PolicyMode = 'upstream' | 'companion';

/** What our monotonic clock says about one node (the tracker's view), all a policy needs of time. */
export interface NodeView {
  /** The node's grace ran out: no heartbeat within it (now > probe + grace). */
  timedOut: boolean;
  /** The last renewal we observed, as written remotely: the Lease's renewTime, else Ready's heartbeat. */
  lastRenewal: string | null | undefined;
  /** The node's grace period (ms), for messages. */
  graceMs: number;
  /** How long ago (ms) the grace ran out, when it did. */
  overdueMs: number | undefined;
  /**
   * A second opinion confirmed the node down before its grace ran out (src/second-opinion): what
   * it found, for the Ready condition's message. Absent otherwise.
   */
  confirmedDown?: string;
  /**
   * A second opinion holds the node's rate-limited step (upstream: NoExecute) for this long more
   * (ms): its kubelet still answers on the node network. Absent: not held.
   */
  heldMs?: number;
}

/** A write to nodes/status for a lost node (after the Lease re-read confirms it), or a renewed one. */
export interface StatusWrite {
  /** 'lost': the grace ran out (re-read the Lease first); 'renewed': our marks of a renewed node go. */
  kind: 'lost' | 'renewed';
  /** Strategic-merge patch body for nodes/<name>/status. */
  patch: Record<string, unknown>;
  /** Events to record once written. */
  events: EventRecord[];
  /** The Ready status before (logged). */
  readyBefore: string | undefined;
  /** Ready was True and this write changes it: pods are looked at in the same reconcile. */
  flippedFromTrue: boolean;
  /** The node as it will be once written (dry-run, or an answer without a body). */
  after: Node;
  /** What the log says: constant messages, applied and dry-run. */
  said: { applied: string; dryRun: string };
  /** nlc_transitions_total kind. */
  transition: 'marked_unknown' | 'marked_lost' | 'lost_cleared';
  /** Upstream: the conditions written, which the tracker records (noteMarkedUnknown). */
  unknown?: NodeStatusDecision;
}

export interface TaintContext {
  view: NodeView;
  /** The disruption controller admitted this node's rate-limited step (a new NoExecute). */
  admitted: boolean;
  /** Master disruption: every zone is fully disrupted, the rate-limited step is withdrawn everywhere. */
  master: boolean;
}

/** What to do about a node's taints. */
export interface TaintWork {
  /** Ask the disruption controller for the rate-limited step, drop a pending ask, or neither. */
  admission: 'request' | 'cancel' | 'none';
  /** spec.taints to write (every taint we do not own kept as is), or undefined: nothing to write. */
  taints: Taint[] | undefined;
  /** The write carries the admitted rate-limited step. */
  addsNoExecute: boolean;
  /** The rate-limited step comes due later: look again after this long (ms). */
  recheckInMs?: number;
}

/** A pod to evict through the Eviction API (PodDisruptionBudgets honoured by the API server). */
export interface EvictionDecision {
  namespace: string;
  name: string;
  uid?: string;
  node: string;
}

export interface PodContext {
  trigger: PodMarkingTrigger;
  /** Master disruption: no new eviction starts. */
  master: boolean;
  /** How long (ms, our clock) the node has been in its rate-limited step, when it is. */
  evictingForMs?: number;
}

/** What to do with the pods of a node. */
export interface PodWork {
  marks: PodNotReadyDecision[];
  evictions: EvictionDecision[];
  /** A pod tolerates the step for a while: look again after this long (ms). */
  recheckInMs?: number;
}

/**
 * What the controller writes for a lost or a recovered node: pure, chosen once at start-up. The
 * wiring (src/controller) asks it at each step and writes what it returns through the fenced writer.
 */
export interface MarkingPolicy {
  readonly mode: PolicyMode;
  /** The nodes/status write this node needs now (undefined: none). */
  status(node: Node, view: NodeView, wallNow: number): StatusWrite | undefined;
  /** The node's Ready as the zone statistics (disruption) count it. */
  zoneReady(node: Node): ReadyStatus;
  /** The taints this node should carry, and the rate-limited step it asks for. */
  taints(node: Node, wallNow: number, ctx: TaintContext): TaintWork;
  /** Whether this node's pods need listing (`flipped`: Ready just left True; `listedBefore`: we list them). */
  podsWanted(node: Node, flipped: boolean, listedBefore: boolean): boolean;
  /** Which of these pods (bound to the node) to mark not Ready, which to evict. */
  pods(node: Node, pods: readonly Pod[], wallNow: number, ctx: PodContext): PodWork;
  /** A renewal of this node's lease needs a reconcile even if we had not reported it due (our marks are on it). */
  renewalMatters(node: Node): boolean;
  /** Our mark of a lost node is on it (upstream: Ready Unknown; companion: our condition True). */
  markedLost(node: Node): boolean;
  /** The node shows its rate-limited step was taken (companion: its evictions go on). */
  inRateLimitedStep(node: Node): boolean;
  /**
   * The taints on this node that show its rate-limited step, as the node carries them (upstream:
   * the not-ready and unreachable NoExecute taints, whoever added them; companion: our taint with
   * its evicting value). A replica that starts acting counts them against the zone rates and the
   * blast-radius cap at their timeAdded (src/controller/taints-in-place.ts).
   */
  rateLimitedStepTaints(node: Node): Taint[];
  /** The Event for a node that appeared or went while we watch (undefined: none). */
  nodeEvent(kind: 'registered' | 'removing', name: string, uid: string | undefined): EventRecord | undefined;
}
