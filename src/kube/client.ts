import http from 'node:http';
import https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { formatDuration } from '../disruption/duration.js';
import { type Credentials, credentialsFromKubeConfig } from './credentials.js';

/** Content types the API server accepts for PATCH. */
export const PatchType = {
  json: 'application/json-patch+json',
  merge: 'application/merge-patch+json',
  strategic: 'application/strategic-merge-patch+json',
  apply: 'application/apply-patch+yaml',
} as const;
export type PatchContentType = (typeof PatchType)[keyof typeof PatchType];

export interface KubeRequest {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  /** Absolute API path, e.g. /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases */
  path: string;
  query?: Record<string, string | number | boolean | undefined>;
  body?: unknown;
  contentType?: string;
  /** Whole-request deadline in milliseconds (connect, headers and body). */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface KubeResponse<T = unknown> {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: T;
}

/** What the metrics layer learns about each request; never blocks the request. */
export interface RequestObservation {
  verb: string;
  resource: string;
  code: string;
  durationSeconds: number;
  /** HTTP method (GET, POST, ...) and the server's host:port, as client-go's rest_client_* label them. */
  method: string;
  host: string;
}
export type RequestObserver = (o: RequestObservation) => void;

/** A kube-apiserver Status, or the part of it we read. */
export interface KubeStatus {
  kind?: string;
  status?: string;
  message?: string;
  reason?: string;
  code?: number;
  details?: { retryAfterSeconds?: number; causes?: unknown[] };
}

/** An HTTP-level failure from the API server, carrying what callers decide on. */
export class KubeApiError extends Error {
  readonly status: number;
  readonly reason: string;
  /** Seconds the server asked us to wait (Retry-After header or Status details). */
  readonly retryAfterSeconds: number | undefined;
  constructor(status: number, body: unknown, headers: http.IncomingHttpHeaders, what: string) {
    const st = (typeof body === 'object' && body !== null ? body : {}) as KubeStatus;
    const reason = st.reason ?? http.STATUS_CODES[status] ?? 'Unknown';
    super(`${what}: ${status} ${reason}${st.message ? `: ${st.message}` : ''}`);
    this.name = 'KubeApiError';
    this.status = status;
    this.reason = reason;
    this.retryAfterSeconds = parseRetryAfter(headers['retry-after']) ?? st.details?.retryAfterSeconds;
  }
  get isConflict(): boolean {
    return this.status === 409;
  }
  get isNotFound(): boolean {
    return this.status === 404;
  }
  get isGone(): boolean {
    return this.status === 410;
  }
  get isTooManyRequests(): boolean {
    return this.status === 429;
  }
}

/** A transport failure: no HTTP status (refused, reset, timed out, aborted). */
export class KubeTransportError extends Error {
  readonly code: string;
  constructor(message: string, code: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'KubeTransportError';
    this.code = code;
  }
}

export function parseRetryAfter(value: string | string[] | undefined): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined || v === '') return undefined;
  const seconds = Number(v);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds;
  const date = Date.parse(v);
  if (Number.isNaN(date)) return undefined;
  return Math.max(0, (date - Date.now()) / 1000);
}

/** Derives Kubernetes verb and resource (with subresource) from a request, for metrics and logs. */
export function describeRequest(
  method: string,
  path: string,
  query?: KubeRequest['query'],
): {
  verb: string;
  resource: string;
} {
  const parts = path.split('/').filter(Boolean);
  // /api/v1/... or /apis/group/version/...
  let i = parts[0] === 'api' ? 2 : parts[0] === 'apis' ? 3 : parts.length;
  if (parts[i] === 'namespaces' && parts.length > i + 2) i += 2;
  const resource = parts[i] ?? 'unknown';
  const name = parts[i + 1];
  const sub = parts[i + 2];
  const full = sub ? `${resource}/${sub}` : resource;
  const m = method.toUpperCase();
  let verb: string;
  if (m === 'GET') verb = query?.watch ? 'watch' : name ? 'get' : 'list';
  else if (m === 'POST') verb = 'create';
  else if (m === 'PUT') verb = 'update';
  else if (m === 'PATCH') verb = 'patch';
  else if (m === 'DELETE') verb = name ? 'delete' : 'deletecollection';
  else verb = m.toLowerCase();
  return { verb, resource: full };
}

export interface KubeClientOptions {
  /** Called once per completed request (any status) and per transport failure. */
  observer?: RequestObserver;
  /** Default whole-request timeout for non-watch requests. */
  defaultTimeoutMs?: number;
  /** Upper bound of pooled sockets to the API server. */
  maxSockets?: number;
  userAgent?: string;
}

interface ConnectionSettings {
  base: URL;
  agent: http.Agent;
  tls: Pick<https.RequestOptions, 'ca' | 'cert' | 'key' | 'rejectUnauthorized' | 'servername'>;
}

const AUTH_REFRESH_MS = 30_000;

/**
 * A small HTTP client for kube-apiserver. Credentials come from our kubeconfig loader (or a
 * @kubernetes/client-node KubeConfig); this class owns the sockets so that watches, timeouts and
 * metrics are under our control.
 */
export class KubeClient {
  private readonly conn: ConnectionSettings;
  private authHeaders: Record<string, string> = {};
  private authFetchedAt = Number.NEGATIVE_INFINITY;
  private authPending: Promise<void> | undefined;
  private readonly observer: RequestObserver | undefined;
  private readonly defaultTimeoutMs: number;
  private readonly userAgent: string;

  private constructor(
    private readonly credentials: Credentials,
    conn: ConnectionSettings,
    opts: KubeClientOptions,
  ) {
    this.conn = conn;
    this.observer = opts.observer;
    this.defaultTimeoutMs = opts.defaultTimeoutMs ?? 30_000;
    this.userAgent = opts.userAgent ?? 'node-lifecycle-controller';
  }

  static async fromCredentials(credentials: Credentials, opts: KubeClientOptions = {}): Promise<KubeClient> {
    const base = credentials.server;
    const tls = credentials.tls;
    const agentOpts = { keepAlive: true, maxSockets: opts.maxSockets ?? 64, ...tls };
    const agent = base.protocol === 'https:' ? new https.Agent(agentOpts) : new http.Agent(agentOpts);
    const client = new KubeClient(credentials, { base, agent, tls }, opts);
    await client.refreshAuth();
    return client;
  }

  /** From a @kubernetes/client-node KubeConfig (tests, tools); the controller uses fromCredentials. */
  static async fromKubeConfig(kc: KubeConfig, opts: KubeClientOptions = {}): Promise<KubeClient> {
    return await KubeClient.fromCredentials(await credentialsFromKubeConfig(kc), opts);
  }

  get server(): string {
    return this.conn.base.toString();
  }

  /** Frees pooled sockets. In-flight requests are not interrupted. */
  close(): void {
    this.conn.agent.destroy();
  }

  private async refreshAuth(): Promise<void> {
    this.authHeaders = await this.credentials.headers();
    this.authFetchedAt = performance.now();
  }

  /** Credentials can rotate (projected service-account tokens, exec plugins): refresh periodically. */
  private async auth(): Promise<Record<string, string>> {
    if (performance.now() - this.authFetchedAt > AUTH_REFRESH_MS) {
      this.authPending ??= this.refreshAuth().finally(() => {
        this.authPending = undefined;
      });
      await this.authPending;
    }
    return this.authHeaders;
  }

  private url(path: string, query?: KubeRequest['query']): URL {
    const u = new URL(path, this.conn.base);
    // Keep a server path prefix (e.g. a proxy at https://host/k8s/clusters/x).
    if (this.conn.base.pathname !== '/' && !path.startsWith(this.conn.base.pathname)) {
      u.pathname = this.conn.base.pathname.replace(/\/$/, '') + path;
    }
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) u.searchParams.set(k, String(v));
    return u;
  }

  /**
   * Sends a request and resolves with the parsed response whatever its status. Rejects only with
   * KubeTransportError (no status at all).
   */
  async raw<T = unknown>(req: KubeRequest): Promise<KubeResponse<T>> {
    const { verb, resource } = describeRequest(req.method, req.path, req.query);
    const started = performance.now();
    try {
      const res = await this.send(req);
      const text = await readBody(res);
      let body: unknown = text;
      if (text && (res.headers['content-type'] ?? '').includes('json')) {
        try {
          body = JSON.parse(text);
        } catch {
          body = text;
        }
      }
      this.observe(req.method, verb, resource, String(res.statusCode ?? 0), started);
      return { status: res.statusCode ?? 0, headers: res.headers, body: body as T };
    } catch (err) {
      const e = toTransportError(err);
      this.observe(req.method, verb, resource, `<error:${e.code}>`, started);
      throw e;
    }
  }

  /** Like raw(), but a non-2xx status rejects with KubeApiError. */
  async request<T = unknown>(req: KubeRequest): Promise<T> {
    const res = await this.raw<T>(req);
    if (res.status < 200 || res.status >= 300) {
      throw new KubeApiError(res.status, res.body, res.headers, `${req.method} ${req.path}`);
    }
    return res.body;
  }

  /**
   * Opens a streaming GET (a watch). Resolves once headers arrive with the live response; the caller
   * reads and must eventually destroy it (or abort the signal). Non-2xx rejects with KubeApiError.
   */
  async stream(
    req: Omit<KubeRequest, 'method' | 'body'> & { connectTimeoutMs?: number },
  ): Promise<http.IncomingMessage> {
    const { verb, resource } = describeRequest('GET', req.path, req.query);
    const started = performance.now();
    let res: http.IncomingMessage;
    try {
      res = await this.send(
        { ...req, method: 'GET', timeoutMs: req.connectTimeoutMs ?? this.defaultTimeoutMs },
        true,
      );
    } catch (err) {
      const e = toTransportError(err);
      this.observe('GET', verb, resource, `<error:${e.code}>`, started);
      throw e;
    }
    const status = res.statusCode ?? 0;
    this.observe('GET', verb, resource, String(status), started);
    if (status < 200 || status >= 300) {
      const text = await readBody(res).catch(() => '');
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        /* not JSON */
      }
      throw new KubeApiError(status, body, res.headers, `GET ${req.path}`);
    }
    return res;
  }

  private observe(method: string, verb: string, resource: string, code: string, started: number): void {
    if (!this.observer) return;
    try {
      this.observer({
        verb,
        resource,
        code,
        durationSeconds: (performance.now() - started) / 1000,
        method,
        host: this.conn.base.host,
      });
    } catch {
      /* metrics must never break a request */
    }
  }

  /**
   * Sends the request and resolves at response headers. When `streaming` is set the deadline only
   * covers reaching the headers; otherwise it covers the whole body too.
   */
  private async send(req: KubeRequest, streaming = false): Promise<http.IncomingMessage> {
    const auth = await this.auth();
    const url = this.url(req.path, req.query);
    const payload =
      req.body === undefined ? undefined : typeof req.body === 'string' ? req.body : JSON.stringify(req.body);
    const headers: Record<string, string | number> = {
      Accept: 'application/json',
      'User-Agent': this.userAgent,
      ...auth,
    };
    if (payload !== undefined) {
      headers['Content-Type'] = req.contentType ?? 'application/json';
      headers['Content-Length'] = Buffer.byteLength(payload);
    }
    const timeoutMs = req.timeoutMs ?? this.defaultTimeoutMs;
    const mod = url.protocol === 'https:' ? https : http;
    return await new Promise<http.IncomingMessage>((resolve, reject) => {
      let settled = false;
      const r = mod.request(url, { method: req.method, headers, agent: this.conn.agent, ...this.conn.tls });
      const onAbort = () => {
        r.destroy(new KubeTransportError(`${req.method} ${req.path}: aborted`, 'ABORTED'));
      };
      const timer = setTimeout(() => {
        r.destroy(
          new KubeTransportError(
            `${req.method} ${req.path}: timed out after ${formatDuration(timeoutMs)}`,
            'TIMEOUT',
          ),
        );
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        req.signal?.removeEventListener('abort', onAbort);
      };
      if (req.signal?.aborted) onAbort();
      else req.signal?.addEventListener('abort', onAbort, { once: true });
      r.on('error', (err) => {
        cleanup();
        if (!settled) {
          settled = true;
          reject(err);
        }
      });
      r.on('response', (res) => {
        settled = true;
        if (streaming) {
          clearTimeout(timer);
          // Aborting the signal later must still tear the stream down.
          if (req.signal) {
            const abortStream = () => res.destroy(new KubeTransportError('watch aborted', 'ABORTED'));
            req.signal.addEventListener('abort', abortStream, { once: true });
            res.once('close', () => req.signal?.removeEventListener('abort', abortStream));
          }
          res.once('close', cleanup);
        } else {
          res.once('close', cleanup);
          res.once('end', cleanup);
        }
        resolve(res);
      });
      r.end(payload);
    });
  }
}

function readBody(res: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (c: Buffer) => chunks.push(c));
    res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    res.on('error', reject);
    res.on('aborted', () => reject(new KubeTransportError('response aborted', 'ECONNRESET')));
  });
}

function toTransportError(err: unknown): KubeTransportError {
  if (err instanceof KubeTransportError) return err;
  const e = err as NodeJS.ErrnoException;
  return new KubeTransportError(e?.message ?? String(err), e?.code ?? 'UNKNOWN', { cause: err });
}

/** Paths of the resources this project touches. */
export const paths = {
  nodes: () => '/api/v1/nodes',
  node: (name: string) => `/api/v1/nodes/${encodeURIComponent(name)}`,
  nodeStatus: (name: string) => `/api/v1/nodes/${encodeURIComponent(name)}/status`,
  pods: (ns?: string) => (ns ? `/api/v1/namespaces/${encodeURIComponent(ns)}/pods` : '/api/v1/pods'),
  pod: (ns: string, name: string) =>
    `/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(name)}`,
  podStatus: (ns: string, name: string) =>
    `/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(name)}/status`,
  leases: (ns: string) => `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/leases`,
  lease: (ns: string, name: string) =>
    `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/leases/${encodeURIComponent(name)}`,
  events: (ns: string) => `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/events`,
  coreEvents: (ns: string) => `/api/v1/namespaces/${encodeURIComponent(ns)}/events`,
  namespaces: () => '/api/v1/namespaces',
} as const;
