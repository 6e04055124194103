import { type TaintInPlace, zoneKeyOf } from '../disruption/index.js';
import { parseMicros } from '../health/index.js';
import type { Node } from '../kube/types.js';
import type { MarkingPolicy } from '../policy/index.js';
import { ourTaintAddedAt } from '../remediation/index.js';
import { OUT_OF_SERVICE_QUEUE_PREFIX } from './out-of-service.js';

/** A timeAdded as wall-clock ms, or undefined when it is missing or does not parse. */
function wallMs(timeAdded: string | null | undefined): number | undefined {
  const us = parseMicros(timeAdded);
  return us === undefined ? undefined : us / 1000;
}

/**
 * The NoExecute steps of ours the nodes carry, dated by their taints' timeAdded, for the disruption
 * controller's seed() when this replica starts acting: a node's rate-limited step (what the policy
 * says shows it: upstream, its not-ready or unreachable NoExecute taint, the latest when it carries
 * both; companion, our taint's evicting value) under the node's name, and our out-of-service taint
 * (our annotation on it) under its queue name, as a second taint of the node. A taint without a
 * timeAdded that parses is left out: it cannot be dated.
 */
export function taintsInPlace(nodes: Iterable<Node>, policy: MarkingPolicy): TaintInPlace[] {
  const out: TaintInPlace[] = [];
  for (const node of nodes) {
    const name = node.metadata.name;
    const zone = zoneKeyOf(node.metadata.labels);
    const dated = policy
      .rateLimitedStepTaints(node)
      .map((t) => wallMs(t.timeAdded))
      .filter((ms) => ms !== undefined);
    if (dated.length > 0) out.push({ name, node: name, zone, addedAt: Math.max(...dated), second: false });
    const oos = wallMs(ourTaintAddedAt(node));
    if (oos !== undefined) {
      out.push({ name: OUT_OF_SERVICE_QUEUE_PREFIX + name, node: name, zone, addedAt: oos, second: true });
    }
  }
  return out;
}
