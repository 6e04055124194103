/**
 * Carries out a fault schedule on the world at its times, and keeps the timeline the checker asks
 * about: when each kubelet ran and reached the server, which faults were active when.
 */
import type { KubeApiError, KubeRequest } from '../../src/kube/client.js';
import { apiError } from './api-server.js';
import type { Timeline } from './checker.js';
import type { Fault, Timed } from './faults.js';
import { LEASE_NS, POD_NS } from './kubelet.js';
import type { Prng } from './prng.js';
import type { World } from './world.js';

const CLOUD_SHUTDOWN_TAINT = 'node.cloudprovider.kubernetes.io/shutdown';
const FENCED = 'node-lifecycle-controller.io/fenced';

/** Faults that keep a leader from seeing, writing or leading, and how long it takes to recover after each. */
const HINDERING: Record<string, number> = {
  'storage-down': 20_000,
  'server-down': 20_000,
  'server-hung': 20_000,
  'server-restart': 20_000,
  throttle: 20_000,
  path: 40_000,
  'watch-cut': 10_000,
  'watch-stall': 20_000,
  'replica-crash': 60_000,
  'replica-restart': 60_000,
};

/** Faults of one node's machine or kubelet (the others are the control plane's). */
const NODE_FAULTS = new Set([
  'kubelet-stop',
  'kubelet-partition',
  'kubelet-not-ready',
  'kubelet-clock',
  'node-recreate',
]);

interface Active {
  kind: string;
  target: string;
  from: number;
  to: number;
  /** storage-slow: how slow. */
  slowMs?: number;
}

type Trap = Extract<Fault, { kind: 'trap' }>;

export class Injector implements Timeline {
  private readonly spans: Active[] = [];
  /** Per node: stop and cut counters, and since when it has been down. */
  private readonly down = new Map<
    string,
    { stopped: boolean; life: number; cuts: number; since: number | undefined; forever: boolean }
  >();
  private readonly pathFaults = new Map<string, Array<'refuse' | 'hang'>>();
  private slow: number[] = [];
  /** Stalls in force, per replica and collection (they may overlap). */
  private readonly stalls = new Map<string, number>();
  private throttles: Array<{ share: number; retryAfterS: number }> = [];
  /** Per node: a fence annotation or cloud taint the injector put there, to remove on revival. */
  private readonly fences = new Map<string, { staysMs: number | undefined }>();
  /** Per node: brings back the kubelet its last stop stopped (nothing once another life began). */
  private readonly revivers = new Map<string, () => void>();
  /** Traps armed: the first matching request fails. */
  private readonly traps: Array<{ trap: Trap; until: number; firedAt?: number }> = [];
  /** When kubelets came back (revived, or a re-created node's joined). */
  private revivals: number[] = [];
  /** Traps that fired (for the run's figures). */
  trapsFired = 0;
  executed = 0;

  constructor(
    private readonly world: World,
    private readonly rng: Prng,
    private readonly now: () => number,
  ) {
    for (const name of world.kubelets.keys())
      this.down.set(name, { stopped: false, life: 0, cuts: 0, since: undefined, forever: false });
  }

  /** Arms a timer for every fault of the schedule (times relative to `t0`). */
  arm(schedule: readonly Timed[], t0: number): void {
    for (const t of schedule) setTimeout(() => this.run(t.fault), Math.max(0, t0 + t.at - this.now()));
  }

  private span(kind: string, target: string, forMs: number, slowMs?: number): void {
    const from = this.now();
    this.spans.push({ kind, target, from, to: from + forMs, ...(slowMs === undefined ? {} : { slowMs }) });
  }

  /** Arms a trap: the server asks it about every replica request until it fires or expires. */
  private armTrap(t: Trap): void {
    this.traps.push({ trap: t, until: this.now() + t.forMs });
    this.world.server.trap = (client, req) => this.sprung(client, req);
  }

  private sprung(_client: string, req: KubeRequest): KubeApiError | undefined {
    const now = this.now();
    for (let i = 0; i < this.traps.length; i++) {
      const armed = this.traps[i]!;
      const { trap, until, firedAt } = armed;
      if (until < now) {
        this.traps.splice(i--, 1);
        continue;
      }
      if (firedAt !== undefined) {
        // Held: the same requests fail until the hold ends.
        if (matches(trap, req))
          return apiError(500, 'InternalError', `${req.method} ${req.path}: failed calling webhook`);
        continue;
      }
      if (!matches(trap, req) || !this.ripe(trap)) continue;
      if (trap.holdMs) {
        armed.firedAt = now;
        armed.until = now + trap.holdMs;
      } else this.traps.splice(i, 1);
      this.trapsFired++;
      // A control-plane fault of a moment (the checker's allowances count it as a throttle).
      this.span('throttle', '', (trap.holdMs ?? 0) + 1_000);
      const then = trap.afterwards;
      if (then) {
        this.later(then.reviveAfterMs, () => this.revivers.get(trap.node)?.());
        this.later(then.reviveAfterMs + then.againAfterMs, () =>
          this.run({
            kind: 'kubelet-stop',
            node: trap.node,
            forMs: Math.round(this.rng.between(5, 10) * 60_000),
            announce: false,
            cloudTaint: then.cloudTaint,
            fence: undefined,
            fenceStaysMs: 0,
          }),
        );
      }
      if (trap.holdMs)
        return apiError(500, 'InternalError', `${req.method} ${req.path}: failed calling webhook`);
      return apiError(429, 'TooManyRequests', `${req.method} ${req.path}`, 1);
    }
    return undefined;
  }

  /** Whether the node is where the trap waits for it: marked Unknown (and fenced, for the out-of-service steps). */
  private ripe(t: Trap): boolean {
    const n = this.world.server.get('nodes', t.node);
    if (!n || readyStatus(n) !== 'Unknown') return false;
    if (t.request === 'pods-list') return true;
    return (
      taintList(n).some((x) => x.key === CLOUD_SHUTDOWN_TAINT) || n.metadata.annotations?.[FENCED] === 'true'
    );
  }

  private later(ms: number, fn: () => void): void {
    setTimeout(fn, ms);
  }

  run(f: Fault): void {
    this.executed++;
    const s = this.world.server;
    switch (f.kind) {
      case 'kubelet-stop':
        this.kubeletStop(f);
        return;
      case 'kubelet-partition': {
        this.span(f.kind, f.node, f.forMs);
        this.setDown(f.node, { cuts: +1 });
        s.cutKubelets.add(f.node);
        this.later(f.forMs, () => {
          if (this.setDown(f.node, { cuts: -1 }).cuts === 0) s.cutKubelets.delete(f.node);
        });
        return;
      }
      case 'kubelet-not-ready': {
        this.span(f.kind, f.node, f.forMs);
        const k = this.world.kubelets.get(f.node)!;
        k.setReady(false);
        this.later(f.forMs, () => k.setReady(true));
        return;
      }
      case 'kubelet-clock':
        this.span(f.kind, f.node, 0);
        this.world.kubelets.get(f.node)!.wallSkewMs = f.skewMs;
        return;
      case 'node-recreate':
        this.recreate(f.node, f.afterMs);
        return;
      case 'storage-down':
        this.span(f.kind, '', f.forMs);
        s.setFaults({ storage: f.answer });
        this.later(f.forMs, () => s.setFaults({ storage: 'up' }));
        return;
      case 'server-down':
        this.span(f.kind, '', f.forMs);
        s.setFaults({ down: true });
        this.later(f.forMs, () => s.setFaults({ down: false }));
        return;
      case 'server-hung':
        this.span(f.kind, '', f.forMs);
        s.setFaults({ hung: true });
        this.later(f.forMs, () => s.setFaults({ hung: false }));
        return;
      case 'trap':
        this.armTrap(f);
        return;
      case 'storage-slow':
        this.span(f.kind, '', f.forMs, f.slowMs);
        this.slow.push(f.slowMs);
        s.setFaults({ slowMs: Math.max(0, ...this.slow) });
        this.later(f.forMs, () => {
          this.slow.splice(this.slow.indexOf(f.slowMs), 1);
          s.setFaults({ slowMs: Math.max(0, ...this.slow) });
        });
        return;
      case 'throttle': {
        this.span(f.kind, '', f.forMs);
        const t = { share: f.share, retryAfterS: f.retryAfterS };
        this.throttles.push(t);
        const apply = () => {
          const top = this.throttles[this.throttles.length - 1];
          s.setFaults({ throttleShare: top?.share ?? 0, retryAfterS: top?.retryAfterS ?? 1 });
        };
        apply();
        this.later(f.forMs, () => {
          this.throttles.splice(this.throttles.indexOf(t), 1);
          apply();
        });
        return;
      }
      case 'server-restart':
        this.span(f.kind, '', 0);
        if (f.compact) s.compactAll();
        s.cutAllWatches();
        return;
      case 'path': {
        this.span(f.kind, f.replica, f.forMs);
        const list = this.pathFaults.get(f.replica) ?? [];
        this.pathFaults.set(f.replica, list);
        list.push(f.state);
        s.setPath(f.replica, f.state);
        this.later(f.forMs, () => {
          list.splice(list.indexOf(f.state), 1);
          s.setPath(f.replica, list[list.length - 1] ?? 'up');
        });
        return;
      }
      case 'watch-cut':
        this.span(f.kind, f.replica, 0);
        s.cutWatches(f.replica);
        return;
      case 'watch-stall': {
        this.span(f.kind, f.replica, f.forMs);
        const colls = f.coll === '*' ? ['nodes', 'leases/kube-node-lease', 'leases/kube-system'] : [f.coll];
        for (const c of colls) {
          const key = `${f.replica} ${c}`;
          this.stalls.set(key, (this.stalls.get(key) ?? 0) + 1);
          s.stallWatch(f.replica, c, true);
        }
        this.later(f.forMs, () => {
          for (const c of colls) {
            const key = `${f.replica} ${c}`;
            const n = (this.stalls.get(key) ?? 1) - 1;
            this.stalls.set(key, n);
            if (n === 0) s.stallWatch(f.replica, c, false);
          }
        });
        return;
      }
      case 'watch-lag':
        this.span(f.kind, f.replica, f.forMs);
        s.lagWatch(f.replica, f.coll, f.lagMs);
        this.later(f.forMs, () => s.lagWatch(f.replica, f.coll, 0));
        return;
      case 'replica-crash':
        this.span(f.kind, f.replica, 0);
        this.world.crash(f.replica);
        return;
      case 'replica-restart':
        this.span(f.kind, f.replica, 0);
        this.world.restart(f.replica);
        return;
    }
  }

  /** The kubelet stopped (or runs again), or its path is cut (one more or one less cut). */
  private setDown(node: string, change: { stopped?: boolean; cuts?: number }) {
    const d = this.down.get(node)!;
    const wasDown = d.stopped || d.cuts > 0;
    if (change.stopped !== undefined) d.stopped = change.stopped;
    d.cuts += change.cuts ?? 0;
    const isDown = d.stopped || d.cuts > 0;
    if (isDown && !wasDown) d.since = this.now();
    if (!isDown && wasDown) d.since = undefined;
    return d;
  }

  private kubeletStop(f: Extract<Fault, { kind: 'kubelet-stop' }>): void {
    const k = this.world.kubelets.get(f.node)!;
    const d = this.down.get(f.node)!;
    if (d.forever || !k.running) return; // already dead: this death is not another one
    const forMs = f.forMs === 'forever' ? undefined : f.forMs;
    this.span('kubelet-stop', f.node, forMs ?? Number.POSITIVE_INFINITY);
    // A revival brings back only the life this death ended: another death or a re-created node
    // since (a new life) is not undone by it.
    let life = -1;
    const stop = () => {
      k.stop();
      life = ++d.life;
      this.setDown(f.node, { stopped: true });
      if (forMs === undefined) d.forever = true;
    };
    if (f.announce) {
      k.announceShutdown();
      this.later(2_000, stop);
    } else stop();
    const s = this.world.server;
    if (f.cloudTaint !== undefined) {
      this.later(f.cloudTaint, () => {
        if (k.running) return;
        this.updateNode(f.node, (n) => ({
          ...n,
          spec: { ...n.spec, taints: [...taintList(n), { key: CLOUD_SHUTDOWN_TAINT, effect: 'NoSchedule' }] },
        }));
      });
    }
    if (f.fence !== undefined) {
      this.later(f.fence, () => {
        if (k.running) return;
        this.fences.set(f.node, { staysMs: f.fenceStaysMs });
        this.updateNode(f.node, (n) => ({
          ...n,
          metadata: { ...n.metadata, annotations: { ...n.metadata.annotations, [FENCED]: 'true' } },
        }));
      });
    }
    if (forMs === undefined) return;
    const revive = () => {
      if (d.forever || d.life !== life || k.running) return;
      this.setDown(f.node, { stopped: false });
      this.revivals.push(this.now());
      k.start(f.statusFirst === true);
      // The cloud provider sees the instance running a little later and lifts its taint.
      this.later(Math.round(this.rng.between(0, 20_000)), () =>
        this.updateNode(f.node, (n) => ({
          ...n,
          spec: { ...n.spec, taints: taintList(n).filter((t) => t.key !== CLOUD_SHUTDOWN_TAINT) },
        })),
      );
      const fence = this.fences.get(f.node);
      if (fence) {
        this.fences.delete(f.node);
        // The operator (or fencing agent) lifts the fence later, or forgets it.
        if (fence.staysMs !== undefined) {
          this.later(fence.staysMs, () =>
            this.updateNode(f.node, (n) => {
              const annotations = { ...n.metadata.annotations };
              delete annotations[FENCED];
              return { ...n, metadata: { ...n.metadata, annotations } };
            }),
          );
        }
      }
    };
    this.revivers.set(f.node, revive);
    this.later(forMs + (f.announce ? 2_000 : 0), revive);
    void s;
  }

  private updateNode(
    name: string,
    change: (n: import('./api-server.js').Obj) => import('./api-server.js').Obj,
  ): void {
    const s = this.world.server;
    const n = s.get('nodes', name);
    if (n) s.put('nodes', change(n));
  }

  /** A dead node deleted (with its lease and pods) and a machine of the same name joining later. */
  private recreate(node: string, afterMs: number): void {
    const k = this.world.kubelets.get(node)!;
    const d = this.down.get(node)!;
    if (k.running || d.forever || d.cuts > 0) return;
    this.span('node-recreate', node, afterMs);
    const s = this.world.server;
    d.forever = true; // no revival of the old machine
    const life = ++d.life;
    s.remove('nodes', node);
    s.remove(`leases/${LEASE_NS}`, node);
    for (const p of s.list(`pods/${POD_NS}`))
      if (p.spec?.nodeName === node) s.remove(`pods/${POD_NS}`, p.metadata.name);
    this.later(afterMs, () => {
      if (d.life !== life) return;
      d.forever = false;
      this.setDown(node, { stopped: false });
      this.revivals.push(this.now());
      k.register();
      k.start();
    });
  }

  // ---------------------------------------------------------------- the timeline

  aliveThroughout(node: string, from: number, to: number): boolean {
    const d = this.down.get(node);
    if (!d || d.stopped || d.cuts > 0) return false;
    for (const a of this.spans) {
      if (a.target !== node) continue;
      if (a.kind !== 'kubelet-stop' && a.kind !== 'kubelet-partition' && a.kind !== 'node-recreate') continue;
      if (a.from <= to && a.to >= from) return false;
    }
    return true;
  }

  quiet(from: number, to: number): boolean {
    for (const a of this.spans) {
      if (a.kind === 'kubelet-stop' || a.kind === 'kubelet-clock') continue;
      if (a.from <= to && a.to >= from) return false;
    }
    return true;
  }

  revived(from: number, to: number): boolean {
    return this.revivals.some((t) => t >= from && t <= to);
  }

  slowOnly(from: number, to: number): number | undefined {
    let slowMs: number | undefined;
    for (const a of this.spans) {
      if (a.kind === 'kubelet-stop' || a.kind === 'kubelet-clock') continue;
      if (a.from > to || a.to < from) continue;
      if (a.kind !== 'storage-slow') return undefined;
      slowMs = Math.max(slowMs ?? 0, a.slowMs ?? 0);
    }
    return slowMs;
  }

  controlPlaneFaults(from: number, to: number): { total: number; lastEnd: number | undefined } {
    let total = 0;
    let lastEnd: number | undefined;
    for (const a of this.spans) {
      if (NODE_FAULTS.has(a.kind)) continue;
      if (a.from > to || a.to < from) continue;
      total += Math.max(0, Math.min(a.to, to) - Math.max(a.from, from));
      lastEnd = Math.max(lastEnd ?? a.to, a.to);
    }
    return { total, lastEnd };
  }

  hindered(from: number, to: number): number {
    let total = 0;
    for (const a of this.spans) {
      const extra = HINDERING[a.kind];
      if (extra === undefined) continue;
      const end = a.to + extra;
      total += Math.max(0, Math.min(end, to) - Math.max(a.from, from));
    }
    return total;
  }

  downSince(node: string): number | undefined {
    return this.down.get(node)?.since;
  }

  /** Drops what the timeline no longer needs (spans that ended long before `before`). */
  prune(before: number): void {
    this.revivals = this.revivals.filter((t) => t >= before);
    let i = 0;
    while (i < this.spans.length) {
      if (this.spans[i]!.to < before) this.spans.splice(i, 1);
      else i++;
    }
  }
}

function matches(t: Trap, req: KubeRequest): boolean {
  switch (t.request) {
    case 'pods-list':
      return (
        req.method === 'GET' &&
        req.path.endsWith('/pods') &&
        String(req.query?.fieldSelector ?? '').includes(`spec.nodeName=${t.node}`) &&
        req.query?.watch === undefined
      );
    case 'lease-get':
      return req.method === 'GET' && req.path.endsWith(`/namespaces/${LEASE_NS}/leases/${t.node}`);
    case 'oos-patch':
      return (
        (req.method === 'PATCH' || req.method === 'PUT') &&
        req.path.endsWith(`/nodes/${t.node}`) &&
        JSON.stringify(req.body ?? '').includes('node.kubernetes.io/out-of-service')
      );
  }
}

function readyStatus(n: import('./api-server.js').Obj): string | undefined {
  const c = (n.status?.conditions as Array<{ type: string; status: string }> | undefined)?.find(
    (x) => x.type === 'Ready',
  );
  return c?.status;
}

function taintList(n: import('./api-server.js').Obj): Array<{ key: string; effect: string }> {
  const t = n.spec?.taints;
  return Array.isArray(t) ? (t as Array<{ key: string; effect: string }>) : [];
}
