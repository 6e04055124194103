import http from 'node:http';
import https from 'node:https';
import type net from 'node:net';
import type stream from 'node:stream';
import tls from 'node:tls';
import type { KubeConfig } from '@kubernetes/client-node';
import { timerDelay } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import { COMPONENT_NAME } from '../names/index.js';
import { type ClientAuth, type Credentials, credentialsFromKubeConfig } from './credentials.js';
import { connectTunnel } from './proxy.js';
import { RateLimiterFullError, type RequestPriority, type RequestRateLimiter } from './rate-limit.js';
import { authorityOf, BoundedHttpAgent, BoundedHttpsAgent, boundSetUp } from './setup-timeout.js';

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
  /**
   * The caller already took a token from this client's rate limiter (the writer does, so that it
   * checks its fence after the wait): do not wait for another.
   */
  throttled?: boolean;
  /** Parses a JSON response body (default JSON.parse); a throw leaves the body as text. */
  parse?: (text: string) => unknown;
  /**
   * The Accept header (default application/json), e.g. metadata only:
   * `application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`.
   */
  accept?: string;
  /**
   * Its lane in the client's rate limiter (RequestPriority, default 'normal'): 'critical' (marks,
   * their lease re-reads, the leader's lock) first, then 'taint', 'normal', 'pods'; 'low' waits
   * behind every other request and is refused at once (RateLimiterFullError) when too many low
   * ones wait already (for reads that must never hold back a mark). All count against
   * --kube-api-qps.
   */
  priority?: RequestPriority;
  /**
   * Called each time the request leaves the process (after any wait for a rate-limiter token or
   * for credentials): a caller that times the server's answer starts its clock here.
   */
  onSend?: () => void;
  /**
   * Asked at the last moment, right before the request's bytes are written to its connection:
   * after the wait for credentials, for each attempt (a 401's second one too), and once a new
   * connection is set up (TCP, TLS). A reason rejects the request with KubeFencedError and nothing
   * of it is sent (the writer's fence: a write it let through may not leave once it closes).
   */
  fence?: () => string | undefined;
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
  /** From sending (after the rate limiter) to the end of the body, or a watch's headers. */
  durationSeconds: number;
  /** HTTP method (GET, POST, ...) and the server's host:port, as client-go's rest_client_* label them. */
  method: string;
  host: string;
  /** Time spent waiting for the client-side rate limiter (only for requests that went through it). */
  rateLimiterSeconds?: number;
}
export type RequestObserver = (o: RequestObservation) => void;

/** A kube-apiserver Status, or the part of it we read. */
export interface KubeStatus {
  kind?: string;
  status?: string;
  message?: string;
  reason?: string;
  code?: number;
  details?: { retryAfterSeconds?: number; causes?: { reason?: string; message?: string }[] };
}

/** An HTTP-level failure from the API server, carrying what callers decide on. */
export class KubeApiError extends Error {
  readonly status: number;
  readonly reason: string;
  /** Seconds the server asked us to wait (Retry-After header or Status details). */
  readonly retryAfterSeconds: number | undefined;
  /** The reasons of the Status's details.causes, e.g. ResourceVersionTooLarge. */
  readonly causes: readonly string[];
  constructor(status: number, body: unknown, headers: http.IncomingHttpHeaders, what: string) {
    const st = (typeof body === 'object' && body !== null ? body : {}) as KubeStatus;
    const reason = st.reason ?? http.STATUS_CODES[status] ?? 'Unknown';
    super(`${what}: ${status} ${reason}${st.message ? `: ${st.message}` : ''}`);
    this.name = 'KubeApiError';
    this.status = status;
    this.reason = reason;
    this.retryAfterSeconds = parseRetryAfter(headers['retry-after']) ?? st.details?.retryAfterSeconds;
    const causes = Array.isArray(st.details?.causes) ? st.details.causes : [];
    this.causes = causes.map((c) => c?.reason).filter((r): r is string => typeof r === 'string');
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
  /**
   * The server has not reached the resourceVersion asked for (it waited 3 s for it): the Status
   * cause ResourceVersionTooLarge, or, from older servers, a 504 saying "Too large resource version"
   * (client-go's isTooLargeResourceVersionError reads it the same way).
   */
  get isTooLargeResourceVersion(): boolean {
    if (this.causes.includes('ResourceVersionTooLarge')) return true;
    return this.status === 504 && /too large resource version/i.test(this.message);
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

/** A request its fence refused at the last moment (KubeRequest.fence): nothing of it was sent. */
export class KubeFencedError extends KubeTransportError {
  readonly reason: string;
  constructor(what: string, reason: string) {
    super(`${what}: not sent: ${reason}`, 'FENCED');
    this.name = 'KubeFencedError';
    this.reason = reason;
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
  /**
   * Client-side rate limiter (client-go's QPS/burst): every request waits for a token before its
   * deadline starts, except watches (as in client-go) and requests marked `throttled`.
   */
  rateLimiter?: RequestRateLimiter | undefined;
}

/**
 * Milliseconds allowed for a proxy to answer CONNECT once it is sent (connecting to the proxy has
 * its own bounds, src/kube/setup-timeout.ts; the request's own deadline applies too).
 */
const PROXY_CONNECT_TIMEOUT_MS = 30_000;
/** The client certificate a socket was opened with (to retire idle sockets after a rotation). */
const CLIENT_CERT = Symbol('clientCert');
type Tagged = { [CLIENT_CERT]?: Buffer | undefined };

/**
 * The connection pool to an https API server. TLS options (CA, client certificate) come with each
 * request, so they are part of the pool key: after a certificate rotation new requests open new
 * connections with the new pair, requests in flight (watches) keep theirs, and idle sockets with an
 * older pair are closed instead of being reused. With a proxy, each new connection is an HTTP
 * CONNECT tunnel. Each new connection's set-up is bounded (30 s to connect, 10 s for the TLS
 * handshake, through a tunnel too), apart from the request's deadline.
 */
class ApiAgent extends BoundedHttpsAgent {
  constructor(
    opts: https.AgentOptions,
    private readonly tunnel: { proxy: URL; proxyCa: Buffer | undefined } | undefined,
    private readonly currentCert: () => Buffer | undefined,
  ) {
    super(opts);
  }

  override createConnection(
    options: tls.ConnectionOptions & { host?: string; port?: number },
    cb?: (err: Error | null, socket: stream.Duplex) => void,
  ): stream.Duplex | null | undefined {
    const cert = options.cert as Buffer | undefined;
    if (!this.tunnel) {
      const s = super.createConnection(options as never, cb as never) as unknown as tls.TLSSocket & Tagged;
      s[CLIENT_CERT] = cert;
      return s;
    }
    const host = options.host ?? 'localhost';
    const port = options.port ?? 443;
    connectTunnel({
      proxy: this.tunnel.proxy,
      host,
      port,
      proxyCa: this.tunnel.proxyCa,
      timeoutMs: PROXY_CONNECT_TIMEOUT_MS,
    }).then(
      (raw) => {
        const s = tls.connect({ ...options, socket: raw }) as tls.TLSSocket & Tagged;
        boundSetUp(s, authorityOf(host, port), true);
        s[CLIENT_CERT] = cert;
        cb?.(null, s);
      },
      (err: Error) => cb?.(err, undefined as unknown as stream.Duplex),
    );
    return undefined;
  }

  override keepSocketAlive(socket: stream.Duplex): boolean {
    if ((socket as stream.Duplex & Tagged)[CLIENT_CERT] !== this.currentCert()) return false;
    return (super.keepSocketAlive as (s: stream.Duplex) => boolean)(socket);
  }

  /** Closes idle sockets opened with another client certificate than the current one. */
  retireIdle(): void {
    const current = this.currentCert();
    for (const list of Object.values(this.freeSockets)) {
      for (const s of [...(list ?? [])])
        if ((s as stream.Duplex & Tagged)[CLIENT_CERT] !== current) s.destroy();
    }
  }
}

/** A client's connection to one API server: credentials, sockets, the server. */
interface Transport {
  base: URL;
  credentials: Credentials;
  agent: http.Agent;
  /** An http:// server through a proxy: absolute-form requests to the proxy (Go does the same). */
  forwardProxy: URL | undefined;
  /** The client certificate of the latest request. */
  currentCert: Buffer | undefined;
}

/** One request's deadline: a timer and the caller's signal, as one AbortSignal. */
class Deadline {
  private readonly ac = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private readonly onCallerAbort: () => void;

  constructor(
    readonly timeoutMs: number,
    private readonly caller: AbortSignal | undefined,
    what: string,
  ) {
    this.timer = setTimeout(
      () =>
        this.ac.abort(
          new KubeTransportError(`${what}: timed out after ${formatDuration(timeoutMs)}`, 'TIMEOUT'),
        ),
      timerDelay(timeoutMs),
    );
    this.onCallerAbort = () => this.ac.abort(new KubeTransportError(`${what}: aborted`, 'ABORTED'));
    if (caller?.aborted) this.onCallerAbort();
    else caller?.addEventListener('abort', this.onCallerAbort, { once: true });
  }

  get signal(): AbortSignal {
    return this.ac.signal;
  }

  /** The caller's signal still aborts; the timer no longer does (a watch past its headers). */
  stopTimer(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  dispose(): void {
    this.stopTimer();
    this.caller?.removeEventListener('abort', this.onCallerAbort);
  }

  /** `p`, or the deadline's reason if it passes first (`p` goes on; its result is then ignored). */
  race<T>(p: Promise<T>): Promise<T> {
    const signal = this.ac.signal;
    if (signal.aborted) {
      p.catch(() => undefined);
      return Promise.reject(signal.reason);
    }
    return new Promise<T>((resolve, reject) => {
      const onAbort = () => reject(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      p.then(
        (v) => {
          signal.removeEventListener('abort', onAbort);
          resolve(v);
        },
        (err: unknown) => {
          signal.removeEventListener('abort', onAbort);
          reject(err);
        },
      );
    });
  }
}

/** Per-request bookkeeping for metrics. */
interface Attempt {
  verb: string;
  resource: string;
  /** The HTTP method, for client-go's rest_client_* labels. */
  method: string;
  started: number;
  /** Seconds waited for the rate limiter; undefined when the request did not go through it. */
  throttleSeconds: number | undefined;
}

/** Errors after which client certificate files are re-checked at once (handshake or reset). */
function isConnectionFailure(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException)?.code ?? '';
  return /SSL|TLS|CERT|EPROTO|ECONNRESET/.test(code);
}

/**
 * A small HTTP client for kube-apiserver. Credentials come from our kubeconfig loader (or a
 * @kubernetes/client-node KubeConfig); this class owns the sockets so that watches, timeouts and
 * metrics are under our control.
 *
 * Per request: a rate-limiter token (not for watches), then the deadline starts and covers getting
 * credentials (an exec plugin run counts against it), connecting (through a proxy if configured),
 * and the response (headers for a watch, the whole body otherwise). A 401 tells the credentials
 * source, and the request is retried once when it has new credentials.
 */
export class KubeClient {
  private readonly observer: RequestObserver | undefined;
  private readonly defaultTimeoutMs: number;
  private readonly userAgent: string;
  private readonly limiter: RequestRateLimiter | undefined;

  private constructor(
    private readonly t: Transport,
    opts: KubeClientOptions,
  ) {
    this.observer = opts.observer;
    this.defaultTimeoutMs = opts.defaultTimeoutMs ?? 30_000;
    this.userAgent = opts.userAgent ?? COMPONENT_NAME;
    this.limiter = opts.rateLimiter;
  }

  static async fromCredentials(credentials: Credentials, opts: KubeClientOptions = {}): Promise<KubeClient> {
    const base = credentials.server;
    const proxy = credentials.proxy;
    const agentOpts = { keepAlive: true, maxSockets: opts.maxSockets ?? 64 };
    const t: Transport = {
      base,
      credentials,
      agent: undefined as unknown as http.Agent,
      forwardProxy: undefined,
      currentCert: undefined,
    };
    if (base.protocol === 'https:') {
      t.agent = new ApiAgent(
        agentOpts,
        proxy ? { proxy, proxyCa: credentials.tls.ca } : undefined,
        () => t.currentCert,
      );
    } else if (proxy) {
      t.forwardProxy = proxy;
      t.agent =
        proxy.protocol === 'https:' ? new BoundedHttpsAgent(agentOpts) : new BoundedHttpAgent(agentOpts);
    } else {
      t.agent = new BoundedHttpAgent(agentOpts);
    }
    const client = new KubeClient(t, opts);
    // Fail at start when no credentials can be had (e.g. the exec plugin fails).
    t.currentCert = (await credentials.auth()).cert;
    return client;
  }

  /** From a @kubernetes/client-node KubeConfig (tests, tools); the controller uses fromCredentials. */
  static async fromKubeConfig(kc: KubeConfig, opts: KubeClientOptions = {}): Promise<KubeClient> {
    return await KubeClient.fromCredentials(await credentialsFromKubeConfig(kc), opts);
  }

  get server(): string {
    return this.t.base.toString();
  }

  /** The proxy requests go through, if any. */
  get proxy(): URL | undefined {
    return this.t.credentials.proxy;
  }

  /** Frees pooled sockets. In-flight requests are not interrupted. */
  close(): void {
    this.t.agent.destroy();
  }

  private url(path: string, query?: KubeRequest['query']): URL {
    const base = this.t.base;
    const u = new URL(path, base);
    // Keep a server path prefix (e.g. a proxy at https://host/k8s/clusters/x).
    if (base.pathname !== '/' && !path.startsWith(base.pathname)) {
      u.pathname = base.pathname.replace(/\/$/, '') + path;
    }
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) u.searchParams.set(k, String(v));
    return u;
  }

  /**
   * Sends a request and resolves with the parsed response whatever its status. Rejects only with
   * KubeTransportError (no status at all).
   */
  async raw<T = unknown>(req: KubeRequest): Promise<KubeResponse<T>> {
    const a = this.attempt(req.method, req.path, req.query);
    try {
      const res = await this.send(req, a);
      const text = await readBody(res);
      let body: unknown = text;
      if (text && (res.headers['content-type'] ?? '').includes('json')) {
        try {
          body = req.parse ? req.parse(text) : JSON.parse(text);
        } catch {
          body = text;
        }
      }
      this.observe(a, String(res.statusCode ?? 0));
      return { status: res.statusCode ?? 0, headers: res.headers, body: body as T };
    } catch (err) {
      const e = toTransportError(err);
      this.observe(a, `<error:${e.code}>`);
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
   * Watches do not wait for the rate limiter (client-go does not limit them either).
   */
  async stream(
    req: Omit<KubeRequest, 'method' | 'body'> & { connectTimeoutMs?: number },
  ): Promise<http.IncomingMessage> {
    const a = this.attempt('GET', req.path, req.query);
    let res: http.IncomingMessage;
    try {
      res = await this.send(
        { ...req, method: 'GET', timeoutMs: req.connectTimeoutMs ?? this.defaultTimeoutMs },
        a,
        true,
      );
    } catch (err) {
      const e = toTransportError(err);
      this.observe(a, `<error:${e.code}>`);
      throw e;
    }
    const status = res.statusCode ?? 0;
    this.observe(a, String(status));
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

  private attempt(method: string, path: string, query: KubeRequest['query']): Attempt {
    const { verb, resource } = describeRequest(method, path, query);
    return { verb, resource, method, started: performance.now(), throttleSeconds: undefined };
  }

  private observe(a: Attempt, code: string): void {
    if (!this.observer) return;
    try {
      const o: RequestObservation = {
        verb: a.verb,
        resource: a.resource,
        code,
        durationSeconds: (performance.now() - a.started) / 1000,
        method: a.method,
        host: this.t.base.host,
      };
      if (a.throttleSeconds !== undefined) o.rateLimiterSeconds = a.throttleSeconds;
      this.observer(o);
    } catch {
      /* metrics must never break a request */
    }
  }

  /** Waits for a rate-limiter token (not part of the request's deadline, as in client-go). */
  private async throttle(req: KubeRequest, a: Attempt, signal: AbortSignal | undefined): Promise<void> {
    if (!this.limiter || req.throttled) return;
    const t0 = performance.now();
    try {
      await this.limiter.acquire(signal, req.priority);
    } catch (err) {
      if (err instanceof RateLimiterFullError) throw err;
      throw err instanceof KubeTransportError
        ? err
        : new KubeTransportError(`${req.method} ${req.path}: aborted`, 'ABORTED');
    }
    const waited = performance.now() - t0;
    a.throttleSeconds = (a.throttleSeconds ?? 0) + waited / 1000;
    a.started += waited;
  }

  /**
   * Sends the request and resolves at response headers. When `streaming` is set the deadline only
   * covers reaching the headers; otherwise it covers the whole body too.
   */
  private async send(req: KubeRequest, a: Attempt, streaming = false): Promise<http.IncomingMessage> {
    if (!streaming) await this.throttle(req, a, req.signal);
    const what = `${req.method} ${req.path}`;
    const timeoutMs = req.timeoutMs ?? this.defaultTimeoutMs;
    const dl = new Deadline(timeoutMs, req.signal, what);
    const payload =
      req.body === undefined ? undefined : typeof req.body === 'string' ? req.body : JSON.stringify(req.body);
    const creds = this.t.credentials;
    try {
      for (let attempt = 1; ; attempt++) {
        const auth = await dl.race(creds.auth());
        this.useCert(auth.cert);
        let res: http.IncomingMessage;
        try {
          req.onSend?.();
          res = await this.dispatch(req, auth, payload, dl);
        } catch (err) {
          if (isConnectionFailure(err)) creds.connectionFailed?.();
          throw err;
        }
        // A source that cannot refresh (e.g. the plugin fails now) leaves the 401 as the answer.
        const refreshed = () => dl.race(creds.unauthorized(auth).catch(() => false));
        if (res.statusCode === 401 && attempt === 1 && (await refreshed())) {
          // New credentials: this response is discarded and the request sent once more.
          res.resume();
          this.observe(a, '401');
          if (!streaming) await dl.race(this.throttle(req, a, dl.signal));
          continue;
        }
        if (streaming) {
          dl.stopTimer();
          res.once('close', () => dl.dispose());
        } else {
          res.once('close', () => dl.dispose());
          res.once('end', () => dl.dispose());
        }
        return res;
      }
    } catch (err) {
      dl.dispose();
      throw err;
    }
  }

  /** Remembers the client certificate in use; idle sockets with an older one are closed. */
  private useCert(cert: Buffer | undefined): void {
    if (cert === this.t.currentCert) return;
    this.t.currentCert = cert;
    if (this.t.agent instanceof ApiAgent) this.t.agent.retireIdle();
  }

  private dispatch(
    req: KubeRequest,
    auth: ClientAuth,
    payload: string | undefined,
    dl: Deadline,
  ): Promise<http.IncomingMessage> {
    const url = this.url(req.path, req.query);
    const headers: Record<string, string | number> = {
      Accept: req.accept ?? 'application/json',
      'User-Agent': this.userAgent,
      ...auth.headers,
    };
    if (payload !== undefined) {
      headers['Content-Type'] = req.contentType ?? 'application/json';
      headers['Content-Length'] = Buffer.byteLength(payload);
    }
    const { tls: trust } = this.t.credentials;
    const proxy = this.t.forwardProxy;
    let r: http.ClientRequest;
    if (url.protocol === 'https:') {
      const options: https.RequestOptions = { method: req.method, headers, agent: this.t.agent };
      if (trust.ca) options.ca = trust.ca;
      if (trust.rejectUnauthorized !== undefined) options.rejectUnauthorized = trust.rejectUnauthorized;
      if (trust.servername) options.servername = trust.servername;
      if (auth.cert && auth.key) {
        options.cert = auth.cert;
        options.key = auth.key;
      }
      r = https.request(url, options);
    } else if (proxy) {
      // An http:// server through a proxy: the absolute URL goes to the proxy, as Go does.
      if (proxy.username || proxy.password) {
        const user = decodeURIComponent(proxy.username);
        const pass = decodeURIComponent(proxy.password);
        headers['Proxy-Authorization'] = `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`;
      }
      headers.Host = url.host;
      const options: https.RequestOptions = {
        method: req.method,
        headers,
        agent: this.t.agent,
        host: proxy.hostname.replace(/^\[(.*)\]$/, '$1'),
        port: Number(proxy.port || (proxy.protocol === 'https:' ? 443 : 80)),
        path: url.href,
      };
      r = proxy.protocol === 'https:' ? https.request(options) : http.request(options);
    } else {
      r = http.request(url, { method: req.method, headers, agent: this.t.agent });
    }
    return new Promise<http.IncomingMessage>((resolve, reject) => {
      let response: http.IncomingMessage | undefined;
      const onAbort = () => {
        const reason = dl.signal.reason as Error;
        if (response) response.destroy(reason);
        else r.destroy(reason);
      };
      if (dl.signal.aborted) onAbort();
      else dl.signal.addEventListener('abort', onAbort, { once: true });
      const detach = () => dl.signal.removeEventListener('abort', onAbort);
      r.on('error', (err) => {
        if (!response) {
          detach();
          reject(err);
        }
      });
      r.on('response', (res) => {
        response = res;
        res.once('close', detach);
        resolve(res);
      });
      endRequest(r, req, payload);
    });
  }
}

/**
 * Sends the request's headers and body: at once; with a fence, once its connection is set up and
 * only if the fence then allows it (else it is destroyed with KubeFencedError, nothing written).
 */
function endRequest(r: http.ClientRequest, req: KubeRequest, payload: string | undefined): void {
  const fence = req.fence;
  if (!fence) {
    r.end(payload);
    return;
  }
  r.once('socket', (socket: net.Socket) =>
    whenConnected(socket, () => {
      const why = fence();
      if (why === undefined) r.end(payload);
      else r.destroy(new KubeFencedError(`${req.method} ${req.path}`, why));
    }),
  );
}

/** Runs `go` once `socket` can carry bytes: at once for a reused one, else once connected (and the TLS handshake done). */
function whenConnected(socket: net.Socket, go: () => void): void {
  if (socket instanceof tls.TLSSocket) {
    const protocol = socket.getProtocol();
    if (socket.connecting || protocol === null || protocol === 'unknown') socket.once('secureConnect', go);
    else go();
    return;
  }
  if (socket.connecting) socket.once('connect', go);
  else go();
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
  podEviction: (ns: string, name: string) =>
    `/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(name)}/eviction`,
  leases: (ns: string) => `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/leases`,
  lease: (ns: string, name: string) =>
    `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/leases/${encodeURIComponent(name)}`,
  events: (ns: string) => `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/events`,
  coreEvents: (ns: string) => `/api/v1/namespaces/${encodeURIComponent(ns)}/events`,
  namespaces: () => '/api/v1/namespaces',
} as const;
