import type { ReadyStatus } from '../disruption/index.js';
import {
  isTaint,
  matchTaint,
  NOT_READY_NO_EXECUTE,
  nodeAfterStatusDecision,
  type PodMarkingMode,
  planTaints,
  podsToMarkNotReady,
  rawTaints,
  readyStatus,
  registeredNodeEvent,
  removingNodeEvent,
  UNREACHABLE_NO_EXECUTE,
  unknownConditionsDecision,
  withoutHealthNoExecute,
} from '../health/index.js';
import type { Node, Taint } from '../kube/types.js';
import type { MarkingPolicy, StatusWrite, TaintContext, TaintWork } from './types.js';

export interface UpstreamPolicyOptions {
  /** --mark-pods-not-ready: 'upstream' only when we flip Ready from True, 'always' while not Ready. */
  markPodsNotReady: 'always' | 'upstream';
}

/**
 * kube-controller-manager's node-lifecycle writes: Ready and the kubelet's conditions Unknown at
 * the grace, the node.kubernetes.io taints that follow from the conditions (a NEW NoExecute taint
 * only when admitted by the zone rates and the cap), pods Ready=False, and upstream's Events.
 */
export function upstreamPolicy(o: UpstreamPolicyOptions): MarkingPolicy {
  const podMode: PodMarkingMode = o.markPodsNotReady === 'upstream' ? 'upstream' : 'level';
  return {
    mode: 'upstream',

    status(node, view, wallNow): StatusWrite | undefined {
      if (!view.timedOut) return undefined;
      const d = unknownConditionsDecision(
        node,
        wallNow,
        view.confirmedDown ? { readyNote: view.confirmedDown } : undefined,
      );
      if (!d) return undefined;
      return {
        kind: 'lost',
        patch: d.patch as unknown as Record<string, unknown>,
        events: d.events,
        readyBefore: d.readyBefore,
        flippedFromTrue: d.flippedFromTrue,
        after: nodeAfterStatusDecision(node, d),
        said: { applied: 'Marked node Unknown', dryRun: 'Dry run: would mark node Unknown' },
        transition: 'marked_unknown',
        unknown: d,
      };
    },

    zoneReady(node): ReadyStatus {
      const s = readyStatus(node);
      return s === 'True' || s === 'False' ? s : 'Unknown';
    },

    taints: upstreamTaints,

    podsWanted(node, flipped, listedBefore) {
      if (readyStatus(node) === 'True') return false;
      return podMode === 'level' || flipped || listedBefore;
    },

    pods(node, pods, wallNow, { trigger }) {
      return { marks: podsToMarkNotReady(node, pods, wallNow, { mode: podMode, trigger }), evictions: [] };
    },

    // The kubelet's own status update brings a renewed node's Ready back (a node event).
    renewalMatters: () => false,

    markedLost: (node) => readyStatus(node) === 'Unknown',

    inRateLimitedStep: () => false,

    // kube-controller-manager's (before the switch) cannot be told from ours: both count.
    rateLimitedStepTaints: (node) =>
      rawTaints(node).filter(
        (t): t is Taint =>
          isTaint(t) && (matchTaint(t, NOT_READY_NO_EXECUTE) || matchTaint(t, UNREACHABLE_NO_EXECUTE)),
      ),

    nodeEvent(kind, name, uid) {
      return kind === 'registered' ? registeredNodeEvent(name, uid) : removingNodeEvent(name, uid);
    },
  };
}

/**
 * The node.kubernetes.io taints that follow from the node's conditions: NoSchedule at once, a NEW
 * NoExecute only when admitted (zone rates, the cap), none while a second opinion holds it (its
 * kubelet still answers), and none of ours at all under master disruption.
 */
function upstreamTaints(node: Node, wallNow: number, { admitted, master, view }: TaintContext): TaintWork {
  const p = planTaints(node, wallNow);
  const add = p.noExecute.kind === 'add';
  if (add && !master && view.heldMs !== undefined) {
    // Its kubelet still answers (a second opinion): no NoExecute while it does, up to the hold.
    return { admission: 'cancel', taints: p.immediateTaints, addsNoExecute: false, recheckInMs: view.heldMs };
  }
  const addsNoExecute = add && !master && admitted;
  let taints = addsNoExecute ? p.finalTaints : p.immediateTaints;
  if (master) {
    // Master disruption: no NoExecute taint of ours stays on any node.
    const base: Node = { ...node, spec: { ...node.spec, taints: taints ?? node.spec?.taints ?? [] } };
    taints = withoutHealthNoExecute(base) ?? taints;
  }
  return { admission: add ? (admitted || master ? 'none' : 'request') : 'cancel', taints, addsNoExecute };
}
