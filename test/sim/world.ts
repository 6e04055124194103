/**
 * The simulated world of one run: the API server, the kubelets of a fleet spread over zones, and
 * the controller's replicas, all in virtual time (vitest's fake timers drive it). Built from one
 * seed; everything random comes from that seed.
 */
import type { Probe } from '../../src/controller/second-opinion.js';
import type { ProbeResult } from '../../src/second-opinion/index.js';
import { SimServer } from './api-server.js';
import { kubeletAddress, SimKubelet } from './kubelet.js';
import type { Prng } from './prng.js';
import { SimReplica } from './replica.js';

export interface WorldOptions {
  nodes: number;
  zones: number;
  podsPerNode: number;
  replicas: number;
  graceMs: number;
  renewMs: number;
  /** The controller's flags (besides those every replica gets). */
  flags: string[];
  /** Ms after a replica's process ended before it starts again (Kubernetes restarting it). */
  restartDelayMs: number;
  verbosity: number;
}

export class World {
  readonly server: SimServer;
  readonly kubelets = new Map<string, SimKubelet>();
  readonly replicas = new Map<string, SimReplica>();
  readonly ids: string[];
  /** Replicas restarted (crash, lost lease, graceful restart). */
  restarts = 0;
  /** Replica starts that threw (a wiring error: the run fails). */
  readonly startFailures: string[] = [];
  private stopped = false;

  constructor(
    readonly rng: Prng,
    readonly o: WorldOptions,
    readonly clock: { now(): number; wall(): number },
  ) {
    this.server = new SimServer(clock, rng.fork(), { historyMs: 5 * 60_000, bookmarkMs: 60_000 });
    for (let i = 0; i < o.nodes; i++) {
      const name = `node-${i}`;
      const k = new SimKubelet(this.server, clock, {
        name,
        zone: `zone-${String.fromCharCode(97 + (i % o.zones))}`,
        renewMs: o.renewMs,
        statusReportMs: 5 * 60_000,
        pods: o.podsPerNode,
      });
      this.kubelets.set(name, k);
    }
    this.ids = Array.from({ length: o.replicas }, (_, i) => `replica-${i}`);
  }

  /**
   * Registers the fleet, starts its kubelets (each at its own phase) and the replicas. Their start
   * runs on virtual time: move it on (it does not wait for them).
   */
  start(): void {
    for (const k of this.kubelets.values()) {
      k.register();
      // Kubelets do not renew in step: each starts somewhere in its first renew interval.
      const phase = Math.floor(this.rng.next() * this.o.renewMs);
      setTimeout(() => k.start(), phase);
    }
    for (const id of this.ids) this.startReplica(id);
  }

  private replicaFlags(): string[] {
    return [...this.o.flags, `--v=${this.o.verbosity}`];
  }

  /**
   * --second-opinion's probe of a kubelet, as the node network would answer it: a running kubelet
   * (cut off from the API server or not) completes the handshake in 2 ms; a stopped one's port is
   * refused at once (even nodes: the machine up, the kubelet gone) or never answers (odd nodes: the
   * machine off), judged when the probe starts. Nothing random: the run's draws are not touched.
   */
  readonly probe: Probe = (target, { timeoutMs, signal }) => {
    const kubelet = [...this.kubelets.values()].find((k) => kubeletAddress(k.o.name) === target.host);
    const settle = (ms: number, r: ProbeResult) =>
      new Promise<ProbeResult>((resolve) => {
        if (signal?.aborted) return resolve({ outcome: 'timeout', detail: 'aborted' });
        const t = setTimeout(() => resolve(r), ms);
        signal?.addEventListener('abort', () => {
          clearTimeout(t);
          resolve({ outcome: 'timeout', detail: 'aborted' });
        });
      });
    if (kubelet?.running) return settle(2, { outcome: 'answers', detail: 'TLS handshake completed' });
    const machineOff = kubelet === undefined || Number(kubelet.o.name.slice('node-'.length)) % 2 === 1;
    return machineOff
      ? settle(timeoutMs, { outcome: 'timeout', detail: `no TCP connection within ${timeoutMs}ms` })
      : settle(1, { outcome: 'refused', detail: 'connection refused' });
  };

  startReplica(id: string): void {
    if (this.stopped) return;
    this.server.revive(id);
    const r = new SimReplica(id, this.server, {
      flags: this.replicaFlags(),
      wallSkewMs: 0,
      verbosity: this.o.verbosity,
      logLines: 400,
      kubeletProbe: this.probe,
      onExit: () => this.restartLater(id),
    });
    this.replicas.set(id, r);
    r.start().catch((err: unknown) => {
      r.log.push(`start failed: ${String(err)}`);
      this.startFailures.push(`${id}: ${String(err)}`);
    });
  }

  private restartLater(id: string): void {
    this.restarts++;
    setTimeout(() => this.startReplica(id), this.o.restartDelayMs);
  }

  /** The process crashes; Kubernetes starts it again after the restart delay. */
  crash(id: string): void {
    const r = this.replicas.get(id);
    if (!r || r.over) return;
    r.crash();
    this.restartLater(id);
  }

  /** SIGTERM (a rolling update): graceful stop, then a new process after the restart delay. */
  restart(id: string): void {
    const r = this.replicas.get(id);
    if (!r || r.over) return;
    this.restarts++;
    void r.stop().then(() => setTimeout(() => this.startReplica(id), this.o.restartDelayMs));
  }

  /** Ends the run: every replica and kubelet stops (no judgement after this). */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const k of this.kubelets.values()) k.stop();
    for (const r of this.replicas.values()) r.crash();
    this.server.cutAllWatches();
  }
}
