import { type ChildProcess, spawn } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import {
  cpSync,
  createWriteStream,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { formatDuration } from '../clock/duration.js';
import { KubeClient, type KubeClientOptions } from '../kube/client.js';
import { type ControlPlaneBinaries, type Environment, ensureBinaries, K8S_VERSION } from './binaries.js';
import { claimPort, type PortClaim } from './ports.js';

export interface ControlPlaneOptions {
  /** The caller's environment: where the binaries are cached (NLC_CACHE_DIR, XDG_CACHE_HOME), their build's. */
  env: Environment;
  /** Record an audit log of writes (JSON lines) at `auditLogPath`. */
  audit?: boolean;
  /**
   * With `audit`: record every request (reads and watches too, any resource, denied ones included)
   * at Metadata level, not only writes to the resources the controller touches. For tests that
   * must see every call a client made, e.g. that none was refused.
   */
  auditReads?: boolean;
  /**
   * With `audit`: writes to nodes, pods and events at Request level (the request body is logged:
   * a test can check what a client asked to change, e.g. which taints a patch carried).
   */
  auditBodies?: boolean;
  /** Extra kube-apiserver flags. */
  apiserverArgs?: string[];
  /**
   * Coordinated leader election (KEP-4355): kube-apiserver with
   * --feature-gates=CoordinatedLeaderElection=true and --runtime-config=coordination.k8s.io/v1beta1=true
   * (the gate alone never gets ready on v1.37.2; the runtime-config alone serves LeaseCandidates
   * without a coordinator).
   */
  coordinatedLeaderElection?: boolean;
  /** Parent folder for the run's temporary files (default: /dev/shm when present). */
  baseDir?: string;
  /** How long to wait for /readyz, in ms. */
  readyTimeoutMs?: number;
  /** Keep the temp dir (logs, audit log, etcd data) after stop(), for debugging. */
  keepDir?: boolean;
  /**
   * kube-apiserver on IPv6 loopback: it binds and advertises ::1 (its self-signed serving
   * certificate then has the IP SAN ::1) and `server` is `https://[::1]:PORT`. etcd stays on
   * 127.0.0.1. Fails (no fallback) when the machine has no ::1.
   */
  ipv6?: boolean;
}

const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    verbs: ["get", "list", "watch"]
  - level: Metadata
    resources:
      - group: ""
        resources: ["nodes", "nodes/status", "pods", "pods/status", "events"]
      - group: "coordination.k8s.io"
        resources: ["leases", "leasecandidates"]
      - group: "events.k8s.io"
        resources: ["events"]
  - level: None
`;

/** `auditBodies`: writes with their request bodies. */
const AUDIT_POLICY_BODIES = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: None
    verbs: ["get", "list", "watch"]
  - level: Request
    resources:
      - group: ""
        resources: ["nodes", "nodes/status", "pods", "pods/status", "pods/eviction", "events"]
      - group: "events.k8s.io"
        resources: ["events"]
  - level: Metadata
    resources:
      - group: "coordination.k8s.io"
        resources: ["leases"]
  - level: None
`;

/** `auditReads`: every request, any verb and resource, at Metadata level. */
const AUDIT_POLICY_ALL = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
`;

/** How much of a child's last output an error quotes. */
const TAIL_CHARS = 2000;

const live = new Set<LocalControlPlane>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // Last line of defence when a test run ends without calling stop(): kill synchronously.
  process.on('exit', () => {
    for (const cp of live) cp.killNow();
  });
}

/**
 * A real etcd + kube-apiserver on loopback, started from cached binaries, with RBAC, an admin
 * token, service-account signing keys (TokenRequest works) and an optional audit log.
 */
export class LocalControlPlane {
  readonly dir: string;
  readonly adminToken: string;
  readonly kubeConfig: KubeConfig;
  readonly kubeconfigPath: string;
  readonly server: string;
  readonly auditLogPath: string | undefined;
  readonly version = K8S_VERSION;
  private etcd: ChildProcess | undefined;
  private apiserver: ChildProcess | undefined;
  private watchdog: ChildProcess | undefined;
  private stopped = false;
  private readonly ends = new WeakMap<
    ChildProcess,
    { name: string; closed: Promise<void>; tail: () => string }
  >();

  private readonly etcdPort: number;
  private readonly apiPort: number;

  private constructor(
    private readonly bins: ControlPlaneBinaries,
    dir: string,
    /** Held from start() to stop(), also while a child is down: see ports.ts. */
    private readonly claims: { etcd: PortClaim; api: PortClaim },
    private readonly opts: ControlPlaneOptions,
  ) {
    this.dir = dir;
    this.adminToken = randomBytes(24).toString('hex');
    this.etcdPort = claims.etcd.port;
    this.apiPort = claims.api.port;
    this.server = `https://${claims.api.address}`;
    this.auditLogPath = opts.audit ? path.join(dir, 'audit.log') : undefined;
    this.kubeconfigPath = path.join(dir, 'admin.kubeconfig');
    this.kubeConfig = new KubeConfig();
  }

  static async start(opts: ControlPlaneOptions): Promise<LocalControlPlane> {
    const bins = await ensureBinaries(opts.env);
    const base = opts.baseDir ?? (existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir());
    const etcd = await claimPort('127.0.0.1');
    const api = await claimPort(opts.ipv6 ? '::1' : '127.0.0.1').catch((err: unknown) => {
      etcd.release();
      throw err;
    });
    const dir = mkdtempSync(path.join(base, 'nlc-cp-'));
    const cp = new LocalControlPlane(bins, dir, { etcd, api }, opts);
    live.add(cp);
    installExitHook();
    try {
      await cp.boot();
    } catch (err) {
      await cp.stop();
      throw err;
    }
    return cp;
  }

  private async boot(): Promise<void> {
    mkdirSync(path.join(this.dir, 'certs'), { recursive: true });
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    writeFileSync(path.join(this.dir, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }));
    writeFileSync(path.join(this.dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));
    writeFileSync(path.join(this.dir, 'tokens.csv'), `${this.adminToken},admin,admin,"system:masters"\n`, {
      mode: 0o600,
    });
    if (this.auditLogPath) {
      writeFileSync(
        path.join(this.dir, 'audit-policy.yaml'),
        this.opts.auditReads ? AUDIT_POLICY_ALL : this.opts.auditBodies ? AUDIT_POLICY_BODIES : AUDIT_POLICY,
      );
    }

    await this.startEtcd();
    this.startApiServer();
    this.startWatchdog();
    await this.waitReady();
    this.writeKubeconfig();
  }

  private async startEtcd(): Promise<void> {
    this.etcd = this.launch('etcd', this.bins.etcd, [
      `--name=nlc`,
      `--data-dir=${path.join(this.dir, 'etcd')}`,
      `--listen-client-urls=http://127.0.0.1:${this.etcdPort}`,
      `--advertise-client-urls=http://127.0.0.1:${this.etcdPort}`,
      '--listen-peer-urls=http://127.0.0.1:0',
      '--unsafe-no-fsync=true',
      '--log-level=warn',
    ]);
    if (this.watchdog) this.startWatchdog();
    await this.waitFor(
      async () => (await fetch(`http://127.0.0.1:${this.etcdPort}/health`)).ok,
      'etcd /health',
      () => this.etcd,
    );
  }

  private apiserverArgs(): string[] {
    const d = this.dir;
    const args = [
      `--etcd-servers=http://127.0.0.1:${this.etcdPort}`,
      `--cert-dir=${path.join(d, 'certs')}`,
      `--secure-port=${this.apiPort}`,
      `--bind-address=${this.claims.api.host}`,
      `--advertise-address=${this.claims.api.host}`,
      '--service-cluster-ip-range=10.0.0.0/24',
      '--allow-privileged=true',
      '--authorization-mode=RBAC',
      // No kube-controller-manager runs here to create default ServiceAccounts for pods.
      '--disable-admission-plugins=ServiceAccount',
      `--token-auth-file=${path.join(d, 'tokens.csv')}`,
      `--service-account-issuer=${this.server}`,
      `--service-account-key-file=${path.join(d, 'sa.pub')}`,
      `--service-account-signing-key-file=${path.join(d, 'sa.key')}`,
      '--endpoint-reconciler-type=none',
      '--v=1',
    ];
    if (this.auditLogPath) {
      args.push(
        `--audit-policy-file=${path.join(d, 'audit-policy.yaml')}`,
        `--audit-log-path=${this.auditLogPath}`,
        '--audit-log-mode=blocking',
        '--audit-log-format=json',
      );
    }
    if (this.opts.coordinatedLeaderElection) {
      args.push(
        '--feature-gates=CoordinatedLeaderElection=true',
        '--runtime-config=coordination.k8s.io/v1beta1=true',
      );
    }
    return [...args, ...(this.opts.apiserverArgs ?? [])];
  }

  private launch(name: string, bin: string, args: string[]): ChildProcess {
    const log = createWriteStream(path.join(this.dir, `${name}.log`), { flags: 'a' });
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    let tail = '';
    const keep = (b: Buffer) => {
      tail = (tail + b.toString('utf8')).slice(-TAIL_CHARS);
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    child.on('error', (err) => {
      log.write(`spawn error: ${err.message}\n`);
      keep(Buffer.from(`spawn error: ${err.message}\n`));
    });
    // After 'close' every byte the child wrote has been read.
    const closed = new Promise<void>((resolve) => child.once('close', () => resolve()));
    this.ends.set(child, { name, closed, tail: () => tail });
    return child;
  }

  /** Throws at once when `child` has exited: waiting for it to answer is pointless. */
  private async failIfExited(child: ChildProcess | undefined, what: string): Promise<void> {
    if (!child || (child.exitCode === null && child.signalCode === null)) return;
    const end = this.ends.get(child);
    await end?.closed;
    const how = child.signalCode ?? `code ${child.exitCode}`;
    throw new Error(
      `${end?.name ?? 'child'} exited (${how}) while waiting for ${what}; its last output:\n${end?.tail() ?? ''}`,
    );
  }

  /** Kills our servers if the owning process dies without cleaning up (even on SIGKILL). */
  private startWatchdog(): void {
    this.watchdog?.kill('SIGKILL');
    const pids = [this.etcd?.pid, this.apiserver?.pid].filter((p): p is number => typeof p === 'number');
    const script = `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; kill -9 ${pids.join(' ')} 2>/dev/null; rm -rf '${this.dir}'`;
    const wd = spawn('bash', ['-c', script], { detached: true, stdio: 'ignore' });
    wd.unref();
    this.watchdog = wd;
  }

  /** Polls `check` until true; fails at once if `child()` (the process that should answer) exits. */
  private async waitFor(
    check: () => Promise<boolean>,
    what: string,
    child: () => ChildProcess | undefined,
    timeoutMs = this.opts.readyTimeoutMs ?? 90_000,
  ) {
    const deadline = performance.now() + timeoutMs;
    let last: unknown;
    while (performance.now() < deadline) {
      if (this.stopped) throw new Error(`control plane stopped while waiting for ${what}`);
      await this.failIfExited(child(), what);
      try {
        if (await check()) return;
      } catch (err) {
        last = err;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(
      `timed out after ${formatDuration(timeoutMs)} waiting for ${what} (${String(last ?? 'not ready')}); logs in ${this.dir}`,
    );
  }

  private caBundle(): Buffer {
    return readFileSync(path.join(this.dir, 'certs', 'apiserver.crt'));
  }

  private async waitReady(): Promise<void> {
    await this.waitFor(
      async () => {
        if (!existsSync(path.join(this.dir, 'certs', 'apiserver.crt'))) return false;
        const client = await this.client({ defaultTimeoutMs: 2000 });
        try {
          const res = await client.raw({ method: 'GET', path: '/readyz' });
          return res.status === 200;
        } finally {
          client.close();
        }
      },
      'kube-apiserver /readyz',
      () => this.apiserver,
    );
  }

  private writeKubeconfig(): void {
    this.kubeConfig.loadFromOptions({
      clusters: [{ name: 'local', server: this.server, caData: this.caBundle().toString('base64') }],
      users: [{ name: 'admin', token: this.adminToken }],
      contexts: [{ name: 'local', cluster: 'local', user: 'admin' }],
      currentContext: 'local',
    });
    writeFileSync(this.kubeconfigPath, this.kubeConfig.exportConfig(), { mode: 0o600 });
  }

  /** A KubeConfig for another identity (e.g. a ServiceAccount token) against this server. */
  kubeConfigForToken(token: string, user = 'token-user'): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'local', server: this.server, caData: this.caBundle().toString('base64') }],
      users: [{ name: user, token }],
      contexts: [{ name: 'local', cluster: 'local', user }],
      currentContext: 'local',
    });
    return kc;
  }

  /** An admin client; the caller closes it. */
  async client(opts: KubeClientOptions = {}): Promise<KubeClient> {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'local', server: this.server, caData: this.caBundle().toString('base64') }],
      users: [{ name: 'admin', token: this.adminToken }],
      contexts: [{ name: 'local', cluster: 'local', user: 'admin' }],
      currentContext: 'local',
    });
    return await KubeClient.fromKubeConfig(kc, { userAgent: 'nlc-localcluster-admin', ...opts });
  }

  get apiserverPid(): number | undefined {
    return this.apiserver?.pid;
  }

  get etcdPid(): number | undefined {
    return this.etcd?.pid;
  }

  /** Starts kube-apiserver (again) on the same port with the same flags; does not wait for ready. */
  startApiServer(): void {
    if (this.apiserver && this.apiserver.exitCode === null && this.apiserver.signalCode === null) return;
    this.apiserver = this.launch('kube-apiserver', this.bins.kubeApiserver, this.apiserverArgs());
    if (this.watchdog) this.startWatchdog();
  }

  async stopApiServer(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    const p = this.apiserver;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    if (p.signalCode === null && signal !== 'SIGKILL') p.kill('SIGCONT');
    await killAndWait(p, signal, 15_000);
  }

  pauseApiServer(): void {
    this.apiserver?.kill('SIGSTOP');
  }

  resumeApiServer(): void {
    this.apiserver?.kill('SIGCONT');
  }

  async restartApiServer(signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
    await this.stopApiServer(signal);
    this.startApiServer();
    await this.waitReady();
  }

  async waitApiServerReady(): Promise<void> {
    await this.waitReady();
  }

  /** etcd's current revision: the resourceVersion of the latest write. */
  async etcdRevision(): Promise<number> {
    const st = (await (
      await fetch(`http://127.0.0.1:${this.etcdPort}/v3/maintenance/status`, { method: 'POST', body: '{}' })
    ).json()) as {
      header?: { revision?: string };
    };
    return Number(st.header?.revision ?? 0);
  }

  /**
   * A copy of etcd's data as of now (a backup), for restoreEtcd: etcd is stopped for the copy and
   * started again, so kube-apiserver sees a short etcd outage. Returns the copy's folder and the
   * revision it holds.
   */
  async snapshotEtcd(): Promise<{ dir: string; revision: number }> {
    const revision = await this.etcdRevision();
    const copy = path.join(this.dir, `etcd-snapshot-${revision}`);
    if (this.etcd) await killAndWait(this.etcd, 'SIGTERM', 10_000);
    cpSync(path.join(this.dir, 'etcd'), copy, { recursive: true });
    await this.startEtcd();
    return { dir: copy, revision };
  }

  /**
   * Puts etcd back to a snapshot, as an operator restoring a backup does: etcd is stopped, its data
   * replaced by the copy and started again; the revision goes back to the snapshot's, so
   * resourceVersions handed out since are "from the future". kube-apiserver is left running (an
   * operator restarts it too: restartApiServer).
   */
  async restoreEtcd(snapshot: { dir: string }): Promise<void> {
    if (this.etcd) await killAndWait(this.etcd, 'SIGTERM', 10_000);
    const data = path.join(this.dir, 'etcd');
    rmSync(data, { recursive: true, force: true });
    cpSync(snapshot.dir, data, { recursive: true });
    await this.startEtcd();
  }

  /**
   * Moves etcd's revision on by `count` writes to a key outside kube-apiserver's prefix (the cluster
   * ages by that many writes without any object changing), `concurrency` at a time.
   */
  async advanceEtcdRevision(count: number, concurrency = 16): Promise<number> {
    const url = `http://127.0.0.1:${this.etcdPort}/v3/kv/put`;
    const body = JSON.stringify({
      key: Buffer.from('/nlc-test/filler').toString('base64'),
      value: Buffer.from('x').toString('base64'),
    });
    let next = 0;
    const worker = async () => {
      while (next < count) {
        next++;
        const res = await fetch(url, { method: 'POST', body });
        if (!res.ok) throw new Error(`etcd put failed: ${res.status} ${await res.text()}`);
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
    return await this.etcdRevision();
  }

  /** Compacts etcd history up to its current revision (old resourceVersions then get 410 Gone). */
  async compactEtcd(): Promise<number> {
    const base = `http://127.0.0.1:${this.etcdPort}`;
    const revision = await this.etcdRevision();
    const res = await fetch(`${base}/v3/kv/compaction`, {
      method: 'POST',
      body: JSON.stringify({ revision, physical: true }),
    });
    if (!res.ok) throw new Error(`etcd compaction failed: ${res.status} ${await res.text()}`);
    return revision;
  }

  /** Synchronous last-resort kill (used from the process exit hook). */
  killNow(): void {
    for (const p of [this.apiserver, this.etcd]) {
      try {
        p?.kill('SIGKILL');
      } catch {
        /* already gone */
      }
    }
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    live.delete(this);
    if (this.apiserver) {
      this.apiserver.kill('SIGCONT');
      await killAndWait(this.apiserver, 'SIGTERM', 5_000);
    }
    if (this.etcd) await killAndWait(this.etcd, 'SIGTERM', 5_000);
    this.watchdog?.kill('SIGKILL');
    this.claims.etcd.release();
    this.claims.api.release();
    if (!this.opts.keepDir) rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Sends `signal` and waits for the exit; SIGKILL after `graceMs`. */
export async function killAndWait(p: ChildProcess, signal: NodeJS.Signals, graceMs = 10_000): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => p.once('exit', () => resolve()));
  p.kill(signal);
  const timer = setTimeout(() => p.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}
