import type { Lease, Node } from '../kube/types.js';
import {
  findCondition,
  hasDuplicateTypes,
  type NodeStatusDecision,
  nodeConditions,
  type UnknownConditionsOptions,
  unknownConditionsDecision,
} from './conditions.js';
import { DeadlineHeap, type Scheduled } from './deadlines.js';
import {
  AnomalyKind,
  ConditionStatusValue,
  NODE_LEASE_NAMESPACE,
  NodeConditionReason,
  NodeConditionType,
} from './reasons.js';
import { parseMicros, sameInstant } from './time.js';
import type { Anomaly, GraceConfig } from './types.js';

/** Upstream defaults: --node-monitor-grace-period 50s (v1.32+), --node-startup-grace-period 60s. */
export const DEFAULT_GRACE: Readonly<GraceConfig> = Object.freeze({
  monitorGraceMs: 50_000,
  startupGraceMs: 60_000,
});

/**
 * A node is timed out when `now > probe + grace` (strictly). `nextDeadline()` returns `probe + grace +
 * DEADLINE_EPSILON_MS`, the first instant at which `popDue` is sure to report it, so that a timer firing
 * exactly on time never finds "not yet" and re-arms for the same instant.
 */
export const DEADLINE_EPSILON_MS = 1;

/**
 * - 'changed' (default): any renewTime VALUE not seen before for this lease is a renewal, whether it
 *   moved forward or backward. A kubelet whose clock is minutes behind, or steps back, behaves like any
 *   other (backward steps are counted: anomaly renew_time_backward). A value equal to one seen among the
 *   last `renewHistorySize` values (a stale object replayed by a lagging API server cache after a relist)
 *   is not a renewal. An identical renewTime (relist, unrelated update) is never a renewal.
 * - 'advanced': upstream exactly: a renewal only when renewTime is strictly after the saved one; a
 *   kubelet whose clock stepped back looks dead until its clock passes the old value again.
 */
export type LeaseRenewalRule = 'changed' | 'advanced';

/** Per-node grace, e.g. per node pool; undefined (or a missing field) = the tracker's defaults. */
export type GraceResolver = (node: Node) => Partial<GraceConfig> | undefined;

export interface NodeHealthTrackerOptions {
  /** Default grace periods (ms); fields missing here fall back to {@link DEFAULT_GRACE}. */
  grace?: Partial<GraceConfig>;
  /** Per-node grace (another module's per-pool config). Called on every node observation. */
  graceFor?: GraceResolver;
  leaseRule?: LeaseRenewalRule;
  /** Distinct renewTime values remembered per lease for replay detection ('changed' rule). Default 8. */
  renewHistorySize?: number;
}

/** What one observation did. */
export interface ObservationResult {
  /** Node (= lease) name; '' when the object had none. */
  name: string;
  /** The probe timestamp was set to `now` (a heartbeat, first sight of the node, or a new lease). */
  refreshed: boolean;
  /** The node had been reported due (timed out) and is now alive again. */
  recovered: boolean;
  /** observeNode only: first time this node name is seen (or again after forgetNode): RegisteredNode. */
  registered: boolean;
  anomalies: Anomaly[];
}

/** A read-only view of one node's health, for tests, debug endpoints and the disruption module. */
export interface NodeHealthSnapshot {
  name: string;
  hasNode: boolean;
  hasLease: boolean;
  /** Our monotonic ms when a heartbeat was last observed (or the grace period last restarted). */
  probeTimestamp: number;
  /** How far storage outages and fleet silences moved the probe since the last observation (ms). */
  forgivenMs: number;
  /** Our monotonic ms when the Ready condition last changed as far as we saw. */
  readyTransitionTimestamp: number;
  /** Raw renewTime of the last lease observation that counted as a renewal. */
  lastSeenRenewTime: string | undefined;
  /** Raw Ready lastHeartbeatTime last observed. */
  lastSeenReadyHeartbeat: string | null | undefined;
  /** Ready status last observed; undefined when the node has no Ready condition. */
  readyStatus: string | undefined;
  graceMs: number;
  graceKind: 'startup' | 'monitor';
  /**
   * probe + grace (or a second opinion's confirmation, if earlier): timed out when now > deadline.
   * undefined for a lease without a node.
   */
  deadline: number | undefined;
  /** A second opinion confirmed this silence down at (our clock); undefined: it did not. */
  confirmedAt: number | undefined;
  /**
   * Heartbeats observed so far (renewals, first sight): names the current silence. Outages, blind
   * spells and fresh graces move probeTimestamp, not this.
   */
  heartbeats: number;
  /** popDue/recheckAll reported it and nothing has refreshed it since. */
  reported: boolean;
}

export interface HealthTrackerStats {
  nodes: number;
  leases: number;
  leasesWithoutNode: number;
  /** Nodes waiting in the deadline heap. */
  scheduled: number;
  /** renewTime moved backwards and counted as a renewal ('changed' rule). */
  backwardSteps: number;
  anomalies: Partial<Record<AnomalyKind, number>>;
}

interface SavedReady {
  status: string;
  heartbeat: string | null | undefined;
  transition: string | null | undefined;
}

/** One node's state; it is also its own item in the deadline heap (`due`, `heapAt`). */
interface Entry extends Scheduled {
  name: string;
  hasNode: boolean;
  uid: string | undefined;
  /** Ready condition of the last observed status; undefined = no Ready condition. */
  ready: SavedReady | undefined;
  graceMs: number;
  graceKind: 'startup' | 'monitor';
  probe: number;
  /**
   * How far storage outages and fleet silences moved `probe` since it was last set by an
   * observation (ms): inferred forgiveness, capped at forgivenessCapOf(entry).
   */
  forgiven: number;
  transition: number;
  reported: boolean;
  hasLease: boolean;
  /** Saved renewTime (µs since epoch) of the last renewal; undefined = none saved. */
  renewMicros: number | undefined;
  renewRaw: string | undefined;
  /** Recent distinct renewTime values (µs), newest last; survives forgetLease. */
  history: number[];
  /**
   * A renewal a re-read showed before the watch did (µs): until the watch shows it, the older
   * renewals the lagging watch still delivers are the watch catching up, not renewals going back.
   */
  readAhead: number | undefined;
  /**
   * A second opinion confirmed the node down at this moment (our clock), during the silence that
   * began at `probe`: it is timed out from then. Cleared when `probe` moves (a renewal, a fresh
   * grace, forgiveness): the confirmation was of a silence that no longer stands.
   */
  confirmed: number | undefined;
  /**
   * Heartbeats observed (renewals, first sight): the current silence's identity. Forgiveness and
   * fresh graces move `probe` but not this: the silence they extend is the same one.
   */
  heartbeats: number;
}

/** The moment a tracked node times out: it is timed out when `now > deadlineOf(entry)`. */
function deadlineOf(entry: Entry): number {
  const grace = entry.probe + entry.graceMs;
  return entry.confirmed === undefined ? grace : Math.min(grace, entry.confirmed);
}

/**
 * The most that storage outages and fleet-wide silences (inferred, not seen: forgiveOutage, holdAll)
 * may move a node's probe past where its last observation set it: its own grace. A dead node is
 * then timed out by its last observed heartbeat + 2 x grace (+ blind time, not capped: extendBlind),
 * and a live kubelet survives a single storage outage L with L <= 2 x grace - renew interval - its
 * reconnect back-off.
 */
export function forgivenessCapOf(entry: { graceMs: number }): number {
  return entry.graceMs;
}

/** Why `body` is not the Lease of node `name` in kube-node-lease (undefined: it is). */
function leaseReadProblem(name: string, body: unknown): string | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    const text = typeof body === 'string' ? JSON.stringify(body.slice(0, 64)) : String(body);
    return `not a JSON object: ${text}`;
  }
  const o = body as { kind?: unknown; metadata?: { name?: unknown; namespace?: unknown } };
  const got = `kind=${String(o.kind)} name=${String(o.metadata?.namespace)}/${String(o.metadata?.name)}`;
  if (o.kind !== 'Lease' || o.metadata?.name !== name || o.metadata?.namespace !== NODE_LEASE_NAMESPACE) {
    return `not the node's Lease ${NODE_LEASE_NAMESPACE}/${name}: ${got}`;
  }
  return undefined;
}

function validMs(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v) && v >= 0;
}

/**
 * Node health on OUR monotonic clock. Pure state machine: no timers, no I/O, no clock reads; every
 * method takes `now` (monotonic ms, e.g. clock.scheduler.now()). Remote timestamps (renewTime,
 * lastHeartbeatTime) are only compared with each other to notice a change; the moment we notice it is
 * `now`. Feed it every watch event (observeLease/observeNode/forget*), arm one timer at
 * `nextDeadline()`, and on firing call `popDue(now)`. Never throws on malformed objects.
 */
export class NodeHealthTracker {
  private readonly entries = new Map<string, Entry>();
  private readonly heap = new DeadlineHeap<Entry>();
  private readonly orphanLeases = new Set<string>();
  private readonly seenAnomalies = new Map<string, Set<AnomalyKind>>();
  private readonly anomalyCounts: Partial<Record<AnomalyKind, number>> = {};
  private readonly defaults: GraceConfig;
  private readonly graceFor: GraceResolver | undefined;
  private readonly leaseRule: LeaseRenewalRule;
  private readonly historySize: number;
  private nodeCount = 0;
  private leaseCount = 0;
  private backwardSteps = 0;
  /** Both lists are complete: a lease without a node is an anomaly from now on (see listsSynced). */
  private judgingOrphans = false;

  constructor(options: NodeHealthTrackerOptions = {}) {
    this.defaults = {
      monitorGraceMs: validMs(options.grace?.monitorGraceMs)
        ? options.grace.monitorGraceMs
        : DEFAULT_GRACE.monitorGraceMs,
      startupGraceMs: validMs(options.grace?.startupGraceMs)
        ? options.grace.startupGraceMs
        : DEFAULT_GRACE.startupGraceMs,
    };
    this.graceFor = options.graceFor;
    this.leaseRule = options.leaseRule ?? 'changed';
    const h = options.renewHistorySize;
    this.historySize = typeof h === 'number' && Number.isInteger(h) && h >= 1 ? h : 8;
  }

  // ---------------------------------------------------------------- observations

  /** Common checks of an observation: a usable `now` and an object with a name. */
  private beginObservation(
    obj: Lease | Node,
    kind: 'Lease' | 'Node',
    now: number,
  ):
    | { ok: true; result: ObservationResult; name: string; meta: Lease['metadata'] }
    | { ok: false; result: ObservationResult } {
    const meta = (obj as Partial<Lease> | null | undefined)?.metadata;
    const name = typeof meta?.name === 'string' ? meta.name : '';
    const result: ObservationResult = {
      name,
      refreshed: false,
      recovered: false,
      registered: false,
      anomalies: [],
    };
    if (!Number.isFinite(now)) {
      this.anomaly(result.anomalies, AnomalyKind.InvalidNow, kind, name, String(now));
      return { ok: false, result };
    }
    if (name === '' || meta === undefined) {
      this.anomaly(result.anomalies, AnomalyKind.MissingName, kind, '');
      return { ok: false, result };
    }
    return { ok: true, result, name, meta };
  }

  /** A Lease from kube-node-lease was added or updated (or relisted). */
  observeLease(lease: Lease, now: number): ObservationResult {
    return this.observeLeaseFrom(lease, now, 'watch');
  }

  private observeLeaseFrom(lease: Lease, now: number, from: 'watch' | 'read'): ObservationResult {
    const start = this.beginObservation(lease, 'Lease', now);
    if (!start.ok) return start.result;
    const { result, name, meta } = start;
    const anomalies = result.anomalies;
    const namespace = meta?.namespace;
    if (namespace !== undefined && namespace !== NODE_LEASE_NAMESPACE) {
      this.anomaly(anomalies, AnomalyKind.LeaseWrongNamespace, 'Lease', '', `${namespace}/${name}`);
      return result;
    }

    const entry = this.entryFor(name, now);
    if (!entry.hasLease) {
      entry.hasLease = true;
      this.leaseCount++;
      if (!entry.hasNode) this.orphanLeases.add(name);
    }
    const spec = typeof lease.spec === 'object' && lease.spec !== null ? lease.spec : {};
    const holder = spec.holderIdentity;
    if (holder === null || holder === undefined || holder === '') {
      this.anomaly(anomalies, AnomalyKind.HolderMissing, 'Lease', name);
    } else if (holder !== name) {
      this.anomaly(anomalies, AnomalyKind.HolderMismatch, 'Lease', name, String(holder));
    }
    if (!entry.hasNode && this.judgingOrphans) {
      this.anomaly(anomalies, AnomalyKind.LeaseWithoutNode, 'Lease', name);
    }

    const raw = spec.renewTime;
    if (raw === null || raw === undefined || raw === '') {
      this.anomaly(anomalies, AnomalyKind.RenewTimeMissing, 'Lease', name);
      return result;
    }
    const micros = parseMicros(raw);
    if (micros === undefined) {
      this.anomaly(anomalies, AnomalyKind.RenewTimeUnparsable, 'Lease', name, String(raw).slice(0, 64));
      return result;
    }

    // The lagging watch catching up with a renewal a re-read already showed: nothing new.
    if (from === 'watch' && entry.readAhead !== undefined) {
      if (micros < entry.readAhead) return result;
      entry.readAhead = undefined;
    }
    let renewal = false;
    const saved = entry.renewMicros;
    if (this.leaseRule === 'advanced') {
      if (saved === undefined || micros > saved) renewal = true;
      else if (micros < saved) {
        this.anomaly(anomalies, AnomalyKind.RenewTimeNotAdvanced, 'Lease', name, String(raw));
      }
    } else if (saved === undefined || micros !== saved) {
      if (entry.history.includes(micros)) {
        this.anomaly(anomalies, AnomalyKind.RenewTimeReplayed, 'Lease', name, String(raw));
      } else {
        renewal = true;
        if (saved !== undefined && micros < saved) {
          this.backwardSteps++;
          this.anomaly(anomalies, AnomalyKind.RenewTimeBackward, 'Lease', name, String(raw));
        }
      }
    }
    if (!renewal) return result;

    entry.renewMicros = micros;
    entry.renewRaw = raw;
    if (from === 'read') entry.readAhead = micros;
    this.remember(entry, micros);
    this.refresh(entry, now, result);
    return result;
  }

  /**
   * The Lease of node `name` as re-read from the API server (before marking it): observed as
   * {@link observeLease} when it is that Lease (kind Lease, that name, in kube-node-lease). Any
   * other answer (a non-JSON body such as a proxy's HTML page, another object) is the anomaly
   * lease_read_invalid and `valid` is false: it shows neither a renewal nor its absence.
   */
  observeLeaseRead(name: string, body: unknown, now: number): ObservationResult & { valid: boolean } {
    const problem = leaseReadProblem(name, body);
    if (problem === undefined) return { ...this.observeLeaseFrom(body as Lease, now, 'read'), valid: true };
    const result: ObservationResult & { valid: boolean } = {
      name,
      refreshed: false,
      recovered: false,
      registered: false,
      anomalies: [],
      valid: false,
    };
    this.anomaly(result.anomalies, AnomalyKind.LeaseReadInvalid, 'Lease', name, problem);
    return result;
  }

  /** A Node was added or updated (or relisted). */
  observeNode(node: Node, now: number): ObservationResult {
    const start = this.beginObservation(node, 'Node', now);
    if (!start.ok) return start.result;
    const { result, name, meta } = start;
    const anomalies = result.anomalies;

    const entry = this.entryFor(name, now);
    const conditions = nodeConditions(node);
    if (hasDuplicateTypes(conditions)) this.anomaly(anomalies, AnomalyKind.DuplicateCondition, 'Node', name);
    const ready = findCondition(conditions, NodeConditionType.Ready);
    const uid = typeof meta.uid === 'string' ? meta.uid : undefined;

    // Status rule, in upstream's order. `refresh` = probe (and transition) := now.
    let refresh = false;
    let transitioned = false;
    if (!entry.hasNode) {
      // No saved health: a fresh grace period (also after a controller restart).
      entry.hasNode = true;
      this.nodeCount++;
      this.orphanLeases.delete(name);
      result.registered = true;
      refresh = true;
      transitioned = true;
    } else if (uid !== undefined && entry.uid !== undefined && uid !== entry.uid) {
      // Deleted and re-created under the same name while we were not looking: a new node.
      refresh = true;
      transitioned = true;
    } else if (entry.ready === undefined && ready !== undefined) {
      // Ready appeared. Not a heartbeat when it is the placeholder a node controller appends on timeout
      // (Unknown, NodeStatusNeverUpdated, heartbeat = creationTimestamp): our own write echoed back.
      const placeholder =
        ready.status === ConditionStatusValue.Unknown &&
        ready.reason === NodeConditionReason.NodeStatusNeverUpdated &&
        sameInstant(ready.lastHeartbeatTime, meta.creationTimestamp);
      if (!placeholder) {
        refresh = true;
        transitioned = true;
      }
    } else if (entry.ready !== undefined && ready === undefined) {
      // Upstream logs an error and (as its code runs) does not refresh the probe; neither do we.
      this.anomaly(anomalies, AnomalyKind.ReadyConditionRemoved, 'Node', name);
    } else if (entry.ready !== undefined && ready !== undefined) {
      const hb = ready.lastHeartbeatTime;
      if (hb != null && hb !== '' && parseMicros(hb) === undefined) {
        this.anomaly(anomalies, AnomalyKind.HeartbeatUnparsable, 'Node', name, String(hb).slice(0, 64));
      }
      if (!sameInstant(entry.ready.heartbeat, hb)) {
        refresh = true;
        transitioned = !sameInstant(entry.ready.transition, ready.lastTransitionTime);
      }
    }

    entry.uid = uid ?? entry.uid;
    entry.ready =
      ready === undefined
        ? undefined
        : { status: ready.status, heartbeat: ready.lastHeartbeatTime, transition: ready.lastTransitionTime };
    const grace = this.resolveGrace(node, name, anomalies);
    if (ready === undefined) {
      entry.graceMs = grace.startupGraceMs;
      entry.graceKind = 'startup';
    } else {
      entry.graceMs = grace.monitorGraceMs;
      entry.graceKind = 'monitor';
    }
    if (transitioned) entry.transition = now;
    if (refresh) this.refresh(entry, now, result);
    else this.reschedule(entry, now);
    return result;
  }

  /**
   * The node list and the lease list are both complete (each watch synced once). Until then a
   * lease without a node is not an anomaly: its Node may just not be listed yet (at start-up
   * every lease would be one). From now on it is; returns the anomaly of each lease that has no
   * node now. Later calls return nothing.
   */
  listsSynced(): Anomaly[] {
    if (this.judgingOrphans) return [];
    this.judgingOrphans = true;
    const out: Anomaly[] = [];
    for (const name of this.leasesWithoutNode()) {
      this.anomaly(out, AnomalyKind.LeaseWithoutNode, 'Lease', name);
    }
    return out;
  }

  /** The Node was deleted. Returns whether it was known (upstream emits RemovingNode then). */
  forgetNode(name: string): boolean {
    const entry = this.entries.get(name);
    if (!entry?.hasNode) return false;
    entry.hasNode = false;
    entry.ready = undefined;
    entry.uid = undefined;
    entry.reported = false;
    this.nodeCount--;
    this.heap.remove(entry);
    if (entry.hasLease) this.orphanLeases.add(name);
    else this.deleteEntry(name);
    return true;
  }

  /**
   * The Lease was deleted. The node falls back to status heartbeats; a re-created lease counts as a
   * renewal when its renewTime was not seen before.
   */
  forgetLease(name: string): boolean {
    const entry = this.entries.get(name);
    if (!entry?.hasLease) return false;
    entry.hasLease = false;
    entry.renewMicros = undefined;
    entry.renewRaw = undefined;
    this.leaseCount--;
    this.orphanLeases.delete(name);
    if (!entry.hasNode) this.deleteEntry(name);
    return true;
  }

  /**
   * A fresh grace period for every node: probe = transition = now. Use at start, on becoming leader,
   * when sight is regained after a watch outage, and on leaving master disruption. O(N).
   */
  resetAll(now: number): void {
    if (!Number.isFinite(now)) return;
    this.rescheduleAll((entry) => {
      entry.probe = now;
      entry.transition = now;
      entry.forgiven = 0;
    });
  }

  /**
   * Time nobody could see does not count against any node: after a blind spell of `blindMs` that
   * ended at `now`, every node's probe moves forward by the part of the spell that came after it,
   * `probe := min(probe + blindMs, now)`. A node silent since before the spell keeps the grace it
   * had left when the spell began; a node last seen during the spell gets a full grace from `now`.
   * Summed over spells, a dead node is timed out after grace + the blind time since its last
   * heartbeat, however the spells are spaced (resetAll after each spell would never time it out
   * if they come more often than the grace period). Not capped: blind time is bounded by the
   * step-down rule, and a cap would mark a live fleet right after a long API-server outage, before
   * its kubelets reconnect. O(N).
   */
  extendBlind(blindMs: number, now: number): void {
    if (!Number.isFinite(now) || !Number.isFinite(blindMs) || blindMs <= 0) return;
    this.rescheduleAll((entry) => {
      entry.probe = Math.max(entry.probe, Math.min(entry.probe + blindMs, now));
    });
  }

  /**
   * An outage of the API server's storage that ended at `now` (`outageMs`, with what the kubelets
   * need to reconnect after it): kubelets could not renew through it, so every probe moves forward
   * as for a blind spell, `probe := min(probe + outageMs, now)`, but inferred, not seen: capped
   * (see {@link forgivenessCapOf}).
   */
  forgiveOutage(outageMs: number, now: number): void {
    if (!Number.isFinite(now) || !Number.isFinite(outageMs) || outageMs <= 0) return;
    this.rescheduleAll((entry) => {
      this.forgive(entry, Math.min(entry.probe + outageMs, now));
    });
  }

  /**
   * No node is timed out before `until` (at most a fresh grace from `now`): every probe moves to at
   * least `until - grace`, never past `now`. For a silence whose cause is not known (a whole fleet
   * quiet at once): a kubelet that could not renew through it gets the time to reconnect. Inferred,
   * not seen: capped (see {@link forgivenessCapOf}). O(N).
   */
  holdAll(until: number, now: number): void {
    if (!Number.isFinite(now) || !Number.isFinite(until) || until <= now) return;
    this.rescheduleAll((entry) => {
      this.forgive(entry, Math.min(until - entry.graceMs, now));
    });
  }

  /**
   * Moves `entry`'s probe forward to `to`, no further than its cap on inferred forgiveness allows:
   * what storage outages and fleet silences forgave since its last observation (a heartbeat, first
   * sight, a fresh grace) never exceeds {@link forgivenessCapOf} (blind spells aside).
   */
  private forgive(entry: Entry, to: number): void {
    const room = Math.max(0, forgivenessCapOf(entry) - entry.forgiven);
    const probe = Math.min(Math.max(entry.probe, to), entry.probe + room);
    entry.forgiven += probe - entry.probe;
    entry.probe = probe;
  }

  /** Moves every entry's probe (`move`), clears `reported` and rebuilds the heap at the new deadlines. O(N). */
  private rescheduleAll(move: (entry: Entry) => void): void {
    const scheduled: Entry[] = [];
    for (const entry of this.entries.values()) {
      const probe = entry.probe;
      move(entry);
      if (entry.probe !== probe) entry.confirmed = undefined;
      entry.reported = false;
      if (entry.hasNode) {
        entry.due = deadlineOf(entry);
        scheduled.push(entry);
      }
    }
    this.heap.rebuild(scheduled);
  }

  /**
   * A second opinion confirmed the node down (src/second-opinion): it is timed out from `now`,
   * before its grace ends, as long as the silence the opinion judged (the one that began at
   * `silentSince`, our clock) still stands. Returns whether it took effect: false for a node we
   * do not track, one that renewed since (`silentSince` is not its probe any more), or one
   * already timed out. The caller re-arms its deadline timer: the node is due at once.
   */
  confirmDown(name: string, silentSince: number, now: number): boolean {
    const entry = this.entries.get(name);
    if (!entry?.hasNode || entry.probe !== silentSince || !Number.isFinite(now)) return false;
    if (now > deadlineOf(entry)) return false;
    entry.confirmed = now - DEADLINE_EPSILON_MS;
    this.reschedule(entry, now);
    return true;
  }

  /**
   * Records that a {@link NodeStatusDecision} was written: the saved Ready becomes the one written and
   * readyTransitionTimestamp = now, as upstream does after its UpdateStatus. The probe is NOT refreshed.
   */
  noteMarkedUnknown(decision: NodeStatusDecision, now: number): void {
    const entry = this.entries.get(decision.node);
    if (!entry?.hasNode) return;
    const ready = findCondition(decision.conditions, NodeConditionType.Ready);
    if (ready === undefined) return;
    entry.ready = {
      status: ready.status,
      heartbeat: ready.lastHeartbeatTime,
      transition: ready.lastTransitionTime,
    };
    if (Number.isFinite(now)) entry.transition = now;
  }

  // ---------------------------------------------------------------- deadlines

  /**
   * When to wake up next (monotonic ms): the earliest `probe + grace + DEADLINE_EPSILON_MS` among nodes
   * not yet reported, or undefined when there is none. O(1).
   */
  nextDeadline(): number | undefined {
    const due = this.heap.peekDue();
    return due === undefined ? undefined : due + DEADLINE_EPSILON_MS;
  }

  /**
   * Names of nodes that became timed out (now > probe + grace) and were not reported yet, earliest first.
   * Each is reported once until an observation refreshes it. O(k log N) for k results.
   */
  popDue(now: number): string[] {
    const out: string[] = [];
    if (!Number.isFinite(now)) return out;
    for (;;) {
      const top = this.heap.peek();
      if (top === undefined || !(now > top.due)) break;
      this.heap.pop();
      if (!top.hasNode) continue;
      top.reported = true;
      out.push(top.name);
    }
    return out;
  }

  /**
   * Safety net, O(N log N): every node timed out at `now` (reported before or not), sorted by name; and
   * the heap is repaired so that every other node is scheduled at its deadline.
   */
  recheckAll(now: number): string[] {
    const out: string[] = [];
    if (!Number.isFinite(now)) return out;
    for (const entry of this.entries.values()) {
      if (!entry.hasNode) {
        this.heap.remove(entry);
        continue;
      }
      const due = deadlineOf(entry);
      if (now > due) {
        entry.reported = true;
        this.heap.remove(entry);
        out.push(entry.name);
      } else {
        entry.reported = false;
        this.heap.schedule(entry, due);
      }
    }
    return out.sort();
  }

  // ---------------------------------------------------------------- queries and decisions

  /** now > probe + grace, for a node we track (a lease without a node is never timed out). */
  isTimedOut(name: string, now: number): boolean {
    const entry = this.entries.get(name);
    return entry?.hasNode === true && now > deadlineOf(entry);
  }

  /**
   * Upstream's timeout write as data: undefined unless we track this node and its grace has expired
   * (now > probe + grace), or when nothing would change (see {@link unknownConditionsDecision}).
   * Observe the node first: the decision uses the grace and probe of the last observation.
   */
  markUnknown(
    node: Node,
    now: number,
    wallNow: number,
    options?: UnknownConditionsOptions,
  ): NodeStatusDecision | undefined {
    const name = node?.metadata?.name;
    if (typeof name !== 'string' || !this.isTimedOut(name, now)) return undefined;
    return unknownConditionsDecision(node, wallNow, options);
  }

  health(name: string): NodeHealthSnapshot | undefined {
    const e = this.entries.get(name);
    if (e === undefined) return undefined;
    return {
      name: e.name,
      hasNode: e.hasNode,
      hasLease: e.hasLease,
      probeTimestamp: e.probe,
      forgivenMs: e.forgiven,
      readyTransitionTimestamp: e.transition,
      lastSeenRenewTime: e.renewRaw,
      lastSeenReadyHeartbeat: e.ready?.heartbeat,
      readyStatus: e.ready?.status,
      graceMs: e.graceMs,
      graceKind: e.graceKind,
      deadline: e.hasNode ? deadlineOf(e) : undefined,
      confirmedAt: e.confirmed,
      heartbeats: e.heartbeats,
      reported: e.reported,
    };
  }

  /** Names of leases whose node we do not know (for a gauge or a periodic log). */
  leasesWithoutNode(): string[] {
    return [...this.orphanLeases].sort();
  }

  stats(): HealthTrackerStats {
    return {
      nodes: this.nodeCount,
      leases: this.leaseCount,
      leasesWithoutNode: this.orphanLeases.size,
      scheduled: this.heap.size,
      backwardSteps: this.backwardSteps,
      anomalies: { ...this.anomalyCounts },
    };
  }

  // ---------------------------------------------------------------- internals

  private entryFor(name: string, now: number): Entry {
    let entry = this.entries.get(name);
    if (entry === undefined) {
      entry = {
        name,
        hasNode: false,
        uid: undefined,
        ready: undefined,
        graceMs: this.defaults.startupGraceMs,
        graceKind: 'startup',
        probe: now,
        forgiven: 0,
        transition: now,
        reported: false,
        hasLease: false,
        renewMicros: undefined,
        renewRaw: undefined,
        history: [],
        readAhead: undefined,
        confirmed: undefined,
        heartbeats: 0,
        due: 0,
        heapAt: -1,
      };
      this.entries.set(name, entry);
    }
    return entry;
  }

  private deleteEntry(name: string): void {
    const entry = this.entries.get(name);
    this.entries.delete(name);
    if (entry !== undefined) this.heap.remove(entry);
    this.orphanLeases.delete(name);
    this.seenAnomalies.delete(name);
  }

  private remember(entry: Entry, micros: number): void {
    const h = entry.history;
    const at = h.indexOf(micros);
    if (at >= 0) h.splice(at, 1);
    h.push(micros);
    if (h.length > this.historySize) h.shift();
  }

  private refresh(entry: Entry, now: number, result: ObservationResult): void {
    result.refreshed = true;
    if (entry.reported) result.recovered = true;
    entry.probe = now;
    entry.forgiven = 0;
    entry.confirmed = undefined;
    entry.heartbeats++;
    entry.reported = false;
    this.reschedule(entry, now);
  }

  private reschedule(entry: Entry, now: number): void {
    if (!entry.hasNode) {
      this.heap.remove(entry);
      return;
    }
    const due = deadlineOf(entry);
    if (entry.reported && now > due) return; // still timed out, already reported
    entry.reported = false;
    this.heap.schedule(entry, due);
  }

  private resolveGrace(node: Node, name: string, anomalies: Anomaly[]): GraceConfig {
    if (this.graceFor === undefined) return this.defaults;
    let custom: Partial<GraceConfig> | undefined;
    try {
      custom = this.graceFor(node);
    } catch (err) {
      this.anomaly(
        anomalies,
        AnomalyKind.InvalidGrace,
        'Node',
        name,
        err instanceof Error ? err.message : 'throw',
      );
      return this.defaults;
    }
    if (custom === undefined || custom === null) return this.defaults;
    const m = custom.monitorGraceMs;
    const s = custom.startupGraceMs;
    const bad = (m !== undefined && !validMs(m)) || (s !== undefined && !validMs(s));
    if (bad) this.anomaly(anomalies, AnomalyKind.InvalidGrace, 'Node', name, `monitor=${m} startup=${s}`);
    return {
      monitorGraceMs: validMs(m) ? m : this.defaults.monitorGraceMs,
      startupGraceMs: validMs(s) ? s : this.defaults.startupGraceMs,
    };
  }

  private anomaly(
    out: Anomaly[],
    kind: AnomalyKind,
    object: Anomaly['object'],
    name: string,
    detail?: string,
  ): void {
    this.anomalyCounts[kind] = (this.anomalyCounts[kind] ?? 0) + 1;
    // Names without an entry ('', a foreign lease, an ignored object) share one key: bounded memory.
    const key = this.entries.has(name) ? name : '';
    let seen = this.seenAnomalies.get(key);
    if (seen === undefined) {
      seen = new Set();
      this.seenAnomalies.set(key, seen);
    }
    const first = !seen.has(kind);
    seen.add(kind);
    const a: Anomaly = { kind, object, name, first };
    if (object === 'Lease' && name !== '') a.namespace = NODE_LEASE_NAMESPACE;
    if (detail !== undefined) a.detail = detail;
    out.push(a);
  }
}
