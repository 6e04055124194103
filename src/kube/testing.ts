import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeClient, type KubeClientOptions } from './client.js';

/**
 * Unit-test helper (not built into dist): a plain-HTTP server on loopback standing in for the API
 * server's HTTP edge, and a KubeClient pointed at it. The real API server is exercised in e2e.
 */
export interface LoopbackServer {
  server: http.Server;
  client: KubeClient;
  close(): Promise<void>;
}

export async function loopbackServer(
  handler: http.RequestListener,
  opts: { token?: string; client?: KubeClientOptions } = {},
): Promise<LoopbackServer> {
  const server = http.createServer(handler);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as AddressInfo;
  const kc = new KubeConfig();
  kc.loadFromOptions({
    // client-node only allows plain HTTP with skipTLSVerify set.
    clusters: [{ name: 'c', server: `http://127.0.0.1:${port}`, skipTLSVerify: true }],
    users: [{ name: 'u', token: opts.token ?? 't' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  const client = await KubeClient.fromKubeConfig(kc, opts.client);
  return {
    server,
    client,
    async close() {
      client.close();
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
}
