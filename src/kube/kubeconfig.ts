import { existsSync } from 'node:fs';
import path from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';

export type KubeconfigSourceKind = 'flag' | 'env' | 'in-cluster' | 'home';

export interface KubeconfigResolution {
  kubeConfig: KubeConfig;
  source: KubeconfigSourceKind;
  /** Files loaded (flag/env/home) or the service-account directory (in-cluster). */
  paths: string[];
  server: string;
}

export interface KubeconfigEnv {
  KUBECONFIG?: string | undefined;
  KUBERNETES_SERVICE_HOST?: string | undefined;
  KUBERNETES_SERVICE_PORT?: string | undefined;
}

export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export class KubeconfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KubeconfigError';
  }
}

/**
 * Finds credentials in controller-runtime's order: --kubeconfig, then $KUBECONFIG (a path list),
 * then the in-cluster service account, then ~/.kube/config. Never falls back to
 * localhost:8080: when nothing is found it says what it tried.
 */
export function resolveKubeconfig(opts: {
  flag: string | undefined;
  env: KubeconfigEnv;
  homeDir: string;
  exists?: (p: string) => boolean;
  serviceAccountDir?: string;
}): KubeconfigResolution {
  const exists = opts.exists ?? existsSync;
  const saDir = opts.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const fromFiles = (files: string[], source: KubeconfigSourceKind): KubeconfigResolution => {
    const kc = new KubeConfig();
    files.forEach((f, i) => {
      if (i === 0) kc.loadFromFile(f);
      else {
        const extra = new KubeConfig();
        extra.loadFromFile(f);
        kc.mergeConfig(extra, true);
      }
    });
    return finish(kc, source, files);
  };
  if (opts.flag) {
    if (!exists(opts.flag)) throw new KubeconfigError(`--kubeconfig ${opts.flag}: file does not exist`);
    return fromFiles([opts.flag], 'flag');
  }
  if (opts.env.KUBECONFIG) {
    const files = opts.env.KUBECONFIG.split(path.delimiter).filter((p) => p !== '' && exists(p));
    if (files.length === 0) {
      throw new KubeconfigError(`$KUBECONFIG=${opts.env.KUBECONFIG}: none of its files exist`);
    }
    return fromFiles(files, 'env');
  }
  if (
    opts.env.KUBERNETES_SERVICE_HOST &&
    opts.env.KUBERNETES_SERVICE_PORT &&
    exists(path.join(saDir, 'token'))
  ) {
    // Built from the values passed in (not process.env): the token file is re-read as it rotates.
    const host = opts.env.KUBERNETES_SERVICE_HOST;
    const server = `https://${host.includes(':') ? `[${host}]` : host}:${opts.env.KUBERNETES_SERVICE_PORT}`;
    const kc = new KubeConfig();
    kc.loadFromClusterAndUser(
      { name: 'in-cluster', server, caFile: path.join(saDir, 'ca.crt'), skipTLSVerify: false },
      {
        name: 'in-cluster',
        authProvider: { name: 'tokenFile', config: { tokenFile: path.join(saDir, 'token') } },
      },
    );
    return finish(kc, 'in-cluster', [saDir]);
  }
  const home = path.join(opts.homeDir, '.kube', 'config');
  if (exists(home)) return fromFiles([home], 'home');
  throw new KubeconfigError(
    'no kubeconfig found: tried --kubeconfig, $KUBECONFIG, the in-cluster service account ' +
      `(${saDir}) and ${home}; refusing to guess a server (no localhost:8080 fallback)`,
  );
}

function finish(kc: KubeConfig, source: KubeconfigSourceKind, paths: string[]): KubeconfigResolution {
  const cluster = kc.getCurrentCluster();
  if (!cluster?.server) {
    throw new KubeconfigError(
      `kubeconfig from ${source} (${paths.join(', ')}) has no current context with a cluster server`,
    );
  }
  return { kubeConfig: kc, source, paths, server: cluster.server };
}
