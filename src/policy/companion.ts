import { formatDuration } from '../clock/duration.js';
import type { ReadyStatus } from '../disruption/index.js';
import {
  applyTaintChanges,
  Companion,
  EventReason,
  type EventRecord,
  EventType,
  findCondition,
  formatTime,
  nodeConditions,
  nodeRef,
  parseMicros,
  podNeedsNotReady,
  podRef,
  readyStatus,
} from '../health/index.js';
import type { Node, NodeCondition, Pod, Taint } from '../kube/types.js';
import type {
  EvictionDecision,
  MarkingPolicy,
  NodeView,
  PodContext,
  PodWork,
  StatusWrite,
  TaintContext,
  TaintWork,
} from './types.js';

export interface CompanionPolicyOptions {
  /** --companion-taint-key: our NoSchedule taint (a domain this project owns). */
  taintKey: string;
  /** This controller's identity (the pod name), named in the condition's message. */
  identity: string;
  /**
   * --companion-evict-after: evict the node's pods this long after its grace ran out (admitted by
   * the zone rates, the blast-radius cap and master disruption); 0: never evict.
   */
  evictAfterMs: number;
  /** --companion-mark-pods-not-ready: set Ready=False on a lost node's pods. */
  markPodsNotReady: boolean;
}

function ourCondition(node: Node): NodeCondition | undefined {
  return findCondition(nodeConditions(node), Companion.ConditionType);
}

/** Lost as the node shows it: our condition is True (written after the Lease re-read confirmed it). */
function isLost(node: Node): boolean {
  return ourCondition(node)?.status === 'True';
}

function ourTaints(node: Node, key: string): Taint[] {
  const list: unknown = node.spec?.taints;
  if (!Array.isArray(list)) return [];
  return list.filter(
    (t): t is Taint => typeof t === 'object' && t !== null && (t as { key?: unknown }).key === key,
  );
}

/** Two renewal times within the same second (a Node condition's times are stored to the second). */
function sameSecond(a: string | null | undefined, b: string | null | undefined): boolean {
  if (a === b) return true;
  const pa = parseMicros(a);
  const pb = parseMicros(b);
  return pa !== undefined && pb !== undefined && Math.floor(pa / 1e6) === Math.floor(pb / 1e6);
}

function withConditions(node: Node, conditions: NodeCondition[]): Node {
  return { ...node, status: { ...node.status, conditions } };
}

function nodeEvent(node: Node, type: EventRecord['type'], reason: EventRecord['reason'], message: string) {
  return { involvedObject: nodeRef(node.metadata.name, node.metadata.uid), type, reason, message };
}

/**
 * How upstream's taint manager would treat a NoExecute taint with our key on this pod: tolerated
 * for ever, for `forMs` (the shortest tolerationSeconds of the matching tolerations; <= 0 is 0), or
 * not at all. A pod opts out of our evictions with such a toleration.
 */
function toleration(pod: Pod, key: string): { tolerates: boolean; forMs: number | undefined } {
  let tolerates = false;
  let forMs: number | undefined;
  for (const raw of pod.spec?.tolerations ?? []) {
    if (typeof raw !== 'object' || raw === null) continue;
    const t = raw as {
      key?: string;
      operator?: string;
      value?: string;
      effect?: string;
      tolerationSeconds?: number;
    };
    if (t.effect && t.effect !== 'NoExecute') continue;
    if (t.key && t.key !== key) continue;
    const op = t.operator || 'Equal';
    if (!(op === 'Exists' || (op === 'Equal' && (t.value ?? '') === ''))) continue;
    tolerates = true;
    if (typeof t.tolerationSeconds === 'number') {
      const ms = Math.max(0, t.tolerationSeconds) * 1000;
      forMs = forMs === undefined ? ms : Math.min(forMs, ms);
    }
  }
  return { tolerates, forMs };
}

/** Pods our evictions leave alone, whatever their tolerations. */
function neverEvicted(pod: Pod): boolean {
  if (pod.metadata.deletionTimestamp) return true; // already going
  const phase = pod.status?.phase;
  if (phase === 'Succeeded' || phase === 'Failed') return true;
  if (pod.metadata.annotations?.[Companion.MirrorPodAnnotation] !== undefined) return true;
  // DaemonSet pods: the DaemonSet controller tolerates upstream's taints for them, not ours; evicting
  // kube-proxy or the CNI agent of a node that is alive after all would cut it off.
  return (pod.metadata.ownerReferences ?? []).some((r) => r.controller === true && r.kind === 'DaemonSet');
}

/**
 * Companion mode: beside a provider's node-lifecycle controller that cannot be changed (EKS, GKE,
 * AKS). It never writes what kube-controller-manager or the kubelet own (Ready and the kubelet's
 * conditions, node.kubernetes.io taints, their Events); it writes only its own condition and taint,
 * optionally pods' Ready=False, and evicts (Eviction API) only when asked to. Everything comes off
 * once the node renews.
 */
export function companionPolicy(o: CompanionPolicyOptions): MarkingPolicy {
  const key = o.taintKey;
  const evicting = (node: Node) => isEvicting(node, key);

  return {
    mode: 'companion',

    status: (node, view, wallNow) => companionStatus(o, node, view, wallNow),

    zoneReady(node): ReadyStatus {
      if (isLost(node)) return 'Unknown';
      const s = readyStatus(node);
      return s === 'True' || s === 'False' ? s : 'Unknown';
    },

    taints: (node, wallNow, ctx) => companionTaints(o, node, wallNow, ctx),

    podsWanted(node) {
      return isLost(node) && (o.markPodsNotReady || (o.evictAfterMs > 0 && evicting(node)));
    },

    pods: (node, pods, wallNow, ctx) => companionPods(o, node, pods, wallNow, ctx),

    renewalMatters: (node) => ourCondition(node) !== undefined,

    markedLost: isLost,

    inRateLimitedStep: evicting,

    rateLimitedStepTaints: (node) => ourTaints(node, key).filter((t) => t.value === Companion.EvictingValue),

    // RegisteredNode and RemovingNode are upstream's Events: the provider records them.
    nodeEvent: () => undefined,
  };
}

/** A node in the evicting step: our taint carries the evicting value. */
function isEvicting(node: Node, key: string): boolean {
  return ourTaints(node, key).some((t) => t.value === Companion.EvictingValue);
}

/** Our condition: True once the node's lease is not renewed within grace; removed once it renews. */
function companionStatus(
  o: CompanionPolicyOptions,
  node: Node,
  view: NodeView,
  wallNow: number,
): StatusWrite | undefined {
  const c = ourCondition(node);
  const readyBefore = readyStatus(node);
  const others = nodeConditions(node).filter((x) => x.type !== Companion.ConditionType);
  if (view.timedOut) {
    if (c?.status === 'True') return undefined;
    const seen = view.lastRenewal ?? undefined;
    const message =
      `Lease kube-node-lease/${node.metadata.name} not renewed within ${formatDuration(view.graceMs)} ` +
      `(last renewal observed: ${seen ?? 'none'}); marked by ${o.identity} in companion mode`;
    const condition: NodeCondition = {
      type: Companion.ConditionType,
      status: 'True',
      reason: Companion.ConditionReason,
      message,
      lastHeartbeatTime: seen ?? null,
      lastTransitionTime: formatTime(wallNow),
    };
    return {
      kind: 'lost',
      patch: { status: { conditions: [condition] } },
      events: [nodeEvent(node, EventType.Warning, EventReason.NodeLeaseExpired, message)],
      readyBefore,
      flippedFromTrue: true,
      after: withConditions(node, [...others, condition]),
      said: { applied: 'Marked node lost', dryRun: 'Dry run: would mark node lost' },
      transition: 'marked_lost',
    };
  }
  // Renewed: a heartbeat we saw after the one the condition records (a restart keeps a dead
  // node's marks: its renewal is still the recorded one).
  if (!c || sameSecond(c.lastHeartbeatTime, view.lastRenewal)) return undefined;
  return {
    kind: 'renewed',
    patch: { status: { conditions: [{ type: Companion.ConditionType, $patch: 'delete' }] } },
    events: [
      nodeEvent(
        node,
        EventType.Normal,
        EventReason.NodeLeaseRenewed,
        `Lease kube-node-lease/${node.metadata.name} renewed (${view.lastRenewal ?? 'status heartbeat'}); companion marks removed`,
      ),
    ],
    readyBefore,
    flippedFromTrue: false,
    after: withConditions(node, others),
    said: { applied: 'Cleared lost node', dryRun: 'Dry run: would clear lost node' },
    transition: 'lost_cleared',
  };
}

/** Our NoSchedule taint on a lost node, and its evicting value once --companion-evict-after passed and admitted. */
function companionTaints(
  o: CompanionPolicyOptions,
  node: Node,
  wallNow: number,
  { view, admitted, master }: TaintContext,
): TaintWork {
  const key = o.taintKey;
  const ours = ourTaints(node, key);
  const timeAdded = formatTime(wallNow);
  const lost = isLost(node);
  const inStep = isEvicting(node, key);
  const canEvict = o.evictAfterMs > 0;
  let value: string | undefined;
  let admission: TaintWork['admission'] = canEvict ? 'cancel' : 'none';
  let addsNoExecute = false;
  let recheckInMs: number | undefined;
  if (lost) {
    value = inStep && canEvict && !master ? Companion.EvictingValue : undefined;
    if (canEvict && !inStep && !master) {
      const wait = view.overdueMs === undefined ? undefined : o.evictAfterMs - view.overdueMs;
      if (wait !== undefined && wait <= 0 && view.heldMs !== undefined) {
        // Its kubelet still answers (a second opinion): no evicting step while it does, up to the hold.
        admission = 'cancel';
        recheckInMs = view.heldMs;
      } else if (wait !== undefined && wait <= 0) {
        admission = admitted ? 'none' : 'request';
        if (admitted) {
          value = Companion.EvictingValue;
          addsNoExecute = true;
        }
      } else {
        admission = 'none';
        recheckInMs = wait;
      }
    } else if (master) admission = 'none';
  }
  const want: Taint | undefined = lost
    ? { key, effect: 'NoSchedule', ...(value ? { value } : {}), timeAdded }
    : undefined;
  const keep = want && ours.find((t) => t.effect === want.effect && (t.value ?? '') === (want.value ?? ''));
  const stale = ours.filter((t) => t !== keep);
  const change = (want && !keep) || stale.length > 0;
  let taints: Taint[] | undefined;
  if (change) {
    const list: unknown = node.spec?.taints;
    const kept = (Array.isArray(list) ? list : []).filter((t) => !stale.includes(t as Taint));
    taints = applyTaintChanges(kept, want && !keep ? [want] : [], []);
  }
  return { admission, taints, addsNoExecute, ...(recheckInMs !== undefined ? { recheckInMs } : {}) };
}

/** Ready=False for a lost node's pods (if asked), and evictions in the evicting step (tolerations honoured). */
function companionPods(
  o: CompanionPolicyOptions,
  node: Node,
  pods: readonly Pod[],
  wallNow: number,
  { master, evictingForMs }: PodContext,
): PodWork {
  const key = o.taintKey;
  const out: PodWork = { marks: [], evictions: [] };
  if (!isLost(node)) return out;
  const name = node.metadata.name;
  if (o.markPodsNotReady) {
    // Judged as upstream judges a node whose Ready is Unknown: every pod whose Ready is not False.
    const asUnknown: Node = withConditions(node, [{ type: 'Ready', status: 'Unknown' }]);
    const now = formatTime(wallNow);
    for (const pod of pods) {
      if (!podNeedsNotReady(asUnknown, pod, { mode: 'level' })) continue;
      out.marks.push({
        namespace: pod.metadata.namespace ?? '',
        name: pod.metadata.name,
        node: name,
        ...(pod.metadata.uid ? { uid: pod.metadata.uid } : {}),
        ...(pod.metadata.resourceVersion ? { resourceVersion: pod.metadata.resourceVersion } : {}),
        patch: { status: { conditions: [{ type: 'Ready', status: 'False', lastTransitionTime: now }] } },
        event: {
          involvedObject: podRef(pod),
          type: EventType.Warning,
          reason: EventReason.PodNodeLeaseExpired,
          message: `Node ${name} lost (lease not renewed): marked not ready by ${o.identity}`,
        },
      });
    }
  }
  if (master || o.evictAfterMs <= 0 || !isEvicting(node, key)) return out;
  for (const pod of pods) {
    if (pod.spec?.nodeName !== name || neverEvicted(pod)) continue;
    const tol = toleration(pod, key);
    if (tol.tolerates) {
      if (tol.forMs === undefined) continue;
      const left = tol.forMs - (evictingForMs ?? 0);
      if (left > 0) {
        out.recheckInMs = Math.min(out.recheckInMs ?? left, left);
        continue;
      }
    }
    const e: EvictionDecision = {
      namespace: pod.metadata.namespace ?? '',
      name: pod.metadata.name,
      node: name,
    };
    if (pod.metadata.uid) e.uid = pod.metadata.uid;
    out.evictions.push(e);
  }
  return out;
}
