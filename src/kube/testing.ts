import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeClient, type KubeClientOptions } from './client.js';

/**
 * Unit-test helper (not built into dist): a server on loopback standing in for the API server's
 * HTTP edge (plain HTTP, or HTTPS with an optional client-certificate check), and a KubeClient
 * pointed at it. The real API server is exercised in e2e.
 */
export interface StubServer {
  server: http.Server;
  /** http://127.0.0.1:port or https://127.0.0.1:port ([::1] for an IPv6 stub) */
  url: string;
  port: number;
  close(): Promise<void>;
}

export interface StubTls {
  cert: string;
  key: string;
  /** CA that client certificates must chain to (requests a client certificate when set). */
  clientCa?: string;
}

export async function startStubServer(
  handler: http.RequestListener,
  tls?: StubTls,
  /** The loopback address to listen on: 127.0.0.1, or ::1 (the url then has it in brackets). */
  host = '127.0.0.1',
): Promise<StubServer> {
  const server: http.Server = tls
    ? https.createServer(
        {
          cert: tls.cert,
          key: tls.key,
          ...(tls.clientCa ? { ca: tls.clientCa, requestCert: true, rejectUnauthorized: false } : {}),
        },
        handler,
      )
    : http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, host, r));
  const { port } = server.address() as AddressInfo;
  return {
    server,
    url: `${tls ? 'https' : 'http'}://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}

export interface LoopbackServer {
  server: http.Server;
  client: KubeClient;
  close(): Promise<void>;
}

export async function loopbackServer(
  handler: http.RequestListener,
  opts: { token?: string; client?: KubeClientOptions; proxyUrl?: string } = {},
): Promise<LoopbackServer> {
  const stub = await startStubServer(handler);
  const kc = new KubeConfig();
  kc.loadFromOptions({
    // client-node only allows plain HTTP with skipTLSVerify set.
    clusters: [
      {
        name: 'c',
        server: stub.url,
        skipTLSVerify: true,
        ...(opts.proxyUrl ? { proxyUrl: opts.proxyUrl } : {}),
      },
    ],
    users: [{ name: 'u', token: opts.token ?? 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  const client = await KubeClient.fromKubeConfig(kc, opts.client);
  return {
    server: stub.server,
    client,
    async close() {
      client.close();
      await stub.close();
    },
  };
}
