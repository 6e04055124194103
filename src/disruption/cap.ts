import type { SeedGrant } from './seed.js';

/**
 * The blast-radius cap (beyond upstream): at most `limit` NEW NoExecute taints within any sliding
 * window of `windowMs`. A taint recorded as a second one of a node that holds a slot (its
 * out-of-service taint after its own NoExecute taint) rides on that slot: it takes none, and a full
 * cap does not hold it. The limit is `maxNodes`, or `maxPercent` of the fleet (rounded down, but at
 * least 1 so that a small fleet is slowed down rather than frozen), whichever is smaller when both
 * are set. 0 or unset disables that bound; with neither bound the cap is off.
 */
export interface CapSettings {
  /** Absolute bound; 0/undefined = no absolute bound. */
  maxNodes?: number;
  /** Percent (0-100] of the fleet (all known nodes, excluded ones included); 0/undefined = none. */
  maxPercent?: number;
  /** Sliding window length in ms; must be > 0 when a bound is set. */
  windowMs?: number;
}

/** Validates cap settings; returns messages naming the bad field (empty when valid). */
export function validateCapSettings(cap: CapSettings | undefined): string[] {
  if (!cap) return [];
  const errors: string[] = [];
  const { maxNodes, maxPercent, windowMs } = cap;
  if (maxNodes !== undefined && !(Number.isInteger(maxNodes) && maxNodes >= 0)) {
    errors.push(`cap.maxNodes: ${String(maxNodes)}: must be an integer >= 0 (0 disables)`);
  }
  if (maxPercent !== undefined && !(Number.isFinite(maxPercent) && maxPercent >= 0 && maxPercent <= 100)) {
    errors.push(`cap.maxPercent: ${String(maxPercent)}: must be a number in [0, 100] (0 disables)`);
  }
  const enabled = (maxNodes ?? 0) > 0 || (maxPercent ?? 0) > 0;
  if (enabled && !(windowMs !== undefined && Number.isFinite(windowMs) && windowMs > 0)) {
    errors.push(`cap.windowMs: ${String(windowMs)}: must be > 0 when maxNodes or maxPercent is set`);
  }
  return errors;
}

interface Grant {
  name: string;
  /** The node it taints. */
  node: string;
  at: number;
  /** A second taint of its node (recorded with `secondOf`). */
  second: boolean;
  /** A second taint of a node that held a slot when it was recorded: takes no slot of its own. */
  rides: boolean;
}

export class BlastRadiusCap {
  /** Grants in time order (oldest first). */
  private grants: Grant[] = [];
  private head = 0;
  /** Slots taken in the window (from `head`): grants that do not ride. */
  private taken = 0;
  /** Per node, its grants in the window that took a slot: the nodes holding one. */
  private readonly holders = new Map<string, number>();

  constructor(private readonly settings: CapSettings = {}) {
    const errors = validateCapSettings(settings);
    if (errors.length > 0) throw new RangeError(errors.join('; '));
  }

  get enabled(): boolean {
    return (this.settings.maxNodes ?? 0) > 0 || (this.settings.maxPercent ?? 0) > 0;
  }

  get windowMs(): number {
    return this.settings.windowMs ?? 0;
  }

  /** The limit for a fleet of `fleetSize` nodes, or undefined when the cap is off. */
  limit(fleetSize: number): number | undefined {
    const bounds: number[] = [];
    const { maxNodes, maxPercent } = this.settings;
    if (maxNodes !== undefined && maxNodes > 0) bounds.push(maxNodes);
    if (maxPercent !== undefined && maxPercent > 0) {
      bounds.push(Math.max(1, Math.floor((maxPercent * fleetSize) / 100 + 1e-9)));
    }
    return bounds.length === 0 ? undefined : Math.min(...bounds);
  }

  private prune(now: number): void {
    const cutoff = now - this.windowMs;
    while (this.head < this.grants.length && this.grants[this.head]!.at <= cutoff) {
      this.leave(this.grants[this.head]!);
      this.head++;
    }
    if (this.head > 64 && this.head * 2 > this.grants.length) {
      this.grants = this.grants.slice(this.head);
      this.head = 0;
    }
  }

  /** A grant left the window or was refunded: its slot, if it took one, is free. */
  private leave(g: Grant): void {
    if (g.rides) return;
    this.taken--;
    const n = this.holders.get(g.node)! - 1;
    if (n === 0) this.holders.delete(g.node);
    else this.holders.set(g.node, n);
  }

  /** Slots taken in the window ending at `now`. */
  used(now: number): number {
    if (!this.enabled) return 0;
    this.prune(now);
    return this.taken;
  }

  /** Whether `node` holds a slot at `now` (a grant of it that took one is in the window). */
  holds(now: number, node: string): boolean {
    if (!this.enabled) return false;
    this.prune(now);
    return this.holders.has(node);
  }

  /**
   * Whether one more taint may be added at `now`; `secondOf`: it is a second taint of that node,
   * which rides on the node's slot if it holds one.
   */
  allows(now: number, fleetSize: number, secondOf?: string): boolean {
    const limit = this.limit(fleetSize);
    if (limit === undefined) return true;
    return this.used(now) < limit || (secondOf !== undefined && this.holders.has(secondOf));
  }

  /**
   * Records a grant at `now` (no-op when the cap is off); `secondOf`: a second taint of that node,
   * which takes no slot while the node holds one.
   */
  record(name: string, now: number, secondOf?: string): void {
    if (!this.enabled) return;
    this.prune(now);
    const node = secondOf ?? name;
    const second = secondOf !== undefined;
    const rides = second && this.holders.has(node);
    this.grants.push({ name, node, at: now, second, rides });
    if (rides) return;
    this.taken++;
    this.holders.set(node, (this.holders.get(node) ?? 0) + 1);
  }

  /**
   * Counts the NoExecute taints found in place when this replica starts acting (see seed.ts): a
   * grant of the same name already in the window (this replica made it when it led before) stands
   * for its taint, at the later of the two times; every other one is added at its time, a second
   * taint riding on its node's slot when a grant of the node that took one is at or before it (as
   * when recorded). Grants of ours whose taints are gone stay as they are. (The cap off, every
   * question answers as if none were there: the caller seeds none.)
   */
  seed(grants: readonly SeedGrant[], now: number): void {
    this.prune(now);
    const all = this.grants.slice(this.head);
    const byName = new Map<string, Grant>();
    for (const g of all) byName.set(g.name, g);
    const added = new Set<Grant>();
    for (const s of grants) {
      const had = byName.get(s.name);
      if (had) {
        had.at = Math.max(had.at, s.at);
        continue;
      }
      const g: Grant = { name: s.name, node: s.node, at: s.at, second: s.second, rides: false };
      byName.set(s.name, g);
      added.add(g);
      all.push(g);
    }
    all.sort((a, b) => a.at - b.at);
    for (const g of all) {
      if (!added.has(g) || !g.second) continue;
      g.rides = all.some((h) => h !== g && h.node === g.node && !h.rides && h.at <= g.at);
    }
    this.grants = all;
    this.head = 0;
    this.taken = 0;
    this.holders.clear();
    for (const g of all) {
      if (g.rides) continue;
      this.taken++;
      this.holders.set(g.node, (this.holders.get(g.node) ?? 0) + 1);
    }
  }

  /** Gives back the most recent grant for `name` still in the window (a taint that was not added). */
  refund(name: string): boolean {
    for (let i = this.grants.length - 1; i >= this.head; i--) {
      const g = this.grants[i]!;
      if (g.name === name) {
        this.grants.splice(i, 1);
        this.leave(g);
        return true;
      }
    }
    return false;
  }

  /** When the next slot frees up (>= now); `now` when a slot is free; undefined when off. */
  nextFreeAt(now: number, fleetSize: number): number | undefined {
    const limit = this.limit(fleetSize);
    if (limit === undefined) return undefined;
    const used = this.used(now);
    if (used < limit) return now;
    // Slots free when enough of the oldest grants that took one leave the window.
    let skip = used - limit;
    for (let i = this.head; ; i++) {
      const g = this.grants[i]!;
      if (g.rides) continue;
      if (skip-- === 0) return g.at + this.windowMs;
    }
  }
}
