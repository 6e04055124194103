/**
 * What a replica that starts acting (it became leader, or acts again after a blind spell or a
 * refusal) counts of the NoExecute taints the leaders before it added: the blast-radius cap's
 * grants and the zones' last tokens live in a leader's memory only, the taints on the nodes. Pure:
 * the caller says which taints are ours (src/controller/taints-in-place.ts) and when it looks.
 */

/** A NoExecute step of ours found on a node, dated by its taint's timeAdded. */
export interface TaintInPlace {
  /** The name its admission goes by: the node's, or its out-of-service taint's queue name. */
  name: string;
  /** The node it taints. */
  node: string;
  /** The node's zone key (the disruption controller's own view of the node wins). */
  zone: string;
  /** Its timeAdded: wall-clock ms as the replica that wrote it read its clock. */
  addedAt: number;
  /**
   * A second NoExecute taint of the node (its out-of-service taint): rides on the node's slot, as
   * a request with `secondOf` does.
   */
  second: boolean;
}

/** One grant for the cap, at a time on our monotonic clock. */
export interface SeedGrant {
  name: string;
  node: string;
  at: number;
  /** A second taint of `node`: takes no slot when a grant of the node that took one is at or before it. */
  second: boolean;
}

export interface DisruptionSeed {
  /** The taints added within the cap's window (in the order given). */
  grants: SeedGrant[];
  /** Per zone, when (our clock) its latest taint was added: its bucket gives no token for one interval after. */
  zones: Map<string, number>;
}

/**
 * Dates each taint on our monotonic clock: `now - max(0, wallNow - addedAt)` (a timeAdded ahead of
 * our wall clock counts as now). Those added within `windowMs` before `now` (0: the cap is off,
 * none) are the cap's grants; every zone gets the time of its latest taint, however old (its
 * bucket's interval is the caller's). A taint whose timeAdded is not a finite number is skipped.
 */
export function planSeed(
  taints: Iterable<TaintInPlace>,
  now: number,
  wallNow: number,
  windowMs: number,
): DisruptionSeed {
  const grants: SeedGrant[] = [];
  const zones = new Map<string, number>();
  for (const t of taints) {
    if (!Number.isFinite(t.addedAt)) continue;
    const at = now - Math.max(0, wallNow - t.addedAt);
    zones.set(t.zone, Math.max(zones.get(t.zone) ?? at, at));
    if (at <= now - windowMs) continue;
    grants.push({ name: t.name, node: t.node, at, second: t.second });
  }
  return { grants, zones };
}
