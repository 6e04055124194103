import type { Clock } from '../clock/clock.js';
import { zoneDisplay, zoneKeyOf } from '../disruption/index.js';
import { IDENTITY_LABEL, LEADER_LABEL } from '../election/index.js';
import { Companion, NODE_LEASE_NAMESPACE, parseMicros, readyStatus } from '../health/index.js';
import type { KubeClient } from '../kube/client.js';
import type { Lease, List, Node, Taint } from '../kube/types.js';
import type { Reflector } from '../watch/index.js';

/** A row of the fleet view. */
export interface NodeRow {
  name: string;
  zone: string;
  /** Seconds since we saw its lease renewTime change; undefined: not seen yet. */
  heartbeatAge: number | undefined;
  /** True when the age is estimated from renewTime against our wall clock (clock skew applies). */
  estimated: boolean;
  ready: string;
  taints: string[];
}

export interface ReplicaRow {
  namespace: string;
  lease: string;
  holder: string;
  leader: boolean;
}

const OUR_TAINT_PREFIX = 'node.kubernetes.io/';

/** How a taint shows in the view: node.kubernetes.io keys shortened, the companion key in full. */
function showTaint(t: Taint, companionKey: string): string | undefined {
  if (t.key.startsWith(OUR_TAINT_PREFIX)) return `${t.key.slice(OUR_TAINT_PREFIX.length)}:${t.effect}`;
  if (t.key === companionKey) return `${t.key}${t.value ? `=${t.value}` : ''}:${t.effect}`;
  return undefined;
}

/**
 * Read-only view of the fleet: node heartbeat ages as observed (on our monotonic clock, from the
 * moment a lease renewTime is seen to change), Ready state, the node.kubernetes.io taints and the
 * companion mode's taint, and which replica of the controller leads.
 */
export class FleetView {
  private readonly lastChange = new Map<string, { renew: string; at: number }>();
  replicas: ReplicaRow[] = [];
  lock:
    | {
        namespace: string;
        holder: string;
        renewedAgo: number | undefined;
        /** Coordinated leader election: the lock's spec.strategy and spec.preferredHolder ('' unset). */
        strategy?: string;
        preferredHolder?: string;
      }
    | undefined;
  private lockSeen: { renew: string; at: number } | undefined;

  constructor(
    private readonly clock: Clock,
    private readonly nodes: Reflector<Node>,
    private readonly leases: Reflector<Lease>,
    /** The companion mode's taint key (--companion-taint-key), shown with its value. */
    private readonly companionKey: string = Companion.DefaultTaintKey,
  ) {
    leases.events$.subscribe((ev) => {
      if (ev.type !== 'Apply' && ev.type !== 'InitApply') return;
      const name = ev.object.metadata.name;
      const renew = String(ev.object.spec?.renewTime ?? '');
      const prev = this.lastChange.get(name);
      // The first sighting during the initial list is not a renewal we saw happen.
      if (!prev) {
        if (ev.type === 'Apply') this.lastChange.set(name, { renew, at: this.clock.scheduler.now() });
        else this.lastChange.set(name, { renew, at: Number.NaN });
      } else if (prev.renew !== renew) this.lastChange.set(name, { renew, at: this.clock.scheduler.now() });
    });
  }

  rows(): NodeRow[] {
    const now = this.clock.scheduler.now();
    const wall = this.clock.wall();
    const out: NodeRow[] = [];
    for (const node of this.nodes.store.values()) {
      const name = node.metadata.name;
      const seen = this.lastChange.get(name);
      let heartbeatAge: number | undefined;
      let estimated = false;
      if (seen && !Number.isNaN(seen.at)) heartbeatAge = (now - seen.at) / 1000;
      else {
        const lease = this.leases.store.getByName(name, NODE_LEASE_NAMESPACE);
        const micros = parseMicros(lease?.spec?.renewTime ?? undefined);
        if (micros !== undefined) {
          heartbeatAge = Math.max(0, (wall - micros / 1000) / 1000);
          estimated = true;
        }
      }
      out.push({
        name,
        zone: zoneDisplay(zoneKeyOf(node.metadata.labels)),
        heartbeatAge,
        estimated,
        ready: readyStatus(node) ?? '-',
        taints: (node.spec?.taints ?? []).flatMap((t) => showTaint(t, this.companionKey) ?? []),
      });
    }
    return out.sort((a, b) =>
      a.zone === b.zone ? a.name.localeCompare(b.name) : a.zone.localeCompare(b.zone),
    );
  }

  /** Polls the controller's identity leases (label-selected, all namespaces) and its lock. */
  async refreshReplicas(client: KubeClient, lockName: string): Promise<void> {
    const list = await client.request<List<Lease>>({
      method: 'GET',
      path: '/apis/coordination.k8s.io/v1/leases',
      query: { labelSelector: IDENTITY_LABEL },
      timeoutMs: 5000,
    });
    this.replicas = list.items
      .map((l) => ({
        namespace: l.metadata.namespace ?? '',
        lease: l.metadata.name,
        holder: l.spec?.holderIdentity ?? '',
        leader: l.metadata.labels?.[LEADER_LABEL] === 'true',
      }))
      .sort((a, b) => a.holder.localeCompare(b.holder));
    const ns = this.replicas[0]?.namespace;
    if (!ns) {
      this.lock = undefined;
      return;
    }
    try {
      const lock = await client.request<Lease>({
        method: 'GET',
        path: `/apis/coordination.k8s.io/v1/namespaces/${ns}/leases/${lockName}`,
        timeoutMs: 5000,
      });
      const renew = String(lock.spec?.renewTime ?? '');
      const now = this.clock.scheduler.now();
      if (!this.lockSeen || this.lockSeen.renew !== renew) this.lockSeen = { renew, at: now };
      this.lock = {
        namespace: ns,
        holder: lock.spec?.holderIdentity ?? '',
        renewedAgo: (now - this.lockSeen.at) / 1000,
        strategy: lock.spec?.strategy ?? '',
        preferredHolder: lock.spec?.preferredHolder ?? '',
      };
    } catch {
      this.lock = { namespace: ns, holder: '', renewedAgo: undefined };
    }
  }

  /** Renders the view as text lines (no ANSI codes except optional colour). */
  render(opts: { title: string; maxRows?: number; colour?: boolean; notes?: string[] }): string {
    const rows = this.rows();
    const c = (code: string, s: string) => (opts.colour ? `\x1b[${code}m${s}\x1b[0m` : s);
    const counts = new Map<string, number>();
    for (const r of rows) counts.set(r.ready, (counts.get(r.ready) ?? 0) + 1);
    const summary = [...counts.entries()].map(([k, v]) => `${v} ${k === 'True' ? 'Ready' : k}`).join(', ');
    const lock = this.lock;
    // Coordinated leader election: the coordinator's strategy, and whom it prefers (a preemption).
    const coordinated = lock?.strategy
      ? `, strategy ${lock.strategy}${lock.preferredHolder ? `, preferred holder ${lock.preferredHolder}` : ''}`
      : '';
    const leader = lock?.holder
      ? `${lock.holder} (lock ${lock.namespace}, renewal seen ${lock.renewedAgo?.toFixed(1) ?? '?'}s ago${coordinated})`
      : lock?.strategy
        ? `none (lock ${lock.namespace}${coordinated})`
        : this.replicas.length
          ? 'none'
          : 'no controller replicas found';
    const lines = [
      opts.title,
      `nodes: ${rows.length}${summary ? ` (${summary})` : ''}   leader: ${leader}`,
      `replicas: ${this.replicas.map((r) => (r.leader ? `${r.holder}*` : r.holder)).join(', ') || '-'}`,
      '',
      `${'NODE'.padEnd(24)} ${'ZONE'.padEnd(18)} ${'HEARTBEAT'.padStart(9)}  ${'READY'.padEnd(8)} TAINTS`,
    ];
    // Unhealthy first when the list is cut.
    const ordered =
      opts.maxRows !== undefined && rows.length > opts.maxRows
        ? [...rows.filter((r) => r.ready !== 'True'), ...rows.filter((r) => r.ready === 'True')]
        : rows;
    for (const r of ordered.slice(0, opts.maxRows ?? ordered.length)) {
      const age =
        r.heartbeatAge === undefined ? '-' : `${r.estimated ? '~' : ''}${r.heartbeatAge.toFixed(1)}s`;
      const ready =
        r.ready === 'True'
          ? c('32', r.ready.padEnd(8))
          : c(r.ready === 'Unknown' ? '33' : '31', r.ready.padEnd(8));
      lines.push(
        `${r.name.padEnd(24)} ${r.zone.padEnd(18)} ${age.padStart(9)}  ${ready} ${r.taints.join(',')}`,
      );
    }
    if (opts.maxRows !== undefined && rows.length > opts.maxRows)
      lines.push(`... ${rows.length - opts.maxRows} more`);
    for (const n of opts.notes ?? []) lines.push(n);
    return lines.join('\n');
  }
}
