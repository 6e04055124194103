/**
 * The simulated nodes of a side-by-side run, behind one interface:
 *  - "fleet": our simulated kubelets (src/fleet), in this process; a group fails by pausing its
 *    heartbeats (lease and status) and recovers by resuming them;
 *  - "kwok": KWOK v0.8.0 as an independent simulator, one kwok process per group (selected by a node
 *    label); a group fails by SIGKILL of its kwok process and recovers by starting a new one (which
 *    takes the lease over only after the old holder's 40 s lease expired, as KWOK does).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createWriteStream, existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { V1Node, V1Pod } from '@kubernetes/client-node';
import { DEFAULT_TIMING, SimulatedFleet } from '../../src/fleet/fleet.js';
import type { KubeletSpec } from '../../src/fleet/kubelet.js';
import { KubeApiError, type KubeClient, paths } from '../../src/kube/client.js';
import { cacheRoot } from '../../src/localcluster/binaries.js';
import { killAndWait, type LocalControlPlane } from '../../src/localcluster/control-plane.js';
import { trackChild } from './children.js';

export const GROUP_LABEL = 'bench.nlc.dev/group';
export const POD_NAMESPACE = 'default';

export interface PlannedNode {
  name: string;
  zone: string;
  region: string;
  /** Failure unit: "stable", "canary", "wave-1", ... */
  group: string;
  /** Pod names (namespace POD_NAMESPACE), `<node>-pod-<i>`. */
  pods: string[];
}

export interface Simulator {
  readonly kind: 'fleet' | 'kwok';
  readonly version: string;
  /** Registers the nodes (and pods) and makes them heartbeat. */
  start(): Promise<void>;
  fail(group: string): Promise<void>;
  recover(group: string): Promise<void>;
  /** Pids whose CPU is the simulator's (for the report), if separate processes. */
  pids(): number[];
  stop(): Promise<void>;
}

export interface SimulatorOptions {
  cp: LocalControlPlane;
  client: KubeClient;
  plan: PlannedNode[];
  renewIntervalMs: number;
  /** Where kwok writes its logs and stage files. */
  workDir: string;
  /** Fleet only: each kubelet serves a TLS endpoint on loopback; a failed node's closes too. */
  kubeletEndpoints?: boolean;
}

// ------------------------------------------------------------------ fleet

export class FleetSimulator implements Simulator {
  readonly kind = 'fleet' as const;
  readonly version = 'src/fleet (this repo)';
  private fleet: SimulatedFleet | undefined;

  constructor(private readonly opts: SimulatorOptions) {}

  async start(): Promise<void> {
    const specs: KubeletSpec[] = this.opts.plan.map((n) => ({
      name: n.name,
      zone: n.zone,
      region: n.region,
      labels: { [GROUP_LABEL]: n.group },
      pods: n.pods.length,
      podNamespace: POD_NAMESPACE,
    }));
    this.fleet = await SimulatedFleet.start(this.opts.client, {
      nodes: specs,
      timing: { ...DEFAULT_TIMING, renewIntervalMs: this.opts.renewIntervalMs },
      startConcurrency: 32,
      ...(this.opts.kubeletEndpoints ? { kubeletEndpoints: true } : {}),
    });
    await this.spreadPhases();
  }

  /**
   * SimulatedFleet.start registers every node within a second or so, and a 4% jitter keeps their
   * renewals bunched for many minutes: every failed node would then share one renewal phase, so one
   * run would measure one phase of the controller's timers, not a distribution. Real kubelets start at
   * unrelated moments; restart each node's heartbeats at an even offset over one renew interval.
   */
  private async spreadPhases(): Promise<void> {
    await this.fleet!.spreadPhases();
  }

  private members(group: string): string[] {
    return this.opts.plan.filter((n) => n.group === group).map((n) => n.name);
  }

  async fail(group: string): Promise<void> {
    for (const n of this.members(group)) this.fleet?.node(n).pauseHeartbeats();
    // The machine is down: its kubelet's port closes with its lease.
    await Promise.all(this.members(group).map((n) => this.fleet?.node(n).endpoint?.close()));
  }

  async recover(group: string): Promise<void> {
    await Promise.all(this.members(group).map((n) => this.fleet?.node(n).endpoint?.open()));
    for (const n of this.members(group)) this.fleet?.node(n).resumeHeartbeats();
  }

  pids(): number[] {
    return [];
  }

  renewErrors(): number {
    if (!this.fleet) return 0;
    return this.fleet.names.reduce((s, n) => s + this.fleet!.node(n).stats.renewErrors, 0);
  }

  async stop(): Promise<void> {
    this.fleet?.stop();
  }
}

// ------------------------------------------------------------------ kwok

export const KWOK_VERSION = 'v0.8.0';

export function kwokBinary(): string {
  return path.join(cacheRoot(process.env), 'bin', `kwok-${KWOK_VERSION}`, 'kwok');
}

/** Installs kwok into the cache folder (never the repo) with the machine's Go, if missing. */
export function ensureKwok(): string {
  const bin = kwokBinary();
  if (existsSync(bin)) return bin;
  console.error(`[kwok] go install sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION} (first time only)`);
  execFileSync('go', ['install', `sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}`], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: {
      ...process.env,
      GOBIN: path.dirname(bin),
      GOMODCACHE: process.env.GOMODCACHE ?? path.join(cacheRoot(process.env), 'gomod'),
      GOCACHE: process.env.GOCACHE ?? path.join(cacheRoot(process.env), 'gobuild'),
      CGO_ENABLED: '0',
    },
  });
  return bin;
}

/** Stage files shipped in the kwok module (v0.8.0 has no built-in stages). */
function kwokStageFiles(): string[] {
  const modcache = (() => {
    try {
      return execFileSync('go', ['env', 'GOMODCACHE'], {
        encoding: 'utf8',
        env: {
          ...process.env,
          GOMODCACHE: process.env.GOMODCACHE ?? path.join(cacheRoot(process.env), 'gomod'),
        },
      }).trim();
    } catch {
      return path.join(cacheRoot(process.env), 'gomod');
    }
  })();
  const candidates = [
    modcache,
    path.join(cacheRoot(process.env), 'gomod'),
    path.join(os.homedir(), 'go', 'pkg', 'mod'),
  ];
  for (const root of candidates) {
    const stage = path.join(root, 'sigs.k8s.io', `kwok@${KWOK_VERSION}`, 'kustomize', 'stage');
    const files = [
      path.join(stage, 'node', 'fast', 'node-initialize.yaml'),
      path.join(stage, 'node', 'heartbeat-with-lease', 'node-heartbeat-with-lease.yaml'),
      path.join(stage, 'pod', 'fast', 'pod-ready.yaml'),
      path.join(stage, 'pod', 'fast', 'pod-delete.yaml'),
    ];
    if (files.every((f) => existsSync(f))) return files;
  }
  throw new Error(`kwok ${KWOK_VERSION} stage files not found in the Go module cache (run ensureKwok first)`);
}

export class KwokSimulator implements Simulator {
  readonly kind = 'kwok' as const;
  readonly version = `kwok ${KWOK_VERSION}`;
  private readonly procs = new Map<string, ChildProcess>();
  private readonly bin: string;
  private readonly stages: string[];
  private readonly kubeconfig: string;

  constructor(private readonly opts: SimulatorOptions) {
    this.bin = ensureKwok();
    this.stages = kwokStageFiles();
    if (opts.renewIntervalMs !== 10_000) {
      console.error('[kwok] renewals are leaseDuration/4 = 10 s in kwok; --renew is ignored for kwok');
    }
    // kwok talks to the loopback control plane only: write its own kubeconfig copy in the run dir.
    this.kubeconfig = path.join(opts.workDir, 'kwok.kubeconfig');
    writeFileSync(this.kubeconfig, readFileSync(opts.cp.kubeconfigPath), { mode: 0o600 });
  }

  private groups(): string[] {
    return [...new Set(this.opts.plan.map((n) => n.group))];
  }

  async start(): Promise<void> {
    const { client, plan } = this.opts;
    // kwok manages existing objects; it does not create them. Start the kwok processes first, then
    // let the nodes appear at even offsets over one renew interval (10 s), so that their lease
    // renewals (kwok renews every 10 s from the moment it first sees a node, 4% jitter) are spread
    // in phase, as unrelated kubelets are.
    for (const g of this.groups()) this.spawnGroup(g);
    const spreadMs = 10_000;
    const started = performance.now();
    await forEachLimited(
      plan.map((n, i) => ({ n, at: (i * spreadMs) / plan.length })),
      64,
      async ({ n, at }) => {
        const wait = started + at - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        await this.createNode(n);
      },
    );
    const pods = plan.flatMap((n) => n.pods.map((p) => ({ node: n.name, pod: p })));
    await forEachLimited(pods, 32, async ({ node, pod }) => {
      const body: V1Pod = {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: pod, namespace: POD_NAMESPACE, labels: { app: 'sim' } },
        spec: {
          nodeName: node,
          containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10' }],
          terminationGracePeriodSeconds: 0,
        },
      };
      await createIgnoreExists(client, paths.pods(POD_NAMESPACE), body);
    });
  }

  private async createNode(n: PlannedNode): Promise<void> {
    const node: V1Node = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name: n.name,
        labels: {
          'kubernetes.io/hostname': n.name,
          'kubernetes.io/os': 'linux',
          'kubernetes.io/arch': 'amd64',
          'topology.kubernetes.io/region': n.region,
          'topology.kubernetes.io/zone': n.zone,
          type: 'kwok',
          [GROUP_LABEL]: n.group,
        },
        annotations: { 'kwok.x-k8s.io/node': 'fake' },
      },
      spec: {},
    };
    await createIgnoreExists(this.opts.client, paths.nodes(), node);
  }

  private spawnGroup(group: string): void {
    const args = [
      `--kubeconfig=${this.kubeconfig}`,
      `--manage-nodes-with-label-selector=${GROUP_LABEL}=${group}`,
      '--node-lease-duration-seconds=40',
      ...this.stages.map((f) => `--config=${f}`),
    ];
    const log = createWriteStream(path.join(this.opts.workDir, `kwok-${group}.log`), { flags: 'a' });
    const child = trackChild(spawn(this.bin, args, { stdio: ['ignore', 'pipe', 'pipe'] }));
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    child.on('error', (err) => log.write(`spawn error: ${err.message}\n`));
    this.procs.set(group, child);
  }

  async fail(group: string): Promise<void> {
    const p = this.procs.get(group);
    if (!p) return;
    this.procs.delete(group);
    await killAndWait(p, 'SIGKILL');
  }

  async recover(group: string): Promise<void> {
    if (!this.procs.has(group)) this.spawnGroup(group);
  }

  pids(): number[] {
    return [...this.procs.values()].map((p) => p.pid).filter((p): p is number => typeof p === 'number');
  }

  async stop(): Promise<void> {
    await Promise.all([...this.procs.values()].map((p) => killAndWait(p, 'SIGTERM')));
    this.procs.clear();
  }
}

// ------------------------------------------------------------------ helpers

async function createIgnoreExists(client: KubeClient, p: string, body: unknown): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await client.request({ method: 'POST', path: p, body });
      return;
    } catch (err) {
      if (err instanceof KubeApiError && err.status === 409) return;
      if (attempt >= 5) throw err;
      await new Promise((r) => setTimeout(r, 200 * 2 ** attempt));
    }
  }
}

export async function forEachLimited<T>(items: readonly T[], limit: number, fn: (t: T) => Promise<void>) {
  let i = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (i < items.length) {
      const item = items[i++]!;
      await fn(item);
    }
  });
  await Promise.all(workers);
}
