import { type Clock, timerDelay } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import { KubeApiError, type KubeClient, type KubeResponse, paths } from '../kube/client.js';
import type { Logger } from '../log/logger.js';
import { EVENT_SOURCE_COMPONENT } from '../names/index.js';
import type { Subscription } from '../rx/index.js';

/**
 * A sign of kube-controller-manager's node-lifecycle-controller before it marks anything (see
 * concurrent-controller.ts for the marks): the `RegisteredNode` Events it records (source
 * node-controller) for every node it lists when it starts, right after kube-controller-manager
 * took its leader-election lock, and for each node added later (within its 5 s node monitor
 * period). No other kube-controller-manager controller records them; ours records them under its
 * own managedFields manager, so only Events written by manager `kube-controller-manager` count.
 *
 * Its lock, kube-system/kube-controller-manager, says which process leads now: holderIdentity and
 * acquireTime (a restarted process takes it anew). Such an Event recorded since that acquireTime
 * (its own timestamps and the acquireTime are both that process's clock; compared to the second,
 * the Events' grain) shows that the leader runs its node-lifecycle-controller, and it keeps running
 * it while it leads: a process's controllers change only with a restart, which is a new
 * acquireTime. The evidence then holds while the lock names that leader and it renews (a change of
 * renewTime seen within the last hour); another leader, or an hour without a renewal, ends it.
 * The lock alone is no evidence: after a correct hand-over kube-controller-manager keeps running
 * with that one controller off (`--controllers=...,-node-lifecycle-controller`), which nothing
 * shows. Without a lock to read (404: no leader election; 403) an Event counts for an hour from its
 * creation, on the API server's clock as the node marks are.
 *
 * Read at start (the replica does not act before the first answer) and every POLL_MS after: the
 * lock each time (one small GET), and the RegisteredNode Events in `default` (a field selector;
 * kube-apiserver serves Events from etcd, so they are listed only when they may have changed) at
 * each read for LIST_FOR_MS after the start, after a change of leader, and after a node joined.
 */

export const KCM_MANAGER = 'kube-controller-manager';
export const KCM_LOCK = { namespace: 'kube-system', name: 'kube-controller-manager' } as const;
/** Node Events go to `default` (client-go's recorder, for a cluster-scoped object). */
export const NODE_EVENTS_NAMESPACE = 'default';
export const REGISTERED_NODE = 'RegisteredNode';
/** Between reads of the lock: kube-controller-manager records RegisteredNode within 5 s of seeing a node. */
export const POLL_MS = 15_000;
/** The Events are listed at each read for this long after the start, a change of leader, a node that joined. */
export const LIST_FOR_MS = 30_000;
const RETRY_MS = 5_000;
const REQUEST_TIMEOUT_MS = 30_000;

/** Who leads kube-controller-manager: its lock's holder, when it took the lock, its last renewal. */
export interface KcmLeader {
  holder: string;
  /** acquireTime, ms on the leader's clock; undefined when the lock has none. */
  acquiredAt: number | undefined;
  renewTime: string;
}

/** A RegisteredNode Event written by kube-controller-manager. */
export interface Registration {
  node: string;
  /** The latest of its eventTime, firstTimestamp and lastTimestamp: the recorder's clock, ms. */
  recordedAt: number | undefined;
  /** metadata.creationTimestamp: the API server's clock, ms. */
  createdAt: number | undefined;
}

/** What the Events show: the node, how long ago (server clock), and whether the current leader recorded it. */
export interface RegisteredEvidence {
  node: string;
  ageMs: number;
  /** The leader that recorded it (it holds while that leader leads); undefined: no lock to date it by. */
  leader: KcmLeader | undefined;
}

function field(v: unknown, key: string): unknown {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
    ? (v as Record<string, unknown>)[key]
    : undefined;
}

const time = (v: unknown): number | undefined => {
  const t = typeof v === 'string' ? Date.parse(v) : Number.NaN;
  return Number.isFinite(t) ? t : undefined;
};

/** The lock's leader, or undefined when it names nobody. */
export function kcmLeader(lease: unknown): KcmLeader | undefined {
  const spec = field(lease, 'spec');
  const holder = field(spec, 'holderIdentity');
  if (typeof holder !== 'string' || holder === '') return undefined;
  const renew = field(spec, 'renewTime');
  return {
    holder,
    acquiredAt: time(field(spec, 'acquireTime')),
    renewTime: typeof renew === 'string' ? renew : '',
  };
}

/** The RegisteredNode Events (source node-controller) among `items` that kube-controller-manager wrote. */
export function kcmRegistrations(items: readonly unknown[]): Registration[] {
  const out: Registration[] = [];
  for (const e of items) {
    if (field(e, 'reason') !== REGISTERED_NODE) continue;
    if (field(field(e, 'source'), 'component') !== EVENT_SOURCE_COMPONENT) continue;
    const node = field(field(e, 'involvedObject'), 'name');
    if (typeof node !== 'string' || node === '') continue;
    const meta = field(e, 'metadata');
    const managed = field(meta, 'managedFields');
    if (!Array.isArray(managed) || !managed.some((m) => field(m, 'manager') === KCM_MANAGER)) continue;
    const stamps = ['eventTime', 'firstTimestamp', 'lastTimestamp']
      .map((k) => time(field(e, k)))
      .filter((t): t is number => t !== undefined);
    out.push({
      node,
      recordedAt: stamps.length > 0 ? Math.max(...stamps) : undefined,
      createdAt: time(field(meta, 'creationTimestamp')),
    });
  }
  return out;
}

/**
 * The newest registration that shows kube-controller-manager's node-lifecycle-controller on: with
 * a leader that has an acquireTime, one it recorded since then (to the second); without, one
 * created within `windowMs` before `serverNow`.
 */
export function registeredEvidence(
  regs: readonly Registration[],
  leader: KcmLeader | undefined,
  serverNow: number,
  windowMs: number,
): RegisteredEvidence | undefined {
  const age = (r: Registration) => (r.createdAt === undefined ? 0 : Math.max(0, serverNow - r.createdAt));
  const sec = (ms: number) => Math.floor(ms / 1000);
  const byLeader = leader?.acquiredAt !== undefined;
  const counting = regs.filter((r) =>
    byLeader
      ? r.recordedAt !== undefined && sec(r.recordedAt) >= sec(leader.acquiredAt as number)
      : r.createdAt !== undefined && age(r) <= windowMs,
  );
  const newest = counting.sort((a, b) => age(a) - age(b))[0];
  if (!newest) return undefined;
  return { node: newest.node, ageMs: age(newest), leader: byLeader ? leader : undefined };
}

/** The API server's clock at its answer (Date header), ms. */
function dateOf(headers: Record<string, string | string[] | undefined>): number | undefined {
  return time(headers.date);
}

export interface RegisteredNodeSignOptions {
  client: Pick<KubeClient, 'raw'>;
  clock: Clock;
  logger: Logger;
  windowMs: number;
  /** --allow-concurrent-node-lifecycle-controller: a warning instead of an error. */
  allow: boolean;
  /** What to do about kube-controller-manager, for the log. */
  fix: string;
  pollMs?: number;
}

/** The evidence held, when it was seen (monotonic), until when unless renewed, and the leader followed. */
interface Held {
  e: RegisteredEvidence;
  seenAt: number;
  until: number;
  leader: KcmLeader | undefined;
}

/**
 * Reads the sign (see the top of this file): the lock at start and every pollMs, the Events in the
 * listing periods. `checked` once a read was answered (or the Events cannot be listed at all: 403,
 * said once); `describe()` says what holds.
 */
export class RegisteredNodeSign {
  private readonly o: RegisteredNodeSignOptions;
  private readonly log: Logger;
  private readonly abort = new AbortController();
  private readonly listeners: (() => void)[] = [];
  private timer: Subscription | undefined;
  private stopped = false;
  private held: Held | undefined;
  /** kube-controller-manager's leader at the last read ('' for none), and the end of the listing period (monotonic). */
  private leaderKey: string | undefined;
  private listUntil = Number.NEGATIVE_INFINITY;
  /** A read answered (or the sign is unavailable: no list on Events). */
  checked = false;
  /** The last read's failure while none was answered yet. */
  checkError: string | undefined;

  constructor(o: RegisteredNodeSignOptions) {
    this.o = o;
    this.log = o.logger.with({ component: 'concurrent-controller' });
  }

  onChange(fn: () => void): void {
    this.listeners.push(fn);
  }

  start(): void {
    this.listUntil = this.now() + LIST_FOR_MS;
    void this.read();
  }

  /** A node joined (the node watch): kube-controller-manager registers it within seconds; list the Events. */
  nodeJoined(): void {
    this.listUntil = Math.max(this.listUntil, this.now() + LIST_FOR_MS);
  }

  stop(): void {
    this.stopped = true;
    this.abort.abort();
    this.timer?.unsubscribe();
  }

  /** Whether evidence holds. */
  holds(): boolean {
    return this.held !== undefined;
  }

  /** What holds, in words (for the refusal and /readyz), or undefined. */
  describe(): string | undefined {
    const h = this.held;
    if (!h) return undefined;
    const ago = formatDuration(Math.max(0, Math.round((this.now() - h.seenAt + h.e.ageMs) / 1000) * 1000));
    const what = `kube-controller-manager's node-lifecycle-controller recorded ${REGISTERED_NODE} for node ${h.e.node} ${ago} ago`;
    return h.leader
      ? `${what}, since its leader ${h.leader.holder} took its lock; refusing to write while that leader leads`
      : `${what}; refusing to write until an hour after that`;
  }

  private now(): number {
    return this.o.clock.scheduler.now();
  }

  private changed(): void {
    for (const fn of this.listeners) fn();
  }

  private schedule(ms: number): void {
    this.timer?.unsubscribe();
    if (this.stopped) return;
    this.timer = this.o.clock.scheduler.schedule(() => void this.read(), timerDelay(ms));
  }

  private async get(path: string, query?: Record<string, string>): Promise<KubeResponse<unknown>> {
    return await this.o.client.raw({
      method: 'GET',
      path,
      ...(query ? { query } : {}),
      timeoutMs: REQUEST_TIMEOUT_MS,
      signal: this.abort.signal,
      priority: 'low',
    });
  }

  /** One read; then the next, at the poll period (sooner while no read was answered). */
  private async read(): Promise<void> {
    if (this.stopped) return;
    let next = this.o.pollMs ?? POLL_MS;
    try {
      if ((await this.step()) === 'unavailable' || this.stopped) return;
      const first = !this.checked;
      this.checked = true;
      this.checkError = undefined;
      if (first) this.changed();
    } catch (err) {
      if (this.stopped) return;
      const cause = err instanceof Error ? err.message : String(err);
      if (!this.checked) {
        next = RETRY_MS;
        this.checkError = cause;
        this.changed();
      }
      this.log.warn('Cannot read the RegisteredNode Events or the lock of kube-controller-manager', {
        err: cause,
        retryIn: formatDuration(next),
      });
    }
    this.expire();
    this.schedule(next);
  }

  /**
   * The lock each time: a leader followed while the evidence it dated holds; a new one (or none
   * now) starts a listing period. The Events are listed only in such a period (LIST_FOR_MS after
   * the start, a change of leader, a node that joined): kube-controller-manager records them then.
   */
  private async step(): Promise<'unavailable' | undefined> {
    const leader = await this.leader();
    const key = leader ? `${leader.holder}|${leader.acquiredAt ?? ''}` : '';
    if (key !== this.leaderKey) {
      this.leaderKey = key;
      this.listUntil = this.now() + LIST_FOR_MS;
    }
    const h = this.held;
    if (h?.leader) {
      if (leader?.holder !== h.leader.holder || leader.acquiredAt !== h.leader.acquiredAt) {
        this.release(
          leader
            ? `its lock changed hands (${h.leader.holder} -> ${leader.holder})`
            : 'its lock names no leader',
        );
      } else if (leader.renewTime !== h.leader.renewTime) {
        Object.assign(h, { until: this.now() + this.o.windowMs, leader });
      }
    }
    if (this.held?.leader || this.now() > this.listUntil) return undefined;
    return await this.look(leader);
  }

  /** Lists kube-controller-manager's RegisteredNode Events and dates them by its leader, if any. */
  private async look(leader: KcmLeader | undefined): Promise<'unavailable' | undefined> {
    const path = paths.coreEvents(NODE_EVENTS_NAMESPACE);
    const res = await this.get(path, {
      fieldSelector: `reason=${REGISTERED_NODE},source=${EVENT_SOURCE_COMPONENT}`,
    });
    if (res.status === 403) return this.unavailable();
    if (res.status < 200 || res.status >= 300)
      throw new KubeApiError(res.status, res.body, res.headers, `GET ${path}`);
    const items = field(res.body, 'items');
    const regs = kcmRegistrations(Array.isArray(items) ? items : []);
    const e = registeredEvidence(regs, leader, dateOf(res.headers) ?? this.o.clock.wall(), this.o.windowMs);
    if (e) this.hold(e, leader);
    return undefined;
  }

  /** kube-controller-manager's lock: its leader; undefined when missing (404), unreadable (403) or naming nobody. */
  private async leader(): Promise<KcmLeader | undefined> {
    const path = paths.lease(KCM_LOCK.namespace, KCM_LOCK.name);
    const res = await this.get(path);
    if (res.status === 404 || res.status === 403) return undefined;
    if (res.status < 200 || res.status >= 300)
      throw new KubeApiError(res.status, res.body, res.headers, `GET ${path}`);
    return kcmLeader(res.body);
  }

  private unavailable(): 'unavailable' {
    this.log.warn(
      `Cannot list Events (403): kube-controller-manager's ${REGISTERED_NODE} Events are not looked for; grant list on events (manifests/base/clusterrole.yaml)`,
    );
    this.stop();
    this.checked = true;
    this.checkError = undefined;
    this.changed();
    return 'unavailable';
  }

  private hold(e: RegisteredEvidence, leader: KcmLeader | undefined): void {
    const now = this.now();
    const until = e.leader ? now + this.o.windowMs : now - e.ageMs + this.o.windowMs;
    if (until <= now) return;
    const had = this.held;
    this.held = { e, seenAt: now, until, leader: e.leader ? leader : undefined };
    if (had) return;
    const fields = {
      node: e.node,
      manager: KCM_MANAGER,
      recordedAgo: formatDuration(Math.round(e.ageMs / 1000) * 1000),
      ...(e.leader ? { leader: e.leader.holder } : {}),
      seenIn: `the ${REGISTERED_NODE} Events`,
      fix: this.o.fix,
    };
    if (this.o.allow) {
      this.log.warn(
        `kube-controller-manager's node-lifecycle-controller is on (it records ${REGISTERED_NODE}): acting anyway (--allow-concurrent-node-lifecycle-controller)`,
        fields,
      );
    } else {
      this.log.error(
        `kube-controller-manager's node-lifecycle-controller is on (it records ${REGISTERED_NODE}): refusing to write`,
        fields,
      );
    }
    this.changed();
  }

  private release(why: string): void {
    const h = this.held;
    if (!h) return;
    this.held = undefined;
    this.log.info(`kube-controller-manager's ${REGISTERED_NODE} evidence no longer holds`, {
      why,
      lastNode: h.e.node,
    });
    this.changed();
  }

  private expire(): void {
    const h = this.held;
    if (!h || h.until > this.now()) return;
    this.release(
      h.leader ? `its leader ${h.leader.holder} has not renewed its lock for an hour` : 'an hour has passed',
    );
  }
}
