import type { Node, Pod, PodCondition } from '../kube/types.js';
import type { NodeStatusDecision } from './conditions.js';
import { findCondition, nodeConditions } from './conditions.js';
import { podNodeNotReadyEvent } from './events.js';
import { ConditionStatusValue, NodeConditionType, PodConditionType } from './reasons.js';
import { formatTime, parseMicros } from './time.js';
import type { EventRecord } from './types.js';

/**
 * - 'upstream': exactly kube-controller-manager: pods are marked only when the controller itself has
 *   just flipped the node's Ready from True (trigger 'node-flipped'), on a retry of that ('retry'), or
 *   for a pod newly bound to a node whose Ready is not True ('pod-bound'). A 'resync' marks nothing, so
 *   work lost to a restart stays lost (#47806, #48681, #135205), False->Unknown marks nothing
 *   (#112733) and a kubelet-reported Ready=False marks nothing (#125618).
 * - 'level' (default): derived from cluster state on every trigger, so a restart, a False->Unknown
 *   transition and a kubelet-reported Ready=False are all covered:
 *     node Ready=Unknown -> every pod on it whose Ready is not False;
 *     node Ready=False   -> the same, except pods whose Ready turned True AFTER the node's Ready turned
 *       False (both timestamps written by the same kubelet clock): a live kubelet re-asserted those
 *       pods (or reverted our mark), and marking them again would fight it every sync. Pods whose
 *       Ready times are missing or unparsable are left alone on a Ready=False node.
 */
export type PodMarkingMode = 'upstream' | 'level';

/** Why the caller is asking; only 'upstream' mode looks at it. */
export type PodMarkingTrigger = 'node-flipped' | 'retry' | 'pod-bound' | 'resync';

export interface PodMarkingOptions {
  mode?: PodMarkingMode;
  trigger?: PodMarkingTrigger;
}

/** Body of a strategic-merge PATCH of pods/<name>/status (conditions merge by type). */
export interface PodStatusPatch {
  status: { conditions: [{ type: 'Ready'; status: 'False'; lastTransitionTime: string }] };
}

/** "Set this pod's Ready to False" as data (upstream MarkPodsNotReady for one pod). */
export interface PodNotReadyDecision {
  namespace: string;
  name: string;
  uid?: string;
  /** resourceVersion the decision was computed from: the writer's precondition. */
  resourceVersion?: string;
  node: string;
  /**
   * Only status, type and lastTransitionTime change; the Ready condition's reason, message and
   * lastProbeTime stay as the kubelet wrote them (upstream copies the condition and flips status).
   */
  patch: PodStatusPatch;
  /** Warning NodeNotReady "Node is not ready" on the pod (emit after the write succeeded). */
  event: EventRecord;
}

function podReady(pod: Pod): PodCondition | undefined {
  const list: unknown = pod.status?.conditions;
  if (!Array.isArray(list)) return undefined;
  const valid = list.filter(
    (c): c is PodCondition =>
      typeof c === 'object' && c !== null && typeof (c as { type?: unknown }).type === 'string',
  );
  return findCondition(valid, PodConditionType.Ready);
}

/** Does this pod, on this node, need Ready=False? (see {@link PodMarkingMode}) */
export function podNeedsNotReady(node: Node, pod: Pod, options: PodMarkingOptions = {}): boolean {
  const mode = options.mode ?? 'level';
  const nodeName = node.metadata?.name;
  if (typeof nodeName !== 'string' || nodeName === '') return false;
  if (pod.spec?.nodeName !== nodeName) return false;
  if (typeof pod.metadata?.name !== 'string' || pod.metadata.name === '') return false;
  const nodeReady = findCondition(nodeConditions(node), NodeConditionType.Ready);
  // No Ready condition: nothing can run there yet (upstream skips too).
  if (nodeReady === undefined || nodeReady.status === ConditionStatusValue.True) return false;
  const ready = podReady(pod);
  if (ready === undefined || ready.status === ConditionStatusValue.False) return false;

  if (mode === 'upstream') {
    const trigger = options.trigger ?? 'resync';
    return trigger === 'node-flipped' || trigger === 'retry' || trigger === 'pod-bound';
  }
  if (nodeReady.status === ConditionStatusValue.Unknown) return true;
  if (nodeReady.status === ConditionStatusValue.False) {
    const nodeSince = parseMicros(nodeReady.lastTransitionTime);
    const podSince = parseMicros(ready.lastTransitionTime);
    if (nodeSince === undefined || podSince === undefined) return false;
    return podSince <= nodeSince;
  }
  return false;
}

/**
 * The pods (of those given: pass the pods indexed by spec.nodeName) that need Ready=False, each with
 * its status patch and event. Pure and deterministic; the caller writes, emits, and calls again on the
 * next trigger (a failed write is simply found again).
 */
export function podsToMarkNotReady(
  node: Node,
  pods: readonly Pod[],
  wallNow: number,
  options: PodMarkingOptions = {},
): PodNotReadyDecision[] {
  const out: PodNotReadyDecision[] = [];
  const now = formatTime(wallNow);
  const nodeName = node.metadata?.name ?? '';
  for (const pod of pods) {
    if (!podNeedsNotReady(node, pod, options)) continue;
    const decision: PodNotReadyDecision = {
      namespace: pod.metadata.namespace ?? '',
      name: pod.metadata.name,
      node: nodeName,
      patch: {
        status: {
          conditions: [{ type: 'Ready', status: 'False', lastTransitionTime: now }],
        },
      },
      event: podNodeNotReadyEvent(pod),
    };
    if (pod.metadata.uid) decision.uid = pod.metadata.uid;
    if (pod.metadata.resourceVersion) decision.resourceVersion = pod.metadata.resourceVersion;
    out.push(decision);
  }
  return out;
}

/** The node as it will be once a status decision is written (to ask pod questions right away). */
export function nodeAfterStatusDecision(node: Node, decision: NodeStatusDecision): Node {
  return { ...node, status: { ...node.status, conditions: decision.conditions } };
}
