import { timerDelay } from '../clock/clock.js';
import type { KubeClient } from '../kube/client.js';
import {
  type KubeletSpec,
  type KubeletTiming,
  SimulatedKubelet,
  type SimulatedKubeletOptions,
  simulatedKubeletCert,
} from './kubelet.js';

export interface FleetOptions {
  /** Number of nodes, named `${namePrefix}${zone}-${index}`; or explicit specs. */
  nodes: number | KubeletSpec[];
  namePrefix?: string;
  zones?: string[];
  region?: string;
  podsPerNode?: number;
  podNamespace?: string;
  timing?: Partial<KubeletTiming>;
  /** Parallel registrations during start (API server friendliness). */
  startConcurrency?: number;
  /**
   * Each kubelet serves a TLS endpoint on 127.0.0.1 (its own port, chosen by the OS; one
   * self-signed certificate for the fleet) and its Node reports that address and port, for the
   * controller's --second-opinion=kubelet to probe. `fleet.node(name).endpoint` closes and reopens
   * it; kill() and stop() close it. Off: Nodes report 10.x.y.10:10250, where nothing listens.
   */
  kubeletEndpoints?: boolean;
}

export const DEFAULT_TIMING: KubeletTiming = {
  leaseDurationSeconds: 40,
  renewIntervalMs: 10_000,
  jitter: 0.04,
  statusUpdateIntervalMs: 10_000,
  statusReportIntervalMs: 5 * 60_000,
  heartbeatTimeoutMs: 10_000,
};

/** Builds node specs spread round-robin across zones. */
export function fleetSpecs(opts: FleetOptions): KubeletSpec[] {
  if (Array.isArray(opts.nodes)) return opts.nodes;
  const zones = opts.zones ?? ['zone-a', 'zone-b', 'zone-c'];
  const region = opts.region ?? 'region-1';
  const prefix = opts.namePrefix ?? 'sim-';
  const specs: KubeletSpec[] = [];
  const perZone = new Map<string, number>();
  for (let i = 0; i < opts.nodes; i++) {
    const zone = zones[i % zones.length]!;
    const n = perZone.get(zone) ?? 0;
    perZone.set(zone, n + 1);
    specs.push({
      name: `${prefix}${zone}-${String(n).padStart(3, '0')}`,
      zone,
      region,
      pods: opts.podsPerNode ?? 0,
      podNamespace: opts.podNamespace ?? 'default',
    });
  }
  return specs;
}

/** A fleet of simulated kubelets sharing one API client. */
export class SimulatedFleet {
  readonly kubelets = new Map<string, SimulatedKubelet>();
  readonly timing: KubeletTiming;

  private constructor(
    readonly client: KubeClient,
    specs: KubeletSpec[],
    timing: KubeletTiming,
    options: SimulatedKubeletOptions,
  ) {
    this.timing = timing;
    for (const s of specs) this.kubelets.set(s.name, new SimulatedKubelet(client, s, timing, options));
  }

  static async start(client: KubeClient, opts: FleetOptions): Promise<SimulatedFleet> {
    const timing = { ...DEFAULT_TIMING, ...opts.timing };
    if (opts.timing?.leaseDurationSeconds !== undefined && opts.timing.renewIntervalMs === undefined) {
      timing.renewIntervalMs = (timing.leaseDurationSeconds * 1000) / 4;
    }
    const options: SimulatedKubeletOptions = opts.kubeletEndpoints
      ? { endpoint: simulatedKubeletCert() }
      : {};
    const fleet = new SimulatedFleet(client, fleetSpecs(opts), timing, options);
    await fleet.forEachLimited(opts.startConcurrency ?? 16, (k) => k.start());
    return fleet;
  }

  get names(): string[] {
    return [...this.kubelets.keys()];
  }

  node(name: string): SimulatedKubelet {
    const k = this.kubelets.get(name);
    if (!k) throw new Error(`no simulated node named ${name}`);
    return k;
  }

  inZone(zone: string): SimulatedKubelet[] {
    return [...this.kubelets.values()].filter((k) => k.zone === zone);
  }

  /**
   * Nodes registered within seconds renew in lock-step for a long time (a few % jitter barely moves
   * them apart), unlike real kubelets, which start at unrelated moments. Restarts each node's
   * heartbeats at an even offset over one renew interval; resolves when the last has restarted.
   */
  async spreadPhases(): Promise<void> {
    const names = this.names;
    for (const n of names) this.node(n).pauseHeartbeats();
    const interval = this.timing.renewIntervalMs;
    await Promise.all(
      names.map(
        (n, i) =>
          new Promise<void>((resolve) =>
            setTimeout(
              () => {
                this.node(n).resumeHeartbeats();
                resolve();
              },
              timerDelay((i * interval) / names.length),
            ),
          ),
      ),
    );
  }

  /** Stops every kubelet's timers, and closes their endpoints. Objects stay in the API server. */
  stop(): void {
    for (const k of this.kubelets.values()) k.kill();
  }

  private async forEachLimited(limit: number, fn: (k: SimulatedKubelet) => Promise<void>): Promise<void> {
    const queue = [...this.kubelets.values()];
    const workers = Array.from({ length: Math.min(limit, queue.length) }, async () => {
      for (let k = queue.shift(); k; k = queue.shift()) await fn(k);
    });
    await Promise.all(workers);
  }
}
