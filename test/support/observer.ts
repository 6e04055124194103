import { readFileSync } from 'node:fs';
import type { KubeClient } from '../../src/kube/client.js';
import { paths } from '../../src/kube/client.js';
import type { Lease, Node, Pod } from '../../src/kube/types.js';
import { rawWatch } from './raw-watch.js';

/**
 * An independent observer of the API server for e2e tests: its own watches on leases, nodes and pods,
 * recording when (performance.now()) it saw renewals, Ready changes and taints. It shares no code
 * with the controller's watch layer.
 */
export class ClusterObserver {
  /** node -> times a renewTime change was seen. */
  readonly renewals = new Map<string, number[]>();
  /** node -> [time, Ready status] each time it changed. */
  readonly ready = new Map<string, { at: number; status: string }[]>();
  /** node -> [time, taint keys:effects] each time the taint set changed. */
  readonly taints = new Map<string, { at: number; taints: string[] }[]>();
  /** node -> times a new Ready lastHeartbeatTime (a kubelet status post) was seen. */
  readonly statusHeartbeats = new Map<string, number[]>();
  readonly nodes = new Map<string, Node>();
  readonly pods = new Map<string, Pod>();
  /** pod key -> [time, Ready status] changes. */
  readonly podReady = new Map<string, { at: number; status: string }[]>();
  /**
   * pod key -> when each incarnation (uid) was first seen going away: a deletionTimestamp, or its
   * DELETED event (a pod whose grace period is 0 is removed at once, with no deletionTimestamp seen).
   */
  readonly podDeleted = new Map<string, { at: number; uid: string }[]>();
  /** pod key -> when its DELETED event came (the object gone from the API, not only terminating). */
  readonly podGone = new Map<string, number[]>();
  private readonly lastRenew = new Map<string, string>();
  private readonly lastHeartbeat = new Map<string, string>();
  private stops: (() => void)[] = [];

  static async start(client: KubeClient): Promise<ClusterObserver> {
    const o = new ClusterObserver();
    o.stops.push(
      await rawWatch<Lease>(client, paths.leases('kube-node-lease'), (e) => {
        const name = e.object.metadata.name;
        const renew = String(e.object.spec?.renewTime ?? '');
        if (o.lastRenew.get(name) === renew) return;
        o.lastRenew.set(name, renew);
        o.renewals.set(name, [...(o.renewals.get(name) ?? []), e.at]);
      }),
      await rawWatch<Node>(client, paths.nodes(), (e) => {
        const name = e.object.metadata.name;
        o.nodes.set(name, e.object);
        const readyCondition = e.object.status?.conditions?.find((c) => c.type === 'Ready');
        const heartbeat = String(readyCondition?.lastHeartbeatTime ?? '');
        if (heartbeat && o.lastHeartbeat.get(name) !== heartbeat) {
          o.lastHeartbeat.set(name, heartbeat);
          o.statusHeartbeats.set(name, [...(o.statusHeartbeats.get(name) ?? []), e.at]);
        }
        const status = readyCondition?.status ?? '-';
        const rs = o.ready.get(name) ?? [];
        if (rs.at(-1)?.status !== status) o.ready.set(name, [...rs, { at: e.at, status }]);
        const taints = (e.object.spec?.taints ?? []).map((t) => `${t.key}:${t.effect}`).sort();
        const ts = o.taints.get(name) ?? [];
        if (ts.at(-1)?.taints.join() !== taints.join()) o.taints.set(name, [...ts, { at: e.at, taints }]);
      }),
      await rawWatch<Pod>(client, paths.pods(), (e) => {
        const key = `${e.object.metadata.namespace}/${e.object.metadata.name}`;
        o.pods.set(key, e.object);
        if (e.type === 'DELETED') o.podGone.set(key, [...(o.podGone.get(key) ?? []), e.at]);
        if (e.type === 'DELETED' || e.object.metadata.deletionTimestamp) {
          const uid = e.object.metadata.uid ?? '';
          const ds = o.podDeleted.get(key) ?? [];
          if (!ds.some((d) => d.uid === uid)) o.podDeleted.set(key, [...ds, { at: e.at, uid }]);
        }
        const status = e.object.status?.conditions?.find((c) => c.type === 'Ready')?.status ?? '-';
        const rs = o.podReady.get(key) ?? [];
        if (rs.at(-1)?.status !== status) o.podReady.set(key, [...rs, { at: e.at, status }]);
      }),
    );
    return o;
  }

  lastRenewalAt(node: string): number | undefined {
    return this.renewals.get(node)?.at(-1);
  }

  /** When the test last saw the kubelet post a new Ready heartbeat (node status, not the lease). */
  lastStatusHeartbeatAt(node: string): number | undefined {
    return this.statusHeartbeats.get(node)?.at(-1);
  }

  readyStatus(node: string): string | undefined {
    return this.ready.get(node)?.at(-1)?.status;
  }

  /** First time after `since` that the node's Ready was `status`. */
  readyAt(node: string, status: string, since = 0): number | undefined {
    return this.ready.get(node)?.find((r) => r.at >= since && r.status === status)?.at;
  }

  currentTaints(node: string): string[] {
    return this.taints.get(node)?.at(-1)?.taints ?? [];
  }

  /** First time after `since` that the node carried all of `want`. */
  taintsAt(node: string, want: string[], since = 0): number | undefined {
    return this.taints.get(node)?.find((t) => t.at >= since && want.every((w) => t.taints.includes(w)))?.at;
  }

  /** First time after `since` that the node carried none of `gone`. */
  taintsGoneAt(node: string, gone: string[], since = 0): number | undefined {
    return this.taints.get(node)?.find((t) => t.at >= since && !gone.some((g) => t.taints.includes(g)))?.at;
  }

  everSawReady(node: string, status: string): boolean {
    return (this.ready.get(node) ?? []).some((r) => r.status === status);
  }

  /** Taints with this prefix that appeared on the node after `since` (ADDED, not just present). */
  taintsAddedSince(node: string, prefix: string, since: number): string[] {
    const history = this.taints.get(node) ?? [];
    const added: string[] = [];
    for (let i = 0; i < history.length; i++) {
      const cur = history[i]!;
      if (cur.at < since) continue;
      const prev = i > 0 ? history[i - 1]!.taints : [];
      for (const t of cur.taints) if (t.startsWith(prefix) && !prev.includes(t)) added.push(t);
    }
    return added;
  }

  /** First time after `since` that the pod (any incarnation) was seen being deleted or gone. */
  podDeletedAt(key: string, since = 0): number | undefined {
    return this.podDeleted.get(key)?.find((d) => d.at >= since)?.at;
  }

  /** First time after `since` that the pod was removed from the API (its DELETED event). */
  podGoneAt(key: string, since = 0): number | undefined {
    return this.podGone.get(key)?.find((at) => at >= since);
  }

  podReadyStatus(key: string): string | undefined {
    return this.podReady.get(key)?.at(-1)?.status;
  }

  stop(): void {
    for (const s of this.stops.splice(0)) s();
  }
}

export interface AuditEvent {
  verb: string;
  /** ResponseStarted (watches) or ResponseComplete; RequestReceived is omitted by the policy. */
  stage?: string;
  requestURI?: string;
  userAgent?: string;
  user: { username: string };
  objectRef?: {
    apiGroup?: string;
    resource?: string;
    subresource?: string;
    name?: string;
    namespace?: string;
  };
  responseStatus?: { code?: number };
  /** The request body (policies at Request level, see ControlPlaneOptions.auditBodies). */
  requestObject?: unknown;
  stageTimestamp?: string;
  requestReceivedTimestamp?: string;
}

/** Audit-log writes (create/update/patch/delete) whose user agent starts with `agentPrefix`. */
export function auditWrites(auditLogPath: string, agentPrefix: string): AuditEvent[] {
  return readFileSync(auditLogPath, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as AuditEvent)
    .filter(
      (e) =>
        ['create', 'update', 'patch', 'delete'].includes(e.verb) &&
        (e.userAgent ?? '').startsWith(agentPrefix),
    );
}

/** Every event of the audit log (reads too when the control plane was started with `auditReads`). */
export function readAuditLog(auditLogPath: string): AuditEvent[] {
  const lines = readFileSync(auditLogPath, 'utf8').split('\n');
  const out: AuditEvent[] = [];
  lines.forEach((l, i) => {
    if (!l) return;
    try {
      out.push(JSON.parse(l) as AuditEvent);
    } catch (err) {
      // Only the line being written right now may be incomplete.
      if (i !== lines.length - 1) throw err;
    }
  });
  return out;
}
