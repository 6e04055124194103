import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { load as loadYaml, YAMLException } from 'js-yaml';
import type { Logger } from '../log/logger.js';
import {
  type AuthSource,
  CertKeyFiles,
  type Credentials,
  credentialsFromKubeConfig,
  ExecCredentials,
  makeCredentials,
  type StaticAuth,
  staticAuthSource,
  withClientCert,
} from './credentials.js';
import {
  ProxyConfigError,
  type ProxyEnv,
  parseProxyUrl,
  proxyFromEnvironment,
  redactProxy,
} from './proxy.js';

export type KubeconfigSourceKind = 'flag' | 'env' | 'in-cluster' | 'home';

export interface KubeconfigResolution {
  source: KubeconfigSourceKind;
  /** Files loaded (flag/env/home) or the service-account directory (in-cluster). */
  paths: string[];
  server: string;
  /** How the user authenticates: token, token-file, client-certificate, exec, basic, auth-provider:<name>, none. */
  auth: string;
  /** The proxy in use (password masked) and where it came from, or undefined (direct). */
  proxy: { url: string; from: string } | undefined;
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
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new KubeconfigError(`kubeconfig ${file}: cannot read it: ${(err as Error).message}`);
    }
    let doc: Dict;
    try {
      doc = asDict(loadYaml(text));
    } catch (err) {
      throw new KubeconfigError(`kubeconfig ${file}: not valid YAML: ${yamlProblem(err)}`);
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

/** A YAML parse error on one line (js-yaml's message adds a multi-line snippet of the source). */
function yamlProblem(err: unknown): string {
  if (!(err instanceof YAMLException)) return (err as Error).message.split('\n')[0] ?? '';
  const at = err.mark ? ` at line ${err.mark.line + 1}, column ${err.mark.column + 1}` : '';
  return `${err.reason}${at}`;
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

/** Loads @kubernetes/client-node (an optional dependency: the container image leaves it out). */
export type ClientNodeLoader = () => Promise<typeof import('@kubernetes/client-node')>;

interface LoadOptions {
  processEnv: NodeJS.ProcessEnv;
  proxyEnv: ProxyEnv;
  logger: Logger | undefined;
  loadClientNode: ClientNodeLoader;
}

/** kubeconfig proxy-url wins; else the environment (HTTPS_PROXY, NO_PROXY, ...) as Go reads it. */
function chooseProxy(
  server: string,
  proxyUrl: string | undefined,
  where: string,
  env: ProxyEnv,
): { url: URL; from: string } | undefined {
  try {
    if (proxyUrl)
      return { url: parseProxyUrl(proxyUrl, `${where}: proxy-url`), from: 'kubeconfig proxy-url' };
    return proxyFromEnvironment(env, new URL(server));
  } catch (err) {
    if (err instanceof ProxyConfigError) throw new KubeconfigError(err.message);
    throw err;
  }
}

/** What the current context names: its cluster (with a server that is a URL) and its user. */
function currentContext(
  merged: MergedConfig,
  where: string,
): { cluster: Named; server: string; user: Named } {
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
  try {
    new URL(server);
  } catch {
    throw new KubeconfigError(
      `${where}: cluster ${JSON.stringify(cluster.name)}: server ${JSON.stringify(server)} is not a URL`,
    );
  }
  const userName = str(ctx.body.user);
  const user: Named = (userName ? merged.users.get(userName) : undefined) ?? {
    name: userName ?? '',
    body: {},
    dir: cluster.dir,
  };
  return { cluster, server, user };
}

/** TLS settings of the cluster, and the user's client certificate (files reloaded when they change). */
function tlsOf(
  cluster: Named,
  user: Named,
  where: string,
  o: LoadOptions,
): {
  tls: Credentials['tls'];
  hasClientCert: boolean;
  clientCert: () => CertKeyFiles | { cert: Buffer; key: Buffer } | undefined;
} {
  const tls: Credentials['tls'] = {};
  const ca = fileOrData(cluster, 'certificate-authority', 'certificate-authority-data', 'cluster');
  if (ca?.data) tls.ca = ca.data;
  if (cluster.body['insecure-skip-tls-verify'] === true) tls.rejectUnauthorized = false;
  const sni = str(cluster.body['tls-server-name']);
  if (sni) tls.servername = sni;
  const cert = fileOrData(user, 'client-certificate', 'client-certificate-data', 'user');
  const key = fileOrData(user, 'client-key', 'client-key-data', 'user');
  if (!cert !== !key) {
    throw new KubeconfigError(
      `${where}: user ${JSON.stringify(user.name)} has a client ${cert ? 'certificate without a key' : 'key without a certificate'}`,
    );
  }
  // Files are reloaded when they change (short-lived certificates); inline data is fixed.
  const clientCert = (): CertKeyFiles | { cert: Buffer; key: Buffer } | undefined => {
    if (!cert?.data || !key?.data) return undefined;
    if (cert.file && key.file) {
      return new CertKeyFiles(cert.file, key.file, {
        logger: o.logger?.with({ component: 'kube-credentials' }),
      });
    }
    return { cert: cert.data, key: key.data };
  };
  return { tls, hasClientCert: cert !== undefined, clientCert };
}

function fromMerged(
  merged: MergedConfig,
  source: KubeconfigSourceKind,
  files: string[],
  o: LoadOptions,
): KubeconfigResolution {
  const where = `kubeconfig from ${source} (${files.join(', ')})`;
  const { cluster, server, user } = currentContext(merged, where);
  const proxy = chooseProxy(
    server,
    str(cluster.body['proxy-url']),
    `${where}: cluster ${JSON.stringify(cluster.name)}`,
    o.proxyEnv,
  );
  const { tls, hasClientCert, clientCert } = tlsOf(cluster, user, where, o);
  const base = (auth: AuthSource): Credentials => {
    const c = clientCert();
    return makeCredentials(new URL(server), tls, c ? withClientCert(auth, c) : auth, proxy?.url);
  };
  const resolved = {
    source,
    paths: files,
    server,
    proxy: proxy ? { url: redactProxy(proxy.url), from: proxy.from } : undefined,
  };
  const authProvider = str(asDict(user.body['auth-provider']).name);
  if (authProvider) {
    return {
      ...resolved,
      auth: `auth-provider:${authProvider}`,
      credentials: () => authProviderCredentials(authProvider, user, files, where, o, proxy?.url),
    };
  }
  const exec = asDict(user.body.exec);
  if (str(exec.command)) {
    const plugin = execPlugin(exec, user, o);
    return {
      ...resolved,
      auth: 'exec',
      async credentials() {
        // Run it once now: a plugin that cannot produce credentials stops the start with its error.
        await plugin.auth();
        return base(plugin);
      },
    };
  }
  const auth = staticAuthOf(user);
  return {
    ...resolved,
    auth: auth.kind === 'none' ? (hasClientCert ? 'client-certificate' : 'none') : auth.kind,
    credentials: async () =>
      base(staticAuthSource(auth, { logger: o.logger?.with({ component: 'kube-credentials' }) })),
  };
}

/** oidc, gcp, azure...: @kubernetes/client-node does it (loaded only for such users). */
async function authProviderCredentials(
  providerName: string,
  user: Named,
  files: string[],
  where: string,
  o: LoadOptions,
  proxy: URL | undefined,
): Promise<Credentials> {
  const { KubeConfig } = await o.loadClientNode().catch((err: unknown) => {
    if ((err as { code?: unknown }).code !== 'ERR_MODULE_NOT_FOUND') throw err;
    throw new KubeconfigError(
      `${where}: user ${JSON.stringify(user.name)} uses auth-provider ${JSON.stringify(providerName)}, ` +
        'which needs the optional package @kubernetes/client-node, left out of this build (the ' +
        'container image leaves it out: in a cluster the controller uses its ServiceAccount). Use an ' +
        'exec credential plugin (what client-go replaced auth providers with), or install the package',
    );
  });
  const kc = new KubeConfig();
  files.forEach((f, i) => {
    if (i === 0) kc.loadFromFile(f);
    else {
      const extra = new KubeConfig();
      extra.loadFromFile(f);
      kc.mergeConfig(extra, true);
    }
  });
  const creds = await credentialsFromKubeConfig(kc);
  // client-node reads proxy-url only; the environment's proxy is ours to apply.
  if (proxy) creds.proxy = proxy;
  return creds;
}

function execPlugin(exec: Dict, user: Named, o: LoadOptions): ExecCredentials {
  return new ExecCredentials(
    {
      apiVersion: str(exec.apiVersion) ?? 'client.authentication.k8s.io/v1',
      command: str(exec.command)!,
      args: Array.isArray(exec.args) ? exec.args.map(String) : [],
      env: Array.isArray(exec.env) ? (exec.env as { name: string; value: string }[]) : [],
      baseDir: user.dir,
    },
    o.processEnv,
    { logger: o.logger?.with({ component: 'kube-credentials' }) },
  );
}

/** A token, a token file (relative to the kubeconfig that names it), basic auth, or none. */
function staticAuthOf(user: Named): StaticAuth {
  const token = str(user.body.token);
  const tokenFile = str(user.body.tokenFile);
  if (token) return { kind: 'token', token };
  if (tokenFile) {
    return {
      kind: 'token-file',
      tokenFile: path.isAbsolute(tokenFile) ? tokenFile : path.join(user.dir, tokenFile),
    };
  }
  if (str(user.body.username)) {
    return { kind: 'basic', username: str(user.body.username), password: str(user.body.password) };
  }
  return { kind: 'none' };
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
  /** HTTPS_PROXY, NO_PROXY, ... (read by main; a kubeconfig proxy-url wins over them). */
  proxyEnv?: ProxyEnv;
  /** Where credential reloads (token file, certificate files, exec plugin) are logged. */
  logger?: Logger;
  /** How @kubernetes/client-node is loaded for auth providers (tests replace it). */
  loadClientNode?: ClientNodeLoader;
}): KubeconfigResolution {
  const exists = opts.exists ?? existsSync;
  const saDir = opts.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const load: LoadOptions = {
    processEnv: opts.processEnv ?? {},
    proxyEnv: opts.proxyEnv ?? {},
    logger: opts.logger,
    loadClientNode: opts.loadClientNode ?? (() => import('@kubernetes/client-node')),
  };
  if (opts.flag) {
    if (!exists(opts.flag)) throw new KubeconfigError(`--kubeconfig ${opts.flag}: file does not exist`);
    return fromMerged(readKubeconfigs([opts.flag]), 'flag', [opts.flag], load);
  }
  if (opts.env.KUBECONFIG) {
    const files = opts.env.KUBECONFIG.split(path.delimiter).filter((p) => p !== '' && exists(p));
    if (files.length === 0) {
      throw new KubeconfigError(`$KUBECONFIG=${opts.env.KUBECONFIG}: none of its files exist`);
    }
    return fromMerged(readKubeconfigs(files), 'env', files, load);
  }
  const host = opts.env.KUBERNETES_SERVICE_HOST;
  const port = opts.env.KUBERNETES_SERVICE_PORT;
  if (host && port && exists(path.join(saDir, 'token'))) {
    // The token file is re-read every minute, and at once on a 401: projected service-account
    // tokens rotate.
    const server = `https://${host.includes(':') ? `[${host}]` : host}:${port}`;
    const proxy = chooseProxy(server, undefined, 'in-cluster', load.proxyEnv);
    return {
      source: 'in-cluster',
      paths: [saDir],
      server,
      auth: 'token-file',
      proxy: proxy ? { url: redactProxy(proxy.url), from: proxy.from } : undefined,
      async credentials() {
        let ca: Buffer;
        try {
          ca = readFileSync(path.join(saDir, 'ca.crt'));
        } catch (err) {
          throw new KubeconfigError(`in-cluster: ${path.join(saDir, 'ca.crt')}: ${(err as Error).message}`);
        }
        const auth = staticAuthSource(
          { kind: 'token-file', tokenFile: path.join(saDir, 'token') },
          { logger: load.logger?.with({ component: 'kube-credentials' }) },
        );
        return makeCredentials(new URL(server), { ca }, auth, proxy?.url);
      },
    };
  }
  const home = opts.homeDir === undefined ? undefined : path.join(opts.homeDir, '.kube', 'config');
  if (home !== undefined && exists(home)) return fromMerged(readKubeconfigs([home]), 'home', [home], load);
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
