/**
 * The two controllers under comparison, each started as a child process with the same kubeconfig
 * (the same ServiceAccount identity), the same grace periods, the same client-side rate limit
 * (`--kube-api-qps` / `--kube-api-burst`) and a 5 s monitor period where the flag exists:
 *  - "kcm":  upstream kube-controller-manager v1.37.2 with only `node-lifecycle-controller` (ours has
 *    no taint-eviction; since Kubernetes 1.34 the NoExecute taints are the node lifecycle
 *    controller's and only the pod deletions the taint-eviction-controller's);
 *  - "ours": node dist/controller.mjs (this repo's bundle, as in the image; `npm run build`).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createWriteStream, existsSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { formatDuration } from '../../src/clock/duration.js';
import { ensureBinaries, K8S_VERSION } from '../../src/localcluster/binaries.js';
import { claimPort, type PortClaim, releaseWhenExits } from '../../src/localcluster/ports.js';
import { imageNodeFlags } from '../../test/support/controller-process.js';
import { trackChild } from './children.js';

export type ControllerName = 'kcm' | 'ours';

export interface ControllerLaunch {
  kubeconfigPath: string;
  graceMs: number;
  startupGraceMs: number;
  /** Client-side rate limit, the same for both: `--kube-api-qps` and `--kube-api-burst`. */
  qps: number;
  burst: number;
  logDir: string;
  /** Ours only: the entry script and node flags before it (default: the image's, {@link imageNodeFlags}). */
  oursEntry?: string;
  oursNodeFlags?: string[];
  /** Ours only: extra controller flags, after the harness's own. */
  oursFlags?: string[];
  /** kcm only: the controllers it runs (default: node-lifecycle-controller). */
  kcmControllers?: string[];
  /**
   * kcm only: its node-lifecycle controller at its defaults (no grace, monitor period or QPS flags;
   * graceMs, startupGraceMs, qps and burst are then not used for it), as a managed control plane runs it.
   */
  kcmDefaults?: boolean;
}

export interface RunningController {
  name: ControllerName;
  version: string;
  command: string[];
  process: ChildProcess;
  logPath: string;
  /** Resolves true once the controller answers its health endpoint with 200. */
  healthy(): Promise<boolean>;
  /** Prometheus text from its metrics endpoint ('' when unavailable). */
  metrics(): Promise<string>;
}

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
/** What the image runs: the bundle `npm run build` makes (scripts/bundle.mjs). */
export const OURS_ENTRY = path.join(REPO_ROOT, 'dist', 'controller.mjs');

/** Starts a controller; `ports` (claimed for it, see ports.ts) are released when it exits. */
function launch(name: ControllerName, bin: string, args: string[], logDir: string, ports: PortClaim[]) {
  const logPath = path.join(logDir, `${name}.log`);
  const log = createWriteStream(logPath, { flags: 'a' });
  const child = trackChild(spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe'] }));
  for (const p of ports) releaseWhenExits(p, child);
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  child.on('error', (err) => log.write(`spawn error: ${err.message}\n`));
  return { child, logPath };
}

const insecureAgent = new https.Agent({ rejectUnauthorized: false });
function httpsGet(url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = https.get(url, { agent: insecureAgent, timeout: 5000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () =>
        resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
      );
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}
async function httpGet(url: string): Promise<{ status: number; body: string }> {
  const res = await fetch(url, { signal: AbortSignal.timeout(5000) });
  return { status: res.status, body: await res.text() };
}

export async function startKcm(l: ControllerLaunch): Promise<RunningController> {
  const bins = await ensureBinaries(process.env, { withKcm: true });
  const port = await claimPort();
  const tuning = l.kcmDefaults
    ? []
    : [
        '--node-monitor-period=5s',
        `--kube-api-qps=${l.qps}`,
        `--kube-api-burst=${l.burst}`,
        `--node-monitor-grace-period=${formatDuration(l.graceMs)}`,
        `--node-startup-grace-period=${formatDuration(l.startupGraceMs)}`,
      ];
  const args = [
    `--kubeconfig=${l.kubeconfigPath}`,
    '--leader-elect=false',
    `--controllers=${(l.kcmControllers ?? ['node-lifecycle-controller']).join(',')}`,
    ...tuning,
    '--bind-address=127.0.0.1',
    `--secure-port=${port.port}`,
    '--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics',
    '--authentication-skip-lookup',
    '--use-service-account-credentials=false',
  ];
  const { child, logPath } = launch('kcm', bins.kubeControllerManager, args, l.logDir, [port]);
  const base = `https://${port.address}`;
  return {
    name: 'kcm',
    version: `kube-controller-manager ${K8S_VERSION}`,
    command: [bins.kubeControllerManager, ...args],
    process: child,
    logPath,
    healthy: async () => (await httpsGet(`${base}/healthz`).catch(() => ({ status: 0 }))).status === 200,
    metrics: async () => {
      const r = await httpsGet(`${base}/metrics`).catch(() => ({ status: 0, body: '' }));
      return r.status === 200 ? r.body : '';
    },
  };
}

/** Is our CLI built and does it start far enough to print its help? */
export function oursUsable(entry = OURS_ENTRY): { ok: boolean; why: string } {
  if (!existsSync(entry)) return { ok: false, why: `${entry} does not exist (npm run build)` };
  try {
    execFileSync(process.execPath, [entry, '--help'], { stdio: 'pipe', timeout: 20_000 });
    return { ok: true, why: '' };
  } catch (err) {
    const e = err as { stderr?: Buffer; stdout?: Buffer; status?: number };
    return {
      ok: false,
      why: `node ${entry} --help failed (exit ${e.status}): ${(e.stderr ?? e.stdout ?? '').toString().slice(0, 400)}`,
    };
  }
}

export async function startOurs(l: ControllerLaunch): Promise<RunningController> {
  const [metricsPort, probePort] = [await claimPort(), await claimPort()];
  const args = [
    ...(l.oursNodeFlags ?? imageNodeFlags()),
    l.oursEntry ?? OURS_ENTRY,
    `--kubeconfig=${l.kubeconfigPath}`,
    '--leader-elect=false',
    `--node-monitor-grace-period=${formatDuration(l.graceMs)}`,
    `--node-startup-grace-period=${formatDuration(l.startupGraceMs)}`,
    `--kube-api-qps=${l.qps}`,
    `--kube-api-burst=${l.burst}`,
    `--metrics-bind-address=${metricsPort.address}`,
    // Plain HTTP, as upstream runs here with --authorization-always-allow-paths=/metrics.
    '--metrics-secure=false',
    `--health-probe-bind-address=${probePort.address}`,
    '--log-format=json',
  ];
  // Ours refuses a lease-watch silence threshold (default 45 s) that is not below the grace period;
  // upstream has no such flag. For short benchmark graces use 3/4 of the grace.
  if (l.graceMs <= 45_000)
    args.push(`--watch-silence-threshold=${formatDuration(Math.floor(l.graceMs * 0.75))}`);
  args.push(...(l.oursFlags ?? []));
  const { child, logPath } = launch('ours', process.execPath, args, l.logDir, [metricsPort, probePort]);
  return {
    name: 'ours',
    version: `node-lifecycle-controller (this repo, node ${process.version})`,
    command: [process.execPath, ...args],
    process: child,
    logPath,
    healthy: async () =>
      (await httpGet(`http://${probePort.address}/healthz`).catch(() => ({ status: 0 }))).status === 200,
    metrics: async () => {
      const r = await httpGet(`http://${metricsPort.address}/metrics`).catch(() => ({
        status: 0,
        body: '',
      }));
      return r.status === 200 ? r.body : '';
    },
  };
}

export async function startController(name: ControllerName, l: ControllerLaunch): Promise<RunningController> {
  return name === 'kcm' ? await startKcm(l) : await startOurs(l);
}
