/**
 * Simulated kubelets for the fault simulator: each renews its node's Lease every renew interval
 * (retrying a failed renewal with client-go's lease controller back-off: 200 ms doubling to 7 s),
 * keeps its Node's Ready condition as it sees itself (posting when the stored one differs, e.g.
 * after the controller marked it Unknown, and at least every status report period), and puts the
 * Ready condition of its pods back when a controller marked them not ready while it runs. It can
 * stop (the machine dies), start again, announce a graceful shutdown, report NotReady for a while,
 * and run with a wall clock off by some amount (renewTime and heartbeats are written on it).
 */
import type { Obj, SimServer } from './api-server.js';

export const ZONE_LABEL = 'topology.kubernetes.io/zone';
export const LEASE_NS = 'kube-node-lease';
export const POD_NS = 'sim';
/** What the kubelet's graceful node shutdown manager puts in the Ready condition's message. */
export const SHUTDOWN_MESSAGE = 'node is shutting down';

const RETRY_FIRST_MS = 200;
const RETRY_MAX_MS = 7_000;
/** The kubelet's client gives up on one write after this long. */
const WRITE_TIMEOUT_MS = 10_000;

function microTime(wallMs: number): string {
  return `${new Date(wallMs).toISOString().slice(0, 23)}000Z`;
}

export interface KubeletOptions {
  name: string;
  zone: string;
  renewMs: number;
  statusReportMs: number;
  pods: number;
}

export class SimKubelet {
  running = false;
  /** Ms the kubelet's wall clock is ahead of true time (negative: behind). */
  wallSkewMs = 0;
  private ready: { status: 'True' | 'False'; reason: string; message: string } = {
    status: 'True',
    reason: 'KubeletReady',
    message: 'kubelet is posting ready status',
  };
  private timer: ReturnType<typeof setTimeout> | undefined;
  private failures = 0;
  /** When our last status post landed (true time, ms), if any. */
  private lastPostAt: number | undefined;
  /** Renewals that landed, for the run's figures. */
  renewals = 0;
  /** A new instance of the node (delete + re-create): counts the uid. */
  private generation = 0;
  /**
   * When the kubelet ran (true time, ms), oldest first; `to` undefined: it runs. What a second
   * opinion's probe finds: its endpoint answers exactly while it runs (a kubelet cut off from the
   * API server still runs and answers).
   */
  readonly runs: Array<{ from: number; to: number | undefined }> = [];

  constructor(
    private readonly server: SimServer,
    private readonly clock: { now(): number; wall(): number },
    readonly o: KubeletOptions,
  ) {}

  private wall(): number {
    return this.clock.wall() + this.wallSkewMs;
  }

  /** Registers the Node (Ready), its Lease and its pods, as a kubelet joining the cluster does. */
  register(): void {
    this.generation++;
    const { name, zone } = this.o;
    const wall = this.wall();
    this.server.kubeletStore(name, 'nodes', {
      metadata: {
        name,
        uid: `uid-${name}-${this.generation}`,
        labels: { [ZONE_LABEL]: zone, 'kubernetes.io/hostname': name },
        creationTimestamp: new Date(this.clock.wall()).toISOString(),
      },
      spec: {},
      status: {
        conditions: [this.readyCondition(wall, wall)],
        // Where a second opinion probes it (the simulator's probe, never a connection).
        addresses: [{ type: 'InternalIP', address: kubeletAddress(name) }],
        daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      },
    });
    this.lastPostAt = this.clock.now();
    this.server.kubeletStore(name, `leases/${LEASE_NS}`, {
      metadata: {
        name,
        namespace: LEASE_NS,
        uid: `uid-lease-${name}-${this.generation}`,
        ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name, uid: `uid-${name}-${this.generation}` }],
      },
      spec: { holderIdentity: name, leaseDurationSeconds: 40, renewTime: microTime(wall) },
    });
    for (let i = 0; i < this.o.pods; i++) this.addPod(`${name}-p${i}`);
  }

  private addPod(podName: string): void {
    const wall = this.clock.wall();
    this.server.kubeletStore(this.o.name, `pods/${POD_NS}`, {
      metadata: { name: podName, namespace: POD_NS, uid: `uid-${podName}-${this.server.resourceVersion}` },
      spec: { nodeName: this.o.name },
      status: {
        phase: 'Running',
        conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: new Date(wall).toISOString() }],
      },
    });
  }

  private readyCondition(heartbeatWall: number, transitionWall: number): Record<string, unknown> {
    return {
      type: 'Ready',
      status: this.ready.status,
      reason: this.ready.reason,
      message: this.ready.message,
      lastHeartbeatTime: new Date(heartbeatWall).toISOString(),
      lastTransitionTime: new Date(transitionWall).toISOString(),
    };
  }

  /**
   * The kubelet starts (or starts again): renews and posts its status at once, then on its rhythm.
   * `statusFirst`: its status post goes out first and its renewal after it (a kubelet's node status
   * and lease loops are independent; either may reach the API server first after a restart).
   */
  start(statusFirst = false): void {
    if (this.running) return;
    this.running = true;
    this.runs.push({ from: this.clock.now(), to: undefined });
    this.failures = 0;
    this.ready = { status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status' };
    if (!statusFirst) {
      this.schedule(0);
      return;
    }
    void this.postStatus().then(() => {
      if (this.running && this.timer === undefined) this.schedule(0);
    });
  }

  /** The machine dies: nothing more is sent (a write already on the wire may still land). */
  stop(): void {
    const last = this.runs.at(-1);
    if (this.running && last) last.to = this.clock.now();
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Graceful node shutdown: Ready=False "node is shutting down" posted, then the machine stops. */
  announceShutdown(): void {
    if (!this.running) return;
    this.ready = { status: 'False', reason: 'KubeletNotReady', message: SHUTDOWN_MESSAGE };
    void this.postStatus();
  }

  /** The kubelet reports NotReady (a runtime or network plugin down) or Ready again. */
  setReady(ready: boolean): void {
    this.ready = ready
      ? { status: 'True', reason: 'KubeletReady', message: 'kubelet is posting ready status' }
      : { status: 'False', reason: 'KubeletNotReady', message: 'container runtime network not ready' };
    if (this.running) void this.postStatus();
  }

  get reportsReady(): boolean {
    return this.ready.status === 'True';
  }

  private schedule(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.cycle();
    }, ms);
  }

  /** One renewal (and the status and pods, when it got through). */
  private async cycle(): Promise<void> {
    if (!this.running) return;
    const ok = await this.renew();
    if (!this.running) return;
    if (!ok) {
      this.failures++;
      this.schedule(Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** (this.failures - 1)));
      return;
    }
    this.failures = 0;
    this.schedule(this.o.renewMs);
    await this.syncStatus();
    if (this.running) await this.syncPods();
  }

  private renew(): Promise<boolean> {
    const { name } = this.o;
    return this.server.kubeletWrite(name, WRITE_TIMEOUT_MS, () => {
      if (!this.running) return;
      const lease = this.server.get(`leases/${LEASE_NS}`, name);
      const spec = { holderIdentity: name, leaseDurationSeconds: 40, renewTime: microTime(this.wall()) };
      const next: Obj = lease
        ? { ...lease, spec: { ...lease.spec, ...spec } }
        : { metadata: { name, namespace: LEASE_NS, uid: `uid-lease-${name}-${this.generation}-r` }, spec };
      this.server.kubeletStore(name, `leases/${LEASE_NS}`, next);
      this.renewals++;
    });
  }

  /** Posts the node status when the stored Ready is not ours, or the report period has passed. */
  private async syncStatus(): Promise<void> {
    const node = this.server.get('nodes', this.o.name);
    if (!node) return;
    const stored = readyOf(node);
    const due = this.lastPostAt === undefined || this.clock.now() - this.lastPostAt >= this.o.statusReportMs;
    if (!due && stored?.status === this.ready.status && stored?.message === this.ready.message) return;
    await this.postStatus();
  }

  private async postStatus(): Promise<void> {
    const { name } = this.o;
    await this.server.kubeletWrite(name, WRITE_TIMEOUT_MS, () => {
      const node = this.server.get('nodes', name);
      if (!node) return;
      const wall = this.wall();
      const conditions = (
        (node.status?.conditions as Array<Record<string, unknown>> | undefined) ?? []
      ).filter((c) => c.type !== 'Ready');
      const before = readyOf(node);
      const transition =
        before?.status === this.ready.status ? Date.parse(String(before.lastTransitionTime)) : wall;
      conditions.push(this.readyCondition(wall, Number.isFinite(transition) ? transition : wall));
      this.server.kubeletStore(name, 'nodes', { ...node, status: { ...node.status, conditions } }, 'status');
      this.lastPostAt = this.clock.now();
    });
  }

  /**
   * Pods of this node: a Ready condition a controller set False goes back to True (the kubelet's
   * status manager), a pod being deleted is finished (and a new one takes its place, as its
   * ReplicaSet would schedule).
   */
  private async syncPods(): Promise<void> {
    const { name } = this.o;
    const mine = this.server.list(`pods/${POD_NS}`).filter((p) => p.spec?.nodeName === name);
    for (const pod of mine) {
      if (!this.running) return;
      if (pod.metadata.deletionTimestamp) {
        await this.server.kubeletWrite(name, WRITE_TIMEOUT_MS, () => {
          this.server.kubeletRemove(name, `pods/${POD_NS}`, pod.metadata.name);
          this.addPod(`${pod.metadata.name.replace(/-r\d+$/, '')}-r${this.server.resourceVersion}`);
        });
        continue;
      }
      const conds = (pod.status?.conditions as Array<Record<string, unknown>> | undefined) ?? [];
      const ready = conds.find((c) => c.type === 'Ready');
      // Its pods are Ready only while it is (a runtime down or a shutdown under way stops them).
      if (ready?.status === 'True' || !this.reportsReady) continue;
      await this.server.kubeletWrite(name, WRITE_TIMEOUT_MS, () => {
        const current = this.server.get(`pods/${POD_NS}`, pod.metadata.name);
        if (!current) return;
        const now = new Date(this.wall()).toISOString();
        const rest = (
          (current.status?.conditions as Array<Record<string, unknown>> | undefined) ?? []
        ).filter((c) => c.type !== 'Ready');
        this.server.kubeletStore(
          name,
          `pods/${POD_NS}`,
          {
            ...current,
            status: {
              ...current.status,
              conditions: [...rest, { type: 'Ready', status: 'True', lastTransitionTime: now }],
            },
          },
          'status',
        );
      });
    }
  }
}

/** The InternalIP a simulated node reports: 127.0.1.N+1 for node-N (loopback, never connected to). */
export function kubeletAddress(node: string): string {
  return `127.0.1.${Number(node.slice('node-'.length)) + 1}`;
}

/** Whether a kubelet that ran in `runs` ran throughout [from, to]. */
export function ranThroughout(
  runs: readonly { from: number; to: number | undefined }[],
  from: number,
  to: number,
): boolean {
  return runs.some((r) => r.from <= from && (r.to === undefined || to < r.to));
}

export function readyOf(node: Obj | undefined): Record<string, unknown> | undefined {
  const conds = (node?.status?.conditions as Array<Record<string, unknown>> | undefined) ?? [];
  return conds.find((c) => c.type === 'Ready');
}
