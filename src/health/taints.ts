import type { Node, Taint } from '../kube/types.js';
import { findCondition, nodeConditions } from './conditions.js';
import { ConditionStatusValue, NodeConditionType, TaintEffectName, TaintKey } from './reasons.js';
import { formatTime } from './time.js';

/** Upstream's NotReadyTaintTemplate / UnreachableTaintTemplate (NoExecute). */
export const NOT_READY_NO_EXECUTE: Readonly<Taint> = Object.freeze({
  key: TaintKey.NotReady,
  effect: TaintEffectName.NoExecute,
});
export const UNREACHABLE_NO_EXECUTE: Readonly<Taint> = Object.freeze({
  key: TaintKey.Unreachable,
  effect: TaintEffectName.NoExecute,
});

/** condition type -> status -> NoSchedule taint key (upstream nodeConditionToTaintKeyStatusMap). */
const CONDITION_TO_NO_SCHEDULE: ReadonlyArray<readonly [string, string, string]> = [
  [NodeConditionType.Ready, ConditionStatusValue.False, TaintKey.NotReady],
  [NodeConditionType.Ready, ConditionStatusValue.Unknown, TaintKey.Unreachable],
  [NodeConditionType.MemoryPressure, ConditionStatusValue.True, TaintKey.MemoryPressure],
  [NodeConditionType.DiskPressure, ConditionStatusValue.True, TaintKey.DiskPressure],
  [NodeConditionType.NetworkUnavailable, ConditionStatusValue.True, TaintKey.NetworkUnavailable],
  [NodeConditionType.PIDPressure, ConditionStatusValue.True, TaintKey.PIDPressure],
];

/** Keys whose NoSchedule taints this controller owns (conditions + unschedulable). */
export const MANAGED_NO_SCHEDULE_KEYS: ReadonlySet<string> = new Set([
  TaintKey.NotReady,
  TaintKey.Unreachable,
  TaintKey.MemoryPressure,
  TaintKey.DiskPressure,
  TaintKey.NetworkUnavailable,
  TaintKey.PIDPressure,
  TaintKey.Unschedulable,
]);

/** A well-formed taint: an object with a string key and effect. */
export function isTaint(t: unknown): t is Taint {
  return (
    typeof t === 'object' &&
    t !== null &&
    typeof (t as { key?: unknown }).key === 'string' &&
    typeof (t as { effect?: unknown }).effect === 'string'
  );
}

/** Same key and effect (upstream MatchTaint; value and timeAdded do not matter). */
export function matchTaint(a: Pick<Taint, 'key' | 'effect'>, b: Pick<Taint, 'key' | 'effect'>): boolean {
  return a.key === b.key && a.effect === b.effect;
}

/** The node's spec.taints as given, junk entries included (we never drop what we do not own). */
export function rawTaints(node: Node): unknown[] {
  const list: unknown = node.spec?.taints;
  return Array.isArray(list) ? list : [];
}

/** The node carries a taint with this key (any effect). */
export function hasTaintKey(node: Node, key: string): boolean {
  return rawTaints(node).some((t) => isTaint(t) && t.key === key);
}

/** True when the node carries a well-formed taint with this key and effect. */
export function hasTaint(node: Node, taint: Pick<Taint, 'key' | 'effect'>): boolean {
  return rawTaints(node).some((t) => isTaint(t) && matchTaint(t, taint));
}

function isManagedNoSchedule(t: Taint): boolean {
  return t.effect === TaintEffectName.NoSchedule && MANAGED_NO_SCHEDULE_KEYS.has(t.key);
}

function isHealthNoExecute(t: Taint): boolean {
  return matchTaint(t, NOT_READY_NO_EXECUTE) || matchTaint(t, UNREACHABLE_NO_EXECUTE);
}

/** The managed NoSchedule taints a node should carry, from its conditions and spec.unschedulable. */
export function desiredNoScheduleTaints(node: Node): Taint[] {
  const conditions = nodeConditions(node);
  const out: Taint[] = [];
  for (const [type, status, key] of CONDITION_TO_NO_SCHEDULE) {
    if (findCondition(conditions, type)?.status === status) {
      out.push({ key, effect: TaintEffectName.NoSchedule });
    }
  }
  if (node.spec?.unschedulable === true) {
    out.push({ key: TaintKey.Unschedulable, effect: TaintEffectName.NoSchedule });
  }
  return out;
}

/**
 * The NoExecute health taint the node should carry: NR for Ready=False, UR for Ready=Unknown, null for
 * Ready=True (remove both), undefined when Ready is missing or has another value (leave as is; upstream
 * waits for a Ready condition before tainting and removes only on True).
 */
export function desiredNoExecuteTaint(node: Node): Taint | null | undefined {
  const status = findCondition(nodeConditions(node), NodeConditionType.Ready)?.status;
  if (status === ConditionStatusValue.False) return { ...NOT_READY_NO_EXECUTE };
  if (status === ConditionStatusValue.Unknown) return { ...UNREACHABLE_NO_EXECUTE };
  if (status === ConditionStatusValue.True) return null;
  return undefined;
}

/** What to do about the NR/UR NoExecute pair. */
export type NoExecuteAction =
  | { kind: 'none' }
  /** A new NoExecute taint: goes through the per-zone rate limiter (disruption module). */
  | { kind: 'add'; taint: Taint }
  /** Replace the opposite taint at once (upstream swaps NR<->UR immediately, not rate limited). */
  | { kind: 'swap'; add: Taint; remove: Taint[] }
  /** Remove health NoExecute taints at once (Ready=True, or a stray opposite taint). */
  | { kind: 'remove'; remove: Taint[] };

export interface TaintPlan {
  node: string;
  uid?: string;
  /** resourceVersion of the node this was computed from: the writer's precondition. */
  resourceVersion?: string;
  /** The managed NoSchedule taints the node should carry (without timeAdded). */
  desiredNoSchedule: Taint[];
  /** See {@link desiredNoExecuteTaint}. */
  desiredNoExecute: Taint | null | undefined;
  /** Managed NoSchedule taints to add, timeAdded = wallNow. */
  noScheduleAdd: Taint[];
  /** Existing managed NoSchedule taints to remove (as they are on the node). */
  noScheduleRemove: Taint[];
  noExecute: NoExecuteAction;
  /**
   * spec.taints after every change that is NOT rate limited (NoSchedule adds/removes, NoExecute swap or
   * removal); undefined when those change nothing. Taints we do not manage keep their place and value.
   */
  immediateTaints: Taint[] | undefined;
  /** spec.taints after everything including a rate-limited NoExecute addition; undefined if no change. */
  finalTaints: Taint[] | undefined;
}

/**
 * Desired health taints of a node and the diff against what it carries. Level based and pure: call it
 * on every node event (NoSchedule pass) and again when the rate limiter admits a NoExecute addition
 * (recompute on the fresh node; the plan's finalTaints may be stale by then).
 */
export function planTaints(node: Node, wallNow: number): TaintPlan {
  const name = typeof node.metadata?.name === 'string' ? node.metadata.name : '';
  const timeAdded = formatTime(wallNow);
  const existing = rawTaints(node);
  const wellFormed = existing.filter(isTaint);

  const desiredNoSchedule = desiredNoScheduleTaints(node);
  const noScheduleAdd: Taint[] = desiredNoSchedule
    .filter((d) => !wellFormed.some((t) => matchTaint(t, d)))
    .map((d) => ({ ...d, timeAdded }));
  const noScheduleRemove: Taint[] = wellFormed.filter(
    (t) => isManagedNoSchedule(t) && !desiredNoSchedule.some((d) => matchTaint(t, d)),
  );

  const desiredNoExecute = desiredNoExecuteTaint(node);
  const presentNoExecute = wellFormed.filter(isHealthNoExecute);
  let noExecute: NoExecuteAction = { kind: 'none' };
  if (desiredNoExecute === null) {
    if (presentNoExecute.length > 0) noExecute = { kind: 'remove', remove: presentNoExecute };
  } else if (desiredNoExecute !== undefined) {
    const opposite = presentNoExecute.filter((t) => !matchTaint(t, desiredNoExecute));
    const has = presentNoExecute.some((t) => matchTaint(t, desiredNoExecute));
    const add = { ...desiredNoExecute, timeAdded };
    if (has) {
      if (opposite.length > 0) noExecute = { kind: 'remove', remove: opposite };
    } else if (opposite.length > 0) {
      noExecute = { kind: 'swap', add, remove: opposite };
    } else {
      noExecute = { kind: 'add', taint: add };
    }
  }

  const immediateAdd: Taint[] = [...noScheduleAdd];
  const immediateRemove: Taint[] = [...noScheduleRemove];
  if (noExecute.kind === 'swap') {
    immediateAdd.push(noExecute.add);
    immediateRemove.push(...noExecute.remove);
  } else if (noExecute.kind === 'remove') {
    immediateRemove.push(...noExecute.remove);
  }
  const immediateChanged = immediateAdd.length > 0 || immediateRemove.length > 0;
  const immediateTaints = immediateChanged
    ? applyTaintChanges(existing, immediateAdd, immediateRemove)
    : undefined;
  const finalTaints =
    noExecute.kind === 'add'
      ? applyTaintChanges(existing, [...immediateAdd, noExecute.taint], immediateRemove)
      : immediateTaints;

  const plan: TaintPlan = {
    node: name,
    desiredNoSchedule,
    desiredNoExecute,
    noScheduleAdd,
    noScheduleRemove,
    noExecute,
    immediateTaints,
    finalTaints,
  };
  if (node.metadata?.uid) plan.uid = node.metadata.uid;
  if (node.metadata?.resourceVersion) plan.resourceVersion = node.metadata.resourceVersion;
  return plan;
}

/**
 * The list with every taint matching (key, effect) of `remove` dropped and `add` appended (an add that
 * matches a taint still present replaces nothing: it is skipped). Order and content of the rest kept.
 */
export function applyTaintChanges(
  existing: readonly unknown[],
  add: readonly Taint[],
  remove: readonly Pick<Taint, 'key' | 'effect'>[],
): Taint[] {
  const kept = existing.filter((t) => !(isTaint(t) && remove.some((r) => matchTaint(t, r)))) as Taint[];
  for (const a of add) {
    if (!kept.some((t) => isTaint(t) && matchTaint(t, a))) kept.push({ ...a });
  }
  return kept;
}

/**
 * spec.taints with the NR/UR NoExecute taints removed (upstream markNodeAsReachable, used on entering
 * master disruption and for recovered nodes), or undefined when the node carries neither.
 */
export function withoutHealthNoExecute(node: Node): Taint[] | undefined {
  const existing = rawTaints(node);
  if (!existing.some((t) => isTaint(t) && isHealthNoExecute(t))) return undefined;
  return applyTaintChanges(existing, [], [NOT_READY_NO_EXECUTE, UNREACHABLE_NO_EXECUTE]);
}

/** Body of a strategic-merge PATCH of nodes/<name> replacing spec.taints (taints have no merge key). */
export interface TaintsPatch {
  metadata?: { resourceVersion: string };
  spec: { taints: Taint[] };
}

/**
 * Patch body for a full spec.taints list. Pass the resourceVersion the list was computed from so that
 * a concurrent change of spec.taints makes the write conflict (409) instead of being overwritten.
 */
export function taintsPatch(taints: readonly Taint[], resourceVersion?: string): TaintsPatch {
  const body: TaintsPatch = { spec: { taints: taints.map((t) => ({ ...t })) } };
  if (resourceVersion) body.metadata = { resourceVersion };
  return body;
}
