import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { KubeConfig } from '@kubernetes/client-node';

/**
 * Where and how to reach an API server: the server URL, TLS material, and the auth headers of the
 * next request (which may change: token files rotate, exec plugins issue short-lived tokens).
 *
 * The controller builds these from a kubeconfig with its own small loader (kubeconfig.ts) instead of
 * @kubernetes/client-node's KubeConfig: loading that class pulls in the whole generated API client,
 * about 85 MiB of resident memory for a process whose working set is a few MiB. client-node is still
 * used, lazily, for the auth providers the loader does not implement (oidc, gcp, azure).
 */
export interface Credentials {
  server: URL;
  tls: { ca?: Buffer; cert?: Buffer; key?: Buffer; rejectUnauthorized?: boolean; servername?: string };
  /** Headers to add to the next request (Authorization). */
  headers(): Promise<Record<string, string>>;
}

/** How often a token file is re-read (client-go re-reads it every minute). */
const TOKEN_FILE_REFRESH_MS = 60_000;

export interface StaticAuth {
  kind: 'none' | 'token' | 'token-file' | 'basic';
  token?: string;
  tokenFile?: string;
  username?: string;
  password?: string;
}

/** A bearer token, a token file re-read every minute, basic auth, or nothing (client certs only). */
export function staticHeaders(
  auth: StaticAuth,
  now: () => number = () => performance.now(),
): () => Promise<Record<string, string>> {
  let cached: { token: string; at: number } | undefined;
  return async (): Promise<Record<string, string>> => {
    switch (auth.kind) {
      case 'token':
        return { Authorization: `Bearer ${auth.token}` };
      case 'token-file': {
        if (!cached || now() - cached.at >= TOKEN_FILE_REFRESH_MS) {
          cached = { token: readFileSync(auth.tokenFile!, 'utf8').trim(), at: now() };
        }
        return { Authorization: `Bearer ${cached.token}` };
      }
      case 'basic':
        return {
          Authorization: `Basic ${Buffer.from(`${auth.username}:${auth.password ?? ''}`).toString('base64')}`,
        };
      default:
        return {};
    }
  };
}

/** The `user.exec` stanza of a kubeconfig (client.authentication.k8s.io). */
export interface ExecConfig {
  apiVersion: string;
  command: string;
  args?: string[];
  env?: { name: string; value: string }[] | null;
  /** The directory of the kubeconfig that declared it (relative commands resolve against it). */
  baseDir?: string;
}

interface ExecStatus {
  token?: string;
  clientCertificateData?: string;
  clientKeyData?: string;
  expirationTimestamp?: string;
}

export class ExecCredentialError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ExecCredentialError';
  }
}

/**
 * Runs an exec credential plugin (e.g. `aws eks get-token`, `gke-gcloud-auth-plugin`) and caches its
 * token until shortly before `expirationTimestamp`, as client-go does.
 */
export class ExecCredentials {
  private cached: { status: ExecStatus; expiresAt: number | undefined } | undefined;
  private pending: Promise<ExecStatus> | undefined;

  constructor(
    private readonly exec: ExecConfig,
    /** Environment the plugin inherits (main passes the process's). */
    private readonly baseEnv: NodeJS.ProcessEnv,
    private readonly wallNow: () => number = Date.now,
  ) {}

  async status(): Promise<ExecStatus> {
    const c = this.cached;
    if (c && (c.expiresAt === undefined || this.wallNow() < c.expiresAt - 10_000)) return c.status;
    this.pending ??= this.run().finally(() => {
      this.pending = undefined;
    });
    return await this.pending;
  }

  async headers(): Promise<Record<string, string>> {
    const s = await this.status();
    return s.token ? { Authorization: `Bearer ${s.token}` } : {};
  }

  private run(): Promise<ExecStatus> {
    const env: NodeJS.ProcessEnv = { ...this.baseEnv };
    for (const e of this.exec.env ?? []) env[e.name] = e.value;
    env.KUBERNETES_EXEC_INFO = JSON.stringify({
      apiVersion: this.exec.apiVersion,
      kind: 'ExecCredential',
      spec: { interactive: false },
    });
    const cmd =
      this.exec.command.includes('/') && this.exec.baseDir && !this.exec.command.startsWith('/')
        ? `${this.exec.baseDir}/${this.exec.command}`
        : this.exec.command;
    return new Promise((resolve, reject) => {
      execFile(
        cmd,
        this.exec.args ?? [],
        { env, timeout: 30_000, maxBuffer: 1 << 20 },
        (err, stdout, stderr) => {
          if (err) {
            reject(
              new ExecCredentialError(
                `exec credential plugin ${cmd} failed: ${err.message}${stderr ? `: ${stderr.trim()}` : ''}`,
              ),
            );
            return;
          }
          let parsed: { kind?: string; status?: ExecStatus };
          try {
            parsed = JSON.parse(stdout) as typeof parsed;
          } catch {
            reject(
              new ExecCredentialError(
                `exec credential plugin ${cmd} did not print an ExecCredential as JSON`,
              ),
            );
            return;
          }
          const status = parsed.status;
          if (!status || (!status.token && !status.clientCertificateData)) {
            reject(
              new ExecCredentialError(
                `exec credential plugin ${cmd} returned no token or client certificate`,
              ),
            );
            return;
          }
          const exp = status.expirationTimestamp ? Date.parse(status.expirationTimestamp) : Number.NaN;
          this.cached = { status, expiresAt: Number.isNaN(exp) ? undefined : exp };
          resolve(status);
        },
      );
    });
  }
}

/** Credentials from a @kubernetes/client-node KubeConfig (tests, and auth providers we don't implement). */
export async function credentialsFromKubeConfig(kc: KubeConfig): Promise<Credentials> {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('kubeconfig has no current cluster');
  const probe: {
    ca?: Buffer;
    cert?: Buffer;
    key?: Buffer;
    rejectUnauthorized?: boolean;
    servername?: string;
  } = {};
  await kc.applyToHTTPSOptions(probe as never);
  const tls: Credentials['tls'] = {};
  if (probe.ca) tls.ca = probe.ca;
  if (probe.cert) tls.cert = probe.cert;
  if (probe.key) tls.key = probe.key;
  if (probe.rejectUnauthorized !== undefined) tls.rejectUnauthorized = probe.rejectUnauthorized;
  if (probe.servername) tls.servername = probe.servername;
  return {
    server: new URL(cluster.server),
    tls,
    async headers() {
      const opts: { headers: Record<string, unknown>; auth?: string } = { headers: {} };
      await kc.applyToHTTPSOptions(opts as never);
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries(opts.headers)) if (typeof v === 'string') out[k] = v;
      if (opts.auth) out.Authorization = `Basic ${Buffer.from(opts.auth).toString('base64')}`;
      return out;
    },
  };
}
