import type http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { asyncScheduler } from 'rxjs';
import { afterEach, describe, expect, it } from 'vitest';
import type { Clock } from '../clock/clock.js';
import { KubeClient } from '../kube/client.js';
import { type AuthSource, type ClientAuth, makeCredentials } from '../kube/credentials.js';
import { RequestRateLimiter } from '../kube/rate-limit.js';
import { loopbackServerPki } from '../kube/testing/pki.js';
import { type StubServer, startStubServer } from '../kube/testing.js';
import type { Node } from '../kube/types.js';
import { memoryLogger } from '../log/logger.js';
import { ApiWriter, createWriterMetrics } from './writer.js';

/**
 * The writer's fence is asked at the last moment: a write it let through can still wait inside the
 * API client (for credentials, for new credentials after a 401, for a new connection's TCP and TLS
 * set-up). A fence that closes during such a wait (another node-lifecycle controller seen, the
 * lease lost) must stop it: nothing of it reaches the API server. Real sockets and timers on
 * loopback.
 */

const clock: Clock = { scheduler: asyncScheduler, wall: () => Date.now() };
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** An API server that records each request it receives; 401 to the token `stale`. */
async function apiServer(tls?: { cert: string; key: string }) {
  const received: string[] = [];
  const stub = await startStubServer((req: http.IncomingMessage, res: http.ServerResponse) => {
    req.resume();
    req.on('end', () => {
      received.push(`${req.method} ${req.url?.split('?')[0]}`);
      if (req.headers.authorization === 'Bearer stale') {
        res.writeHead(401, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ kind: 'Status', code: 401, reason: 'Unauthorized' }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ metadata: { name: 'n1', resourceVersion: '8' } }));
    });
  }, tls);
  cleanups.push(() => stub.close());
  return { stub, received };
}

/** Credentials answered after `authDelayMs`; after a 401, new ones after `refreshDelayMs`. */
function slowAuth(o: { token: string; authDelayMs?: number; refreshDelayMs?: number }): AuthSource {
  let current: ClientAuth = { headers: { Authorization: `Bearer ${o.token}` } };
  return {
    auth: async () => {
      await sleep(o.authDelayMs ?? 0);
      return current;
    },
    unauthorized: async () => {
      await sleep(o.refreshDelayMs ?? 0);
      current = { headers: { Authorization: 'Bearer fresh' } };
      return true;
    },
  };
}

async function writerFor(server: StubServer, source: AuthSource, ca?: string) {
  const limiter = new RequestRateLimiter(100, 100, clock.scheduler);
  const client = await KubeClient.fromCredentials(
    makeCredentials(new URL(server.url), ca ? { ca: Buffer.from(ca) } : {}, source),
    { rateLimiter: limiter },
  );
  cleanups.push(() => client.close());
  let refusal: string | undefined;
  const writer = new ApiWriter({
    client,
    fence: () => refusal,
    dryRun: false,
    logger: memoryLogger(2),
    metrics: createWriterMetrics(new Registry()),
    clock,
    qps: 100,
    burst: 100,
    limiter,
    component: 'node-controller',
    instance: 'nlc-0',
  });
  const node = { metadata: { name: 'n1', resourceVersion: '7' } } as Node;
  const patch = () => writer.patchNodeStatus('n1', node, () => ({ status: { conditions: [] } }));
  return {
    patch,
    refuse: (why: string) => {
      refusal = why;
    },
  };
}

const REFUSAL = 'another node-lifecycle controller is running';

describe('the fence closes while a write waits inside the API client: nothing is sent', () => {
  it('waiting for credentials', async () => {
    const api = await apiServer();
    const w = await writerFor(api.stub, slowAuth({ token: 'ok', authDelayMs: 500 }));
    const out = w.patch();
    await sleep(50);
    w.refuse(REFUSAL);
    expect(await out).toEqual({ kind: 'fenced', reason: REFUSAL });
    await sleep(100);
    expect(api.received).toEqual([]);
  });

  it('waiting for new credentials after a 401 (the second attempt is not sent)', async () => {
    const api = await apiServer();
    const w = await writerFor(api.stub, slowAuth({ token: 'stale', refreshDelayMs: 500 }));
    const out = w.patch();
    await sleep(150); // the first attempt was answered 401; new credentials come 500 ms after it
    expect(api.received).toEqual(['PATCH /api/v1/nodes/n1/status']);
    w.refuse(REFUSAL);
    expect(await out).toEqual({ kind: 'fenced', reason: REFUSAL });
    await sleep(100);
    expect(api.received).toEqual(['PATCH /api/v1/nodes/n1/status']);
  });

  it("waiting for a new connection's TLS handshake", async () => {
    const pki = loopbackServerPki();
    const api = await apiServer({ cert: pki.server.cert, key: pki.server.key });
    // In front of it: a relay that holds each new connection 500 ms before passing it on.
    const sockets = new Set<net.Socket>();
    const relay = net.createServer((down) => {
      sockets.add(down);
      down.on('error', () => undefined);
      setTimeout(() => {
        const up = net.connect(api.stub.port, '127.0.0.1');
        sockets.add(up);
        up.on('error', () => undefined);
        down.pipe(up).pipe(down);
      }, 500);
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    cleanups.push(async () => {
      for (const s of sockets) s.destroy();
      await new Promise((r) => relay.close(r));
    });
    const url = `https://127.0.0.1:${(relay.address() as AddressInfo).port}`;
    const w = await writerFor({ ...api.stub, url }, slowAuth({ token: 'ok' }), pki.ca.cert);
    const out = w.patch();
    await sleep(50);
    w.refuse(REFUSAL);
    expect(await out).toEqual({ kind: 'fenced', reason: REFUSAL });
    await sleep(600);
    expect(api.received).toEqual([]);
    // The fence open again: the next write goes out (over a reused or a new connection).
    w.refuse(undefined as unknown as string);
    expect(await w.patch()).toMatchObject({ kind: 'applied' });
    expect(api.received).toEqual(['PATCH /api/v1/nodes/n1/status']);
  });
});
