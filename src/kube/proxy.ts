import net from 'node:net';
import tls from 'node:tls';
import { domainToASCII } from 'node:url';
import { timerDelay } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import { authorityOf, boundSetUp } from './setup-timeout.js';

/**
 * HTTP(S) proxies for the API server connection, with the semantics of Go's
 * `http.ProxyFromEnvironment` (golang.org/x/net/http/httpproxy), which client-go uses, and of a
 * kubeconfig cluster's `proxy-url`, which replaces the environment when set.
 *
 * - HTTPS_PROXY (else https_proxy) for an https server, HTTP_PROXY (else http_proxy) for an http one;
 *   a value without a scheme means http://.
 * - NO_PROXY (else no_proxy): comma-separated; `*` (everything), an IP, an IP:port, a CIDR, a domain
 *   (`example.com` matches it and its subdomains, `.example.com` and `*.example.com` only the
 *   subdomains), optionally with `:port`. Case-insensitive.
 * - An environment proxy never applies to `localhost` or a loopback IP (Go's special case).
 *   A kubeconfig `proxy-url` applies to every server, loopback included (client-go's http.ProxyURL).
 * - http:// and https:// proxies are supported (https: TLS to the proxy, then CONNECT). socks5 is
 *   refused with a clear error, and so is any other scheme or a malformed value: Go silently
 *   ignores a malformed proxy variable and connects directly; we refuse to start instead.
 */
export interface ProxyEnv {
  HTTPS_PROXY?: string | undefined;
  https_proxy?: string | undefined;
  HTTP_PROXY?: string | undefined;
  http_proxy?: string | undefined;
  NO_PROXY?: string | undefined;
  no_proxy?: string | undefined;
}

export const PROXY_ENV_NAMES = [
  'HTTPS_PROXY',
  'https_proxy',
  'HTTP_PROXY',
  'http_proxy',
  'NO_PROXY',
  'no_proxy',
] as const;

/** The proxy variables of an environment (main passes process.env through this). */
export function proxyEnvOf(env: Record<string, string | undefined>): ProxyEnv {
  const out: ProxyEnv = {};
  for (const k of PROXY_ENV_NAMES) if (env[k] !== undefined) out[k] = env[k];
  return out;
}

export class ProxyConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProxyConfigError';
  }
}

/** A proxy URL with its password (if any) masked, for logs and errors. */
export function redactProxy(u: URL | string): string {
  let url: URL;
  try {
    url = typeof u === 'string' ? new URL(u) : new URL(u.href);
  } catch {
    return '<unparseable>';
  }
  if (url.password) url.password = 'xxxxx';
  return url.href.replace(/\/$/, '');
}

/** A proxy setting we could not parse, with anything like a password masked. */
function maskRaw(raw: string): string {
  return raw.replace(/^([^/]*\/\/[^:/@]*):[^@/]*@/, '$1:xxxxx@');
}

/**
 * Parses a proxy setting as Go does (no scheme or no host: try again with http:// in front), then
 * refuses what we cannot use. `where` names the setting in the error (e.g. "HTTPS_PROXY").
 */
export function parseProxyUrl(raw: string, where: string): URL {
  let u: URL | undefined;
  try {
    u = new URL(raw);
  } catch {
    u = undefined;
  }
  // Go retries a value that is not an absolute URL as http://<value> (e.g. "proxy:3128"); we do
  // so only for values without a scheme separator, so that "http://[::1" stays an error.
  if ((!u || u.host === '') && !raw.includes('://')) {
    try {
      u = new URL(`http://${raw}`);
    } catch {
      throw new ProxyConfigError(`${where}: ${JSON.stringify(maskRaw(raw))} is not a valid proxy URL`);
    }
  }
  if (!u || u.host === '') {
    throw new ProxyConfigError(`${where}: ${JSON.stringify(maskRaw(raw))} is not a valid proxy URL`);
  }
  if (u.protocol === 'socks5:' || u.protocol === 'socks5h:') {
    throw new ProxyConfigError(
      `${where}: ${redactProxy(u)}: SOCKS5 proxies are not supported; use an http:// or https:// proxy (HTTP CONNECT)`,
    );
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') {
    throw new ProxyConfigError(
      `${where}: ${redactProxy(u)}: unsupported proxy scheme ${JSON.stringify(u.protocol.replace(/:$/, ''))} (accepted: http, https)`,
    );
  }
  if (u.hostname === '') throw new ProxyConfigError(`${where}: ${JSON.stringify(maskRaw(raw))} has no host`);
  return u;
}

type Matcher = (host: string, port: string, ip: string | undefined) => boolean;

function ipFamily(ip: string): 'ipv4' | 'ipv6' | undefined {
  const v = net.isIP(ip);
  return v === 4 ? 'ipv4' : v === 6 ? 'ipv6' : undefined;
}

function ipSet(add: (list: net.BlockList) => void): (ip: string) => boolean {
  const list = new net.BlockList();
  add(list);
  // BlockList compares numerically and matches IPv4-mapped IPv6 addresses against IPv4 rules.
  return (ip) => {
    const fam = ipFamily(ip);
    return fam !== undefined && list.check(ip, fam);
  };
}

const isLoopback = ipSet((l) => {
  l.addSubnet('127.0.0.0', 8, 'ipv4');
  l.addAddress('::1', 'ipv6');
});

function splitHostPort(s: string): { host: string; port: string } | undefined {
  // "[v6]:port" or "host:port" with exactly one colon (Go's net.SplitHostPort).
  const v6 = /^\[([^\]]*)\]:(\d*)$/.exec(s);
  if (v6) return { host: v6[1]!, port: v6[2]! };
  const i = s.lastIndexOf(':');
  if (i < 0 || s.indexOf(':') !== i) return undefined;
  return { host: s.slice(0, i), port: s.slice(i + 1) };
}

/** NO_PROXY as Go's httpproxy parses it. */
export function noProxyMatchers(noProxy: string): { ip: Matcher[]; domain: Matcher[] } {
  const ip: Matcher[] = [];
  const domain: Matcher[] = [];
  for (const raw of noProxy.split(',')) {
    const p = raw.trim().toLowerCase();
    if (p === '') continue;
    if (p === '*') {
      const all: Matcher = () => true;
      return { ip: [all], domain: [all] };
    }
    const cidr = /^(.+)\/(\d{1,3})$/.exec(p);
    if (cidr) {
      const fam = ipFamily(cidr[1]!);
      const bits = Number(cidr[2]);
      if (fam && bits <= (fam === 'ipv4' ? 32 : 128)) {
        const inNet = ipSet((l) => l.addSubnet(cidr[1]!, bits, fam));
        ip.push((_h, _p, addr) => addr !== undefined && inNet(addr));
        continue;
      }
    }
    let phost = p;
    let pport = '';
    const hp = splitHostPort(p);
    if (hp) {
      if (hp.host === '') continue;
      phost = hp.host.startsWith('[') && hp.host.endsWith(']') ? hp.host.slice(1, -1) : hp.host;
      pport = hp.port;
    }
    const fam = ipFamily(phost);
    if (fam) {
      const same = ipSet((l) => l.addAddress(phost, fam));
      ip.push((_h, port, addr) => addr !== undefined && same(addr) && (pport === '' || pport === port));
      continue;
    }
    if (phost === '') continue;
    if (phost.startsWith('*.')) phost = phost.slice(1);
    let matchHost = false;
    if (!phost.startsWith('.')) {
      matchHost = true;
      phost = `.${phost}`;
    }
    // biome-ignore lint/suspicious/noControlCharactersInRegex: the ASCII range is the point
    const ascii = /^[\x00-\x7f]*$/.test(phost) ? phost : domainToASCII(phost.slice(1));
    const suffix = ascii.startsWith('.') ? ascii : `.${ascii}`;
    domain.push((host, port, addr) => {
      if (addr !== undefined) return false;
      if (host.endsWith(suffix) || (matchHost && host === suffix.slice(1)))
        return pport === '' || pport === port;
      return false;
    });
  }
  return { ip, domain };
}

/**
 * The proxy an environment selects for a server URL, or undefined (direct). Throws
 * ProxyConfigError when the variable that applies is malformed or names an unsupported scheme.
 */
export function proxyFromEnvironment(env: ProxyEnv, target: URL): { url: URL; from: string } | undefined {
  const pick = (...names: (keyof ProxyEnv)[]) => {
    for (const n of names) {
      const v = env[n];
      if (v) return { name: n, value: v };
    }
    return undefined;
  };
  const chosen =
    target.protocol === 'https:'
      ? pick('HTTPS_PROXY', 'https_proxy')
      : target.protocol === 'http:'
        ? pick('HTTP_PROXY', 'http_proxy')
        : undefined;
  if (!chosen) return undefined;
  const url = parseProxyUrl(chosen.value, chosen.name);
  if (!useProxy(env, target)) return undefined;
  return { url, from: chosen.name };
}

/** Whether the environment's proxy applies to this server (NO_PROXY and the loopback rule). */
export function useProxy(env: ProxyEnv, target: URL): boolean {
  let host = target.hostname.toLowerCase();
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  const port = target.port || (target.protocol === 'https:' ? '443' : '80');
  if (host === 'localhost') return false;
  const ip = ipFamily(host) ? host : undefined;
  if (ip && isLoopback(ip)) return false;
  const noProxy = env.NO_PROXY || env.no_proxy || '';
  const m = noProxyMatchers(noProxy);
  if (ip && m.ip.some((f) => f(host, port, ip))) return false;
  if (m.domain.some((f) => f(host, port, ip))) return false;
  return true;
}

/**
 * Opens a tunnel to `host:port` through an HTTP proxy (HTTP CONNECT; TLS to the proxy first for an
 * https:// proxy). Resolves with the raw tunnelled socket; the caller starts TLS to the server on it.
 * Connecting to the proxy is bounded as any connection is (30 s, then 10 s for its TLS handshake);
 * the proxy then has `timeoutMs` to answer the CONNECT.
 */
export function connectTunnel(opts: {
  proxy: URL;
  host: string;
  port: number;
  /** Trust for an https:// proxy's certificate (added to the system roots). */
  proxyCa?: Buffer | undefined;
  timeoutMs: number;
}): Promise<net.Socket> {
  const { proxy } = opts;
  const authority = authorityOf(opts.host, opts.port);
  const problem = (message: string, code: string) =>
    Object.assign(new Error(`proxy ${redactProxy(proxy)}${message}`), { code });
  return new Promise((resolve, reject) => {
    const socket = proxySocket(proxy, opts.proxyCa);
    let done = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const fail = (err: Error) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      reject(err);
    };
    socket.once('error', (err) =>
      fail(problem(`: ${err.message}`, (err as NodeJS.ErrnoException).code ?? 'EPROXY')),
    );
    socket.once('close', () =>
      fail(problem(' closed the connection before answering CONNECT', 'ECONNRESET')),
    );
    const onConnect = () => {
      socket.write(connectRequest(proxy, authority));
      timer = setTimeout(
        () => fail(problem(`: no CONNECT answer within ${formatDuration(opts.timeoutMs)}`, 'ETIMEDOUT')),
        timerDelay(opts.timeoutMs),
      );
    };
    socket.once(proxy.protocol === 'https:' ? 'secureConnect' : 'connect', onConnect);
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) {
        if (head.length > 16 * 1024) fail(problem(': CONNECT answer too long', 'EPROXY'));
        return;
      }
      socket.off('data', onData);
      const status = /^HTTP\/1\.[01] (\d{3})(.*)/.exec(head.subarray(0, end).toString('latin1'));
      if (status?.[1] !== '200') {
        const answer = status ? `${status[1]}${status[2]}` : 'not an HTTP answer';
        fail(problem(` refused CONNECT to ${authority}: ${answer}`, 'EPROXY'));
        return;
      }
      done = true;
      clearTimeout(timer);
      socket.removeAllListeners('error');
      socket.removeAllListeners('close');
      // Paused, so that bytes the proxy sent after its answer wait for the caller's reader.
      socket.pause();
      const rest = head.subarray(end + 4);
      if (rest.length > 0) socket.unshift(rest);
      resolve(socket);
    };
    socket.on('data', onData);
  });
}

/** The connection to the proxy itself (TLS for an https:// proxy), bounded like any connection. */
function proxySocket(proxy: URL, proxyCa: Buffer | undefined): net.Socket {
  const secure = proxy.protocol === 'https:';
  const port = Number(proxy.port || (secure ? 443 : 80));
  const host = proxy.hostname.replace(/^\[(.*)\]$/, '$1');
  const socket: net.Socket = secure
    ? tls.connect({
        host,
        port,
        servername: net.isIP(host) ? undefined : host,
        ca: proxyCa ? [...tls.rootCertificates, proxyCa.toString('utf8')] : undefined,
      })
    : net.connect({ host, port });
  boundSetUp(socket, authorityOf(host, port), secure);
  return socket;
}

/** The CONNECT request, with Basic proxy credentials when the proxy URL carries them. */
function connectRequest(proxy: URL, authority: string): string {
  const lines = [`CONNECT ${authority} HTTP/1.1`, `Host: ${authority}`];
  if (proxy.username || proxy.password) {
    const user = decodeURIComponent(proxy.username);
    const pass = decodeURIComponent(proxy.password);
    lines.push(`Proxy-Authorization: Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`);
  }
  return `${lines.join('\r\n')}\r\n\r\n`;
}
