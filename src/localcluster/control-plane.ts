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
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { formatDuration } from '../disruption/duration.js';
import { KubeClient, type KubeClientOptions } from '../kube/client.js';
import { type ControlPlaneBinaries, ensureBinaries, K8S_VERSION } from './binaries.js';

export interface ControlPlaneOptions {
  /** Record an audit log of writes (JSON lines) at `auditLogPath`. */
  audit?: boolean;
  /**
   * With `audit`: record every request (reads and watches too, any resource, denied ones included)
   * at Metadata level, not only writes to the resources the controller touches. For tests that
   * must see every call a client made, e.g. that none was refused.
   */
  auditReads?: boolean;
  /** Extra kube-apiserver flags. */
  apiserverArgs?: string[];
  /** Parent folder for the run's temporary files (default: /dev/shm when present). */
  baseDir?: string;
  /** How long to wait for /readyz, in ms. */
  readyTimeoutMs?: number;
  /** Keep the temp dir (logs, audit log, etcd data) after stop(), for debugging. */
  keepDir?: boolean;
}

/** Finds a free TCP port on loopback. */
export async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
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
        resources: ["leases"]
      - group: "events.k8s.io"
        resources: ["events"]
  - level: None
`;

/** `auditReads`: every request, any verb and resource, at Metadata level. */
const AUDIT_POLICY_ALL = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
`;

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

  private constructor(
    private readonly bins: ControlPlaneBinaries,
    dir: string,
    private readonly etcdPort: number,
    private readonly apiPort: number,
    private readonly opts: ControlPlaneOptions,
  ) {
    this.dir = dir;
    this.adminToken = randomBytes(24).toString('hex');
    this.server = `https://127.0.0.1:${apiPort}`;
    this.auditLogPath = opts.audit ? path.join(dir, 'audit.log') : undefined;
    this.kubeconfigPath = path.join(dir, 'admin.kubeconfig');
    this.kubeConfig = new KubeConfig();
  }

  static async start(opts: ControlPlaneOptions = {}): Promise<LocalControlPlane> {
    const bins = await ensureBinaries();
    const base = opts.baseDir ?? (existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir());
    const dir = mkdtempSync(path.join(base, 'nlc-cp-'));
    const [etcdPort, apiPort] = [await freePort(), await freePort()];
    const cp = new LocalControlPlane(bins, dir, etcdPort, apiPort, opts);
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
        this.opts.auditReads ? AUDIT_POLICY_ALL : AUDIT_POLICY,
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
    );
  }

  private apiserverArgs(): string[] {
    const d = this.dir;
    const args = [
      `--etcd-servers=http://127.0.0.1:${this.etcdPort}`,
      `--cert-dir=${path.join(d, 'certs')}`,
      `--secure-port=${this.apiPort}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      '--service-cluster-ip-range=10.0.0.0/24',
      '--allow-privileged=true',
      '--authorization-mode=RBAC',
      // No kube-controller-manager runs here to create default ServiceAccounts for pods.
      '--disable-admission-plugins=ServiceAccount',
      `--token-auth-file=${path.join(d, 'tokens.csv')}`,
      `--service-account-issuer=https://127.0.0.1:${this.apiPort}`,
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
    return [...args, ...(this.opts.apiserverArgs ?? [])];
  }

  private launch(name: string, bin: string, args: string[]): ChildProcess {
    const log = createWriteStream(path.join(this.dir, `${name}.log`), { flags: 'a' });
    const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    child.on('error', (err) => log.write(`spawn error: ${err.message}\n`));
    return child;
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

  private async waitFor(
    check: () => Promise<boolean>,
    what: string,
    timeoutMs = this.opts.readyTimeoutMs ?? 90_000,
  ) {
    const deadline = performance.now() + timeoutMs;
    let last: unknown;
    while (performance.now() < deadline) {
      if (this.stopped) throw new Error(`control plane stopped while waiting for ${what}`);
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
    await this.waitFor(async () => {
      if (!existsSync(path.join(this.dir, 'certs', 'apiserver.crt'))) return false;
      const client = await this.client({ defaultTimeoutMs: 2000 });
      try {
        const res = await client.raw({ method: 'GET', path: '/readyz' });
        return res.status === 200;
      } finally {
        client.close();
      }
    }, 'kube-apiserver /readyz');
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
