import { KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { KubeClient, KubeTransportError } from './client.js';
import { startConnectProxy } from './testing/connect-proxy.js';
import { fullBacklogListener, silentListener } from './testing/dead-listeners.js';
import { loopbackServerPki } from './testing/pki.js';

/**
 * A connection's set-up is bounded apart from the request's own deadline, as client-go bounds it
 * (net.Dialer Timeout 30 s, http.Transport TLSHandshakeTimeout 10 s): a connection that hangs while
 * the network is not ready fails within that and is retried, instead of holding a list page for its
 * whole timeout. Real sockets on loopback; our timers run on virtual time (I/O stays real).
 */

const pki = loopbackServerPki();
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function clientFor(server: string, proxyUrl?: string): Promise<KubeClient> {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      {
        name: 'c',
        server,
        caData: Buffer.from(pki.ca.cert).toString('base64'),
        ...(server.startsWith('http:') ? { skipTLSVerify: true } : {}),
        ...(proxyUrl ? { proxyUrl } : {}),
      },
    ],
    users: [{ name: 'u', token: 't0k' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  const client = await KubeClient.fromKubeConfig(kc);
  cleanups.push(() => client.close());
  return client;
}

/** A promise's outcome as it stands, without waiting for it. */
function watchOutcome<T>(p: Promise<T>): { settled: boolean; error: unknown } {
  const o = { settled: false, error: undefined as unknown };
  p.then(
    () => {
      o.settled = true;
    },
    (err: unknown) => {
      o.settled = true;
      o.error = err;
    },
  );
  return o;
}

/** Lets real I/O callbacks and the promise chains behind them run (timers are virtual). */
async function realTurns(n = 20): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise<void>((r) => setImmediate(r));
}

/**
 * Sends a list with a 60 s deadline, waits until `ready` (real I/O: the connection got as far as
 * it will), then checks it is still pending at `boundMs` - 1 ms of virtual time and failed at
 * `boundMs`; returns the error.
 */
async function failsAt(client: KubeClient, ready: () => Promise<void>, boundMs: number): Promise<unknown> {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
  const out = watchOutcome(client.request({ method: 'GET', path: '/api/v1/nodes', timeoutMs: 60_000 }));
  await ready();
  await realTurns();
  await vi.advanceTimersByTimeAsync(boundMs - 1);
  await realTurns();
  expect(out.settled, `still pending ${boundMs - 1} ms into set-up`).toBe(false);
  await vi.advanceTimersByTimeAsync(1);
  await realTurns();
  expect(out.settled, `failed ${boundMs} ms into set-up`).toBe(true);
  expect(out.error).toBeInstanceOf(KubeTransportError);
  expect((out.error as KubeTransportError).code).toBe('ETIMEDOUT');
  return out.error;
}

describe('connection set-up bounded apart from the request deadline (client-go: 30 s dial, 10 s TLS handshake)', () => {
  it('a server that accepts TCP and never answers the TLS handshake: fails after 10 s, not the 60 s deadline', async () => {
    const silent = await silentListener();
    cleanups.push(() => silent.close());
    const client = await clientFor(`https://127.0.0.1:${silent.port}`);
    const err = await failsAt(client, () => silent.acceptedAtLeast(1), 10_000);
    expect(String(err)).toMatch(
      new RegExp(`TLS handshake with 127\\.0\\.0\\.1:${silent.port}: no answer within 10s`),
    );
  });

  it('a listener that never accepts (accept queue full): the dial fails after 30 s, https and http alike', async () => {
    const dead = await fullBacklogListener();
    cleanups.push(() => dead.close());
    for (const scheme of ['https', 'http']) {
      const client = await clientFor(`${scheme}://127.0.0.1:${dead.port}`);
      const err = await failsAt(client, async () => undefined, 30_000);
      expect(String(err)).toMatch(
        new RegExp(`connect to 127\\.0\\.0\\.1:${dead.port}: no TCP connection within 30s`),
      );
      vi.useRealTimers();
    }
  });

  it('through a CONNECT proxy: the API server never answering the TLS handshake in the tunnel fails after 10 s', async () => {
    const silent = await silentListener();
    cleanups.push(() => silent.close());
    const proxy = await startConnectProxy();
    cleanups.push(() => proxy.close());
    const client = await clientFor(`https://127.0.0.1:${silent.port}`, proxy.url);
    const err = await failsAt(client, () => silent.acceptedAtLeast(1), 10_000);
    expect(proxy.tunnels).toEqual([`127.0.0.1:${silent.port}`]);
    expect(String(err)).toMatch(
      new RegExp(`TLS handshake with 127\\.0\\.0\\.1:${silent.port}: no answer within 10s`),
    );
  });

  it('a proxy that never accepts: the dial to the proxy fails after 30 s (CONNECT tunnel and absolute-form alike)', async () => {
    const dead = await fullBacklogListener();
    cleanups.push(() => dead.close());
    const tunnelled = await clientFor('https://127.0.0.1:6443', `http://127.0.0.1:${dead.port}`);
    const err = await failsAt(tunnelled, async () => undefined, 30_000);
    expect(String(err)).toMatch(
      new RegExp(
        `proxy http://127\\.0\\.0\\.1:${dead.port}: connect to 127\\.0\\.0\\.1:${dead.port}: no TCP connection within 30s`,
      ),
    );
    vi.useRealTimers();
    const forwarded = await clientFor('http://127.0.0.1:8080', `http://127.0.0.1:${dead.port}`);
    const err2 = await failsAt(forwarded, async () => undefined, 30_000);
    expect(String(err2)).toMatch(
      new RegExp(`connect to 127\\.0\\.0\\.1:${dead.port}: no TCP connection within 30s`),
    );
  });

  it('an https:// proxy that never answers its TLS handshake: fails after 10 s', async () => {
    const silent = await silentListener();
    cleanups.push(() => silent.close());
    const client = await clientFor('https://127.0.0.1:6443', `https://127.0.0.1:${silent.port}`);
    const err = await failsAt(client, () => silent.acceptedAtLeast(1), 10_000);
    expect(String(err)).toMatch(
      new RegExp(
        `proxy https://127\\.0\\.0\\.1:${silent.port}: TLS handshake with 127\\.0\\.0\\.1:${silent.port}: no answer within 10s`,
      ),
    );
  });

  it('a proxy that accepts and never answers CONNECT: fails 30 s after the CONNECT was sent', async () => {
    const silent = await silentListener();
    cleanups.push(() => silent.close());
    const client = await clientFor('https://127.0.0.1:6443', `http://127.0.0.1:${silent.port}`);
    const err = await failsAt(client, () => silent.acceptedAtLeast(1), 30_000);
    expect(String(err)).toMatch(/no CONNECT answer within 30s/);
  });
});
