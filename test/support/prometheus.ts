/**
 * A real Prometheus server and promtool for the e2e tests, built from the Go module proxy by
 * scripts/build-prometheus.sh into the cache folder (keyed by version), like the control plane.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { dump } from 'js-yaml';
import { cacheRoot } from '../../src/localcluster/binaries.js';
import { killAndWait } from '../../src/localcluster/control-plane.js';
import { claimPort, releaseWhenExits } from '../../src/localcluster/ports.js';

/** Kept in step with scripts/build-prometheus.sh's default. */
export const PROMETHEUS_VERSION = 'v3.16.0';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export interface PrometheusBinaries {
  prometheus: string;
  promtool: string;
}

export function prometheusBinaries(env: NodeJS.ProcessEnv = process.env): PrometheusBinaries {
  const dir = path.join(cacheRoot(env), 'bin', `prometheus-${PROMETHEUS_VERSION}`);
  return { prometheus: path.join(dir, 'prometheus'), promtool: path.join(dir, 'promtool') };
}

/** The cached binaries, built first when missing (minutes, once; progress on stderr). */
export async function ensurePrometheus(): Promise<PrometheusBinaries> {
  const bins = prometheusBinaries();
  if (existsSync(bins.prometheus) && existsSync(bins.promtool)) return bins;
  await new Promise<void>((resolve, reject) => {
    const child = spawn('bash', [path.join(ROOT, 'scripts', 'build-prometheus.sh')], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, PROMETHEUS_VERSION },
    });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 ? resolve() : reject(new Error(`building Prometheus failed (exit ${code}); see stderr`)),
    );
  });
  return bins;
}

/** `promtool check rules <file>`: exit code and output. */
export function promtoolCheckRules(
  bins: PrometheusBinaries,
  file: string,
): { code: number | null; output: string } {
  const r = spawnSync(bins.promtool, ['check', 'rules', file], { encoding: 'utf8' });
  return { code: r.status, output: `${r.stdout}${r.stderr}` };
}

export interface Sample {
  metric: Record<string, string>;
  value: number;
}

export interface ActiveAlert {
  labels: Record<string, string>;
  state: 'pending' | 'firing' | 'inactive';
  activeAt?: string;
  value?: string;
}

export interface Target {
  labels: Record<string, string>;
  scrapePool: string;
  health: 'up' | 'down' | 'unknown';
  lastError: string;
}

/** A Prometheus process on loopback with the given configuration and rule files. */
export class PrometheusServer {
  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
    readonly dir: string,
  ) {}

  static async start(opts: {
    bins: PrometheusBinaries;
    dir: string;
    config: Record<string, unknown>;
    ruleFiles?: Record<string, unknown>;
  }): Promise<PrometheusServer> {
    mkdirSync(path.join(opts.dir, 'data'), { recursive: true });
    const ruleFiles: string[] = [];
    for (const [name, content] of Object.entries(opts.ruleFiles ?? {})) {
      const f = path.join(opts.dir, name);
      writeFileSync(f, dump(content));
      ruleFiles.push(f);
    }
    const configFile = path.join(opts.dir, 'prometheus.yml');
    writeFileSync(configFile, dump({ ...opts.config, rule_files: ruleFiles }));
    const port = await claimPort();
    const log = createWriteStream(path.join(opts.dir, 'prometheus.log'));
    const child = spawn(
      opts.bins.prometheus,
      [
        `--config.file=${configFile}`,
        `--storage.tsdb.path=${path.join(opts.dir, 'data')}`,
        `--web.listen-address=${port.address}`,
        '--log.level=warn',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    releaseWhenExits(port, child);
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    process.once('exit', () => child.kill('SIGKILL'));
    const p = new PrometheusServer(child, `http://${port.address}`, opts.dir);
    const deadline = performance.now() + 30_000;
    for (;;) {
      if (child.exitCode !== null) throw new Error(`prometheus exited (${child.exitCode}): ${p.log()}`);
      const ok = await fetch(`${p.url}/-/ready`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) return p;
      if (performance.now() > deadline) throw new Error(`prometheus not ready in 30 s: ${p.log()}`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  log(): string {
    try {
      return readFileSync(path.join(this.dir, 'prometheus.log'), 'utf8').slice(-4000);
    } catch {
      return '';
    }
  }

  private async api<T>(pathAndQuery: string): Promise<T> {
    const res = await fetch(`${this.url}${pathAndQuery}`);
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`${pathAndQuery}: ${body.error ?? res.status}`);
    return body.data;
  }

  /** An instant query through /api/v1/query. */
  async query(expr: string): Promise<Sample[]> {
    const data = await this.api<{ result: { metric: Record<string, string>; value: [number, string] }[] }>(
      `/api/v1/query?query=${encodeURIComponent(expr)}`,
    );
    return data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
  }

  async alerts(): Promise<ActiveAlert[]> {
    return (await this.api<{ alerts: ActiveAlert[] }>('/api/v1/alerts')).alerts;
  }

  async targets(): Promise<Target[]> {
    return (await this.api<{ activeTargets: Target[] }>('/api/v1/targets')).activeTargets;
  }

  async stop(): Promise<void> {
    await killAndWait(this.child, 'SIGTERM', 10_000);
  }
}
