import { formatDuration } from '../clock/duration.js';
import { TokenBucket } from '../clock/token-bucket.js';
import { type Logger, silentLogger } from '../log/logger.js';
import { BlastRadiusCap, type CapSettings, validateCapSettings } from './cap.js';
import { type DisruptionMetrics, HELD_BACK_REASONS, type HeldBackReason } from './metrics.js';
import { planSeed, type TaintInPlace } from './seed.js';
import {
  computeZoneState,
  type RateSettings,
  ZONE_STATES,
  type ZoneState,
  zoneDisplay,
  zoneRate,
} from './zones.js';

export type ReadyStatus = 'True' | 'False' | 'Unknown';

/** What the disruption core needs to know about one node. */
export interface NodeObservation {
  name: string;
  /** Zone key, see `zoneKeyOf(labels)`. */
  zone: string;
  /** Ready condition status as it stands after our own marking ('Unknown' when there is none). */
  ready: ReadyStatus;
  /** Labelled node.kubernetes.io/exclude-disruption: left out of zone statistics, still tainted. */
  excluded: boolean;
}

export interface DisruptionOptions extends RateSettings {
  /** --unhealthy-zone-threshold: fraction of not-ready nodes that makes a zone PartialDisruption. */
  unhealthyZoneThreshold: number;
  /** Token bucket burst; upstream hard-codes 1. */
  burst?: number;
  /** Blast-radius cap (beyond upstream); off when unset. */
  cap?: CapSettings;
  /**
   * An admitted node counts as "in flight" (further requests for it are ignored) until the caller
   * settles it, or at most this long (ms) if it never does. Default 120000.
   */
  inFlightTimeoutMs?: number;
}

/** Upstream's defaults (kube-controller-manager flags). */
export const DEFAULT_DISRUPTION_OPTIONS: Readonly<Required<Omit<DisruptionOptions, 'cap'>>> = Object.freeze({
  nodeEvictionRate: 0.1,
  secondaryNodeEvictionRate: 0.01,
  largeClusterSizeThreshold: 50,
  unhealthyZoneThreshold: 0.55,
  burst: 1,
  inFlightTimeoutMs: 120_000,
});

/** Checks options; returns messages naming each bad field (empty when valid). */
export function validateDisruptionOptions(o: DisruptionOptions): string[] {
  const errors: string[] = [];
  const rate = (field: string, v: number) => {
    if (!(Number.isFinite(v) && v >= 0))
      errors.push(`${field}: ${String(v)}: must be a number >= 0 (per second)`);
  };
  rate('nodeEvictionRate', o.nodeEvictionRate);
  rate('secondaryNodeEvictionRate', o.secondaryNodeEvictionRate);
  if (!(Number.isInteger(o.largeClusterSizeThreshold) && o.largeClusterSizeThreshold >= 0)) {
    errors.push(`largeClusterSizeThreshold: ${String(o.largeClusterSizeThreshold)}: must be an integer >= 0`);
  }
  if (
    !(
      Number.isFinite(o.unhealthyZoneThreshold) &&
      o.unhealthyZoneThreshold >= 0 &&
      o.unhealthyZoneThreshold <= 1
    )
  ) {
    errors.push(`unhealthyZoneThreshold: ${String(o.unhealthyZoneThreshold)}: must be a number in [0, 1]`);
  }
  if (o.burst !== undefined && !(Number.isInteger(o.burst) && o.burst >= 1)) {
    errors.push(`burst: ${String(o.burst)}: must be an integer >= 1`);
  }
  if (
    o.inFlightTimeoutMs !== undefined &&
    !(Number.isFinite(o.inFlightTimeoutMs) && o.inFlightTimeoutMs > 0)
  ) {
    errors.push(`inFlightTimeoutMs: ${String(o.inFlightTimeoutMs)}: must be > 0`);
  }
  errors.push(...validateCapSettings(o.cap));
  return errors;
}

/** One zone as of the last evaluate(). Only zones with counted (non-excluded) nodes are listed. */
export interface ZoneStatus {
  zone: string;
  state: ZoneState;
  /** Counted nodes (excluded ones left out). */
  size: number;
  /** Counted nodes whose Ready is not True. */
  notReady: number;
  /** Nodes of the zone labelled exclude-disruption. */
  excluded: number;
  /** NoExecute taints per second currently allowed in the zone (0 = held). */
  rate: number;
  /** NoExecute requests waiting in the zone. */
  queued: number;
}

export interface ZoneTransition {
  zone: string;
  from: ZoneState;
  to: ZoneState;
  size: number;
  notReady: number;
  /** Rate in force after the transition. */
  rate: number;
}

/** Orders for the caller, as data. */
export type DisruptionDecision =
  /** Entering master disruption: remove our NoExecute not-ready/unreachable taints from EVERY node. */
  | { kind: 'RemoveAllNoExecuteTaints' }
  /** Leaving master disruption: reset every node's probe timestamp to `now` (health tracker resetAll). */
  | { kind: 'ResetAllProbeTimestamps'; now: number };

export interface DisruptionUpdate {
  zones: ZoneStatus[];
  transitions: ZoneTransition[];
  /** 'entered' / 'exited' on the evaluate() that changed it, else null. */
  masterDisruption: 'entered' | 'exited' | null;
  masterDisruptionActive: boolean;
  decisions: DisruptionDecision[];
}

export type RequestResult =
  /** Newly queued. */
  | 'queued'
  /** Already waiting (the taint key is updated, the place in the queue kept). */
  | 'already-queued'
  /** Admitted and not settled yet; nothing done. */
  | 'in-flight'
  /** The node is observed Ready=True; nothing queued. */
  | 'ignored-ready';

export interface Admission {
  name: string;
  zone: string;
  /** The taint key given with the latest request, if any. */
  key: string | undefined;
  requestedAt: number;
  waitedMs: number;
}

/** An Event to record, as data (same shape as the health core's EventRecord). */
export interface DisruptionEvent {
  involvedObject: { apiVersion: 'v1'; kind: 'Node'; name: string };
  type: 'Warning';
  reason: 'NoExecuteTaintHeldByCap';
  message: string;
}

export interface AdmitResult {
  /** Add the NoExecute taint to these nodes now, then settle() each. */
  admitted: Admission[];
  /** Nodes held back by the cap for the first time (one Event per node and request). */
  events: DisruptionEvent[];
}

export type SettleOutcome =
  /** The taint was written: counts in node_collector_evictions_total. */
  | 'applied'
  /** The write failed: the cap slot is given back and the node goes to the back of its zone queue. */
  | 'failed'
  /** Nothing was written because it was no longer needed (node gone or healthy): cap slot given back. */
  | 'dropped';

export interface QueuedNode {
  name: string;
  zone: string;
  requestedAt: number;
  reason: HeldBackReason;
}

interface QueueItem {
  name: string;
  zone: string;
  key: string | undefined;
  requestedAt: number;
  seq: number;
  /** The zone's rate alone would have let it through already: only the cap holds it. */
  capHeld: boolean;
  /** A second NoExecute taint of this node (its out-of-service taint): rides on its cap slot. */
  secondOf: string | undefined;
}

interface ZoneEntry {
  key: string;
  counted: number;
  notReady: number;
  excluded: number;
  state: ZoneState;
  /** Had counted nodes at the last evaluate() (upstream: present in zoneStates). */
  tracked: boolean;
  rate: number;
  bucket: TokenBucket;
  /** The same limiter run without the cap, to tell what the cap alone holds back. */
  shadow: TokenBucket;
  /** FIFO by request; Map keeps insertion order and deletes in O(1). */
  queue: Map<string, QueueItem>;
  capHeld: number;
}

interface InFlight {
  zone: string;
  at: number;
  secondOf: string | undefined;
}

/**
 * The pure disruption-protection core: zones, zone states, per-zone token buckets for NEW NoExecute
 * taints, master disruption and the blast-radius cap. Time is passed in (monotonic ms); nothing
 * here sets timers: after any call, ask `nextWakeup(now)` and arm one timer for `admit()`.
 *
 * Caller protocol (level based):
 * 1. `observe()` / `forget()` nodes as they change (or `update()` with the whole set), then
 *    `evaluate(now)` and carry out its decisions (master disruption).
 * 2. `requestNoExecute(name, zone, now, key)` whenever a node needs a NoExecute not-ready/unreachable
 *    taint it does not have yet (a swap NR <-> UR is NOT a new taint: do it directly). Idempotent.
 * 3. `admit(now)` when `nextWakeup()` says so: write the admitted taints, then `settle()` each.
 * 4. A node that became Ready=True is dropped from the queue by `observe()`; `cancel()` does it
 *    explicitly.
 */
export class DisruptionController {
  private readonly opts: Required<Omit<DisruptionOptions, 'cap'>>;
  private readonly cap: BlastRadiusCap;
  private readonly log: Logger;
  private readonly metrics: DisruptionMetrics | undefined;

  private readonly nodes = new Map<string, NodeObservation>();
  private readonly zones = new Map<string, ZoneEntry>();
  /** Pending request -> zone whose queue holds it. */
  private readonly pending = new Map<string, string>();
  private readonly inFlight = new Map<string, InFlight>();
  private master = false;
  private seq = 0;
  private capHeldTotal = 0;

  constructor(
    options: Partial<DisruptionOptions> = {},
    deps: { logger?: Logger; metrics?: DisruptionMetrics } = {},
  ) {
    const merged = { ...DEFAULT_DISRUPTION_OPTIONS, ...stripUndefined(options) };
    const errors = validateDisruptionOptions(merged);
    if (errors.length > 0) throw new RangeError(`invalid disruption options: ${errors.join('; ')}`);
    const { cap, ...rest } = merged;
    this.opts = rest;
    this.cap = new BlastRadiusCap(cap ?? {});
    this.log = (deps.logger ?? silentLogger).with({ component: 'disruption' });
    this.metrics = deps.metrics;
    this.updateHeldBackMetric();
  }

  // ---- nodes ---------------------------------------------------------------------------------

  /** Adds or updates one node (O(1)). Ready=True drops its pending NoExecute request. */
  observe(node: NodeObservation): void {
    const prev = this.nodes.get(node.name);
    if (prev) this.uncount(prev);
    const obs: NodeObservation = {
      name: node.name,
      zone: node.zone,
      ready: node.ready,
      excluded: node.excluded,
    };
    this.nodes.set(node.name, obs);
    this.count(obs);
    if (obs.ready === 'True') {
      if (this.removePending(node.name)) {
        this.log.debug(4, 'Node is ready again: dropped its NoExecute request', { node: node.name });
      }
    } else if (prev && prev.zone !== obs.zone) {
      this.movePending(node.name, obs.zone);
    }
    this.updateHeldBackMetric();
  }

  /** Removes a deleted node: statistics, queue and in-flight state. */
  forget(name: string): void {
    const prev = this.nodes.get(name);
    if (prev) {
      this.uncount(prev);
      this.nodes.delete(name);
    }
    this.removePending(name);
    this.inFlight.delete(name);
    this.updateHeldBackMetric();
  }

  /** Replaces the whole node set (nodes not listed are forgotten), then evaluates. */
  update(nodes: Iterable<NodeObservation>, now: number): DisruptionUpdate {
    const seen = new Set<string>();
    for (const n of nodes) {
      seen.add(n.name);
      this.observe(n);
    }
    for (const name of [...this.nodes.keys()]) if (!seen.has(name)) this.forget(name);
    return this.evaluate(now);
  }

  // ---- zone states ---------------------------------------------------------------------------

  /**
   * Recomputes zone states from the observed nodes (O(zones)) like upstream's handleDisruption:
   * swaps zone rate limiters on state changes, enters or leaves master disruption.
   */
  evaluate(now: number): DisruptionUpdate {
    const computed = this.computeZoneStates();
    const allAreFull = computed.size > 0 && [...computed.values()].every((s) => s === 'FullDisruption');
    const transitions: ZoneTransition[] = [];
    const decisions: DisruptionDecision[] = [];
    let masterChange: DisruptionUpdate['masterDisruption'] = null;
    this.untrackEmptyZones(now);
    if (allAreFull && !this.master) {
      masterChange = 'entered';
      this.enterMasterDisruption(computed, transitions, now);
      decisions.push({ kind: 'RemoveAllNoExecuteTaints' });
    } else if (!allAreFull && this.master) {
      masterChange = 'exited';
      this.exitMasterDisruption(computed, transitions, now);
      decisions.push({ kind: 'ResetAllProbeTimestamps', now });
    } else {
      for (const [key, state] of computed) {
        const z = this.zones.get(key)!;
        z.tracked = true;
        if (z.state === state) continue;
        // Upstream swaps the limiter only when the state changes (and never during master disruption).
        if (!this.master) this.setRate(z, zoneRate(state, z.counted, this.opts), now);
        moveZone(z, state, transitions);
      }
    }
    for (const t of transitions) {
      this.log.info('Controller detected that zone is now in new state', {
        zone: zoneDisplay(t.zone),
        from: t.from,
        newState: t.to,
        size: t.size,
        notReady: t.notReady,
        rate: t.rate,
      });
    }
    if (masterChange && this.metrics) {
      this.metrics.masterDisruptionTransitions.inc({
        direction: masterChange === 'entered' ? 'enter' : 'exit',
      });
    }
    this.gcZones();
    this.updateZoneMetrics(now);
    this.updateHeldBackMetric();
    return {
      zones: this.zoneStatuses(),
      transitions,
      masterDisruption: masterChange,
      masterDisruptionActive: this.master,
      decisions,
    };
  }

  /** The state of each zone with counted nodes, from its Ready and not-Ready counts. */
  private computeZoneStates(): Map<string, ZoneState> {
    const computed = new Map<string, ZoneState>();
    for (const z of this.zones.values()) {
      if (z.counted > 0) {
        computed.set(
          z.key,
          computeZoneState(z.counted - z.notReady, z.notReady, this.opts.unhealthyZoneThreshold),
        );
      }
    }
    return computed;
  }

  /** Zones that lost all their counted nodes: no longer in the statistics (upstream deletes them). */
  private untrackEmptyZones(now: number): void {
    for (const z of this.zones.values()) {
      if (z.tracked && z.counted === 0) {
        z.tracked = false;
        z.state = 'Initial';
        if (!this.master) this.setRate(z, this.opts.nodeEvictionRate, now);
        this.untrackZoneMetrics(z.key);
        this.log.debug(2, 'Zone has no counted nodes any more', { zone: zoneDisplay(z.key) });
      }
    }
  }

  /** Every counted zone is in full disruption: no zone evicts (rates 0), the taints come off. */
  private enterMasterDisruption(
    computed: Map<string, ZoneState>,
    transitions: ZoneTransition[],
    now: number,
  ): void {
    this.master = true;
    for (const z of this.zones.values()) this.setRate(z, 0, now);
    for (const [key, state] of computed) {
      const z = this.zones.get(key)!;
      z.tracked = true;
      moveZone(z, state, transitions);
    }
    this.log.info('Controller detected that all Nodes are not-Ready. Entering master disruption mode', {
      zones: computed.size,
    });
  }

  /** Some node is Ready again: each zone gets the rate of its state (probe times are reset). */
  private exitMasterDisruption(
    computed: Map<string, ZoneState>,
    transitions: ZoneTransition[],
    now: number,
  ): void {
    this.master = false;
    for (const z of this.zones.values()) {
      const state = computed.get(z.key);
      if (state === undefined) {
        this.setRate(z, this.opts.nodeEvictionRate, now);
        continue;
      }
      z.tracked = true;
      this.setRate(z, zoneRate(state, z.counted, this.opts), now);
      moveZone(z, state, transitions);
    }
    this.log.info('Controller detected that some Nodes are Ready. Exiting master disruption mode', {
      zones: computed.size,
    });
  }

  get masterDisruptionActive(): boolean {
    return this.master;
  }

  /** Zones with counted nodes as of the last evaluate(). */
  zoneStatuses(): ZoneStatus[] {
    const out: ZoneStatus[] = [];
    for (const z of this.zones.values()) {
      if (!z.tracked) continue;
      out.push({
        zone: z.key,
        state: z.state,
        size: z.counted,
        notReady: z.notReady,
        excluded: z.excluded,
        rate: z.rate,
        queued: z.queue.size,
      });
    }
    return out;
  }

  /** The zone's state as of the last evaluate() ('Initial' for a zone never evaluated). */
  zoneState(zone: string): ZoneState {
    return this.zones.get(zone)?.state ?? 'Initial';
  }

  /** NoExecute taints per second currently allowed in the zone. */
  rateOf(zone: string): number {
    return this.zones.get(zone)?.rate ?? (this.master ? 0 : this.opts.nodeEvictionRate);
  }

  // ---- NoExecute work ------------------------------------------------------------------------

  /**
   * Asks to add a NEW NoExecute taint to `name`. The node's observed zone wins over `zone` (which
   * is used for nodes not observed yet). FIFO per zone, deduplicated by node name. `secondOf`: the
   * request is a second NoExecute taint of that node under another name (its out-of-service
   * taint): the blast-radius cap counts it on the node's slot while the node holds one.
   */
  requestNoExecute(name: string, zone: string, now: number, key?: string, secondOf?: string): RequestResult {
    const node = this.nodes.get(name);
    if (node?.ready === 'True') return 'ignored-ready';
    const flight = this.inFlight.get(name);
    if (flight) {
      if (now - flight.at < this.opts.inFlightTimeoutMs) return 'in-flight';
      this.inFlight.delete(name);
      this.log.warn('NoExecute admission was never settled; accepting a new request', { node: name });
    }
    const zoneKey = node?.zone ?? zone;
    const queuedIn = this.pending.get(name);
    if (queuedIn !== undefined) {
      const item = this.zones.get(queuedIn)!.queue.get(name)!;
      if (key !== undefined) item.key = key;
      if (queuedIn !== zoneKey) this.movePending(name, zoneKey);
      return 'already-queued';
    }
    this.enqueue({
      name,
      zone: zoneKey,
      key,
      requestedAt: now,
      seq: ++this.seq,
      capHeld: false,
      secondOf,
    });
    this.updateHeldBackMetric();
    return 'queued';
  }

  /** Drops a pending request (node recovered or deleted). Returns whether one was pending. */
  cancel(name: string): boolean {
    const removed = this.removePending(name);
    if (removed) this.updateHeldBackMetric();
    return removed;
  }

  /**
   * Admits what the zone rates and the cap allow at `now`, oldest request first across zones.
   * Master disruption admits nothing.
   */
  admit(now: number): AdmitResult {
    if (this.master) {
      this.updateHeldBackMetric(now);
      return { admitted: [], events: [] };
    }
    const fleet = this.nodes.size;
    const newlyHeld = this.holdForCap(now);
    const admitted = this.admitInOrder(now, fleet);
    const events = this.capHeldEvents(newlyHeld, now, fleet);
    this.updateHeldBackMetric(now);
    return { admitted, events };
  }

  /**
   * 1. Runs each zone's limiter without the cap: what it would let through but the cap holds back
   *    is "held by cap". Returns the items held for the first time.
   */
  private holdForCap(now: number): QueueItem[] {
    const newlyHeld: QueueItem[] = [];
    if (!this.cap.enabled) return newlyHeld;
    for (const z of this.zones.values()) {
      if (z.queue.size <= z.capHeld || !z.shadow.available(now)) continue;
      for (const item of z.queue.values()) {
        if (item.capHeld) continue;
        if (!z.shadow.tryTake(now)) break;
        item.capHeld = true;
        z.capHeld++;
        this.capHeldTotal++;
        newlyHeld.push(item);
      }
    }
    return newlyHeld;
  }

  /**
   * 2. Admits in global request order (the heads of the zones with a token) while the zone buckets
   *    and the cap allow; a head the cap holds does not hold back a second taint of a node that
   *    holds a slot (it takes none) at the head of another zone.
   */
  private admitInOrder(now: number, fleet: number): Admission[] {
    const admitted: Admission[] = [];
    for (;;) {
      let best: ZoneEntry | undefined;
      let bestHead: QueueItem | undefined;
      for (const z of this.zones.values()) {
        if (z.queue.size === 0 || !z.bucket.available(now)) continue;
        const head = z.queue.values().next().value!;
        if (!this.cap.allows(now, fleet, head.secondOf)) continue;
        if (!bestHead || head.seq < bestHead.seq) {
          best = z;
          bestHead = head;
        }
      }
      if (!best || !bestHead) break;
      best.bucket.tryTake(now);
      this.removePending(bestHead.name);
      this.cap.record(bestHead.name, now, bestHead.secondOf);
      this.inFlight.set(bestHead.name, { zone: best.key, at: now, secondOf: bestHead.secondOf });
      admitted.push({
        name: bestHead.name,
        zone: best.key,
        key: bestHead.key,
        requestedAt: bestHead.requestedAt,
        waitedMs: now - bestHead.requestedAt,
      });
      this.log.debug(2, 'Admitted NoExecute taint', {
        node: bestHead.name,
        zone: zoneDisplay(best.key),
        waited: formatDuration(now - bestHead.requestedAt),
      });
    }
    return admitted;
  }

  /**
   * 3. One Event per node the cap holds back, the first time it does (an item is flagged only
   *    once; only a new request, e.g. after a failed write, can be held and reported again).
   */
  private capHeldEvents(newlyHeld: readonly QueueItem[], now: number, fleet: number): DisruptionEvent[] {
    const events: DisruptionEvent[] = [];
    for (const item of newlyHeld) {
      if (!item.capHeld || this.pending.get(item.name) !== item.zone) continue;
      const limit = this.cap.limit(fleet) ?? 0;
      const message =
        `Adding the NoExecute taint is held back by the blast-radius cap: ${this.cap.used(now)} of ` +
        `${limit} node(s) allowed per ${formatDuration(this.cap.windowMs)} already tainted`;
      events.push({
        involvedObject: { apiVersion: 'v1', kind: 'Node', name: item.name },
        type: 'Warning',
        reason: 'NoExecuteTaintHeldByCap',
        message,
      });
      this.metrics?.capHolds.inc();
      this.log.warn('NoExecute taint held back by blast-radius cap', {
        node: item.name,
        zone: zoneDisplay(item.zone),
        limit,
        window: formatDuration(this.cap.windowMs),
      });
    }
    return events;
  }

  /** Reports what became of an admission. Returns false when `name` was not in flight. */
  settle(name: string, outcome: SettleOutcome, now: number): boolean {
    const flight = this.inFlight.get(name);
    if (!flight) return false;
    this.inFlight.delete(name);
    switch (outcome) {
      case 'applied':
        this.metrics?.evictionsTotal.inc({ zone: flight.zone });
        break;
      case 'dropped':
        this.cap.refund(name);
        break;
      case 'failed': {
        this.cap.refund(name);
        const node = this.nodes.get(name);
        if (node?.ready !== 'True') {
          this.enqueue({
            name,
            zone: node?.zone ?? flight.zone,
            key: undefined,
            requestedAt: now,
            seq: ++this.seq,
            capHeld: false,
            secondOf: flight.secondOf,
          });
        }
        break;
      }
    }
    this.updateHeldBackMetric(now);
    return true;
  }

  /**
   * When admit() should run next: a time >= now, or undefined when nothing can be admitted
   * until something changes (empty queues, zero rates, master disruption).
   */
  nextWakeup(now: number): number | undefined {
    if (this.master || this.pending.size === 0) return undefined;
    const fleet = this.nodes.size;
    const capFree = this.cap.nextFreeAt(now, fleet) ?? now;
    let t = Number.POSITIVE_INFINITY;
    for (const z of this.zones.values()) {
      if (z.queue.size === 0) continue;
      const token = z.bucket.nextTokenAt(now);
      // A second taint of a node that holds a cap slot waits for its token only.
      const head = z.queue.values().next().value!;
      const free = head.secondOf !== undefined && this.cap.holds(now, head.secondOf) ? now : capFree;
      if (token !== undefined) t = Math.min(t, Math.max(token, free));
      if (this.cap.enabled && z.queue.size > z.capHeld) {
        const shadow = z.shadow.nextTokenAt(now);
        if (shadow !== undefined) t = Math.min(t, shadow);
      }
    }
    return Number.isFinite(t) ? Math.max(t, now) : undefined;
  }

  /**
   * This replica starts acting (it became leader, or acts again after a blind spell or a refusal):
   * the NoExecute taints of ours still on the nodes, added by the leaders before it (or by itself),
   * count as if it had admitted them (planSeed dates them on our clock). In the blast-radius cap,
   * each at its time within the window (one it remembers under the same name is not counted
   * twice); in each zone, the bucket gives no token until one interval after its latest taint.
   * Returns how many the cap counts now and the zones that wait for a token because of them.
   */
  seed(
    taints: Iterable<TaintInPlace>,
    now: number,
    wallNow: number,
  ): { capUsed: number; zonesWaiting: number } {
    const located = Array.from(taints, (t) => ({ ...t, zone: this.nodes.get(t.node)?.zone ?? t.zone }));
    const plan = planSeed(located, now, wallNow, this.cap.enabled ? this.cap.windowMs : 0);
    this.cap.seed(plan.grants, now);
    let zonesWaiting = 0;
    for (const [zone, at] of plan.zones) {
      const z = this.zoneEntry(zone);
      z.bucket.takenAt(at);
      z.shadow.takenAt(at);
      if (!z.bucket.available(now)) zonesWaiting++;
    }
    this.updateHeldBackMetric(now);
    return { capUsed: this.cap.used(now), zonesWaiting };
  }

  /** Pending requests by what holds them. */
  heldBack(): Record<HeldBackReason, number> {
    const total = this.pending.size;
    if (this.master) return { 'rate-limit': 0, cap: 0, 'master-disruption': total };
    return { 'rate-limit': total - this.capHeldTotal, cap: this.capHeldTotal, 'master-disruption': 0 };
  }

  /** Pending requests in queue order (per zone), for diagnostics and tests. */
  queued(): QueuedNode[] {
    const out: QueuedNode[] = [];
    for (const z of this.zones.values()) {
      for (const item of z.queue.values()) {
        const reason: HeldBackReason = this.master
          ? 'master-disruption'
          : item.capHeld
            ? 'cap'
            : 'rate-limit';
        out.push({ name: item.name, zone: item.zone, requestedAt: item.requestedAt, reason });
      }
    }
    return out;
  }

  /** Names admitted and not settled yet. */
  inFlightNames(): string[] {
    return [...this.inFlight.keys()];
  }

  /** Additions counted in the cap window ending at `now` (0 when the cap is off). */
  capUsed(now: number): number {
    return this.cap.used(now);
  }

  /** The cap limit for the current fleet, or undefined when the cap is off. */
  capLimit(): number | undefined {
    return this.cap.limit(this.nodes.size);
  }

  // ---- internals -----------------------------------------------------------------------------

  private zoneEntry(key: string): ZoneEntry {
    let z = this.zones.get(key);
    if (!z) {
      // Upstream creates a zone's queue with a full primary-rate bucket (stopped in master disruption).
      const rate = this.master ? 0 : this.opts.nodeEvictionRate;
      z = {
        key,
        counted: 0,
        notReady: 0,
        excluded: 0,
        state: 'Initial',
        tracked: false,
        rate,
        bucket: TokenBucket.full(rate, this.opts.burst),
        shadow: TokenBucket.full(rate, this.opts.burst),
        queue: new Map(),
        capHeld: 0,
      };
      this.zones.set(key, z);
      this.metrics?.evictionsTotal.inc({ zone: key }, 0);
    }
    return z;
  }

  private setRate(z: ZoneEntry, rate: number, now: number): void {
    z.bucket = z.bucket.swapped(rate, now);
    z.shadow = z.shadow.swapped(rate, now);
    z.rate = rate;
  }

  private count(n: NodeObservation): void {
    const z = this.zoneEntry(n.zone);
    if (n.excluded) {
      z.excluded++;
      return;
    }
    z.counted++;
    if (n.ready !== 'True') z.notReady++;
  }

  private uncount(n: NodeObservation): void {
    const z = this.zones.get(n.zone);
    if (!z) return;
    if (n.excluded) {
      z.excluded--;
      return;
    }
    z.counted--;
    if (n.ready !== 'True') z.notReady--;
  }

  private enqueue(item: QueueItem): void {
    const z = this.zoneEntry(item.zone);
    z.queue.set(item.name, item);
    this.pending.set(item.name, item.zone);
  }

  private removePending(name: string): boolean {
    const zoneKey = this.pending.get(name);
    if (zoneKey === undefined) return false;
    this.pending.delete(name);
    const z = this.zones.get(zoneKey);
    const item = z?.queue.get(name);
    if (z && item) {
      z.queue.delete(name);
      if (item.capHeld) {
        z.capHeld--;
        this.capHeldTotal--;
      }
    }
    return true;
  }

  private movePending(name: string, toZone: string): void {
    const fromZone = this.pending.get(name);
    if (fromZone === undefined || fromZone === toZone) return;
    const item = this.zones.get(fromZone)?.queue.get(name);
    this.removePending(name);
    if (!item) return;
    this.enqueue({ ...item, zone: toZone, seq: ++this.seq, capHeld: false });
  }

  private gcZones(): void {
    for (const [key, z] of this.zones) {
      if (z.counted === 0 && z.excluded === 0 && z.queue.size === 0 && !z.tracked) this.zones.delete(key);
    }
  }

  private untrackZoneMetrics(zone: string): void {
    const m = this.metrics;
    if (!m) return;
    // Upstream keeps the series of a vanished zone at size 0, health 100, unhealthy 0.
    m.zoneSize.set({ zone }, 0);
    m.zoneHealth.set({ zone }, 100);
    m.unhealthyNodes.set({ zone }, 0);
    for (const state of ZONE_STATES) m.zoneState.remove({ zone, state });
  }

  private updateZoneMetrics(now: number): void {
    const m = this.metrics;
    if (!m) return;
    for (const z of this.zones.values()) {
      if (!z.tracked) continue;
      m.zoneSize.set({ zone: z.key }, z.counted);
      m.unhealthyNodes.set({ zone: z.key }, z.notReady);
      m.zoneHealth.set({ zone: z.key }, (100 * (z.counted - z.notReady)) / z.counted);
      for (const state of ZONE_STATES) m.zoneState.set({ zone: z.key, state }, state === z.state ? 1 : 0);
    }
    m.masterDisruption.set(this.master ? 1 : 0);
    m.capUsed.set(this.cap.used(now));
  }

  private updateHeldBackMetric(now?: number): void {
    const m = this.metrics;
    if (!m) return;
    const held = this.heldBack();
    for (const reason of HELD_BACK_REASONS) m.heldBack.set({ reason }, held[reason]);
    if (now !== undefined) m.capUsed.set(this.cap.used(now));
  }
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}

/** Moves a zone to `to`, recording the transition (with the zone's rate as set now). */
function moveZone(z: ZoneEntry, to: ZoneState, transitions: ZoneTransition[]): void {
  if (z.state === to) return;
  transitions.push({ zone: z.key, from: z.state, to, size: z.counted, notReady: z.notReady, rate: z.rate });
  z.state = to;
}
