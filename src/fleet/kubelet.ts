import type { AddressInfo, Socket } from 'node:net';
import tls from 'node:tls';
import type { V1Lease, V1Node, V1NodeCondition, V1Pod } from '@kubernetes/client-node';
import { timerDelay } from '../clock/clock.js';
import { selfSignedCert } from '../http/x509.js';
import { KubeApiError, type KubeClient, PatchType, paths } from '../kube/client.js';

import { NODE_LEASE_NAMESPACE } from '../kube/types.js';

export { NODE_LEASE_NAMESPACE };
export const CONDITION_TYPES = [
  'Ready',
  'MemoryPressure',
  'DiskPressure',
  'PIDPressure',
  'NetworkUnavailable',
] as const;

export interface KubeletTiming {
  /** leaseDurationSeconds written into the Lease (kubelet default 40). */
  leaseDurationSeconds: number;
  /** Interval between lease renewals (kubelet: leaseDuration / 4). */
  renewIntervalMs: number;
  /** Jitter factor added on top of each interval (kubelet: 0.04). */
  jitter: number;
  /** How often the kubelet computes node status and compares it with the server's copy (10s). */
  statusUpdateIntervalMs: number;
  /** Post status at least this often even when nothing changed (5m). */
  statusReportIntervalMs: number;
  /**
   * How long a lease renewal or status request may take before the kubelet gives up and retries.
   * cmd/kubelet sets min(nodeStatusUpdateFrequency, nodeLeaseDurationSeconds): 10 s by default,
   * the fleet's default. Tests that scale the status interval down to 1 s keep 10 s on purpose: a
   * 1 s timeout makes the kubelet back off (up to 7 s) through a paused API server, longer than
   * their 5 s grace leaves a node after the pause (docs/operations.md, "etcd down").
   */
  heartbeatTimeoutMs: number;
}

export interface KubeletSpec {
  name: string;
  zone: string;
  region: string;
  labels?: Record<string, string>;
  pods?: number;
  podNamespace?: string;
}

export interface KubeletStats {
  renewals: number;
  renewErrors: number;
  statusPosts: number;
  /** renewTime (as written, node clock) of the last successful renewal. */
  lastRenewTime: string | undefined;
  /** Our wall clock when the last renewal was accepted. */
  lastRenewAcceptedAt: number | undefined;
}

/** The TLS identity simulated kubelet endpoints serve. Nobody verifies it. */
export interface KubeletServingCert {
  /** PEM chain. */
  cert: string;
  /** PEM private key. */
  key: string;
}

/**
 * A self-signed serving certificate for 127.0.0.1, made once per fleet and shared by all its
 * kubelets: key generation is the costly part, and what is in the certificate does not matter to a
 * peer that checks nothing (the controller's second opinion only asks whether a handshake completes).
 */
export function simulatedKubeletCert(now = Date.now()): KubeletServingCert {
  const { certPem, keyPem } = selfSignedCert({ hosts: ['127.0.0.1'], commonName: 'sim-kubelet', now });
  return { cert: certPem, key: keyPem };
}

export interface SimulatedKubeletOptions {
  /**
   * Serve a kubelet endpoint with this certificate: a TLS server on 127.0.0.1, port chosen by the
   * OS, which the Node reports as its InternalIP and daemonEndpoints.kubeletEndpoint. Without it the
   * Node reports 10.x.y.10:10250, where nothing may ever be connected to.
   */
  endpoint?: KubeletServingCert;
}

/**
 * A simulated kubelet's serving port on 127.0.0.1: it completes TLS handshakes and serves nothing
 * (no HTTP). Open while the kubelet process runs (start() opens it, kill() closes it), whether or
 * not its heartbeats reach the API server; close() and open() take it away and bring it back on
 * their own, for a kubelet that is up but whose port does not answer.
 */
export class KubeletEndpoint {
  readonly host = '127.0.0.1';
  private server: tls.Server | undefined;
  private boundPort = 0;
  /** open() and close() run one after the other, in the order called. */
  private queue: Promise<void> = Promise.resolve();
  private readonly sockets = new Set<Socket>();

  constructor(
    private readonly cert: KubeletServingCert,
    /** Called when a re-open had to take another port than before (the status must say so). */
    private readonly onPortChange: () => void,
  ) {}

  /** The port it serves on, or last served on when closed; 0 before the first open. */
  get port(): number {
    return this.boundPort;
  }
  get isOpen(): boolean {
    return this.server !== undefined;
  }

  /** Listens (again): on the port it had, so that the Node's status stays right. Idempotent. */
  open(): Promise<void> {
    return this.serially(() => this.listen());
  }

  /**
   * Stops listening (connections to the port are refused from then on) and drops the connections
   * it holds. Idempotent; resolves when the server has closed.
   */
  close(): Promise<void> {
    return this.serially(async () => {
      const server = this.server;
      if (!server) return;
      this.server = undefined;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const s of this.sockets) s.destroy();
      await closed;
    });
  }

  private serially(op: () => Promise<void>): Promise<void> {
    const run = this.queue.then(op);
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async listen(): Promise<void> {
    if (this.server) return;
    let server: tls.Server;
    try {
      server = await this.listenOn(this.boundPort);
    } catch (err) {
      // Another socket took the port while it was closed (the OS hands out freed ports again).
      if (this.boundPort === 0 || (err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
      server = await this.listenOn(0);
    }
    const port = (server.address() as AddressInfo).port;
    const moved = this.boundPort !== 0 && port !== this.boundPort;
    this.boundPort = port;
    this.server = server;
    if (moved) this.onPortChange();
  }

  private listenOn(port: number): Promise<tls.Server> {
    const server = tls.createServer({ cert: this.cert.cert, key: this.cert.key });
    // 'connection' is the TCP socket: close() destroys these, whatever state their TLS is in.
    server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => this.sockets.delete(s));
    });
    // Probes hang up as soon as their handshake completes, often before the server's side of it.
    server.on('tlsClientError', () => undefined);
    // Nothing is served: read and drop, so that a peer's end is seen and the socket closes.
    server.on('secureConnection', (s) => {
      s.on('error', () => undefined);
      s.resume();
    });
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, this.host, () => {
        server.off('error', reject);
        // Accept errors (EMFILE under load) must not end the process: the peer sees a reset.
        server.on('error', () => undefined);
        // As the kubelet's timers: a fleet left running does not keep the process alive.
        server.unref();
        resolve(server);
      });
    });
  }
}

type ReadyOverride = { status: 'False'; reason: string; message: string } | undefined;

/** MicroTime as the API server formats it: RFC 3339 with microseconds. */
export function microTime(ms: number): string {
  const iso = new Date(ms).toISOString(); // 2026-01-01T00:00:00.123Z
  return `${iso.slice(0, 23)}000Z`;
}
/** metav1.Time: RFC 3339 with whole seconds. */
export function rfc3339(ms: number): string {
  return `${new Date(ms).toISOString().slice(0, 19)}Z`;
}

/**
 * One simulated kubelet: registers its Node, renews its Lease in kube-node-lease the way the
 * kubelet does (optimistic update, renewTime from its own clock, jittered interval, backoff on
 * failure), and posts node status when the server's copy differs from what it would report.
 */
export class SimulatedKubelet {
  readonly name: string;
  readonly zone: string;
  readonly region: string;
  readonly stats: KubeletStats = {
    renewals: 0,
    renewErrors: 0,
    statusPosts: 0,
    lastRenewTime: undefined,
    lastRenewAcceptedAt: undefined,
  };
  /** Offset of this node's clock from the machine's, in ms (step with stepClock). */
  clockOffsetMs = 0;
  private lease: V1Lease | undefined;
  private nodeUid: string | undefined;
  private renewTimer: NodeJS.Timeout | undefined;
  private statusTimer: NodeJS.Timeout | undefined;
  private running = false;
  private heartbeating = false;
  private failures = 0;
  private readyOverride: ReadyOverride;
  private lastStatusPost = Number.NEGATIVE_INFINITY;
  private readonly conditionTransitions = new Map<string, string>();
  private readonly podNames: string[] = [];
  /** Its serving port (with the `endpoint` option): close() and open() it to stop and resume answering. */
  readonly endpoint: KubeletEndpoint | undefined;
  /** The endpoint port in the last status posted. */
  private postedPort: number | undefined;

  constructor(
    private readonly client: KubeClient,
    private readonly spec: KubeletSpec,
    private readonly timing: KubeletTiming,
    options: SimulatedKubeletOptions = {},
  ) {
    this.name = spec.name;
    this.zone = spec.zone;
    this.region = spec.region;
    for (let i = 0; i < (spec.pods ?? 0); i++) this.podNames.push(`${spec.name}-pod-${i}`);
    if (options.endpoint) {
      this.endpoint = new KubeletEndpoint(options.endpoint, () => {
        if (this.isHeartbeating) void this.syncStatus(false);
      });
    }
  }

  get podNamespace(): string {
    return this.spec.podNamespace ?? 'default';
  }
  get pods(): readonly string[] {
    return this.podNames;
  }
  get isHeartbeating(): boolean {
    return this.running && this.heartbeating;
  }

  private now(): number {
    return Date.now() + this.clockOffsetMs;
  }

  /** Opens its endpoint (if any), registers the Node (if absent), its Lease and pods, then starts heartbeating. */
  async start(): Promise<void> {
    if (this.running) return;
    // Before the first status post, which reports the port.
    await this.endpoint?.open();
    await this.register();
    this.running = true;
    this.heartbeating = true;
    await this.renewOnce();
    await this.syncStatus(true);
    await this.ensurePods();
    this.scheduleRenew();
    this.scheduleStatus();
  }

  /**
   * The kubelet process dies: no more renewals or status posts, and its endpoint stops listening
   * (`await endpoint.close()` to know it has closed). `start()` brings it back.
   */
  kill(): void {
    this.running = false;
    this.heartbeating = false;
    this.clearTimers();
    void this.endpoint?.close();
  }

  /**
   * Heartbeats stop (lease and status) but the kubelet stays "up", its endpoint answering (a node
   * cut off from the API server); resume with resumeHeartbeats.
   */
  pauseHeartbeats(): void {
    this.heartbeating = false;
    this.clearTimers();
  }

  /** Resumes at once: renew now, then on the usual interval. */
  resumeHeartbeats(): void {
    if (!this.running || this.heartbeating) return;
    this.heartbeating = true;
    void this.renewOnce().finally(() => this.scheduleRenew());
    void this.syncStatus(false).finally(() => this.scheduleStatus());
  }

  /** Steps the node's clock (positive: ahead, negative: behind). */
  stepClock(deltaMs: number): void {
    this.clockOffsetMs += deltaMs;
  }

  /** Report Ready=False (while still renewing the lease), or clear that override. */
  reportNotReady(reason = 'KubeletNotReady', message = 'container runtime is down'): void {
    this.readyOverride = { status: 'False', reason, message };
    if (this.isHeartbeating) void this.syncStatus(false);
  }
  reportReady(): void {
    this.readyOverride = undefined;
    if (this.isHeartbeating) void this.syncStatus(false);
  }

  private clearTimers(): void {
    if (this.renewTimer) clearTimeout(this.renewTimer);
    if (this.statusTimer) clearTimeout(this.statusTimer);
    this.renewTimer = undefined;
    this.statusTimer = undefined;
  }

  private jittered(ms: number): number {
    return ms + Math.random() * this.timing.jitter * ms;
  }

  private scheduleRenew(): void {
    if (!this.isHeartbeating) return;
    // Kubelet: on error, back off 200ms doubling up to 7s; otherwise the jittered interval.
    const delay =
      this.failures > 0
        ? Math.min(200 * 2 ** (this.failures - 1), 7000)
        : this.jittered(this.timing.renewIntervalMs);
    this.renewTimer = setTimeout(() => {
      void this.renewOnce().finally(() => this.scheduleRenew());
    }, timerDelay(delay));
    this.renewTimer.unref?.();
  }

  private scheduleStatus(): void {
    if (!this.isHeartbeating) return;
    this.statusTimer = setTimeout(
      () => {
        void this.syncStatus(false).finally(() => this.scheduleStatus());
      },
      timerDelay(this.jittered(this.timing.statusUpdateIntervalMs)),
    );
    this.statusTimer.unref?.();
  }

  private nodeObject(): V1Node {
    return {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name: this.name,
        labels: {
          'kubernetes.io/hostname': this.name,
          'kubernetes.io/os': 'linux',
          'kubernetes.io/arch': 'amd64',
          'node.kubernetes.io/instance-type': 'sim.large',
          'topology.kubernetes.io/region': this.region,
          'topology.kubernetes.io/zone': this.zone,
          ...this.spec.labels,
        },
      },
      spec: {},
    };
  }

  private async register(): Promise<void> {
    try {
      const created = await this.client.request<V1Node>({
        method: 'POST',
        path: paths.nodes(),
        body: this.nodeObject(),
      });
      this.nodeUid = created.metadata?.uid;
    } catch (err) {
      if (!(err instanceof KubeApiError && err.status === 409)) throw err;
      const existing = await this.client.request<V1Node>({ method: 'GET', path: paths.node(this.name) });
      this.nodeUid = existing.metadata?.uid;
    }
  }

  private leaseBody(): V1Lease {
    return {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name: this.name,
        namespace: NODE_LEASE_NAMESPACE,
        ownerReferences: this.nodeUid
          ? [{ apiVersion: 'v1', kind: 'Node', name: this.name, uid: this.nodeUid }]
          : undefined,
      },
      spec: {
        holderIdentity: this.name,
        leaseDurationSeconds: this.timing.leaseDurationSeconds,
        renewTime: microTime(this.now()) as unknown as Date,
      },
    };
  }

  /** One renewal attempt: optimistic update of our cached copy, or create / re-read on failure. */
  private async renewOnce(): Promise<void> {
    if (!this.isHeartbeating) return;
    try {
      if (!this.lease) {
        try {
          this.lease = await this.client.request<V1Lease>({
            method: 'GET',
            path: paths.lease(NODE_LEASE_NAMESPACE, this.name),
            timeoutMs: this.timing.heartbeatTimeoutMs,
          });
        } catch (err) {
          if (!(err instanceof KubeApiError && err.isNotFound)) throw err;
          this.lease = await this.client.request<V1Lease>({
            method: 'POST',
            path: paths.leases(NODE_LEASE_NAMESPACE),
            body: this.leaseBody(),
            timeoutMs: this.timing.heartbeatTimeoutMs,
          });
          this.accepted();
          return;
        }
      }
      const body = this.leaseBody();
      body.metadata = {
        ...body.metadata,
        resourceVersion: this.lease.metadata?.resourceVersion,
        ownerReferences: this.lease.metadata?.ownerReferences ?? body.metadata?.ownerReferences,
      };
      this.lease = await this.client.request<V1Lease>({
        method: 'PUT',
        path: paths.lease(NODE_LEASE_NAMESPACE, this.name),
        body,
        timeoutMs: this.timing.heartbeatTimeoutMs,
      });
      this.accepted();
    } catch {
      this.lease = undefined;
      this.failures++;
      this.stats.renewErrors++;
    }
  }

  private accepted(): void {
    this.failures = 0;
    this.stats.renewals++;
    this.stats.lastRenewTime = String(this.lease?.spec?.renewTime ?? '');
    this.stats.lastRenewAcceptedAt = Date.now();
  }

  private desiredConditions(nowIso: string): V1NodeCondition[] {
    const desired: Array<Pick<V1NodeCondition, 'type' | 'status' | 'reason' | 'message'>> = [
      {
        type: 'MemoryPressure',
        status: 'False',
        reason: 'KubeletHasSufficientMemory',
        message: 'kubelet has sufficient memory available',
      },
      {
        type: 'DiskPressure',
        status: 'False',
        reason: 'KubeletHasNoDiskPressure',
        message: 'kubelet has no disk pressure',
      },
      {
        type: 'PIDPressure',
        status: 'False',
        reason: 'KubeletHasSufficientPID',
        message: 'kubelet has sufficient PID available',
      },
      {
        type: 'NetworkUnavailable',
        status: 'False',
        reason: 'RouteCreated',
        message: 'simulated network is up',
      },
      this.readyOverride
        ? { type: 'Ready', ...this.readyOverride }
        : {
            type: 'Ready',
            status: 'True',
            reason: 'KubeletReady',
            message: 'kubelet is posting ready status',
          },
    ];
    return desired.map((c) => {
      const key = `${c.type}=${c.status}`;
      let transition = this.conditionTransitions.get(c.type);
      if (!transition?.startsWith(`${key}@`)) {
        transition = `${key}@${nowIso}`;
        this.conditionTransitions.set(c.type, transition);
      }
      return {
        ...c,
        lastHeartbeatTime: nowIso as unknown as Date,
        lastTransitionTime: transition.slice(key.length + 1) as unknown as Date,
      };
    });
  }

  private statusBody(nowIso: string) {
    const idx = Number.parseInt(this.name.replace(/\D+/g, '').slice(-4) || '1', 10) % 250;
    const internalIP = this.endpoint?.host ?? `10.${Math.floor(idx / 250) + 1}.${idx}.10`;
    return {
      status: {
        capacity: { cpu: '4', memory: '16393244Ki', pods: '110', 'ephemeral-storage': '102626232Ki' },
        allocatable: { cpu: '3800m', memory: '15576092Ki', pods: '110', 'ephemeral-storage': '94580335255' },
        conditions: this.desiredConditions(nowIso),
        addresses: [
          { type: 'InternalIP', address: internalIP },
          { type: 'Hostname', address: this.name },
        ],
        daemonEndpoints: { kubeletEndpoint: { Port: this.endpoint?.port ?? 10250 } },
        nodeInfo: {
          machineID: this.name,
          systemUUID: this.name,
          bootID: this.name,
          kernelVersion: '6.1.0-sim',
          osImage: 'Simulated Linux',
          containerRuntimeVersion: 'sim://1.0.0',
          kubeletVersion: 'v1.37.2',
          kubeProxyVersion: '',
          operatingSystem: 'linux',
          architecture: 'amd64',
        },
      },
    };
  }

  /**
   * Kubelet's status sync: read the server's copy; post when it differs from what we would report
   * (for example a controller set Ready=Unknown), or when the report interval has passed.
   */
  private async syncStatus(force: boolean): Promise<void> {
    if (!this.isHeartbeating) return;
    try {
      const node = await this.client.request<V1Node>({
        method: 'GET',
        path: paths.node(this.name),
        query: { resourceVersion: '0' },
        timeoutMs: this.timing.heartbeatTimeoutMs,
      });
      const nowIso = rfc3339(this.now());
      const want = this.desiredConditions(nowIso);
      const have = new Map((node.status?.conditions ?? []).map((c) => [c.type, c]));
      const differs = want.some((w) => {
        const h = have.get(w.type);
        return !h || h.status !== w.status || h.reason !== w.reason;
      });
      const due = Date.now() - this.lastStatusPost >= this.timing.statusReportIntervalMs;
      const moved = this.endpoint !== undefined && this.endpoint.port !== this.postedPort;
      if (force || differs || due || moved) {
        const body = this.statusBody(nowIso);
        await this.client.request({
          method: 'PATCH',
          path: paths.nodeStatus(this.name),
          contentType: PatchType.strategic,
          body,
          timeoutMs: this.timing.heartbeatTimeoutMs,
        });
        this.postedPort = body.status.daemonEndpoints.kubeletEndpoint.Port;
        this.lastStatusPost = Date.now();
        this.stats.statusPosts++;
      }
      if (differs && this.podNames.length > 0) await this.ensurePods();
    } catch {
      /* the next sync retries */
    }
  }

  private podObject(name: string): V1Pod {
    return {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, namespace: this.podNamespace, labels: { app: 'sim', 'sim.nlc.dev/node': this.name } },
      spec: {
        nodeName: this.name,
        containers: [{ name: 'app', image: 'registry.k8s.io/pause:3.10' }],
        terminationGracePeriodSeconds: 0,
      },
    };
  }

  /** Creates missing pods and reports them Running and Ready, as the kubelet does for its pods. */
  private async ensurePods(): Promise<void> {
    for (const name of this.podNames) {
      if (!this.isHeartbeating) return;
      let pod: V1Pod;
      try {
        pod = await this.client.request<V1Pod>({ method: 'GET', path: paths.pod(this.podNamespace, name) });
      } catch (err) {
        if (!(err instanceof KubeApiError && err.isNotFound)) continue;
        try {
          pod = await this.client.request<V1Pod>({
            method: 'POST',
            path: paths.pods(this.podNamespace),
            body: this.podObject(name),
          });
        } catch {
          continue;
        }
      }
      const ready = pod.status?.conditions?.find((c) => c.type === 'Ready');
      if (pod.status?.phase === 'Running' && ready?.status === 'True') continue;
      const now = rfc3339(this.now());
      const cond = (type: string) => ({ type, status: 'True', lastTransitionTime: now, lastProbeTime: null });
      await this.client
        .request({
          method: 'PATCH',
          path: paths.podStatus(this.podNamespace, name),
          contentType: PatchType.strategic,
          body: {
            status: {
              phase: 'Running',
              hostIP: '10.0.0.10',
              podIP: '10.244.0.10',
              startTime: now,
              conditions: ['PodScheduled', 'Initialized', 'ContainersReady', 'Ready'].map(cond),
              containerStatuses: [
                {
                  name: 'app',
                  ready: true,
                  restartCount: 0,
                  started: true,
                  image: 'registry.k8s.io/pause:3.10',
                  imageID: 'registry.k8s.io/pause@sha256:sim',
                  containerID: `sim://${name}`,
                  state: { running: { startedAt: now } },
                },
              ],
            },
          },
        })
        .catch(() => undefined);
    }
  }
}
