/**
 * The kind suite's tools: which docker, kind and kubectl to use (the machine's, or those
 * test/kind/offline/provision.sh built), the cluster's lifecycle, and small typed readers over
 * `kubectl get -o json`. The suite observes the cluster only through kubectl, the tool operators use.
 */
import { execFile, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const NS = 'nlc-system';
export const LOCK = 'node-lifecycle-controller';
export const DEPLOYMENT = 'node-lifecycle-controller';
export const IMAGE = 'node-lifecycle-controller:dev';
export const UNREACHABLE = 'node.kubernetes.io/unreachable';
export const NOT_READY = 'node.kubernetes.io/not-ready';

/**
 * docs/deploy.md's `kubectl run ... --overrides` for `cleanup`: the controller's ServiceAccount, and
 * what the namespace's Pod Security level (restricted) demands of a pod. test/unit/docs-commands.test.ts
 * keeps the README's and docs/deploy.md's copies equal to it.
 */
export const CLEANUP_POD_OVERRIDES = {
  spec: {
    serviceAccountName: 'node-lifecycle-controller',
    securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
    containers: [
      {
        name: 'nlc-cleanup',
        securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
      },
    ],
  },
};

export interface KindSettings {
  /** Environment for every tool: PATH with the provisioned tools first. */
  env: NodeJS.ProcessEnv;
  cluster: string;
  kubeconfig: string;
  /** kind node image; undefined means kind's default (a machine that can pull). */
  nodeImage?: string;
  /** A kind config used instead of test/kind/kind-config.yaml. */
  configFile?: string;
  /** A prebuilt controller image to test instead of building the Dockerfile. */
  prebuiltImage?: string;
  cgroupVersion: string;
  keep: boolean;
  offline: boolean;
  /** A CA bundle handed to `docker build` as the npm-ca secret (TLS-intercepting proxies). */
  buildCaFile?: string;
  diagnosticsDir: string;
}

function cacheRoot(env: NodeJS.ProcessEnv): string {
  return (
    env.NLC_CACHE_DIR ??
    path.join(env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'node-lifecycle-controller')
  );
}

/** KEY=VALUE lines (comments and blanks ignored). */
function readEnvFile(file: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^([A-Z0-9_]+)=(.*)$/.exec(line.trim());
    if (m?.[1]) out[m[1]] = m[2] ?? '';
  }
  return out;
}

function run(cmd: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs = 30_000) {
  return new Promise<{ code: number; out: string; err: string }>((resolve) => {
    execFile(cmd, args, { env, timeout: timeoutMs, maxBuffer: 64 << 20 }, (error, stdout, stderr) => {
      const code = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolve({ code, out: String(stdout), err: String(stderr) || (error?.message ?? '') });
    });
  });
}

/**
 * The settings from the environment, or why the suite cannot run here (the suite then fails).
 */
export async function resolveKind(
  procEnv: NodeJS.ProcessEnv = process.env,
): Promise<{ settings: KindSettings } | { skip: string }> {
  const envFile = procEnv.NLC_KIND_ENV_FILE ?? path.join(cacheRoot(procEnv), 'kind-offline', 'env');
  const provisioned = existsSync(envFile) ? readEnvFile(envFile) : {};
  const env: NodeJS.ProcessEnv = { ...procEnv };
  if (provisioned.NLC_KIND_PATH) env.PATH = `${provisioned.NLC_KIND_PATH}:${procEnv.PATH ?? ''}`;
  for (const [tool, args] of [
    ['docker', ['info', '--format', '{{.ServerVersion}}']],
    ['kind', ['version']],
    ['kubectl', ['version', '--client']],
  ] as const) {
    const r = await run(tool, [...args], env);
    if (r.code !== 0) {
      const hint = existsSync(envFile)
        ? `provisioned by ${envFile}; is dockerd running? (test/kind/offline/provision.sh engine)`
        : 'install Docker, kind and kubectl, or run test/kind/offline/provision.sh (no registry needed)';
      return { skip: `${tool} ${args[0]} failed (${(r.err || r.out).trim().split('\n')[0]}); ${hint}` };
    }
  }
  const cgroup = await run('docker', ['info', '--format', '{{.CgroupVersion}}'], env);
  const cluster = procEnv.NLC_KIND_CLUSTER ?? 'nlc-e2e';
  const ca = procEnv.NLC_BUILD_CA_FILE ?? procEnv.NODE_EXTRA_CA_CERTS;
  return {
    settings: {
      env,
      cluster,
      kubeconfig: path.join(os.tmpdir(), `kind-${cluster}-${process.pid}.kubeconfig`),
      nodeImage: procEnv.NLC_KIND_NODE_IMAGE ?? provisioned.NLC_KIND_NODE_IMAGE,
      configFile: procEnv.NLC_KIND_CONFIG,
      prebuiltImage: procEnv.NLC_KIND_IMAGE,
      cgroupVersion: cgroup.out.trim(),
      keep: procEnv.NLC_KIND_KEEP === '1',
      offline: provisioned.NLC_KIND_OFFLINE === '1',
      buildCaFile: ca && existsSync(ca) ? ca : undefined,
      diagnosticsDir: path.join(REPO, '.tmp', 'kind-diagnostics'),
    },
  };
}

/** Runs a tool; throws with its output when it fails. */
export class Tools {
  constructor(readonly s: KindSettings) {}

  async sh(cmd: string, args: string[], opts: { timeoutMs?: number; input?: string } = {}): Promise<string> {
    if (opts.input !== undefined) return this.withInput(cmd, args, opts.input, opts.timeoutMs);
    const r = await run(cmd, args, this.s.env, opts.timeoutMs ?? 60_000);
    if (r.code !== 0) {
      throw new Error(
        `${cmd} ${args.join(' ')} failed (exit ${r.code}): ${(r.err || r.out).trim().slice(-2000)}`,
      );
    }
    return r.out;
  }

  private withInput(cmd: string, args: string[], input: string, timeoutMs = 60_000): Promise<string> {
    return new Promise((resolve, reject) => {
      const child = spawn(cmd, args, { env: this.s.env, stdio: ['pipe', 'pipe', 'pipe'] });
      let out = '';
      let err = '';
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      child.stdout.on('data', (b: Buffer) => {
        out += b.toString();
      });
      child.stderr.on('data', (b: Buffer) => {
        err += b.toString();
      });
      child.on('close', (code) => {
        clearTimeout(timer);
        if (code === 0) resolve(out);
        else
          reject(
            new Error(`${cmd} ${args.join(' ')} failed (exit ${code}): ${(err || out).trim().slice(-2000)}`),
          );
      });
      child.stdin.end(input);
    });
  }

  /** Streams a long command's output to ours (image builds, cluster creation). */
  stream(
    cmd: string,
    args: string[],
    extraEnv: NodeJS.ProcessEnv = {},
    timeoutMs = 30 * 60_000,
  ): Promise<void> {
    return new Promise((resolve, reject) => {
      const child = spawn(cmd, args, {
        env: { ...this.s.env, ...extraEnv },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      const tail: string[] = [];
      const onData = (b: Buffer) => {
        const text = b.toString();
        process.stdout.write(text);
        tail.push(text);
        if (tail.length > 200) tail.shift();
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      child.on('close', (code) => {
        clearTimeout(timer);
        if (code === 0) resolve();
        else
          reject(new Error(`${cmd} ${args.join(' ')} failed (exit ${code}):\n${tail.join('').slice(-3000)}`));
      });
    });
  }

  kubectl(args: string[], opts: { timeoutMs?: number; input?: string } = {}): Promise<string> {
    return this.sh('kubectl', ['--kubeconfig', this.s.kubeconfig, ...args], opts);
  }

  async getJson<T>(args: string[]): Promise<T> {
    return JSON.parse(await this.kubectl(['get', ...args, '-o', 'json'])) as T;
  }

  docker(args: string[], timeoutMs = 120_000): Promise<string> {
    return this.sh('docker', args, { timeoutMs });
  }
}

/**
 * Runs one of the project's build scripts (scripts/build-*.sh: built once into the cache, keyed by
 * version; instant when cached) and returns the folder holding its binary, the last line it prints.
 */
export async function builtToolDir(t: Tools, script: string): Promise<string> {
  const out = await t.sh('bash', [path.join(REPO, 'scripts', script)], { timeoutMs: 30 * 60_000 });
  const dir = out.trim().split('\n').at(-1);
  if (!dir) throw new Error(`scripts/${script} printed no directory`);
  return dir;
}

// ------------------------------------------------------------------------------ typed readers

export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}
export interface Taint {
  key: string;
  effect: string;
  timeAdded?: string;
}
export interface NodeObj {
  metadata: { name: string; labels?: Record<string, string> };
  spec: { taints?: Taint[] };
  status: { conditions?: Condition[] };
}
export interface PodObj {
  metadata: {
    name: string;
    namespace: string;
    uid?: string;
    deletionTimestamp?: string;
    creationTimestamp: string;
  };
  spec: { nodeName?: string; containers?: { name: string; image?: string }[] };
  status: {
    phase?: string;
    podIP?: string;
    conditions?: Condition[];
    containerStatuses?: { name: string; image?: string; imageID?: string }[];
  };
}
export interface LeaseObj {
  spec: {
    holderIdentity?: string;
    renewTime?: string;
    leaseDurationSeconds?: number;
    leaseTransitions?: number;
  };
}
export interface DeploymentObj {
  metadata: { generation: number };
  spec: { replicas: number };
  status: {
    observedGeneration?: number;
    readyReplicas?: number;
    updatedReplicas?: number;
    availableReplicas?: number;
  };
}

export const condition = (o: { status: { conditions?: Condition[] } }, type: string) =>
  o.status.conditions?.find((c) => c.type === type);
export const hasTaint = (n: NodeObj, key: string, effect: string) =>
  (n.spec.taints ?? []).some((t) => t.key === key && t.effect === effect);
export const healthTaints = (n: NodeObj) =>
  (n.spec.taints ?? []).filter((t) => t.key === UNREACHABLE || t.key === NOT_READY);

/** Seconds with one decimal, for the PASS lines. */
export const secs = (ms: number) => (ms / 1000).toFixed(1);

export function writeDiagnostics(dir: string, name: string, text: string): string {
  mkdirSync(dir, { recursive: true });
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}
