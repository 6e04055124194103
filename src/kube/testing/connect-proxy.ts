import http from 'node:http';
import type { AddressInfo } from 'node:net';
import net from 'node:net';

/**
 * Test helper (not built into dist): a real HTTP proxy on loopback. It tunnels CONNECT requests
 * (https servers) and forwards absolute-form requests (http servers), counting both, and can demand
 * Proxy-Authorization.
 */
export interface TestProxy {
  url: string;
  port: number;
  /** CONNECT tunnels opened, by target authority. */
  tunnels: string[];
  /** Absolute-form requests forwarded (URLs). */
  forwarded: string[];
  /** Proxy-Authorization headers seen. */
  proxyAuth: (string | undefined)[];
  /** Tunnels currently open. */
  readonly openTunnels: number;
  close(): Promise<void>;
}

export async function startConnectProxy(
  opts: {
    /** "user:password" the proxy demands. */
    requireAuth?: string;
    /** Names only the proxy can resolve (name -> IP), like a proxy in front of a private network. */
    hosts?: Record<string, string>;
  } = {},
): Promise<TestProxy> {
  const tunnels: string[] = [];
  const forwarded: string[] = [];
  const proxyAuth: (string | undefined)[] = [];
  const open = new Set<net.Socket>();
  const authorized = (h: string | undefined) =>
    opts.requireAuth === undefined || h === `Basic ${Buffer.from(opts.requireAuth).toString('base64')}`;

  const server = http.createServer((req, res) => {
    proxyAuth.push(req.headers['proxy-authorization']);
    if (!authorized(req.headers['proxy-authorization'])) {
      res.writeHead(407, { 'proxy-authenticate': 'Basic realm="test"' }).end();
      return;
    }
    let target: URL;
    try {
      target = new URL(req.url ?? '');
    } catch {
      res.writeHead(400).end('absolute-form request expected');
      return;
    }
    forwarded.push(target.href);
    const mapped = opts.hosts?.[target.hostname];
    if (mapped) target.hostname = mapped;
    const headers = { ...req.headers };
    delete headers['proxy-authorization'];
    const up = http.request(target, { method: req.method, headers, agent: false }, (upRes) => {
      res.writeHead(upRes.statusCode ?? 502, upRes.headers);
      upRes.pipe(res);
    });
    up.on('error', () => res.writeHead(502).end());
    req.pipe(up);
  });
  server.on('connect', (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    proxyAuth.push(req.headers['proxy-authorization']);
    if (!authorized(req.headers['proxy-authorization'])) {
      client.end(
        'HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="test"\r\n\r\n',
      );
      return;
    }
    const authority = req.url ?? '';
    const i = authority.lastIndexOf(':');
    const name = authority.slice(0, i).replace(/^\[(.*)\]$/, '$1');
    const host = opts.hosts?.[name] ?? name;
    const port = Number(authority.slice(i + 1));
    const upstream = net.connect(port, host, () => {
      tunnels.push(authority);
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    open.add(client);
    const done = () => {
      open.delete(client);
      client.destroy();
      upstream.destroy();
    };
    upstream.on('error', () => {
      if (!tunnels.includes(authority)) client.end('HTTP/1.1 502 Bad Gateway\r\n\r\n');
      done();
    });
    client.on('error', done);
    client.on('close', done);
    upstream.on('close', done);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    tunnels,
    forwarded,
    proxyAuth,
    get openTunnels() {
      return open.size;
    },
    async close() {
      for (const s of open) s.destroy();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
