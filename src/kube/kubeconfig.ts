import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { load as loadYaml } from 'js-yaml';
import {
  type Credentials,
  credentialsFromKubeConfig,
  ExecCredentials,
  type StaticAuth,
  staticHeaders,
} from './credentials.js';

export type KubeconfigSourceKind = 'flag' | 'env' | 'in-cluster' | 'home';

export interface KubeconfigResolution {
  source: KubeconfigSourceKind;
  /** Files loaded (flag/env/home) or the service-account directory (in-cluster). */
  paths: string[];
  server: string;
  /** How the user authenticates: token, token-file, client-certificate, exec, basic, auth-provider:<name>, none. */
  auth: string;
  /** Builds the credentials (runs an exec plugin once, or loads client-node for auth providers). */
  credentials(): Promise<Credentials>;
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

type Dict = Record<string, unknown>;
interface Named {
  name: string;
  body: Dict;
  /** Directory of the file that defined it: relative paths resolve against it. */
  dir: string;
}

function asDict(v: unknown): Dict {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Dict) : {};
}
function str(v: unknown): string | undefined {
  return typeof v === 'string' && v !== '' ? v : undefined;
}

interface MergedConfig {
  clusters: Map<string, Named>;
  users: Map<string, Named>;
  contexts: Map<string, Named>;
  currentContext: string | undefined;
}

/** Parses and merges kubeconfig files the way kubectl does: for each name, the first file wins. */
function readKubeconfigs(files: string[]): MergedConfig {
  const merged: MergedConfig = {
    clusters: new Map(),
    users: new Map(),
    contexts: new Map(),
    currentContext: undefined,
  };
  for (const file of files) {
    let doc: Dict;
    try {
      doc = asDict(loadYaml(readFileSync(file, 'utf8')));
    } catch (err) {
      throw new KubeconfigError(`kubeconfig ${file}: cannot read it: ${(err as Error).message}`);
    }
    const dir = path.dirname(path.resolve(file));
    const take = (list: unknown, key: string, into: Map<string, Named>) => {
      for (const item of Array.isArray(list) ? list : []) {
        const name = str(asDict(item).name);
        if (name && !into.has(name)) into.set(name, { name, body: asDict(asDict(item)[key]), dir });
      }
    };
    take(doc.clusters, 'cluster', merged.clusters);
    take(doc.users, 'user', merged.users);
    take(doc.contexts, 'context', merged.contexts);
    merged.currentContext ??= str(doc['current-context']);
  }
  return merged;
}

function fileOrData(
  entry: Named,
  fileKey: string,
  dataKey: string,
  what: string,
): { file?: string; data?: Buffer } | undefined {
  const data = str(entry.body[dataKey]);
  if (data) return { data: Buffer.from(data, 'base64') };
  const file = str(entry.body[fileKey]);
  if (!file) return undefined;
  const abs = path.isAbsolute(file) ? file : path.join(entry.dir, file);
  try {
    return { file: abs, data: readFileSync(abs) };
  } catch (err) {
    throw new KubeconfigError(
      `kubeconfig ${what} ${JSON.stringify(entry.name)}: ${fileKey} ${abs}: ${(err as Error).message}`,
    );
  }
}

function fromMerged(
  merged: MergedConfig,
  source: KubeconfigSourceKind,
  files: string[],
  processEnv: NodeJS.ProcessEnv,
): KubeconfigResolution {
  const where = `kubeconfig from ${source} (${files.join(', ')})`;
  const ctxName = merged.currentContext;
  if (!ctxName) throw new KubeconfigError(`${where} has no current-context`);
  const ctx = merged.contexts.get(ctxName);
  if (!ctx) throw new KubeconfigError(`${where}: current-context ${JSON.stringify(ctxName)} is not defined`);
  const clusterName = str(ctx.body.cluster);
  const cluster = clusterName ? merged.clusters.get(clusterName) : undefined;
  if (!cluster || !str(cluster.body.server)) {
    throw new KubeconfigError(`${where}: context ${JSON.stringify(ctxName)} has no cluster with a server`);
  }
  const server = str(cluster.body.server)!;
  if (str(cluster.body['proxy-url'])) {
    throw new KubeconfigError(
      `${where}: cluster ${JSON.stringify(cluster.name)} uses proxy-url, which is not supported`,
    );
  }
  const userName = str(ctx.body.user);
  const user: Named = (userName ? merged.users.get(userName) : undefined) ?? {
    name: userName ?? '',
    body: {},
    dir: cluster.dir,
  };

  const tls: Credentials['tls'] = {};
  const ca = fileOrData(cluster, 'certificate-authority', 'certificate-authority-data', 'cluster');
  if (ca?.data) tls.ca = ca.data;
  if (cluster.body['insecure-skip-tls-verify'] === true) tls.rejectUnauthorized = false;
  const sni = str(cluster.body['tls-server-name']);
  if (sni) tls.servername = sni;
  const cert = fileOrData(user, 'client-certificate', 'client-certificate-data', 'user');
  const key = fileOrData(user, 'client-key', 'client-key-data', 'user');
  if (cert?.data) tls.cert = cert.data;
  if (key?.data) tls.key = key.data;

  const base = (headers: Credentials['headers']): Credentials => ({ server: new URL(server), tls, headers });
  const authProvider = asDict(user.body['auth-provider']);
  const exec = asDict(user.body.exec);
  if (str(authProvider.name)) {
    // oidc, gcp, azure...: let @kubernetes/client-node do it (loaded only for such users).
    return {
      source,
      paths: files,
      server,
      auth: `auth-provider:${str(authProvider.name)}`,
      async credentials() {
        const { KubeConfig } = await import('@kubernetes/client-node');
        const kc = new KubeConfig();
        files.forEach((f, i) => {
          if (i === 0) kc.loadFromFile(f);
          else {
            const extra = new KubeConfig();
            extra.loadFromFile(f);
            kc.mergeConfig(extra, true);
          }
        });
        return await credentialsFromKubeConfig(kc);
      },
    };
  }
  if (str(exec.command)) {
    const plugin = new ExecCredentials(
      {
        apiVersion: str(exec.apiVersion) ?? 'client.authentication.k8s.io/v1',
        command: str(exec.command)!,
        args: Array.isArray(exec.args) ? exec.args.map(String) : [],
        env: Array.isArray(exec.env) ? (exec.env as { name: string; value: string }[]) : [],
        baseDir: user.dir,
      },
      processEnv,
    );
    return {
      source,
      paths: files,
      server,
      auth: 'exec',
      async credentials() {
        const status = await plugin.status();
        if (status.clientCertificateData) tls.cert = Buffer.from(status.clientCertificateData);
        if (status.clientKeyData) tls.key = Buffer.from(status.clientKeyData);
        return base(() => plugin.headers());
      },
    };
  }
  let auth: StaticAuth = { kind: 'none' };
  const token = str(user.body.token);
  const tokenFile = str(user.body.tokenFile);
  if (token) auth = { kind: 'token', token };
  else if (tokenFile) {
    auth = {
      kind: 'token-file',
      tokenFile: path.isAbsolute(tokenFile) ? tokenFile : path.join(user.dir, tokenFile),
    };
  } else if (str(user.body.username)) {
    auth = { kind: 'basic', username: str(user.body.username), password: str(user.body.password) };
  }
  const label = auth.kind === 'none' ? (tls.cert ? 'client-certificate' : 'none') : auth.kind;
  const headers = staticHeaders(auth);
  return { source, paths: files, server, auth: label, credentials: async () => base(headers) };
}

/**
 * Finds credentials in controller-runtime's order: --kubeconfig, then $KUBECONFIG (a path list),
 * then the in-cluster service account, then ~/.kube/config. Never falls back to
 * localhost:8080: when nothing is found it says what it tried.
 */
export function resolveKubeconfig(opts: {
  flag: string | undefined;
  env: KubeconfigEnv;
  /** undefined: no home directory (a container user without a passwd entry and no $HOME). */
  homeDir: string | undefined;
  exists?: (p: string) => boolean;
  serviceAccountDir?: string;
  /** Environment an exec credential plugin inherits. */
  processEnv?: NodeJS.ProcessEnv;
}): KubeconfigResolution {
  const exists = opts.exists ?? existsSync;
  const saDir = opts.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const processEnv = opts.processEnv ?? {};
  if (opts.flag) {
    if (!exists(opts.flag)) throw new KubeconfigError(`--kubeconfig ${opts.flag}: file does not exist`);
    return fromMerged(readKubeconfigs([opts.flag]), 'flag', [opts.flag], processEnv);
  }
  if (opts.env.KUBECONFIG) {
    const files = opts.env.KUBECONFIG.split(path.delimiter).filter((p) => p !== '' && exists(p));
    if (files.length === 0) {
      throw new KubeconfigError(`$KUBECONFIG=${opts.env.KUBECONFIG}: none of its files exist`);
    }
    return fromMerged(readKubeconfigs(files), 'env', files, processEnv);
  }
  const host = opts.env.KUBERNETES_SERVICE_HOST;
  const port = opts.env.KUBERNETES_SERVICE_PORT;
  if (host && port && exists(path.join(saDir, 'token'))) {
    // The token file is re-read every minute: projected service-account tokens rotate.
    const server = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
    const headers = staticHeaders({ kind: 'token-file', tokenFile: path.join(saDir, 'token') });
    return {
      source: 'in-cluster',
      paths: [saDir],
      server,
      auth: 'token-file',
      async credentials() {
        let ca: Buffer;
        try {
          ca = readFileSync(path.join(saDir, 'ca.crt'));
        } catch (err) {
          throw new KubeconfigError(`in-cluster: ${path.join(saDir, 'ca.crt')}: ${(err as Error).message}`);
        }
        return { server: new URL(server), tls: { ca }, headers };
      },
    };
  }
  const home = opts.homeDir === undefined ? undefined : path.join(opts.homeDir, '.kube', 'config');
  if (home !== undefined && exists(home))
    return fromMerged(readKubeconfigs([home]), 'home', [home], processEnv);
  throw new KubeconfigError(
    'no kubeconfig found: tried --kubeconfig, $KUBECONFIG, the in-cluster service account ' +
      `(${saDir}) and ${home ?? '~/.kube/config (no home directory: $HOME unset and no passwd entry)'}; ` +
      'refusing to guess a server (no localhost:8080 fallback)',
  );
}

/**
 * The user's home directory, or undefined when there is none: os.homedir() throws (uv_os_homedir
 * ENOENT) for a container user such as 65532 that has no passwd entry when $HOME is unset.
 */
export function homeDirectory(): string | undefined {
  try {
    return os.homedir();
  } catch {
    return undefined;
  }
}
