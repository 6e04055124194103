import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Versions of the control plane we build and test against (see docs/control-plane.md). */
export const K8S_VERSION = 'v1.37.2';
export const ETCD_VERSION = 'v3.6.16';

export interface ControlPlaneBinaries {
  dir: string;
  etcd: string;
  kubeApiserver: string;
  kubeControllerManager: string;
  /** Built only on request (`--with-kubectl`, or `--kind`); the tests render manifests with it. */
  kubectl: string;
}

/** The environment a caller passes in (its process's, in main, tests and benchmarks): read nowhere else. */
export type Environment = Readonly<Record<string, string | undefined>>;

/** Cache folder shared by all runs of this project on this machine (never inside the repo). */
export function cacheRoot(env: Environment): string {
  return (
    env.NLC_CACHE_DIR ??
    path.join(env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'node-lifecycle-controller')
  );
}

export function binariesIn(env: Environment): ControlPlaneBinaries {
  const dir = path.join(cacheRoot(env), 'bin', `k8s-${K8S_VERSION}-etcd-${ETCD_VERSION}`);
  return {
    dir,
    etcd: path.join(dir, 'etcd'),
    kubeApiserver: path.join(dir, 'kube-apiserver'),
    kubeControllerManager: path.join(dir, 'kube-controller-manager'),
    kubectl: path.join(dir, 'kubectl'),
  };
}

function buildScript(): string {
  // dist/localcluster/binaries.js or src/localcluster/binaries.ts -> <repo>/scripts
  const here = path.dirname(fileURLToPath(import.meta.url));
  return path.resolve(here, '..', '..', 'scripts', 'build-control-plane.sh');
}

/**
 * Returns the cached binaries, building them from the Go module proxy first if they are missing
 * (a one-time cost of several minutes; progress goes to stderr).
 */
export async function ensureBinaries(
  env: Environment,
  opts: { withKcm?: boolean } = {},
): Promise<ControlPlaneBinaries> {
  const bins = binariesIn(env);
  const missing = !existsSync(bins.etcd) || !existsSync(bins.kubeApiserver);
  const missingKcm = opts.withKcm === true && !existsSync(bins.kubeControllerManager);
  if (!missing && !missingKcm) return bins;
  const args = [buildScript(), ...(opts.withKcm ? ['--with-kcm'] : [])];
  await new Promise<void>((resolve, reject) => {
    const child = spawn('bash', args, {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...env, K8S_VERSION, ETCD_VERSION },
    });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0
        ? resolve()
        : reject(new Error(`building the control plane failed (exit ${code}); see stderr`)),
    );
  });
  return bins;
}
