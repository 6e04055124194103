import { mkdtempSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient, KubeTransportError } from './client.js';
import { KubeconfigError, resolveKubeconfig } from './kubeconfig.js';
import { connectTunnel, type ProxyEnv, parseProxyUrl, proxyFromEnvironment, redactProxy } from './proxy.js';
import { startConnectProxy, type TestProxy } from './testing/connect-proxy.js';
import { loopbackServerPki } from './testing/pki.js';
import { loopbackServer, type StubServer, startStubServer } from './testing.js';

const proxied = (env: ProxyEnv, target: string) => proxyFromEnvironment(env, new URL(target))?.url.href;

describe('proxy selection from the environment (Go ProxyFromEnvironment semantics)', () => {
  const P = 'http://proxy.corp:3128/';
  it('HTTPS_PROXY for https servers, HTTP_PROXY for http ones; upper case first, then lower case', () => {
    expect(proxied({ HTTPS_PROXY: P }, 'https://api.example:6443')).toBe(P);
    expect(proxied({ HTTP_PROXY: P }, 'https://api.example:6443')).toBeUndefined();
    expect(proxied({ HTTP_PROXY: P }, 'http://api.example:8080')).toBe(P);
    expect(proxied({ https_proxy: P }, 'https://api.example:6443')).toBe(P);
    expect(proxied({ HTTPS_PROXY: P, https_proxy: 'http://other:1' }, 'https://a.example')).toBe(P);
    expect(proxied({ HTTPS_PROXY: '', https_proxy: 'http://other:1' }, 'https://a.example')).toBe(
      'http://other:1/',
    );
    expect(proxied({}, 'https://api.example:6443')).toBeUndefined();
  });

  it('a value without a scheme is http://', () => {
    expect(proxied({ HTTPS_PROXY: 'proxy.corp:3128' }, 'https://api.example')).toBe(
      'http://proxy.corp:3128/',
    );
    expect(proxied({ HTTPS_PROXY: '10.1.2.3:3128' }, 'https://api.example')).toBe('http://10.1.2.3:3128/');
  });

  it('never proxies localhost or a loopback IP', () => {
    for (const t of [
      'https://localhost:6443',
      'https://127.0.0.1:6443',
      'https://127.9.9.9',
      'https://[::1]:6443',
    ]) {
      expect(proxied({ HTTPS_PROXY: P }, t), t).toBeUndefined();
    }
    expect(proxied({ HTTPS_PROXY: P }, 'https://localhost.example:6443')).toBe(P);
  });

  it.each([
    // [NO_PROXY, server, proxied?]
    ['*', 'https://api.example', false],
    ['example.com', 'https://example.com', false],
    ['example.com', 'https://api.example.com', false],
    ['example.com', 'https://notexample.com', true],
    ['.example.com', 'https://example.com', true],
    ['.example.com', 'https://api.example.com', false],
    ['*.example.com', 'https://example.com', true],
    ['*.example.com', 'https://a.b.example.com', false],
    ['EXAMPLE.com', 'https://api.example.COM', false],
    ['example.com:6443', 'https://api.example.com:6443', false],
    ['example.com:6443', 'https://api.example.com:443', true],
    ['example.com:443', 'https://api.example.com', false],
    ['10.0.0.1', 'https://10.0.0.1:6443', false],
    ['10.0.0.1', 'https://10.0.0.2:6443', true],
    ['10.0.0.1:6443', 'https://10.0.0.1:6443', false],
    ['10.0.0.1:443', 'https://10.0.0.1:6443', true],
    ['10.0.0.0/8', 'https://10.96.0.1', false],
    ['10.0.0.0/8', 'https://11.0.0.1', true],
    ['fd00::/8', 'https://[fd00::1]:6443', false],
    ['[fd00::1]:6443', 'https://[fd00::1]:6443', false],
    ['fd00::1', 'https://[fd00::2]:6443', true],
    [' other.org , 10.96.0.0/12 ', 'https://10.96.0.1:443', false],
    ['10.0.0.0/8', 'https://ten.example', true], // a CIDR matches IPs only
    ['example.com', 'https://10.0.0.1', true], // a domain matches names only
    [':443', 'https://api.example', true], // no host part: ignored
  ] as const)('NO_PROXY=%j, server %s: proxied %s', (noProxy, target, want) => {
    expect(proxied({ HTTPS_PROXY: P, NO_PROXY: noProxy }, target) !== undefined).toBe(want);
    expect(proxied({ HTTPS_PROXY: P, no_proxy: noProxy }, target) !== undefined).toBe(want);
  });

  it('refuses socks5, other schemes and garbage with the variable named (Go would ignore them silently)', () => {
    expect(() => proxied({ HTTPS_PROXY: 'socks5://p:1080' }, 'https://a.example')).toThrow(
      /HTTPS_PROXY: socks5:\/\/p:1080: SOCKS5 proxies are not supported/,
    );
    expect(() => proxied({ https_proxy: 'ftp://p:21' }, 'https://a.example')).toThrow(
      /https_proxy: .*unsupported proxy scheme "ftp" \(accepted: http, https\)/,
    );
    expect(() => parseProxyUrl('http://[::1', 'X')).toThrow(/X: .* is not a valid proxy URL/);
    // An unused variable is not judged (an http:// proxy setting does not matter to an https server).
    expect(proxied({ HTTP_PROXY: 'socks5://p:1080' }, 'https://a.example')).toBeUndefined();
  });

  it('masks a proxy password in what it prints', () => {
    expect(redactProxy('http://me:secret@proxy:3128')).toBe('http://me:xxxxx@proxy:3128');
    expect(() => proxied({ HTTPS_PROXY: 'socks5://me:secret@p:1080' }, 'https://a.example')).toThrow(/xxxxx/);
  });
});

/** A kubeconfig file in `dir` for `server`, trusting `ca`, with the token t0k; `extra` goes into the cluster. */
function kubeconfigFile(dir: string, server: string, ca: string, extra = ''): string {
  const p = path.join(dir, `kc-${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(
    p,
    [
      `clusters: [{name: c, cluster: {server: "${server}", certificate-authority-data: ${Buffer.from(ca).toString('base64')}${extra}}}]`,
      'users: [{name: u, user: {token: t0k}}]',
      'contexts: [{name: x, context: {cluster: c, user: u}}]',
      'current-context: x',
    ].join('\n'),
  );
  return p;
}

describe('KubeClient through a real CONNECT proxy on loopback', () => {
  const NAME = 'api.nlc.test'; // only the proxy can resolve it
  const pki = loopbackServerPki([NAME]);
  let dir: string;
  let stub: StubServer;
  let proxy: TestProxy;
  const seen: { url?: string; auth?: string }[] = [];
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'nlc-proxy-'));
  });
  afterEach(async () => {
    await proxy?.close();
    await stub?.close();
  });
  const start = async (proxyOpts: Parameters<typeof startConnectProxy>[0] = {}) => {
    stub = await startStubServer(
      (req, res) => {
        seen.push({ url: req.url, auth: req.headers.authorization });
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ ok: true }));
      },
      { cert: pki.server.cert, key: pki.server.key },
    );
    proxy = await startConnectProxy({ hosts: { [NAME]: '127.0.0.1' }, ...proxyOpts });
  };
  const kubeconfig = (server: string, extra = '') => kubeconfigFile(dir, server, pki.ca.cert, extra);

  it('HTTPS_PROXY: every new connection is a CONNECT tunnel; keep-alive reuses it; NO_PROXY bypasses it', async () => {
    await start();
    const file = kubeconfig(`https://${NAME}:${stub.port}`);
    const r = resolveKubeconfig({ flag: file, env: {}, homeDir: dir, proxyEnv: { HTTPS_PROXY: proxy.url } });
    expect(r.proxy).toEqual({ url: proxy.url, from: 'HTTPS_PROXY' });
    const client = await KubeClient.fromCredentials(await r.credentials());
    try {
      for (let i = 0; i < 3; i++) {
        await expect(client.request({ method: 'GET', path: '/api/v1/nodes' })).resolves.toEqual({ ok: true });
      }
      expect(proxy.tunnels).toEqual([`${NAME}:${stub.port}`]);
      expect(seen.at(-1)).toEqual({ url: '/api/v1/nodes', auth: 'Bearer t0k' });
    } finally {
      client.close();
    }
    // NO_PROXY: direct, and the name does not resolve without the proxy.
    const direct = resolveKubeconfig({
      flag: file,
      env: {},
      homeDir: dir,
      proxyEnv: { HTTPS_PROXY: proxy.url, NO_PROXY: 'nlc.test' },
    });
    expect(direct.proxy).toBeUndefined();
    const c2 = await KubeClient.fromCredentials(await direct.credentials(), { defaultTimeoutMs: 5000 });
    try {
      const err = await c2.request({ method: 'GET', path: '/api/v1/nodes' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(KubeTransportError);
      expect(proxy.tunnels).toHaveLength(1);
    } finally {
      c2.close();
    }
  });

  it('kubeconfig proxy-url wins over the environment and applies to loopback servers too', async () => {
    await start();
    const file = kubeconfig(`https://127.0.0.1:${stub.port}`, `, proxy-url: "${proxy.url}"`);
    const r = resolveKubeconfig({
      flag: file,
      env: {},
      homeDir: dir,
      proxyEnv: { HTTPS_PROXY: 'http://127.0.0.1:1', NO_PROXY: '*' },
    });
    expect(r.proxy).toEqual({ url: proxy.url, from: 'kubeconfig proxy-url' });
    const client = await KubeClient.fromCredentials(await r.credentials());
    try {
      await expect(client.request({ method: 'GET', path: '/api/v1/pods' })).resolves.toEqual({ ok: true });
      expect(proxy.tunnels).toEqual([`127.0.0.1:${stub.port}`]);
    } finally {
      client.close();
    }
  });

  it('sends the proxy URL credentials as Proxy-Authorization; a refusal names the proxy and the status', async () => {
    await start({ requireAuth: 'me:s3cret' });
    const good = resolveKubeconfig({
      flag: kubeconfig(`https://${NAME}:${stub.port}`),
      env: {},
      homeDir: dir,
      proxyEnv: { HTTPS_PROXY: `http://me:s3cret@127.0.0.1:${proxy.port}` },
    });
    expect(good.proxy?.url).toBe(`http://me:xxxxx@127.0.0.1:${proxy.port}`);
    const client = await KubeClient.fromCredentials(await good.credentials());
    try {
      await expect(client.request({ method: 'GET', path: '/api/v1/nodes' })).resolves.toEqual({ ok: true });
    } finally {
      client.close();
    }
    const bad = resolveKubeconfig({
      flag: kubeconfig(`https://${NAME}:${stub.port}`),
      env: {},
      homeDir: dir,
      proxyEnv: { HTTPS_PROXY: `http://me:wrong@127.0.0.1:${proxy.port}` },
    });
    const c2 = await KubeClient.fromCredentials(await bad.credentials());
    try {
      const err = await c2.request({ method: 'GET', path: '/api/v1/nodes' }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(KubeTransportError);
      expect(String(err)).toMatch(
        /proxy http:\/\/me:xxxxx@127\.0\.0\.1:\d+ refused CONNECT to api\.nlc\.test:\d+: 407/,
      );
      expect(String(err)).not.toContain('wrong');
    } finally {
      c2.close();
    }
  });

  it('an http:// server through the proxy gets absolute-form requests (no tunnel), as Go sends them', async () => {
    proxy = await startConnectProxy();
    const lb = await loopbackServer(
      (req, res) => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ path: req.url, host: req.headers.host }));
      },
      { proxyUrl: proxy.url },
    );
    try {
      const out = await lb.client.request<{ path: string; host: string }>({
        method: 'GET',
        path: '/api/v1/nodes',
        query: { limit: 5 },
      });
      const port = (lb.server.address() as { port: number }).port;
      expect(out).toEqual({ path: '/api/v1/nodes?limit=5', host: `127.0.0.1:${port}` });
      expect(proxy.forwarded).toEqual([`http://127.0.0.1:${port}/api/v1/nodes?limit=5`]);
      expect(proxy.tunnels).toEqual([]);
    } finally {
      await lb.close();
    }
  });

  it('refuses a socks5 proxy-url loudly at start', () => {
    expect(() =>
      resolveKubeconfig({
        flag: kubeconfig('https://127.0.0.1:6443', ', proxy-url: "socks5://127.0.0.1:1080"'),
        env: {},
        homeDir: dir,
      }),
    ).toThrow(KubeconfigError);
    expect(() =>
      resolveKubeconfig({
        flag: kubeconfig('https://127.0.0.1:6443', ', proxy-url: "socks5://127.0.0.1:1080"'),
        env: {},
        homeDir: dir,
      }),
    ).toThrow(/proxy-url: socks5:\/\/127\.0\.0\.1:1080: SOCKS5 proxies are not supported/);
  });
});

describe('KubeClient and an API server on https://[::1]:PORT', () => {
  // The serving certificate names the server by its IP only (IP SAN ::1), as kube-apiserver's does.
  const pki = loopbackServerPki(['::1']);
  let dir: string;
  let stub: StubServer;
  let proxy: TestProxy | undefined;
  const sni: (string | false | null)[] = [];
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'nlc-ipv6-'));
  });
  afterEach(async () => {
    await proxy?.close();
    await stub?.close();
  });
  const start = async () => {
    stub = await startStubServer(
      (req, res) => {
        sni.push((req.socket as TLSSocket).servername);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ ok: true }));
      },
      { cert: pki.server.cert, key: pki.server.key },
      '::1',
    );
  };
  const kubeconfig = (extra = '') => kubeconfigFile(dir, stub.url, pki.ca.cert, extra);

  it('direct, past HTTPS_PROXY (loopback); the certificate checked against the IP SAN, no SNI sent', async () => {
    await start();
    expect(stub.url).toMatch(/^https:\/\/\[::1\]:\d+$/);
    const r = resolveKubeconfig({
      flag: kubeconfig(),
      env: {},
      homeDir: dir,
      proxyEnv: { HTTPS_PROXY: 'http://127.0.0.1:9' },
    });
    expect(r.proxy).toBeUndefined();
    const client = await KubeClient.fromCredentials(await r.credentials(), { defaultTimeoutMs: 5000 });
    try {
      sni.length = 0;
      await expect(client.request({ method: 'GET', path: '/api/v1/nodes' })).resolves.toEqual({ ok: true });
      // RFC 6066: SNI carries host names only.
      expect(sni).toEqual([false]);
    } finally {
      client.close();
    }
  });

  it('through a kubeconfig proxy-url: CONNECT [::1]:PORT, then TLS to the IP as above', async () => {
    await start();
    proxy = await startConnectProxy();
    const r = resolveKubeconfig({ flag: kubeconfig(`, proxy-url: "${proxy.url}"`), env: {}, homeDir: dir });
    const client = await KubeClient.fromCredentials(await r.credentials(), { defaultTimeoutMs: 5000 });
    try {
      sni.length = 0;
      await expect(client.request({ method: 'GET', path: '/api/v1/pods' })).resolves.toEqual({ ok: true });
      expect(proxy.tunnels).toEqual([`[::1]:${stub.port}`]);
      expect(sni).toEqual([false]);
    } finally {
      client.close();
    }
  });
});

describe('connectTunnel: what a proxy answers to CONNECT', () => {
  /** A raw TCP "proxy" that reads the CONNECT request, then does `answer` with the socket. */
  async function rawProxy(
    answer: (socket: net.Socket, request: string) => void,
  ): Promise<{ url: URL; close(): void }> {
    const server = net.createServer((socket) => {
      let got = '';
      socket.on('data', (d) => {
        got += d.toString('latin1');
        if (got.includes('\r\n\r\n')) answer(socket, got);
      });
      socket.on('error', () => undefined);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const port = (server.address() as net.AddressInfo).port;
    return { url: new URL(`http://u:p%40ss@127.0.0.1:${port}`), close: () => server.close() };
  }
  const tunnel = (proxy: URL) => connectTunnel({ proxy, host: 'api.nlc.test', port: 6443, timeoutMs: 5_000 });

  it('a 200 gives the socket, with any bytes after the answer still to be read; the request carries the credentials', async () => {
    let request = '';
    const p = await rawProxy((s, req) => {
      request = req;
      s.write('HTTP/1.1 200 Connection established\r\n\r\nEARLY');
    });
    try {
      const socket = await tunnel(p.url);
      await new Promise((r) => setTimeout(r, 50)); // the caller may start reading later
      const first = await new Promise<string>((r) =>
        socket.once('data', (d: Buffer) => r(d.toString())).resume(),
      );
      socket.destroy();
      expect(first).toBe('EARLY');
      expect(request).toBe(
        `CONNECT api.nlc.test:6443 HTTP/1.1\r\nHost: api.nlc.test:6443\r\nProxy-Authorization: Basic ${Buffer.from('u:p@ss').toString('base64')}\r\n\r\n`,
      );
    } finally {
      p.close();
    }
  });

  it.each([
    [
      'closes before answering',
      (s: net.Socket) => s.end(),
      /closed the connection before answering CONNECT/,
      'ECONNRESET',
    ],
    [
      'answers something that is not HTTP',
      (s: net.Socket) => s.write('SSH-2.0-x\r\n\r\n'),
      /refused CONNECT to api\.nlc\.test:6443: not an HTTP answer/,
      'EPROXY',
    ],
    [
      'answers 16 KiB without an end of headers',
      (s: net.Socket) => s.write(`HTTP/1.1 200 OK\r\n${'x'.repeat(17 * 1024)}`),
      /CONNECT answer too long/,
      'EPROXY',
    ],
  ])(
    'a proxy that %s: refused, named (password masked), with a code',
    async (_what, answer, message, code) => {
      const p = await rawProxy(answer);
      try {
        const err = (await tunnel(p.url).catch((e: unknown) => e)) as NodeJS.ErrnoException;
        expect(err.message).toMatch(message);
        expect(err.message).toContain(`proxy http://u:xxxxx@127.0.0.1:${p.url.port}`);
        expect(err.code).toBe(code);
      } finally {
        p.close();
      }
    },
  );
});
