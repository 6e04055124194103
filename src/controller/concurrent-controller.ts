import { Counter, Gauge, type Registry } from 'prom-client';
import { type Clock, timerDelay } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import { readyStatus } from '../health/index.js';
import { KubeApiError, type KubeClient, type KubeResponse, paths } from '../kube/client.js';
import type { Node } from '../kube/types.js';
import type { Logger } from '../log/logger.js';
import type { Observable, Subscription } from '../rx/index.js';
import type { WatchEvent } from '../watch/index.js';
import { KCM_MANAGER, type RegisteredNodeSign } from './kcm-registered.js';

/**
 * Another node-lifecycle controller beside ours in upstream mode: kube-controller-manager whose own
 * node-lifecycle-controller was not turned off (the default install runs --mode=upstream). Both
 * would mark the same nodes, each with its own grace, rates, cap and pod marks, and each undoes
 * nothing of the other's: the operator gets neither behaviour. This finds the evidence and says
 * what to do; run.ts keeps the replica from writing while it holds.
 *
 * The evidence is the nodes' Ready condition (and, seen before kube-controller-manager marks
 * anything, its RegisteredNode Events dated by its lock: kcm-registered.ts, passed in as
 * `registered`). A node-lifecycle controller writes that
 * condition only to set it Unknown (it stops there; the kubelet sets it back to True), and the API
 * server records who did in the node's metadata.managedFields: the entry of that manager, for the
 * status subresource, owns f:status/f:conditions/k:{"type":"Ready"}/f:status until the kubelet
 * writes the condition again, and its `time` is when the manager last wrote the node's status.
 * kube-controller-manager's entry is `kube-controller-manager` (its user agent up to the first
 * '/'), operation Update, subresource status. Other kube-controller-manager controllers write Nodes
 * too (node-ipam's podCIDR, the node-lifecycle labels and taints, in the entry without a
 * subresource), so they are no evidence; neither are the taints: spec.taints is an atomic list,
 * owned as a whole by whoever changed it last (kubectl taint, our own writes), and a list emptied
 * has no owner at all.
 *
 * Two ways to see it:
 * - at start, one metadata-only list of the nodes: any node whose Ready status
 *   kube-controller-manager set within the last EVIDENCE_WINDOW_MS, on the API server's clock (the
 *   list's Date header against the entry's time: no clock of ours is compared with the server's);
 * - while running, on the node watch: a node whose Ready turns Unknown is read again (full object)
 *   and whoever owns its Ready status, if not us (our writes carry our user agent, so the API
 *   server names them after COMPONENT), is evidence.
 *
 * Why an hour: a node kube-controller-manager marked before the hand-over and that never came back
 * keeps that entry for ever, so old evidence must not count; evidence of the last hour means its
 * node-lifecycle-controller ran within the hour. A correct hand-over (docs/deploy.md: ours and the
 * flag change in one maintenance window) leaves at most an hour in which a node it marked just
 * before the change makes ours wait; a node it marks after the change cannot exist. Each piece of
 * evidence holds for an hour from the write it shows, then it lapses and the replica acts again
 * (said in the log); new marks by the other controller keep it.
 */

export { KCM_MANAGER };
/** How long a write of the other controller holds (from that write, on the API server's clock). */
export const EVIDENCE_WINDOW_MS = 3_600_000;
/** The Accept header of a metadata-only list: names and managedFields, no status or images. */
export const METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';
const READY_KEY = 'k:{"type":"Ready"}';
/** Nodes waiting to be read again after turning Unknown; more are dropped (counted). */
const MAX_PENDING_CHECKS = 8;
const PAGE_SIZE = 500;
const REQUEST_TIMEOUT_MS = 30_000;
const RETRY_MIN_MS = 5_000;
const RETRY_MAX_MS = 60_000;

/** One managedFields entry that owns a node's Ready status: who set it last, and when (ms). */
export interface ReadyStatusOwner {
  manager: string;
  operation: string;
  subresource: string;
  time: number | undefined;
}

/** A write of another node-lifecycle controller: the node, the manager, how long ago (server clock). */
export interface Evidence {
  node: string;
  manager: string;
  ageMs: number;
}

function field(v: unknown, key: string): unknown {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
    ? (v as Record<string, unknown>)[key]
    : undefined;
}

/** The managedFields entries (of any object shape) that own the Ready condition's status. */
export function readyStatusOwners(managedFields: unknown): ReadyStatusOwner[] {
  if (!Array.isArray(managedFields)) return [];
  const out: ReadyStatusOwner[] = [];
  for (const e of managedFields) {
    const manager = field(e, 'manager');
    if (typeof manager !== 'string' || manager === '') continue;
    const ready = field(field(field(field(e, 'fieldsV1'), 'f:status'), 'f:conditions'), READY_KEY);
    if (field(ready, 'f:status') === undefined) continue;
    const time = field(e, 'time');
    const t = typeof time === 'string' ? Date.parse(time) : Number.NaN;
    out.push({
      manager,
      operation: String(field(e, 'operation') ?? ''),
      subresource: String(field(e, 'subresource') ?? ''),
      time: Number.isFinite(t) ? t : undefined,
    });
  }
  return out;
}

/** The API server's clock at its answer (the Date header), ms; undefined when absent. */
export function serverTime(headers: Record<string, string | string[] | undefined>): number | undefined {
  const d = headers.date;
  const t = typeof d === 'string' ? Date.parse(d) : Number.NaN;
  return Number.isFinite(t) ? t : undefined;
}

type WithManagedFields = { metadata?: { name?: unknown; managedFields?: unknown } };

/**
 * At start: nodes whose Ready status kube-controller-manager set (status subresource) within
 * `windowMs` before `serverNow`, newest first. An entry without a time cannot be placed: skipped.
 */
export function startEvidence(
  items: readonly WithManagedFields[],
  serverNow: number,
  windowMs: number,
): Evidence[] {
  const out: Evidence[] = [];
  for (const item of items) {
    const node = item.metadata?.name;
    if (typeof node !== 'string') continue;
    for (const o of readyStatusOwners(item.metadata?.managedFields)) {
      if (o.manager !== KCM_MANAGER || o.subresource !== 'status' || o.time === undefined) continue;
      const ageMs = Math.max(0, serverNow - o.time);
      if (ageMs <= windowMs) out.push({ node, manager: o.manager, ageMs });
    }
  }
  return out.sort((a, b) => a.ageMs - b.ageMs);
}

/**
 * While running: a node just seen turning Unknown, read again. Whoever owns its Ready status, if
 * that is not us, set it Unknown; the kubelet never does (it writes True or False). Nothing when
 * the node is no longer Unknown (the kubelet is back) or the write is older than `windowMs`.
 */
export function watchEvidence(
  node: Node & WithManagedFields,
  serverNow: number,
  ours: string,
  windowMs: number,
): Evidence | undefined {
  if (readyStatus(node) !== 'Unknown') return undefined;
  for (const o of readyStatusOwners(node.metadata?.managedFields)) {
    if (o.manager === ours || o.manager === 'kubelet') continue;
    const ageMs = o.time === undefined ? 0 : Math.max(0, serverNow - o.time);
    if (ageMs <= windowMs) return { node: node.metadata.name, manager: o.manager, ageMs };
  }
  return undefined;
}

/** What to do about `manager`, in one line. */
export function fixFor(manager: string): string {
  const companion = 'or run this controller beside it with --mode=companion (docs/deploy.md)';
  if (manager === KCM_MANAGER) {
    return (
      "turn off kube-controller-manager's node-lifecycle-controller by appending ,-node-lifecycle-controller " +
      'to the value of its --controllers flag (the default * becomes --controllers=*,-node-lifecycle-controller; ' +
      "kubeadm's becomes --controllers=*,bootstrapsigner,tokencleaner,-node-lifecycle-controller), " +
      companion
    );
  }
  return `stop ${manager} from marking nodes, ${companion}`;
}

export interface ConcurrentControllerMetrics {
  conflicting: Gauge<'manager'>;
  checks: Counter<'result'>;
}

export function createConcurrentControllerMetrics(registry: Registry): ConcurrentControllerMetrics {
  const checks = new Counter({
    name: 'nlc_ready_writer_checks_total',
    help: 'Nodes read again after they turned Unknown, to see who set their Ready condition, by result (ours, other, not_unknown, failed, dropped).',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  for (const result of ['ours', 'other', 'not_unknown', 'failed', 'dropped']) checks.inc({ result }, 0);
  return {
    conflicting: new Gauge({
      name: 'nlc_conflicting_controller',
      help: "1 while another node-lifecycle controller (by its managedFields manager) was seen setting nodes' Ready condition within the last hour, or kube-controller-manager's current leader recording RegisteredNode Events; this replica then writes nothing unless --allow-concurrent-node-lifecycle-controller.",
      labelNames: ['manager'] as const,
      registers: [registry],
    }),
    checks,
  };
}

export interface ConcurrentControllerOptions {
  /** Reads only: a metadata list at start, a GET of a node that turned Unknown. */
  client: Pick<KubeClient, 'raw'>;
  clock: Clock;
  logger: Logger;
  metrics: ConcurrentControllerMetrics;
  /** Our managedFields manager name (our user agent up to its first '/'). */
  ours: string;
  /** --allow-concurrent-node-lifecycle-controller: report, but do not refuse. */
  allow: boolean;
  windowMs?: number;
  /**
   * kube-controller-manager's RegisteredNode Events, dated by its lock (kcm-registered.ts): seen
   * before it marks anything. Started and stopped with this check; its first read gates acting.
   */
  registered?: RegisteredNodeSign;
}

/**
 * Watches for another node-lifecycle controller (see the top of this file). `mayAct()` is false
 * until the start check ran and while evidence holds (unless allowed); `refusal()` says why, for
 * the writer's fence and /readyz; `onChange` tells run.ts when either changes.
 */
export class ConcurrentControllerCheck {
  private readonly o: ConcurrentControllerOptions;
  private readonly log: Logger;
  private readonly windowMs: number;
  private checked = false;
  private checkError: string | undefined;
  /** Managers with evidence that holds: the node shown, and until when (monotonic). */
  private readonly active = new Map<string, { node: string; writtenAt: number; until: number }>();
  private readonly lastReady = new Map<string, string | undefined>();
  private readonly pending = new Set<string>();
  private reading = false;
  private stopped = false;
  private readonly listeners: (() => void)[] = [];
  private expiry: Subscription | undefined;
  private retry: Subscription | undefined;
  private events: Subscription | undefined;
  private readonly abort = new AbortController();

  constructor(o: ConcurrentControllerOptions) {
    this.o = o;
    this.log = o.logger.with({ component: 'concurrent-controller' });
    this.windowMs = o.windowMs ?? EVIDENCE_WINDOW_MS;
    o.registered?.onChange(() => {
      this.gauge(KCM_MANAGER);
      this.changed();
    });
  }

  /** Runs the start checks (retried until they succeed) and follows the node watch's events. */
  start(events$: Observable<WatchEvent<Node>>): void {
    this.events = events$.subscribe((ev) => this.onEvent(ev));
    void this.startCheck(RETRY_MIN_MS);
    this.o.registered?.start();
  }

  stop(): void {
    this.stopped = true;
    this.abort.abort();
    this.events?.unsubscribe();
    this.expiry?.unsubscribe();
    this.retry?.unsubscribe();
    this.o.registered?.stop();
  }

  onChange(fn: () => void): void {
    this.listeners.push(fn);
  }

  /** Whether the controller may act: the start checks ran, and no evidence holds (or it is allowed). */
  mayAct(): boolean {
    if (this.o.allow) return true;
    const r = this.o.registered;
    return this.checked && this.active.size === 0 && (!r || (r.checked && !r.holds()));
  }

  /** Why this replica refuses to write (fence, /readyz), or undefined. */
  refusal(): string | undefined {
    if (this.o.allow) return undefined;
    const [manager, e] = [...this.active.entries()].sort((a, b) => b[1].writtenAt - a[1].writtenAt)[0] ?? [];
    if (!manager || !e) {
      const registered = this.o.registered?.describe();
      if (registered === undefined) return undefined;
      return `another node-lifecycle controller is running: ${registered}. Fix: ${fixFor(KCM_MANAGER)}`;
    }
    // Whole seconds: the managedFields time has no finer grain.
    const ago = formatDuration(Math.max(0, Math.round((this.now() - e.writtenAt) / 1000) * 1000));
    return (
      `another node-lifecycle controller is running: ${manager} set node ${e.node}'s Ready condition ` +
      `${ago} ago; refusing to write until an hour after its last such write. Fix: ${fixFor(manager)}`
    );
  }

  /** For /readyz: the refusal, or why the start check could not be made yet. */
  readiness(): string | undefined {
    const refusal = this.refusal();
    if (refusal !== undefined) return refusal;
    if (this.o.allow) return undefined;
    const r = this.o.registered;
    const error = !this.checked ? this.checkError : r && !r.checked ? r.checkError : undefined;
    if (error !== undefined) {
      return `could not yet check for another node-lifecycle controller (not acting until it can): ${error}`;
    }
    return undefined;
  }

  /** nlc_conflicting_controller{manager}: 1 while any evidence of that manager holds. */
  private gauge(manager: string): void {
    const held = this.active.has(manager) || (manager === KCM_MANAGER && this.o.registered?.holds() === true);
    this.o.metrics.conflicting.set({ manager }, held ? 1 : 0);
  }

  private now(): number {
    return this.o.clock.scheduler.now();
  }

  private changed(): void {
    for (const fn of this.listeners) fn();
  }

  // -- at start ---------------------------------------------------------------------------------

  private async startCheck(retryMs: number): Promise<void> {
    if (this.stopped) return;
    let found: Evidence[];
    let nodes: number;
    try {
      ({ found, nodes } = await this.listEvidence());
    } catch (err) {
      if (this.stopped) return;
      this.checkError = err instanceof Error ? err.message : String(err);
      this.log.warn('Cannot check for another node-lifecycle controller; not acting until it can', {
        err: this.checkError,
        retryIn: formatDuration(retryMs),
      });
      this.retry = this.o.clock.scheduler.schedule(
        () => void this.startCheck(Math.min(RETRY_MAX_MS, retryMs * 2)),
        retryMs,
      );
      this.changed();
      return;
    }
    if (this.stopped) return;
    this.log.info('Checked the nodes for another node-lifecycle controller', {
      nodes,
      found: found.length === 0 ? 'none' : [...new Set(found.map((e) => e.manager))].join(','),
      window: formatDuration(this.windowMs),
    });
    for (const e of found) this.found(e, 'the node list at start');
    this.checked = true;
    this.checkError = undefined;
    this.changed();
  }

  private async listEvidence(): Promise<{ found: Evidence[]; nodes: number }> {
    const found: Evidence[] = [];
    let nodes = 0;
    let cont: string | undefined;
    let accept: string | undefined = METADATA_LIST;
    do {
      const req = {
        method: 'GET' as const,
        path: paths.nodes(),
        query: { limit: PAGE_SIZE, continue: cont },
        timeoutMs: REQUEST_TIMEOUT_MS,
        signal: this.abort.signal,
        priority: 'low' as const,
      };
      let res: KubeResponse<{ items?: WithManagedFields[]; metadata?: { continue?: string } }> =
        await this.o.client.raw({ ...req, accept });
      if (res.status === 406 && accept) {
        // Something between us and the API server does not serve metadata-only lists.
        accept = undefined;
        res = await this.o.client.raw(req);
      }
      if (res.status < 200 || res.status >= 300) {
        throw new KubeApiError(res.status, res.body, res.headers, `GET ${paths.nodes()}`);
      }
      const items = Array.isArray(res.body?.items) ? res.body.items : [];
      nodes += items.length;
      // Without a Date header (kube-apiserver always sends one), our wall clock stands in.
      const serverNow = serverTime(res.headers) ?? this.o.clock.wall();
      found.push(...startEvidence(items, serverNow, this.windowMs));
      cont = res.body?.metadata?.continue || undefined;
    } while (cont && !this.stopped);
    return { found: found.sort((a, b) => a.ageMs - b.ageMs), nodes };
  }

  // -- while running ----------------------------------------------------------------------------

  private onEvent(ev: WatchEvent<Node>): void {
    if (ev.type === 'Init' || ev.type === 'InitDone') return;
    const name = ev.object.metadata.name;
    if (ev.type === 'Delete') {
      this.lastReady.delete(name);
      return;
    }
    const status = readyStatus(ev.object);
    const before = this.lastReady.get(name);
    // A node that joins is registered by kube-controller-manager's node-lifecycle-controller, if on.
    if (ev.type === 'Apply' && !this.lastReady.has(name)) this.o.registered?.nodeJoined();
    this.lastReady.set(name, status);
    // A list (start, relist) only records; the start check covers what it shows.
    if (ev.type !== 'Apply' || status !== 'Unknown' || before === undefined || before === 'Unknown') return;
    if (this.pending.has(name)) return;
    if (this.pending.size >= MAX_PENDING_CHECKS) {
      this.o.metrics.checks.inc({ result: 'dropped' });
      return;
    }
    this.pending.add(name);
    void this.drain();
  }

  /** Reads the pending nodes again, one at a time. */
  private async drain(): Promise<void> {
    if (this.reading) return;
    this.reading = true;
    try {
      for (const name of this.pending) {
        if (this.stopped) return;
        await this.checkNode(name);
        this.pending.delete(name);
      }
    } finally {
      this.reading = false;
    }
  }

  private async checkNode(name: string): Promise<void> {
    let res: KubeResponse<Node & WithManagedFields>;
    try {
      res = await this.o.client.raw({
        method: 'GET',
        path: paths.node(name),
        timeoutMs: REQUEST_TIMEOUT_MS,
        signal: this.abort.signal,
        priority: 'low',
      });
    } catch (err) {
      if (this.stopped) return;
      this.o.metrics.checks.inc({ result: 'failed' });
      this.log.debug(2, 'Could not read a node that turned Unknown', { node: name, err });
      return;
    }
    if (res.status < 200 || res.status >= 300 || typeof res.body !== 'object' || res.body === null) {
      this.o.metrics.checks.inc({ result: 'failed' });
      this.log.debug(2, 'Could not read a node that turned Unknown', { node: name, status: res.status });
      return;
    }
    const serverNow = serverTime(res.headers) ?? this.o.clock.wall();
    const e = watchEvidence(res.body, serverNow, this.o.ours, this.windowMs);
    if (e) {
      this.o.metrics.checks.inc({ result: 'other' });
      this.found(e, 'the node watch');
      return;
    }
    const unknown = readyStatus(res.body) === 'Unknown';
    this.o.metrics.checks.inc({ result: unknown ? 'ours' : 'not_unknown' });
  }

  // -- evidence -----------------------------------------------------------------------------------

  private found(e: Evidence, seenIn: string): void {
    const now = this.now();
    const writtenAt = now - e.ageMs;
    const until = writtenAt + this.windowMs;
    if (until <= now) return;
    const had = this.active.get(e.manager);
    if (had) {
      if (writtenAt > had.writtenAt) Object.assign(had, { node: e.node, writtenAt, until });
      this.armExpiry();
      return;
    }
    this.active.set(e.manager, { node: e.node, writtenAt, until });
    this.gauge(e.manager);
    const fields = {
      node: e.node,
      manager: e.manager,
      writtenAgo: formatDuration(Math.round(e.ageMs)),
      seenIn,
      fix: fixFor(e.manager),
    };
    if (this.o.allow) {
      this.log.warn(
        "Another node-lifecycle controller sets the nodes' Ready condition: acting anyway (--allow-concurrent-node-lifecycle-controller)",
        fields,
      );
    } else {
      this.log.error("Another node-lifecycle controller sets the nodes' Ready condition: refusing to write", {
        ...fields,
        until: `an hour after its last such write (${formatDuration(Math.round(until - now))} from now, later if it writes again)`,
      });
    }
    this.armExpiry();
    this.changed();
  }

  private armExpiry(): void {
    this.expiry?.unsubscribe();
    const next = Math.min(...[...this.active.values()].map((e) => e.until));
    if (!Number.isFinite(next)) return;
    this.expiry = this.o.clock.scheduler.schedule(() => this.expire(), timerDelay(next - this.now()));
  }

  private expire(): void {
    const now = this.now();
    let lapsed = false;
    for (const [manager, e] of this.active) {
      if (e.until > now) continue;
      this.active.delete(manager);
      this.gauge(manager);
      lapsed = true;
      this.log.info('No write of the other node-lifecycle controller seen for an hour', {
        manager,
        lastNode: e.node,
        ...(this.o.allow ? {} : { now: this.mayAct() ? 'acting again' : 'still refusing' }),
      });
    }
    this.armExpiry();
    if (lapsed) this.changed();
  }
}
