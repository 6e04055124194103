import { Companion, isTaint, rawTaints, readyStatus, TaintKey } from '../health/index.js';
import type { Node, Taint } from '../kube/types.js';
import { APPLIED_ANNOTATION, OUT_OF_SERVICE_TAINT } from './out-of-service.js';

/**
 * What an uninstall leaves behind that only this controller would take off, and the `cleanup`
 * command (src/cli/cleanup.ts) removes: pure, one node at a time.
 *
 * - Companion mode's taint (its key: ours alone, whatever its value or effect) and its
 *   `NodeLeaseExpired` condition.
 * - The out-of-service taint we applied (it carries our annotation; one an operator put there has
 *   none and stays), and that annotation.
 * - `node.kubernetes.io/unreachable` and `not-ready` taints, only on a node whose kubelet reports
 *   Ready=True: stale marks that the controller taking over (kube-controller-manager's, once turned
 *   back on) would also take off. On a node that is not Ready they stay: it is that controller's to
 *   judge, and taking them off would let pods onto a node that may be down.
 * Never the operator's fence annotation, nor any other taint or condition.
 */
export interface CleanupOptions {
  /** --companion-taint-key the controller ran with. */
  companionTaintKey: string;
}

export interface NodeCleanup {
  node: string;
  /** `key:effect` of each taint removed. */
  taintsRemoved: string[];
  /** The node's taints after (undefined: unchanged). */
  taints: Taint[] | undefined;
  annotationsRemoved: string[];
  /** Conditions removed (the status subresource). */
  conditionsRemoved: string[];
  /** Health taints left on a node that is not Ready (said, not removed). */
  kept: string[];
}

const HEALTH_KEYS: readonly string[] = [TaintKey.Unreachable, TaintKey.NotReady];

/** What to take off `node` (undefined: nothing of ours on it). */
export function cleanupPlan(node: Node, o: CleanupOptions): NodeCleanup | undefined {
  const all = rawTaints(node);
  const taints = all.filter(isTaint);
  const ready = readyStatus(node) === 'True';
  const ourOutOfService = node.metadata.annotations?.[APPLIED_ANNOTATION] !== undefined;
  const removed: Taint[] = [];
  const kept: string[] = [];
  for (const t of taints) {
    const id = `${t.key}:${t.effect}`;
    if (t.key === o.companionTaintKey) removed.push(t);
    else if (t.key === OUT_OF_SERVICE_TAINT.key && ourOutOfService) removed.push(t);
    else if (HEALTH_KEYS.includes(t.key)) {
      if (ready) removed.push(t);
      else kept.push(id);
    }
  }
  const annotationsRemoved = ourOutOfService ? [APPLIED_ANNOTATION] : [];
  const conditionsRemoved = (node.status?.conditions ?? [])
    .filter((c) => c?.type === Companion.ConditionType)
    .map((c) => c.type);
  if (removed.length === 0 && annotationsRemoved.length === 0 && conditionsRemoved.length === 0) {
    return kept.length === 0 ? undefined : plan(node, [], undefined, [], [], kept);
  }
  // Every other entry stays as it was, a malformed one included.
  const after =
    removed.length === 0 ? undefined : (all.filter((t) => !removed.includes(t as Taint)) as Taint[]);
  return plan(node, removed, after, annotationsRemoved, conditionsRemoved, kept);
}

function plan(
  node: Node,
  removed: readonly Taint[],
  taints: Taint[] | undefined,
  annotationsRemoved: string[],
  conditionsRemoved: string[],
  kept: string[],
): NodeCleanup {
  return {
    node: node.metadata.name,
    taintsRemoved: removed.map((t) => `${t.key}:${t.effect}`),
    taints,
    annotationsRemoved,
    conditionsRemoved,
    kept,
  };
}

/** Whether a plan writes anything. */
export function writes(p: NodeCleanup): boolean {
  return p.taints !== undefined || p.annotationsRemoved.length > 0 || p.conditionsRemoved.length > 0;
}
