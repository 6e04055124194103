import { execFile } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import tls from 'node:tls';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from '../log/logger.js';
import { parseProxyUrl } from './proxy.js';

/**
 * Where and how to reach an API server: the server URL, the TLS trust, an optional proxy, and the
 * authentication of the next request (which changes: token files rotate, exec plugins issue
 * short-lived tokens and certificates, cert-manager or Vault rewrite client certificate files).
 *
 * The controller builds these from a kubeconfig with its own small loader (kubeconfig.ts) instead of
 * @kubernetes/client-node's KubeConfig: loading that class pulls in the whole generated API client,
 * about 85 MiB of resident memory for a process whose working set is a few MiB. client-node is still
 * used, lazily, for the auth providers the loader does not implement (oidc, gcp, azure).
 */
export interface Credentials extends AuthSource {
  server: URL;
  /** Trust and server name. The client certificate, if any, comes with each auth(). */
  tls: { ca?: Buffer; rejectUnauthorized?: boolean; servername?: string };
  /** The proxy to reach `server` through (kubeconfig proxy-url, or the environment's), if any. */
  proxy?: URL;
}

/** What authenticates one request: headers, and the client certificate for new TLS connections. */
export interface ClientAuth {
  headers: Record<string, string>;
  /** PEM client certificate and key; the same Buffer objects for as long as the pair is unchanged. */
  cert?: Buffer;
  key?: Buffer;
}

/**
 * A source of ClientAuth. `auth()` is called for every request (sources cache; an exec plugin run is
 * shared by concurrent callers) so nothing is ever sent past the expiry its source knows of.
 */
export interface AuthSource {
  auth(): Promise<ClientAuth>;
  /**
   * The server answered 401 Unauthorized to a request sent with `used`. The source drops `used` if it
   * is still its current credential (re-runs the exec plugin, re-reads the token file or the
   * certificate files, rate-limited) and resolves true when it now holds different credentials, so
   * that one retry is worthwhile.
   */
  unauthorized(used: ClientAuth): Promise<boolean>;
  /** A TLS handshake or connection failed: check client certificate files now (rate-limited). */
  connectionFailed?(): void;
}

/** Credentials for `server` from an auth source (methods bound: sources may be class instances). */
export function makeCredentials(
  server: URL,
  tlsOpts: Credentials['tls'],
  source: AuthSource,
  proxy?: URL,
): Credentials {
  const creds: Credentials = {
    server,
    tls: tlsOpts,
    auth: () => source.auth(),
    unauthorized: (used) => source.unauthorized(used),
    connectionFailed: () => source.connectionFailed?.(),
  };
  if (proxy) creds.proxy = proxy;
  return creds;
}

/** A credential that cannot be produced (plugin failed, token file unreadable, bad cert pair). */
export class CredentialError extends Error {
  readonly code: string;
  constructor(message: string, code = 'CREDENTIALS') {
    super(message);
    this.name = 'CredentialError';
    this.code = code;
  }
}

export class ExecCredentialError extends CredentialError {
  constructor(message: string) {
    super(message, 'EXEC_CREDENTIAL');
    this.name = 'ExecCredentialError';
  }
}

const monotonic = () => performance.now();

/** How often a token file is re-read (client-go re-reads it every minute). */
export const TOKEN_FILE_REFRESH_MS = 60_000;
/** Least time between two re-reads forced by a 401 or a TLS failure. */
export const FORCED_RELOAD_MIN_MS = 1_000;
/** How often client certificate files are checked for a change (a stat of each). */
export const CERT_FILE_CHECK_MS = 5_000;

const bearer = (token: string): Record<string, string> => ({ Authorization: `Bearer ${token}` });

/** A fixed set of headers (a kubeconfig token, basic auth, or none): a 401 cannot be recovered. */
export function staticAuth(headers: Record<string, string>): AuthSource {
  const auth: ClientAuth = { headers };
  return {
    auth: async () => auth,
    unauthorized: async () => false,
  };
}

export interface StaticAuth {
  kind: 'none' | 'token' | 'token-file' | 'basic';
  token?: string;
  tokenFile?: string;
  username?: string;
  password?: string;
}

/** A bearer token, a token file (re-read every minute and on a 401), basic auth, or nothing. */
export function staticAuthSource(
  auth: StaticAuth,
  opts: { now?: () => number; logger?: Logger } = {},
): AuthSource {
  switch (auth.kind) {
    case 'token':
      return staticAuth(bearer(auth.token!));
    case 'token-file':
      return new TokenFile(auth.tokenFile!, opts);
    case 'basic':
      return staticAuth({
        Authorization: `Basic ${Buffer.from(`${auth.username}:${auth.password ?? ''}`).toString('base64')}`,
      });
    default:
      return staticAuth({});
  }
}

/**
 * A bearer token file (projected service-account tokens rotate): re-read every minute as client-go
 * does, and at once when the server answers 401 with the token we sent (at most once a second). A
 * failed re-read keeps the previous token and tries again on a later request.
 */
export class TokenFile implements AuthSource {
  private current: ClientAuth | undefined;
  private readAt = Number.NEGATIVE_INFINITY;
  private attemptAt = Number.NEGATIVE_INFINITY;
  private forcedAt = Number.NEGATIVE_INFINITY;
  private readonly now: () => number;

  constructor(
    readonly path: string,
    private readonly opts: { now?: () => number; logger?: Logger; read?: (p: string) => string } = {},
  ) {
    this.now = opts.now ?? monotonic;
  }

  private reload(): void {
    const now = this.now();
    this.attemptAt = now;
    let token: string;
    try {
      token = (this.opts.read ?? ((p) => readFileSync(p, 'utf8')))(this.path).trim();
    } catch (err) {
      if (!this.current) throw new CredentialError(`token file ${this.path}: ${(err as Error).message}`);
      this.opts.logger?.warn('Cannot re-read the token file; using the previous token', {
        path: this.path,
        err,
      });
      return;
    }
    this.readAt = now;
    if (this.current?.headers.Authorization !== `Bearer ${token}`) this.current = { headers: bearer(token) };
  }

  async auth(): Promise<ClientAuth> {
    const now = this.now();
    if (
      !this.current ||
      (now - this.readAt >= TOKEN_FILE_REFRESH_MS && now - this.attemptAt >= FORCED_RELOAD_MIN_MS)
    ) {
      this.reload();
    }
    return this.current!;
  }

  async unauthorized(used: ClientAuth): Promise<boolean> {
    if (this.current && this.current !== used) return true; // re-read since that request left
    const now = this.now();
    if (now - this.forcedAt < FORCED_RELOAD_MIN_MS) return false;
    this.forcedAt = now;
    const before = this.current;
    this.reload();
    if (this.current !== before) {
      this.opts.logger?.info('Re-read the token file after 401 Unauthorized: new token', { path: this.path });
      return true;
    }
    return false;
  }
}

interface FileStamp {
  ino: number;
  size: number;
  mtimeMs: number;
  ctimeMs: number;
}
const stamp = (p: string): FileStamp => {
  const s = statSync(p);
  return { ino: s.ino, size: s.size, mtimeMs: s.mtimeMs, ctimeMs: s.ctimeMs };
};
const sameStamp = (a: FileStamp, b: FileStamp) =>
  a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs && a.ctimeMs === b.ctimeMs;

/**
 * A client certificate and key from files, reloaded when either changes (inode, size, mtime or
 * ctime; checked with a stat at most every 5 s, and at once, at most once a second, after a 401 or a
 * TLS failure). A new pair is used only once it loads as a matching pair: a half-written rotation
 * (new certificate, old key) keeps the previous pair until the next check. Each change yields new
 * Buffer objects, so the client knows to open new connections with them.
 *
 * client-go re-reads such files every 5 minutes and then closes every connection; here a change is
 * seen within seconds, new connections use the new pair, and open ones (watches) are left to finish.
 */
export class CertKeyFiles {
  private pair: { cert: Buffer; key: Buffer } | undefined;
  private stamps: [FileStamp, FileStamp] | undefined;
  private checkedAt = Number.NEGATIVE_INFINITY;
  private forcedAt = Number.NEGATIVE_INFINITY;
  private readonly now: () => number;

  constructor(
    readonly certPath: string,
    readonly keyPath: string,
    private readonly opts: { now?: () => number; logger?: Logger } = {},
  ) {
    this.now = opts.now ?? monotonic;
    this.load(true);
  }

  /** Loads the files; returns whether the pair changed. Throws only when there is no pair yet. */
  private load(initial = false): boolean {
    this.checkedAt = this.now();
    let stamps: [FileStamp, FileStamp];
    try {
      stamps = [stamp(this.certPath), stamp(this.keyPath)];
    } catch (err) {
      if (initial) throw new CredentialError(`client certificate files: ${(err as Error).message}`);
      this.opts.logger?.warn('Cannot stat the client certificate files; keeping the current pair', { err });
      return false;
    }
    if (this.stamps && sameStamp(stamps[0], this.stamps[0]) && sameStamp(stamps[1], this.stamps[1])) {
      return false;
    }
    let cert: Buffer;
    let key: Buffer;
    try {
      cert = readFileSync(this.certPath);
      key = readFileSync(this.keyPath);
      // Refuse a certificate and key that do not belong together (a rotation caught half-way).
      tls.createSecureContext({ cert, key });
    } catch (err) {
      const message = `client certificate ${this.certPath} and key ${this.keyPath}: ${(err as Error).message}`;
      if (initial) throw new CredentialError(message);
      this.opts.logger?.warn(
        'Client certificate files changed but do not load as a pair; keeping the current pair',
        {
          err: message,
        },
      );
      return false;
    }
    this.stamps = stamps;
    if (this.pair?.cert.equals(cert) && this.pair.key.equals(key)) return false;
    const changed = this.pair !== undefined;
    this.pair = { cert, key };
    if (changed) this.opts.logger?.info('Client certificate reloaded', { cert: this.certPath });
    return changed;
  }

  /** The current pair (re-checked when the last check is 5 s old). */
  current(): { cert: Buffer; key: Buffer } {
    if (this.now() - this.checkedAt >= CERT_FILE_CHECK_MS) this.load();
    return this.pair!;
  }

  /** Checks now (at most once a second); returns whether the pair changed. */
  recheck(): boolean {
    const now = this.now();
    if (now - this.forcedAt < FORCED_RELOAD_MIN_MS) return false;
    this.forcedAt = now;
    return this.load();
  }
}

/** Adds a client certificate (fixed, or reloaded from files) to a source's headers. */
export function withClientCert(
  source: AuthSource,
  cert: { cert: Buffer; key: Buffer } | CertKeyFiles,
): AuthSource {
  const pair = () => (cert instanceof CertKeyFiles ? cert.current() : cert);
  const last = new WeakMap<ClientAuth, ClientAuth>();
  return {
    async auth() {
      const inner = await source.auth();
      const p = pair();
      // An exec plugin's own certificate wins over the kubeconfig's.
      if (inner.cert) return inner;
      // Same inner auth and same pair: the same object (the client compares by identity).
      const prev = last.get(inner);
      if (prev && prev.cert === p.cert && prev.key === p.key) return prev;
      const out = { ...inner, cert: p.cert, key: p.key };
      last.set(inner, out);
      return out;
    },
    async unauthorized(used) {
      const rotated = cert instanceof CertKeyFiles && (cert.recheck() || cert.current().cert !== used.cert);
      const inner = await source.unauthorized(used);
      return rotated || inner;
    },
    connectionFailed() {
      if (cert instanceof CertKeyFiles) cert.recheck();
      source.connectionFailed?.();
    },
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

export interface ExecStatus {
  token?: string;
  clientCertificateData?: string;
  clientKeyData?: string;
  expirationTimestamp?: string;
}

/** Refresh this long before expirationTimestamp: 10 s, or a tenth of a shorter lifetime. */
export function expiryMarginMs(lifetimeMs: number): number {
  return Math.min(10_000, Math.max(0, lifetimeMs) / 10);
}

/**
 * Runs an exec credential plugin (e.g. `aws eks get-token`, `gke-gcloud-auth-plugin`) and caches
 * what it returns, as client-go's exec authenticator does:
 * - until shortly before `expirationTimestamp` (converted to our monotonic clock when received; we
 *   refresh a small margin early, client-go exactly at expiry), or, without one, until a 401;
 * - on a 401 the plugin runs again, once per failing credential (concurrent 401s for the same
 *   credential share one run; a request that used an older credential just retries with the new
 *   one), and the client retries the request once (client-go does not retry);
 * - concurrent callers share one run; a caller stops waiting at its own request deadline while the
 *   run goes on and its result serves later requests;
 * - a certificate and key it returns are used for new TLS connections, and replaced on every run
 *   that returns different ones.
 */
export class ExecCredentials implements AuthSource {
  private cached: { auth: ClientAuth; refreshAt: number | undefined } | undefined;
  private pending: Promise<ClientAuth> | undefined;
  private readonly wallNow: () => number;
  private readonly now: () => number;
  private readonly logger: Logger | undefined;
  /** Plugin runs so far (started). */
  runs = 0;

  constructor(
    private readonly exec: ExecConfig,
    /** Environment the plugin inherits (main passes the process's). */
    private readonly baseEnv: NodeJS.ProcessEnv,
    opts: { wallNow?: () => number; now?: () => number; logger?: Logger } = {},
  ) {
    this.wallNow = opts.wallNow ?? Date.now;
    this.now = opts.now ?? monotonic;
    this.logger = opts.logger;
  }

  async auth(): Promise<ClientAuth> {
    const c = this.cached;
    if (c && (c.refreshAt === undefined || this.now() < c.refreshAt)) return c.auth;
    return await this.refresh();
  }

  private refresh(): Promise<ClientAuth> {
    this.pending ??= this.run().finally(() => {
      this.pending = undefined;
    });
    return this.pending;
  }

  async unauthorized(used: ClientAuth): Promise<boolean> {
    if (this.pending) return !sameAuth(await this.pending, used);
    if (this.cached && this.cached.auth !== used) return !sameAuth(this.cached.auth, used);
    // The credential we hold failed: run the plugin again (once for this credential).
    this.cached = undefined;
    this.logger?.info('Exec credential plugin: 401 Unauthorized, running the plugin again', {
      command: this.exec.command,
    });
    return !sameAuth(await this.refresh(), used);
  }

  private async run(): Promise<ClientAuth> {
    this.runs++;
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
    const stdout = await new Promise<string>((resolve, reject) => {
      execFile(
        cmd,
        this.exec.args ?? [],
        { env, timeout: 30_000, maxBuffer: 1 << 20 },
        (err, stdout, stderr) => {
          if (!err) resolve(stdout);
          else {
            const detail = `${err.message}${stderr ? `: ${stderr.trim()}` : ''}`;
            reject(new ExecCredentialError(`exec credential plugin ${cmd} failed: ${detail}`));
          }
        },
      );
    });
    const status = execStatusOf(stdout, cmd);
    const auth: ClientAuth = { headers: status.token ? bearer(status.token) : {} };
    if (status.clientCertificateData && status.clientKeyData) {
      Object.assign(auth, this.clientCertOf(status.clientCertificateData, status.clientKeyData, cmd));
    }
    const refreshAt = this.refreshAtOf(status.expirationTimestamp, cmd);
    this.cached = { auth, refreshAt };
    return auth;
  }

  /** The plugin's certificate and key; the previous Buffers when the pair did not change (connections stay reusable). */
  private clientCertOf(certData: string, keyData: string, cmd: string): { cert: Buffer; key: Buffer } {
    const prev = this.cached?.auth;
    const cert = Buffer.from(certData);
    const key = Buffer.from(keyData);
    if (prev?.cert?.equals(cert) && prev.key?.equals(key)) return { cert: prev.cert, key: prev.key };
    try {
      tls.createSecureContext({ cert, key });
    } catch (e) {
      throw new ExecCredentialError(
        `exec credential plugin ${cmd} returned a client certificate and key that do not load: ${(e as Error).message}`,
      );
    }
    return { cert, key };
  }

  /** When to run the plugin again (monotonic), from its expirationTimestamp; undefined: never on time. */
  private refreshAtOf(expirationTimestamp: string | undefined, cmd: string): number | undefined {
    if (!expirationTimestamp) return undefined;
    const exp = Date.parse(expirationTimestamp);
    if (Number.isNaN(exp)) {
      throw new ExecCredentialError(
        `exec credential plugin ${cmd} returned an unparseable expirationTimestamp ${JSON.stringify(expirationTimestamp)}`,
      );
    }
    // Remote (wall) expiry -> our monotonic clock, once, now.
    const lifetime = exp - this.wallNow();
    return this.now() + lifetime - expiryMarginMs(lifetime);
  }
}

/** The status of the ExecCredential a plugin printed: a token or a certificate with its key. */
export function execStatusOf(stdout: string, cmd: string): ExecStatus {
  let parsed: { kind?: string; status?: ExecStatus };
  try {
    parsed = JSON.parse(stdout) as typeof parsed;
  } catch {
    throw new ExecCredentialError(`exec credential plugin ${cmd} did not print an ExecCredential as JSON`);
  }
  const status = parsed.status;
  if (!status || (!status.token && !status.clientCertificateData)) {
    throw new ExecCredentialError(`exec credential plugin ${cmd} returned no token or client certificate`);
  }
  if (!status.clientCertificateData !== !status.clientKeyData) {
    throw new ExecCredentialError(
      `exec credential plugin ${cmd} returned a client certificate without its key, or a key without its certificate`,
    );
  }
  return status;
}

function sameAuth(a: ClientAuth, b: ClientAuth): boolean {
  if (a === b) return true;
  if (a.headers.Authorization !== b.headers.Authorization) return false;
  const eq = (x?: Buffer, y?: Buffer) => (x === undefined ? y === undefined : y !== undefined && x.equals(y));
  return eq(a.cert, b.cert) && eq(a.key, b.key);
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
  const tlsOpts: Credentials['tls'] = {};
  if (probe.ca) tlsOpts.ca = probe.ca;
  if (probe.rejectUnauthorized !== undefined) tlsOpts.rejectUnauthorized = probe.rejectUnauthorized;
  if (probe.servername) tlsOpts.servername = probe.servername;
  const cert = probe.cert && probe.key ? { cert: probe.cert, key: probe.key } : undefined;
  let last: ClientAuth | undefined;
  const source: AuthSource = {
    async auth() {
      const opts: { headers: Record<string, unknown>; auth?: string } = { headers: {} };
      await kc.applyToHTTPSOptions(opts as never);
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(opts.headers)) if (typeof v === 'string') headers[k] = v;
      if (opts.auth) headers.Authorization = `Basic ${Buffer.from(opts.auth).toString('base64')}`;
      if (last && last.headers.Authorization === headers.Authorization) return last;
      last = { headers, ...cert };
      return last;
    },
    // client-node's auth providers refresh on expiry themselves; nothing to re-run on a 401.
    unauthorized: async () => false,
  };
  const proxy = cluster.proxyUrl
    ? parseProxyUrl(cluster.proxyUrl, `cluster ${cluster.name} proxy-url`)
    : undefined;
  return makeCredentials(new URL(cluster.server), tlsOpts, source, proxy);
}
