import type { Node, NodeCondition } from '../kube/types.js';
import { nodeNotReadyEvent } from './events.js';
import {
  ConditionStatusValue,
  NodeConditionMessage,
  NodeConditionReason,
  NodeConditionType,
  NodeLifecycleCondition,
} from './reasons.js';
import { formatTime } from './time.js';
import type { EventRecord } from './types.js';

/** The conditions set to Unknown on timeout, in upstream's order. NetworkUnavailable is NOT one. */
export const CONDITIONS_SET_UNKNOWN: readonly string[] = [
  NodeConditionType.Ready,
  NodeConditionType.MemoryPressure,
  NodeConditionType.DiskPressure,
  NodeConditionType.PIDPressure,
];

function isCondition(c: unknown): c is { type: string; status: string } {
  return (
    typeof c === 'object' &&
    c !== null &&
    typeof (c as { type?: unknown }).type === 'string' &&
    typeof (c as { status?: unknown }).status === 'string'
  );
}

/** The node's well-formed conditions (junk entries and a non-array value are skipped). */
export function nodeConditions(node: Node): NodeCondition[] {
  const list: unknown = node.status?.conditions;
  if (!Array.isArray(list)) return [];
  return list.filter(isCondition) as NodeCondition[];
}

/** The FIRST condition of this type (as upstream's GetNodeCondition), or undefined. */
export function findCondition<T extends { type: string }>(
  list: readonly T[] | undefined,
  type: string,
): T | undefined {
  if (!list) return undefined;
  for (const c of list) if (c.type === type) return c;
  return undefined;
}

/** True when some condition type occurs more than once. */
export function hasDuplicateTypes(list: readonly { type: string }[]): boolean {
  const seen = new Set<string>();
  for (const c of list) {
    if (seen.has(c.type)) return true;
    seen.add(c.type);
  }
  return false;
}

/** The Ready condition's status ('True' | 'False' | 'Unknown' | other), or undefined when absent. */
export function readyStatus(node: Node): string | undefined {
  return findCondition(nodeConditions(node), NodeConditionType.Ready)?.status;
}

/** Whether condition `type` is on the node with status True. */
export function conditionTrue(node: Node, type: string): boolean {
  return findCondition(nodeConditions(node), type)?.status === ConditionStatusValue.True;
}

/**
 * Taken out of service on purpose (KEP-5683: MaintenanceInProgress, DrainInProgress or Drained
 * True): a silent node like this is marked as any other, but it does not count in its zone's
 * disruption (planned maintenance of a zone is not a zone failing). MaintenancePlanned alone does
 * not: the maintenance has not begun.
 */
export function underMaintenance(node: Node): boolean {
  return (
    conditionTrue(node, NodeLifecycleCondition.MaintenanceInProgress) ||
    conditionTrue(node, NodeLifecycleCondition.DrainInProgress) ||
    conditionTrue(node, NodeLifecycleCondition.Drained)
  );
}

/** One entry of a strategic-merge patch of status.conditions (merge key: type). */
export interface ConditionPatchEntry {
  type: string;
  status: string;
  reason: string;
  message: string;
  lastTransitionTime: string;
  /** Only on appended conditions; on changed ones the kubelet's last heartbeat is left as it is. */
  lastHeartbeatTime?: string | null;
}

/** Body of a strategic-merge PATCH of nodes/<name>/status. */
export interface NodeStatusPatch {
  status: { conditions: ConditionPatchEntry[] };
}

/** "Set these node conditions to Unknown", as data. */
export interface NodeStatusDecision {
  node: string;
  uid?: string;
  /** resourceVersion of the node this was computed from: the writer's precondition. */
  resourceVersion?: string;
  /** Ready status before ('True' | 'False' | other), undefined when the node had no Ready. */
  readyBefore: string | undefined;
  /** Ready was True: upstream's trigger for the node event and pod marking. */
  flippedFromTrue: boolean;
  /** The node's full condition list after the change (what upstream's UpdateStatus would send). */
  conditions: NodeCondition[];
  /** Minimal strategic-merge patch for nodes/status: only the changed/appended conditions. */
  patch: NodeStatusPatch;
  /** NodeNotReady on the Node when flippedFromTrue (upstream RecordNodeStatusChange). */
  events: EventRecord[];
}

export interface UnknownConditionsOptions {
  /**
   * Upstream writes only when the Ready condition itself changes; with Ready already Unknown a stale
   * MemoryPressure=True (for example) is left as it is. true (default) = upstream. false = also write
   * when only the other three conditions would change.
   */
  onlyWhenReadyChanges?: boolean;
  /** Appended to the Ready condition's message (after upstream's own): why it is Unknown so soon. */
  readyNote?: string;
}

/**
 * What upstream's tryUpdateNodeHealth writes once a node's grace has expired. Pure: the timeout itself
 * is judged by the tracker. For Ready, MemoryPressure, DiskPressure, PIDPressure:
 *  - missing -> appended {Unknown, NodeStatusNeverUpdated, "Kubelet never posted node status.",
 *    lastHeartbeatTime: creationTimestamp, lastTransitionTime: wallNow};
 *  - present and not Unknown -> {Unknown, NodeStatusUnknown, "Kubelet stopped posting node status.",
 *    lastTransitionTime: wallNow}, lastHeartbeatTime kept;
 *  - already Unknown -> untouched.
 * Returns undefined when nothing would be written.
 */
export function unknownConditionsDecision(
  node: Node,
  wallNow: number,
  options: UnknownConditionsOptions = {},
): NodeStatusDecision | undefined {
  const name = node.metadata?.name;
  if (typeof name !== 'string' || name === '') return undefined;
  const onlyWhenReadyChanges = options.onlyWhenReadyChanges ?? true;
  const now = formatTime(wallNow);
  const before = nodeConditions(node);
  const conditions: NodeCondition[] = before.map((c) => ({ ...c }));
  const patch: ConditionPatchEntry[] = [];
  let readyChanged = false;

  for (const type of CONDITIONS_SET_UNKNOWN) {
    const current = findCondition(conditions, type);
    if (current === undefined) {
      const added: NodeCondition = {
        type,
        status: ConditionStatusValue.Unknown,
        reason: NodeConditionReason.NodeStatusNeverUpdated,
        message: NodeConditionMessage.NeverPosted,
        lastHeartbeatTime: node.metadata.creationTimestamp ?? null,
        lastTransitionTime: now,
      };
      conditions.push(added);
      patch.push({
        type,
        status: ConditionStatusValue.Unknown,
        reason: NodeConditionReason.NodeStatusNeverUpdated,
        message: NodeConditionMessage.NeverPosted,
        lastHeartbeatTime: node.metadata.creationTimestamp ?? null,
        lastTransitionTime: now,
      });
      if (type === NodeConditionType.Ready) readyChanged = true;
    } else if (current.status !== ConditionStatusValue.Unknown) {
      const message =
        type === NodeConditionType.Ready && options.readyNote
          ? `${NodeConditionMessage.StoppedPosting} ${options.readyNote}`
          : NodeConditionMessage.StoppedPosting;
      current.status = ConditionStatusValue.Unknown;
      current.reason = NodeConditionReason.NodeStatusUnknown;
      current.message = message;
      current.lastTransitionTime = now;
      patch.push({
        type,
        status: ConditionStatusValue.Unknown,
        reason: NodeConditionReason.NodeStatusUnknown,
        message,
        lastTransitionTime: now,
      });
      if (type === NodeConditionType.Ready) readyChanged = true;
    }
  }

  if (patch.length === 0) return undefined;
  if (onlyWhenReadyChanges && !readyChanged) return undefined;

  const readyBefore = findCondition(before, NodeConditionType.Ready)?.status;
  const flippedFromTrue = readyBefore === ConditionStatusValue.True;
  const decision: NodeStatusDecision = {
    node: name,
    readyBefore,
    flippedFromTrue,
    conditions,
    patch: { status: { conditions: patch } },
    events: flippedFromTrue ? [nodeNotReadyEvent(node)] : [],
  };
  if (node.metadata.uid) decision.uid = node.metadata.uid;
  if (node.metadata.resourceVersion) decision.resourceVersion = node.metadata.resourceVersion;
  return decision;
}
