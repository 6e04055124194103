/**
 * The invariants, checked as the simulation runs, from outside the controller: every write that
 * lands on the simulated API server, every object a replica is given, and the fault timeline. Each
 * invariant is one promise of docs/guarantees.md; a violation names it, with the time and the node.
 *
 * Safety
 * - S1 a node whose kubelet ran and reached the API server for the whole last grace period (only
 *   outages inside the fault model in between) is never marked Unknown, never gets an unreachable
 *   NoExecute or out-of-service taint, its pods are never marked not ready for it or evicted.
 * - S2 no such write is sent after the replica sending it was shown a heartbeat of that node (a
 *   lease renewal, a kubelet status post, or the node for the first time) less than a grace
 *   period before, by whatever path it was shown (watch, list, re-read, a 409's re-read).
 * - S3 never two writers: every write of a replica lands while the lock names it the holder.
 * - S5 nothing is sent while the sender is blind: its lease watch broken (for over a few seconds:
 *   a reconnect in flight) or silent for longer than the silence threshold.
 * - S2 with --second-opinion=kubelet: a write of that kind may come --confirm-after after the
 *   heartbeat instead of a grace, only for a node whose kubelet was stopped (its probe fails) at
 *   some moment of the CONFIRM_WINDOW_MS before it was sent.
 * - S6 with --second-opinion=kubelet and a hold: a node whose kubelet ran (answering its probes)
 *   from its last heartbeat on gets no new unreachable NoExecute taint, and its pods are not marked
 *   not ready, before that heartbeat + grace + --cut-off-hold (cut off from the control plane is
 *   not down).
 * - S4 guardrails: a zone gets a new NoExecute taint at most at the eviction rate (decisions 1/rate
 *   apart), and the blast-radius cap is never exceeded in any window, across leader terms for the
 *   taints still in place; a small zone partially disrupted, or every zone fully, for longer than
 *   the leader can lag gets no new NoExecute taint.
 * Liveness
 * - L1 a stopped node in a quiet stretch (no fault but other nodes' deaths, one leader throughout,
 *   other nodes renewing) is marked by its last heartbeat + grace + QUIET_MARK_MS.
 *   With the storage slow (S) and no other fault, by its last heartbeat + grace + 8 s + 6 x S + 2 s
 *   (the reconnect hold a silent fleet gets, its re-read and its status write and those of nodes
 *   that died with it, queued ahead of it), unless a kubelet came back meanwhile.
 *   With --second-opinion=kubelet, a node whose kubelet stopped (its probe fails) within
 *   --confirm-after of its last heartbeat and stayed stopped is marked in the same quiet stretch
 *   by its last heartbeat + --confirm-after + 2 ticks + the retry + the probe timeout + QUIET_MARK_MS.
 * - L2 every stopped node is marked by its last heartbeat + 2 x grace + the time faults kept the
 *   controller from seeing or leading (each fault counted with a recovery allowance), or by a new
 *   leader's taking the lock + a grace + the same, whichever is later.
 * - L4 the pods of a node marked Unknown (still down, one leader) are marked not ready within
 *   POD_MARK_MS of the mark, or of the end of the control-plane faults after it (when those add
 *   up to at most 30 s: a longer run of failures backs the retries off).
 * - L5 with --out-of-service: a node down, marked and fenced gets the out-of-service taint within
 *   --out-of-service-after + its zone's tokens + OOS_SLACK_MS (cap off, its zone not disrupted).
 * - L3 at the end of the quiet tail: every running node is Ready without our NoExecute or
 *   out-of-service taints, every node stopped for longer than 2 x grace is marked Unknown.
 * Bounded
 * - B1 each replica's work queue, the open watches and the pending timers stay within bounds.
 */
import type { Landed, Obj, SimServer } from './api-server.js';
import { ranThroughout, readyOf, ZONE_LABEL } from './kubelet.js';

export const QUIET_MARK_MS = 100;
/**
 * S2 with a second opinion: how recently before a write the kubelet must have been stopped for a
 * write sooner than a grace after the heartbeat (the confirming probe's retry and timeout, with
 * the 1 s tick and slack).
 */
export const CONFIRM_WINDOW_MS = 10_000;
/** The controller's 1 s tick, at which the second opinion plans its probes: twice (first and confirming). */
const PROBE_TICKS_MS = 2_000;
export const POD_MARK_MS = 10_000;
/**
 * The longest an admitted NoExecute taint may wait before its first attempt: a worker, the
 * client's limiter, a re-read behind a slow API server (each well under this).
 */
export const STALE_ADMISSION_MS = 30_000;
/** The hold a fleet silent at once gets before it is judged (src/controller/lease-recheck.ts, KUBELET_RECONNECT_MS). */
export const SLOW_MARK_HOLD_MS = 8_000;
/**
 * Requests of S each a mark may wait for with the storage slow: its lease re-read and its status
 * write, twice over (once more after the hold), and those of nodes that died with it ahead of it.
 */
export const SLOW_MARK_REQUESTS = 6;
const OOS_SLACK_MS = 60_000;
/** --leader-elect-renew-deadline's default: a leader not renewed for longer has stopped leading. */
const RENEW_DEADLINE_MS = 10_000;
/** Slack for the controller's 1 s sight check and a reconnect in flight when judging S5. */
const BLIND_SLACK_MS = 3_000;
/** Attempts of one write follow each other within this (the writer's backoffs and token waits). */
const ATTEMPT_GAP_MS = 20_000;
/**
 * A NoExecute taint's timeAdded is when its zone admitted it (src/controller/taints.ts), to the
 * second: admissions are judged on it, this far apart at worst.
 */
const CLIENT_WAIT_MS = 1_500;
/** Which taint an admission added: its key and its timeAdded (as written), if any. */
interface TaintId {
  key: string;
  added: string | undefined;
}
/** The most a zone pass takes to follow what its replica was shown (it runs at once, after the turn). */
const MASTER_PASS_MS = 2_000;
const UNREACHABLE = 'node.kubernetes.io/unreachable';
const NOT_READY = 'node.kubernetes.io/not-ready';
const OUT_OF_SERVICE = 'node.kubernetes.io/out-of-service';
const LOCK = 'node-lifecycle-controller';

export interface Violation {
  at: number;
  invariant: string;
  node?: string | undefined;
  detail: string;
}

type Taint = { key: string; effect: string; timeAdded?: string };

function taintsOf(o: Obj | undefined): Taint[] {
  const t = o?.spec?.taints;
  return Array.isArray(t) ? (t as Taint[]) : [];
}

function has(list: Taint[], key: string, effect: string): boolean {
  return list.some((t) => t.key === key && t.effect === effect);
}

/** The fault timeline the injector keeps, as the checker asks about it. */
export interface Timeline {
  /** Whether the kubelet of `node` ran with its path up throughout [from, to]. */
  aliveThroughout(node: string, from: number, to: number): boolean;
  /** Whether nothing but kubelet deaths happened in [from, to] (no other fault active or starting). */
  quiet(from: number, to: number): boolean;
  /** Time in [from, to] covered by faults that can keep a leader from seeing, writing or leading, with their recovery allowances. */
  hindered(from: number, to: number): number;
  /** Since when the kubelet of `node` has been stopped or cut off (undefined: it runs and reaches). */
  downSince(node: string): number | undefined;
  /** Whether some kubelet came back (revived, re-created) in [from, to]. */
  revived(from: number, to: number): boolean;
  /** The slowest the storage was in [from, to] when that was the only fault but kubelet deaths (undefined: another fault, or none). */
  slowOnly(from: number, to: number): number | undefined;
  /** Faults of the control plane (not of nodes) in [from, to]: their total time and the last end. */
  controlPlaneFaults(from: number, to: number): { total: number; lastEnd: number | undefined };
}

interface Seen {
  /** The Ready status of the node as last shown (what upstream's not-ready handling goes by). */
  ready: string | undefined;
  /** The lease renewTime values shown (the tracker's replay memory: the last 8). */
  renewals: string[];
  /** The kubelet heartbeats (Ready lastHeartbeatTime) shown. */
  heartbeats: string[];
  uid: string | undefined;
  /** When the last NEW heartbeat (of either kind, or first sight) was shown. */
  lastFreshAt: number;
  /** Its order within its millisecond (Checker.order). */
  lastFreshOrder?: number;
  /** A renewal a re-read showed ahead of the watch (ms, the kubelet's clock): older ones the watch brings are not new. */
  readAhead?: number | undefined;
  /** Since when the node has been shown not Ready (undefined: shown Ready, or never shown). */
  notReadySince?: number | undefined;
}

interface NodeTruth {
  /** Heartbeats the kubelet posted (values of Ready.lastHeartbeatTime). */
  kubeletHeartbeats: Set<string>;
  /** When its last lease renewal or status post landed. */
  lastHeartbeatAt: number;
  zone: string;
}

export class Checker {
  readonly violations: Violation[] = [];
  private readonly truth = new Map<string, NodeTruth>();
  /** Per replica instance: what it was shown, per node. */
  private readonly seen = new Map<string, Map<string, Seen>>();
  /** Per leader term (replica instance) and zone: when its last NoExecute adds were decided. */
  private readonly zoneDecisions = new Map<string, Array<{ at: number; node: string } & TaintId>>();
  /** The leader term whose writes landed last: a replica instance and the lock's epoch. */
  private writingTerm: string | undefined;
  /** New NoExecute taints, in order (the cap's window). */
  private readonly noExecuteAdds: Array<{ at: number; node: string; by: string; rides: boolean } & TaintId> =
    [];
  /** Replica instance names: `id#n`, n counting its starts. */
  private readonly instance = new Map<string, string>();
  private readonly starts = new Map<string, number>();
  /** Lock holder changes: [time, holder]. */
  readonly holders: Array<[number, string]> = [];
  /** When each node was first marked Unknown after its last heartbeat (cleared by a heartbeat). */
  private readonly markedAt = new Map<string, number>();
  /** New NoExecute taints as they landed, by zone. */
  private readonly zoneAdds: Array<{ zone: string; at: number }> = [];
  /** Ticks at which some zone was partially disrupted or every zone fully (the zone rate may be 0). */
  private readonly disruptionTicks: number[] = [];
  /** Zones partially disrupted (upstream's rule, per the stored nodes) since when. */
  private readonly partialSince = new Map<string, number>();
  /** Every zone fully disrupted (all its nodes not Ready) since, per the stored nodes. */
  private fullDisruptionSince: number | undefined;
  marks = 0;
  writes = 0;

  constructor(
    private readonly server: SimServer,
    private readonly timeline: Timeline,
    private readonly o: {
      graceMs: number;
      evictionRate: number;
      cap: { max: number; windowMs: number } | undefined;
      outOfService: { afterMs: number } | undefined;
      /** --second-opinion=kubelet: its timings (undefined: off). */
      secondOpinion?:
        | { confirmAfterMs: number; retryMs: number; intervalMs: number; timeoutMs: number; holdMs: number }
        | undefined;
      /** When each kubelet ran (what its probe finds: answers exactly while it runs). */
      kubeletRuns?: (node: string) => readonly { from: number; to: number | undefined }[];
      silenceMs: number;
      now: () => number;
    },
  ) {
    server.onLanded = (w) => this.landed(w);
    server.onDelivered = (client, coll, obj, via) => this.delivered(client, coll, obj, via);
    server.onAttempt = (client, req, sentAt) => {
      if (typeof req.body === 'object' && req.body !== null) this.sentOrder.set(req.body, ++this.order);
      this.attempted(client, req.method, req.path, req.body, sentAt);
    };
    server.onContact = (client, coll, what) => {
      if (coll === 'leases/kube-node-lease') this.leaseContact(client, what);
    };
  }

  /**
   * Writes that add a NoExecute taint, by the node: the first attempt of the write (its retries
   * follow within ATTEMPT_GAP_MS), which is when it was decided, give or take the client's own
   * rate-limiter wait. A zone's rate governs decisions, not when a delayed write lands.
   */
  private readonly noExecuteChains = new Map<string, { by: string; firstAt: number; lastAt: number }>();
  /**
   * The order of what happens within one millisecond of virtual time: each object given to a
   * replica, and each write sent (by its body). A write sent in the same millisecond as a fresh
   * heartbeat was given was sent after it when its order is later (a 409's re-read, then its retry).
   */
  private order = 0;
  private readonly sentOrder = new WeakMap<object, number>();

  private attempted(client: string, method: string, path: string, body: unknown, sentAt: number): void {
    if (method !== 'PATCH') return;
    const m = /^\/api\/v1\/nodes\/([^/]+)$/.exec(path);
    if (!m) return;
    const taints = (body as { spec?: { taints?: Taint[] } } | undefined)?.spec?.taints;
    if (!Array.isArray(taints)) return;
    const name = decodeURIComponent(m[1]!);
    // An attempt that would add a NoExecute taint the node does not carry now.
    const carried = taintsOf(this.server.get('nodes', name));
    if (!taints.some((t) => t.effect === 'NoExecute' && !has(carried, t.key, 'NoExecute'))) return;
    const c = this.noExecuteChains.get(name);
    if (c && c.by === client && sentAt - c.lastAt < ATTEMPT_GAP_MS) c.lastAt = sentAt;
    else this.noExecuteChains.set(name, { by: client, firstAt: sentAt, lastAt: sentAt });
  }

  /** Each replica's lease watch as the API server sees it: open streams, last contact, last broken. */
  private readonly leaseWatch = new Map<
    string,
    { open: number; lastContact: number; brokenAt: number | undefined }
  >();

  private leaseContact(client: string, what: 'open' | 'list' | 'data' | 'end' | 'error'): void {
    const w = this.leaseWatch.get(client);
    if (!w) return;
    const now = this.o.now();
    if (what === 'open') {
      w.open++;
      w.lastContact = now;
      w.brokenAt = undefined;
    } else if (what === 'list') {
      // A list is a fresh look at every lease: contact, whatever became of the watch since.
      w.lastContact = now;
      w.brokenAt = undefined;
    } else if (what === 'data') w.lastContact = now;
    else {
      w.open = Math.max(0, w.open - 1);
      // An end (the server's timeout, the client re-opening a quiet watch) is followed by a resume
      // at once; the silence clock runs on from the last delivery. A broken one is not.
      if (what === 'error' && w.open === 0) w.brokenAt = now;
    }
  }

  /**
   * S5: why `by` could not see when it sent a write at `sentAt` (undefined: it could). Its lease
   * watch broken for over BLIND_SLACK_MS, or silent (no event, bookmark or reconnect) for over the
   * silence threshold and BLIND_SLACK_MS.
   */
  private blindAt(by: string, sentAt: number): string | undefined {
    const w = this.leaseWatch.get(by);
    if (!w) return undefined;
    if (w.open === 0 && w.brokenAt !== undefined && sentAt - w.brokenAt > BLIND_SLACK_MS) {
      return `its lease watch broken ${((sentAt - w.brokenAt) / 1000).toFixed(1)}s before`;
    }
    if (sentAt - w.lastContact > this.o.silenceMs + BLIND_SLACK_MS) {
      return `its lease watch silent for ${((sentAt - w.lastContact) / 1000).toFixed(1)}s (threshold ${this.o.silenceMs / 1000}s)`;
    }
    return undefined;
  }

  /** A new process of replica `id` starts: it has been shown nothing. */
  replicaStarted(id: string): void {
    const now = this.o.now();
    this.leaseWatch.set(id, { open: 0, lastContact: now, brokenAt: now });
    const n = (this.starts.get(id) ?? 0) + 1;
    this.starts.set(id, n);
    this.instance.set(id, `${id}#${n}`);
    this.seen.set(id, new Map());
  }

  /** What the world can tell about a node when a violation names it (the replay's report). */
  context: ((node: string) => string) | undefined;

  private fail(invariant: string, node: string | undefined, detail: string): void {
    if (this.violations.length >= 50) return;
    const more = node && this.context && this.violations.length < 3 ? `\n      ${this.context(node)}` : '';
    this.violations.push({ at: this.o.now(), invariant, node, detail: detail + more });
  }

  // ---------------------------------------------------------------- what replicas are shown

  private delivered(client: string, coll: string, obj: Obj, via: 'watch' | 'list' | 'get'): void {
    const seen = this.seen.get(client);
    if (!seen) return;
    const name = obj.metadata.name;
    const now = this.o.now();
    if (coll === 'leases/kube-node-lease') {
      const rt = (obj.spec as { renewTime?: string } | undefined)?.renewTime;
      if (typeof rt !== 'string') return;
      const s = this.seenOf(seen, name);
      // As the tracker: a watch catching up with a renewal a re-read already showed shows nothing new.
      const t = Date.parse(rt);
      if (via !== 'get' && s.readAhead !== undefined) {
        if (t < s.readAhead) return;
        s.readAhead = undefined;
      }
      if (!s.renewals.includes(rt)) {
        s.renewals.push(rt);
        if (s.renewals.length > 8) s.renewals.shift();
        s.lastFreshAt = now;
        s.lastFreshOrder = ++this.order;
        if (via === 'get') s.readAhead = t;
      }
    } else if (coll === 'nodes') {
      const s = seen.get(name);
      const uid = obj.metadata.uid;
      if (!s || s.uid !== uid) {
        // First sight (or a node re-created under the same name): a fresh grace period.
        const fresh = this.seenOf(seen, name);
        fresh.uid = uid;
        fresh.lastFreshAt = now;
        fresh.lastFreshOrder = ++this.order;
      }
      const shown = this.seenOf(seen, name);
      shown.ready = readyOf(obj)?.status as string | undefined;
      if (shown.ready === 'True') shown.notReadySince = undefined;
      else shown.notReadySince ??= now;
      const hb = readyOf(obj)?.lastHeartbeatTime;
      const t = this.truth.get(name);
      if (typeof hb === 'string' && t?.kubeletHeartbeats.has(hb)) {
        const x = this.seenOf(seen, name);
        if (!x.heartbeats.includes(hb)) {
          x.heartbeats.push(hb);
          if (x.heartbeats.length > 8) x.heartbeats.shift();
          x.lastFreshAt = now;
          x.lastFreshOrder = ++this.order;
        }
      }
    }
  }

  private seenOf(seen: Map<string, Seen>, name: string): Seen {
    let s = seen.get(name);
    if (!s) {
      s = {
        ready: undefined,
        renewals: [],
        heartbeats: [],
        uid: undefined,
        lastFreshAt: Number.NEGATIVE_INFINITY,
      };
      seen.set(name, s);
    }
    return s;
  }

  // ---------------------------------------------------------------- writes

  private landed(w: Landed): void {
    if (w.by.startsWith('kubelet/')) {
      this.kubeletWrote(w);
      return;
    }
    if (w.by === 'sim') return;
    this.writes++;
    const election = w.coll === 'leases/kube-system';
    if (election) {
      if (w.name === LOCK) this.lockChanged(w);
      return;
    }
    const term = `${this.instance.get(w.by) ?? w.by}@${this.holders.length}`;
    if (term !== this.writingTerm) {
      this.writingTerm = term;
      this.termStarted();
    }
    // S3: the lock names the writer when its write lands.
    const lock = this.server.get('leases/kube-system', LOCK);
    const holder = (lock?.spec as { holderIdentity?: string } | undefined)?.holderIdentity;
    if (holder !== w.by) {
      this.fail(
        'S3 one writer',
        w.name,
        `${w.by} wrote ${w.method} ${w.coll}/${w.name}${w.sub ? `/${w.sub}` : ''} while the lock names ${holder ?? 'nobody'}`,
      );
    }
    for (const kind of this.destructive(w)) this.judge(w, kind);
  }

  /** The lock changed hands, or its holder took it again (a new acquireTime: a new term, a fresh grace). */
  private lockChanged(w: Landed): void {
    const spec = w.after?.spec as { holderIdentity?: string; acquireTime?: string } | undefined;
    const holder = spec?.holderIdentity ?? '';
    const acquired = spec?.acquireTime ?? '';
    const last = this.holders[this.holders.length - 1];
    // A holder that could not renew for longer than its renew deadline (10 s) stopped leading in
    // between (its own fence closed): renewing again, it starts a new term too.
    const lapsed = w.at - this.lastLockWrite > RENEW_DEADLINE_MS;
    // A restarted process keeps its identity (a pod's name) and renews its own lock: a new term all
    // the same (it knows nothing of how long the nodes were silent).
    const writer = this.instance.get(w.by) ?? w.by;
    const restarted = this.lastLockWriter !== undefined && writer !== this.lastLockWriter && holder === w.by;
    if (!last || last[1] !== holder || this.lastAcquire !== acquired || lapsed || restarted) {
      this.holders.push([w.at, holder]);
    }
    this.lastAcquire = acquired;
    this.lastLockWrite = w.at;
    this.lastLockWriter = writer;
  }

  private lastLockWriter: string | undefined;

  private lastAcquire = '';
  private lastLockWrite = Number.NEGATIVE_INFINITY;

  private kubeletWrote(w: Landed): void {
    const node = w.by.slice('kubelet/'.length);
    let t = this.truth.get(node);
    if (!t) {
      t = { kubeletHeartbeats: new Set(), lastHeartbeatAt: w.at, zone: '' };
      this.truth.set(node, t);
    }
    if (w.coll === 'nodes' && w.after) {
      const hb = readyOf(w.after)?.lastHeartbeatTime;
      if (typeof hb === 'string') t.kubeletHeartbeats.add(hb);
      t.zone = w.after.metadata.labels?.[ZONE_LABEL] ?? t.zone;
      t.lastHeartbeatAt = w.at;
      this.markedAt.delete(node);
    } else if (w.coll === 'leases/kube-node-lease' && w.after) {
      t.lastHeartbeatAt = w.at;
      this.markedAt.delete(node);
    }
  }

  /** What a write does that the safety invariants are about. */
  private destructive(w: Landed): string[] {
    const kinds: string[] = [];
    if (w.coll === 'nodes' && w.sub === 'status') {
      if (readyOf(w.after)?.status === 'Unknown' && readyOf(w.before)?.status !== 'Unknown') {
        kinds.push('mark');
        this.marks++;
        if (!this.markedAt.has(w.name)) {
          this.markedAt.set(w.name, w.at);
          if (readyOf(w.before)?.status === 'True') this.flippedAt.set(w.name, w.at);
          else this.flippedAt.delete(w.name);
          this.quietMark(w.name, w.at);
        }
      }
    } else if (w.coll === 'nodes' && w.method === 'PATCH') {
      const before = taintsOf(w.before);
      const after = taintsOf(w.after);
      const added = (key: string) => has(after, key, 'NoExecute') && !has(before, key, 'NoExecute');
      // A swap of one health NoExecute taint for the other is not a new NoExecute taint (upstream
      // swaps at once, outside the zone rates); it is still a judgement about the node.
      const swap = (other: string) => has(before, other, 'NoExecute') && !has(after, other, 'NoExecute');
      if (added(UNREACHABLE)) kinds.push(swap(NOT_READY) ? 'unreachable-swap' : 'unreachable-noexecute');
      if (added(OUT_OF_SERVICE)) kinds.push('out-of-service');
      if (added(NOT_READY)) kinds.push(swap(UNREACHABLE) ? 'not-ready-swap' : 'not-ready-noexecute');
    } else if (w.coll.startsWith('pods/') && w.sub === 'status') {
      const was = (w.before?.status?.conditions as Array<{ type: string; status: string }> | undefined)?.find(
        (c) => c.type === 'Ready',
      );
      const is = (w.after?.status?.conditions as Array<{ type: string; status: string }> | undefined)?.find(
        (c) => c.type === 'Ready',
      );
      if (was?.status === 'True' && is?.status === 'False') kinds.push('pod-not-ready');
    } else if (w.sub === 'eviction') kinds.push('evict');
    return kinds;
  }

  private nodeOfPod(w: Landed): string | undefined {
    return (w.before?.spec as { nodeName?: string } | undefined)?.nodeName;
  }

  private judge(w: Landed, kind: string): void {
    const node = kind === 'pod-not-ready' || kind === 'evict' ? this.nodeOfPod(w) : w.name;
    if (!node) return;
    const g = this.o.graceMs;
    // A node that says itself it is not ready (as the writer last saw it): its not-ready taint and
    // its pods' marks are upstream's, whatever its lease does.
    const selfNotReady = this.seen.get(w.by)?.get(node)?.ready === 'False';
    const unreachability =
      kind !== 'not-ready-noexecute' &&
      kind !== 'not-ready-swap' &&
      !(kind === 'pod-not-ready' && selfNotReady);
    // S5: nothing is sent while the sender cannot see.
    const blind = this.blindAt(w.by, w.sentAt);
    if (blind !== undefined)
      this.fail('S5 acts on nothing it cannot see', node, `${kind} by ${w.by} sent while ${blind}`);
    if (unreachability) {
      // S1: alive and reaching the server for the whole last grace period.
      if (this.timeline.aliveThroughout(node, w.at - g, w.at)) {
        this.fail(
          'S1 live node untouched',
          node,
          `${kind} by ${w.by}: its kubelet ran and reached the API server for the last ${g / 1000}s`,
        );
      }
      // S2: nothing sent against a heartbeat the sender was shown less than a grace before.
      const s = this.seen.get(w.by)?.get(node);
      const sentAfter =
        s !== undefined &&
        (s.lastFreshAt < w.sentAt ||
          (s.lastFreshAt === w.sentAt &&
            s.lastFreshOrder !== undefined &&
            typeof w.body === 'object' &&
            w.body !== null &&
            (this.sentOrder.get(w.body) ?? 0) > s.lastFreshOrder));
      const window = this.confirmedDown(node, w.sentAt) ? this.o.secondOpinion!.confirmAfterMs : g;
      if (s && sentAfter && w.sentAt < s.lastFreshAt + window) {
        this.fail(
          'S2 acts on what it saw',
          node,
          `${kind} by ${w.by} sent ${((w.sentAt - s.lastFreshAt) / 1000).toFixed(3)}s after it was shown a fresh heartbeat of the node (${window === g ? 'grace' : 'confirm-after, its kubelet stopped'} ${window / 1000}s)`,
        );
      }
      if (kind === 'unreachable-noexecute' || kind === 'pod-not-ready') this.cutOffNotEvicted(w, node, kind);
    }
    if (kind === 'unreachable-noexecute' || kind === 'not-ready-noexecute' || kind === 'out-of-service') {
      this.guardrails(w, node, kind);
    }
  }

  /** Whether a second opinion could have confirmed `node` down by `at`: its kubelet stopped at some moment of the CONFIRM_WINDOW_MS before. */
  private confirmedDown(node: string, at: number): boolean {
    if (!this.o.secondOpinion || !this.o.kubeletRuns) return false;
    return !ranThroughout(this.o.kubeletRuns(node), at - CONFIRM_WINDOW_MS, at);
  }

  /** S6: a kubelet that ran (answering) since its node's last heartbeat keeps its pods, Ready, for the hold. */
  private cutOffNotEvicted(w: Landed, node: string, kind: string): void {
    const so = this.o.secondOpinion;
    // The silence the write was decided in: from the last heartbeat its sender was shown (a
    // renewal landing while the write is on the wire is S2's business, not this one's).
    // Shown one after it was sent: it raced a renewal, decided in the silence before (not kept).
    const h = this.seen.get(w.by)?.get(node)?.lastFreshAt;
    if (!so || so.holdMs <= 0 || !this.o.kubeletRuns || h === undefined || h > w.sentAt) return;
    const until = h + this.o.graceMs + so.holdMs;
    if (w.sentAt >= until || !ranThroughout(this.o.kubeletRuns(node), h, w.sentAt)) return;
    this.fail(
      'S6 cut off, not evicted',
      node,
      `${kind === 'pod-not-ready' ? 'a pod marked not ready' : 'unreachable NoExecute'} by ${w.by} sent ${((w.sentAt - h) / 1000).toFixed(3)}s after the last heartbeat it was shown while its kubelet answered throughout (hold until ${((until - h) / 1000).toFixed(0)}s)`,
    );
  }

  /**
   * A new leader term wrote its first write: the zone rates and the cap carry over from earlier
   * terms only the NoExecute taints still on their nodes (what a new leader can see; a node tainted
   * and back within the window leaves nothing to count).
   */
  private termStarted(): void {
    // The very taint that admission added, still on its node (same key, same timeAdded): one
    // removed since (the node back, master disruption) leaves nothing a new leader can count, even
    // where the node carries another NoExecute taint of ours.
    const tainted = (a: { node: string } & TaintId) =>
      taintsOf(this.server.get('nodes', a.node)).some(
        (t) =>
          t.key === a.key && t.effect === 'NoExecute' && (a.added === undefined || t.timeAdded === a.added),
      );
    for (const [zone, times] of this.zoneDecisions)
      this.zoneDecisions.set(
        zone,
        times.filter((t) => tainted(t)),
      );
    const kept = this.noExecuteAdds.filter((a) => tainted(a));
    this.noExecuteAdds.splice(0, this.noExecuteAdds.length, ...kept);
  }

  /** S4: zone rates, the cap (any window, across terms for the taints still in place), master disruption. */
  private guardrails(w: Landed, node: string, kind: string): void {
    const zone = this.server.get('nodes', node)?.metadata.labels?.[ZONE_LABEL] ?? '';
    const term = this.instance.get(w.by) ?? w.by;
    const rate = this.o.evictionRate;
    // When the zone admitted it: its timeAdded (the guardrails govern admissions; the write may
    // land much later, behind 429s and slow requests). Without one, its first attempt.
    const key =
      kind === 'out-of-service' ? OUT_OF_SERVICE : kind === 'not-ready-noexecute' ? NOT_READY : UNREACHABLE;
    const added = taintsOf(w.after).find((t) => t.key === key && t.effect === 'NoExecute')?.timeAdded;
    const stamp = Date.parse(String(added));
    const id: TaintId = { key, added: typeof added === 'string' ? added : undefined };
    const chain = this.noExecuteChains.get(node);
    const first = chain && chain.by === w.by ? chain.firstAt : w.sentAt;
    const decided = Number.isFinite(stamp) ? stamp : first;
    this.noExecuteChains.delete(node);
    // An admission is for the write it was given to: one first sent long after its zone admitted
    // it (its timeAdded) was written on an admission that outlived what it was for.
    if (Number.isFinite(stamp) && first - stamp > STALE_ADMISSION_MS) {
      this.fail(
        'S4 zone rate',
        node,
        `${kind} by ${term}: first sent ${((first - stamp) / 1000).toFixed(1)}s after its zone admitted it (its timeAdded): written on a stale admission, not its zone's token`,
      );
    }
    // The out-of-service taint takes its zone's token too (after the node's own NoExecute taint).
    if (rate > 0) {
      const times = this.zoneDecisions.get(zone) ?? [];
      const gap = 1000 / rate - CLIENT_WAIT_MS;
      const near = times.find((t) => Math.abs(t.at - decided) < gap);
      if (near !== undefined) {
        this.fail(
          'S4 zone rate',
          node,
          `${kind} in ${zone || 'the default zone'} by ${term}: decided ${((decided - near.at) / 1000).toFixed(2)}s from ${near.node}'s (rate ${rate}/s: ${1 / rate}s apart)`,
        );
      }
      times.push({ at: decided, node, ...id });
      if (times.length > 16) times.shift();
      this.zoneDecisions.set(zone, times);
    }
    this.zoneAdds.push({ zone, at: w.at });
    if (this.zoneAdds.length > 200) this.zoneAdds.shift();
    const cap = this.o.cap;
    if (cap) {
      // A node's out-of-service taint rides on the slot of its own NoExecute taint while that one
      // is in the window (it takes none of its own); a slot leaves the window a window after it was
      // taken (give or take the client's wait before the first attempt).
      const window = (a: { at: number }, t: number) => a.at > t - cap.windowMs + CLIENT_WAIT_MS;
      const rides =
        kind === 'out-of-service' &&
        this.noExecuteAdds.some(
          (a) => a.node === node && !a.rides && a.at > decided - cap.windowMs - CLIENT_WAIT_MS,
        );
      this.noExecuteAdds.push({ at: decided, node, by: this.instance.get(w.by) ?? w.by, rides, ...id });
      if (this.noExecuteAdds.length > 200) this.noExecuteAdds.shift();
      const inWindow = this.noExecuteAdds.filter((a) => !a.rides && window(a, decided));
      const nodes = new Set(inWindow.map((a) => a.node));
      if (nodes.size > cap.max) {
        const list = inWindow.map((a) => `${a.node}@${(a.at / 1000).toFixed(1)}s by ${a.by}`).join(', ');
        this.fail(
          'S4 cap',
          node,
          `${kind}: ${nodes.size} nodes took slots within ${cap.windowMs / 1000}s (cap ${cap.max}): ${list}`,
        );
      }
    }
    // A small zone (up to 50 nodes) partially disrupted gets no new NoExecute taint (its rate is 0):
    // judged once the leader could have seen it (a blind spell's threshold, its lag, a zone pass).
    const partialSince = this.partialSince.get(zone);
    if (partialSince !== undefined && decided - partialSince > this.o.silenceMs + 20_000) {
      this.fail(
        'S4 partial disruption',
        node,
        `${kind} in ${zone || 'the default zone'}, partially disrupted for ${((decided - partialSince) / 1000).toFixed(1)}s`,
      );
    }
    // Master disruption, as the deciding replica saw it: admitted after it had been shown every
    // node not Ready (and none Ready), its zone pass had stopped every zone.
    const allDown = this.shownAllNotReady(w.by);
    if (allDown !== undefined && decided - allDown > MASTER_PASS_MS) {
      this.fail(
        'S4 master disruption',
        node,
        `${kind} by ${term} admitted ${((decided - allDown) / 1000).toFixed(1)}s after it had been shown every node not Ready`,
      );
    }
    if (kind === 'unreachable-noexecute' && this.fullDisruptionSince !== undefined) {
      if (w.at - this.fullDisruptionSince > this.o.silenceMs + 10_000) {
        this.fail(
          'S4 master disruption',
          node,
          `unreachable NoExecute while every zone has been fully disrupted for ${((w.at - this.fullDisruptionSince) / 1000).toFixed(1)}s`,
        );
      }
    }
  }

  /**
   * Since when replica `by` has been shown every node not Ready: each node the API server holds
   * shown to it not Ready, and none it was shown (a node deleted since included) last shown Ready.
   * Undefined when not.
   */
  private shownAllNotReady(by: string): number | undefined {
    const seen = this.seen.get(by);
    if (!seen) return undefined;
    let since = Number.NEGATIVE_INFINITY;
    for (const s of seen.values()) {
      if (s.ready === undefined) continue;
      if (s.notReadySince === undefined) return undefined;
      since = Math.max(since, s.notReadySince);
    }
    const nodes = this.server.list('nodes');
    if (nodes.length === 0) return undefined;
    for (const n of nodes) if (seen.get(n.metadata.name)?.notReadySince === undefined) return undefined;
    return since;
  }

  // ---------------------------------------------------------------- periodic checks

  /** Every few seconds: master disruption state, liveness (L1, L2). */
  tick(): void {
    const now = this.o.now();
    this.trackDisruption(now);
    const g = this.o.graceMs;
    for (const [node, t] of this.truth) {
      const since = this.timeline.downSince(node);
      if (since === undefined) continue;
      const stored = this.server.get('nodes', node);
      if (!stored) continue;
      if (readyOf(stored)?.status === 'Unknown') {
        this.podsMarked(node, now);
        this.outOfServiceApplied(node, stored, now);
        continue;
      }
      const h = t.lastHeartbeatAt;
      // L1: a quiet stretch around the death (judged here while it is not marked, and as it is).
      if (!this.markedAt.has(node) && this.quietMark(node, now)) this.markedAt.set(node, now);
      // L2: bounded, whatever happened. A new leader knows nothing of how long a node was silent:
      // it gives every node a fresh grace from when it took the lock.
      const took = this.holders
        .filter(([at, holder]) => at > h && holder !== '')
        .map(([at]) => at)
        .pop();
      const allowance = Math.max(
        2 * g + this.timeline.hindered(h, now) + 10_000,
        took === undefined ? 0 : took - h + g + this.timeline.hindered(took, now) + 10_000,
      );
      if (now - h > allowance && !this.markedAt.has(node)) {
        this.fail(
          'L2 bounded mark',
          node,
          `not marked ${((now - h) / 1000).toFixed(1)}s after its last heartbeat (allowance ${(allowance / 1000).toFixed(1)}s; lock taken since: ${
            this.holders
              .filter(([at]) => at > h)
              .map(([at, who]) => `${who || 'released'}@${((at - h) / 1000).toFixed(1)}s`)
              .join(', ') || 'no change'
          })`,
        );
        this.markedAt.set(node, now);
      }
    }
  }

  /** Marks that flipped a node from Ready=True (its pods are marked then, not at a later re-list). */
  private readonly flippedAt = new Map<string, number>();
  /** Liveness reported once per mark: node -> the mark it was reported for. */
  private readonly reported = new Map<string, number>();

  /** The mark (time) of a down node, if one of ours stands since its last heartbeat and the same leader holds since a grace before it. */
  private standingMark(node: string, now: number): number | undefined {
    const m = this.markedAt.get(node);
    if (m === undefined || this.timeline.downSince(node) === undefined) return undefined;
    if (!this.stableLeader(m - this.o.graceMs, now)) return undefined;
    return m;
  }

  /** L4: a marked node's Ready pods are marked not ready soon after the mark. */
  private podsMarked(node: string, now: number): void {
    const m = this.standingMark(node, now);
    if (m === undefined || this.flippedAt.get(node) !== m || this.reported.get(`pods ${node}`) === m) return;
    const faults = this.timeline.controlPlaneFaults(m, now);
    if (faults.total > 30_000) return;
    const due = Math.max(m, faults.lastEnd ?? m, this.heldUntil(node, m) ?? m) + POD_MARK_MS;
    if (now <= due) return;
    const ready = this.server
      .list('pods/sim')
      .filter(
        (p) =>
          (p.spec as { nodeName?: string } | undefined)?.nodeName === node && !p.metadata.deletionTimestamp,
      )
      .filter((p) =>
        (p.status?.conditions as Array<{ type: string; status: string }> | undefined)?.some(
          (c) => c.type === 'Ready' && c.status === 'True',
        ),
      );
    if (ready.length === 0) return;
    this.reported.set(`pods ${node}`, m);
    this.fail(
      'L4 pods marked',
      node,
      `${ready.length} pod(s) still Ready ${((now - m) / 1000).toFixed(1)}s after the node was marked (due ${((due - m) / 1000).toFixed(1)}s after)`,
    );
  }

  /**
   * With a second opinion and a hold: the latest a node marked at `m` whose kubelet answered then
   * keeps its pods (S6): the hold's end (its grace ended by the mark), or its kubelet's stop + the
   * next probe, the confirming one and its timeout, whichever is first. Undefined: not held.
   */
  private heldUntil(node: string, m: number): number | undefined {
    const so = this.o.secondOpinion;
    if (!so || so.holdMs <= 0 || !this.o.kubeletRuns) return undefined;
    const run = this.o.kubeletRuns(node).find((r) => r.from <= m && (r.to === undefined || m < r.to));
    if (!run) return undefined;
    const stopped = run.to === undefined ? Number.POSITIVE_INFINITY : run.to;
    return Math.min(m + so.holdMs, stopped + so.intervalMs + so.retryMs + so.timeoutMs + PROBE_TICKS_MS);
  }

  /** When the node started showing a fence signal the controller trusts (undefined: none now). */
  private readonly fencedSince = new Map<string, number>();

  /** L5: a node down, marked and fenced gets the out-of-service taint in time. */
  private outOfServiceApplied(node: string, stored: Obj, now: number): void {
    const oos = this.o.outOfService;
    if (!oos) return;
    const fenced =
      has(taintsOf(stored), 'node.cloudprovider.kubernetes.io/shutdown', 'NoSchedule') ||
      stored.metadata.annotations?.['node-lifecycle-controller.io/fenced'] === 'true';
    if (!fenced) {
      this.fencedSince.delete(node);
      return;
    }
    if (!this.fencedSince.has(node)) this.fencedSince.set(node, now);
    const m = this.standingMark(node, now);
    if (m === undefined || this.o.cap || has(taintsOf(stored), OUT_OF_SERVICE, 'NoExecute')) return;
    if (this.reported.get(`oos ${node}`) === m) return;
    const from = Math.max(m, this.fencedSince.get(node)!);
    if (this.disruptedSince(from)) return;
    const faults = this.timeline.controlPlaneFaults(from, now);
    if (faults.total > 30_000) return;
    const zone = stored.metadata.labels?.[ZONE_LABEL] ?? '';
    const others = this.noExecuteInZone(zone, from, now);
    const due =
      Math.max(from, faults.lastEnd ?? from) +
      oos.afterMs +
      (others + 1) * (1000 / this.o.evictionRate) +
      OOS_SLACK_MS;
    if (now <= due) return;
    this.reported.set(`oos ${node}`, m);
    this.fail(
      'L5 out-of-service',
      node,
      `down, marked and fenced for ${((now - from) / 1000).toFixed(1)}s without the out-of-service taint (due ${((due - from) / 1000).toFixed(1)}s after)`,
    );
  }

  /** New NoExecute taints that landed in `zone` in [from, to]. */
  private noExecuteInZone(zone: string, from: number, to: number): number {
    return this.zoneAdds.filter((a) => a.zone === zone && a.at >= from && a.at <= to).length;
  }

  /** Whether some zone was partially disrupted (or all fully) at any tick since `from`. */
  private disruptedSince(from: number): boolean {
    return this.disruptionTicks.some((t) => t >= from);
  }

  /** L1: a mark at `at` (or none yet at `at`) of a node that died in a quiet stretch. True when it failed. */
  private quietMark(node: string, at: number): boolean {
    const t = this.truth.get(node);
    const since = this.timeline.downSince(node);
    if (!t || since === undefined) return false;
    const h = t.lastHeartbeatAt;
    const g = this.o.graceMs;
    const confirmed = this.confirmedBy(node, h);
    const due = (confirmed ?? h + g) + QUIET_MARK_MS;
    if (at <= due) return false;
    if (
      this.timeline.quiet(h - g, due) &&
      this.stableLeader(h - g, due) &&
      this.othersRenewing(node, h, due)
    ) {
      this.fail(
        'L1 quiet mark',
        node,
        confirmed === undefined
          ? `marked ${((at - h - g) / 1000).toFixed(3)}s past its grace (last heartbeat ${(h / 1000).toFixed(3)}s, bound ${QUIET_MARK_MS} ms) in a quiet stretch`
          : `marked ${((at - h) / 1000).toFixed(3)}s after its last heartbeat, its kubelet stopped throughout (second opinion: bound ${((due - h) / 1000).toFixed(3)}s) in a quiet stretch`,
      );
      return true;
    }
    return this.slowMark(node, h, at);
  }

  /**
   * With a second opinion: when a node whose kubelet stopped within --confirm-after of its last
   * heartbeat `h` and has not run since is confirmed down at the latest (undefined: no second
   * opinion, or its kubelet ran meanwhile): the first probe on the tick after --confirm-after, the
   * confirming one a retry later on a tick, its timeout.
   */
  private confirmedBy(node: string, h: number): number | undefined {
    const so = this.o.secondOpinion;
    if (!so || !this.o.kubeletRuns) return undefined;
    const by = h + so.confirmAfterMs + PROBE_TICKS_MS + so.retryMs + so.timeoutMs;
    const runs = this.o.kubeletRuns(node);
    // Stopped from before its first probe, and not started again until the bound.
    if (runs.some((r) => r.from <= by && (r.to === undefined || r.to > h + so.confirmAfterMs)))
      return undefined;
    return by;
  }

  /**
   * L1, the storage slow: a node that died while the storage was slow (writes and quorum reads up
   * to S late) and nothing else happened (one leader; kubelets may die, the whole fleet too) is
   * marked by its last heartbeat + G + the kubelets' reconnect hold a silent fleet gets + 6 x S +
   * 2 s (SLOW_MARK_REQUESTS), unless a kubelet came back meanwhile. True when it failed.
   */
  private slowMark(node: string, h: number, at: number): boolean {
    const g = this.o.graceMs;
    const slow = this.timeline.slowOnly(h - g, h + 2 * g);
    if (slow === undefined) return false;
    const due = h + g + SLOW_MARK_HOLD_MS + SLOW_MARK_REQUESTS * slow + 2_000;
    if (at <= due) return false;
    // A kubelet back meanwhile ends what looks like a storage outage (the fleet silent, then a
    // write): that is forgiven as one, and L2 bounds it.
    if (
      this.timeline.slowOnly(h - g, due) === undefined ||
      !this.stableLeader(h - g, due) ||
      this.timeline.revived(h - g, due)
    )
      return false;
    this.fail(
      'L1 slow mark',
      node,
      `marked ${((at - h - g) / 1000).toFixed(3)}s past its grace (last heartbeat ${(h / 1000).toFixed(3)}s, bound ${((due - h - g) / 1000).toFixed(1)}s) with the storage ${slow} ms slow and no other fault`,
    );
    return true;
  }

  private stableLeader(from: number, to: number): boolean {
    // The holder at `from` is still the holder at `to`, and it held the lock for a grace already.
    let at = '';
    for (const [t, h] of this.holders) {
      if (t <= from - this.o.graceMs) at = h;
      else if (t <= to) return false;
    }
    return at !== '';
  }

  /**
   * Whether some other node's kubelet ran and reached the API server throughout [from, to]: the
   * fleet was not silent at once (a whole fleet silent is held for the kubelets' reconnect time, and
   * looks like a storage outage when one of them comes back).
   */
  private othersRenewing(node: string, from: number, to: number): boolean {
    for (const n of this.truth.keys())
      if (n !== node && this.timeline.aliveThroughout(n, from, to)) return true;
    return false;
  }

  private trackDisruption(now: number): void {
    const zones = new Map<string, { all: number; notReady: number }>();
    for (const n of this.server.list('nodes')) {
      const z = n.metadata.labels?.[ZONE_LABEL] ?? '';
      const c = zones.get(z) ?? { all: 0, notReady: 0 };
      c.all++;
      if (readyOf(n)?.status !== 'True') c.notReady++;
      zones.set(z, c);
    }
    const full = zones.size > 0 && [...zones.values()].every((c) => c.notReady === c.all);
    if (!full) this.fullDisruptionSince = undefined;
    else this.fullDisruptionSince ??= now;
    // Upstream's zone states: partial disruption (>= 55% and more than 2 not Ready, not all) stops a
    // small zone's evictions.
    const partialZone = (c: { all: number; notReady: number }) =>
      c.notReady > 2 && c.notReady / c.all >= 0.55 && c.notReady < c.all;
    const partial = [...zones.values()].some(partialZone);
    for (const [z, c] of zones) {
      if (!partialZone(c)) this.partialSince.delete(z);
      else if (!this.partialSince.has(z)) this.partialSince.set(z, now);
    }
    if (full || partial) {
      this.disruptionTicks.push(now);
      if (this.disruptionTicks.length > 500) this.disruptionTicks.shift();
    }
  }

  /** L3, at the end of the quiet tail. */
  finish(): void {
    const now = this.o.now();
    for (const n of this.server.list('nodes')) {
      const name = n.metadata.name;
      const since = this.timeline.downSince(name);
      const ready = readyOf(n)?.status;
      const taints = taintsOf(n);
      if (since === undefined) {
        if (ready !== 'True')
          this.fail('L3 converged', name, `running, but Ready=${String(ready)} at the end`);
        for (const key of [UNREACHABLE, OUT_OF_SERVICE])
          if (has(taints, key, 'NoExecute'))
            this.fail('L3 converged', name, `running, but still tainted ${key}:NoExecute at the end`);
      } else if (now - since > 2 * this.o.graceMs + 30_000 && ready !== 'Unknown') {
        this.fail(
          'L3 converged',
          name,
          `stopped for ${((now - since) / 1000).toFixed(0)}s, but Ready=${String(ready)} at the end`,
        );
      }
    }
  }

  /** B1: bounded queues, watches and timers. */
  bounded(
    figures: { replica: string; queued: number }[],
    openWatches: number,
    timers: number,
    limits: { queue: number; watches: number; timers: number },
  ): void {
    for (const f of figures)
      if (f.queued > limits.queue)
        this.fail('B1 bounded', undefined, `${f.replica}: ${f.queued} keys queued (limit ${limits.queue})`);
    if (openWatches > limits.watches)
      this.fail('B1 bounded', undefined, `${openWatches} open watches (limit ${limits.watches})`);
    if (timers > limits.timers)
      this.fail('B1 bounded', undefined, `${timers} pending timers (limit ${limits.timers})`);
  }
}
