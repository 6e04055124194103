import type http from 'node:http';
import { lastValueFrom, toArray } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KubeApiError, type KubeClient, KubeTransportError } from '../kube/client.js';
import { parseSkippingManagedFields } from '../kube/json.js';
import { type LoopbackServer, loopbackServer } from '../kube/testing.js';
import { kubeTransport, leaseTarget, podTarget } from './transport.js';

// A loopback HTTP server scripted per test (real sockets, no timers involved).
let handler: (req: http.IncomingMessage, res: http.ServerResponse) => void = () => undefined;
let stub: LoopbackServer;
let client: KubeClient;

beforeAll(async () => {
  stub = await loopbackServer((req, res) => handler(req, res));
  client = stub.client;
});
afterAll(async () => {
  await stub?.close();
});

describe('kubeTransport', () => {
  it('lists one page with limit, continue and selectors', async () => {
    let url: URL | undefined;
    handler = (req, res) => {
      url = new URL(req.url ?? '', 'http://x');
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ metadata: { resourceVersion: '9' }, items: [{ metadata: { name: 'a' } }] }));
    };
    const t = kubeTransport(client, podTarget({ fieldSelector: 'spec.nodeName=n1' }));
    const page = await t.list({ limit: 50, continue: 'tok', timeoutMs: 5000 }, new AbortController().signal);
    expect(page.items).toHaveLength(1);
    expect(url?.pathname).toBe('/api/v1/pods');
    expect(Object.fromEntries(url!.searchParams)).toEqual({
      limit: '50',
      continue: 'tok',
      fieldSelector: 'spec.nodeName=n1',
    });
  });

  it('parses list pages with parseList: managedFields of every item cut, the rest as sent', async () => {
    const item = (name: string) => ({
      metadata: {
        name,
        uid: `u-${name}`,
        managedFields: [{ manager: 'kubelet', fieldsV1: { 'f:spec': {} } }],
      },
      spec: { renewTime: '2026-12-01T00:00:00.000000Z' },
    });
    handler = (_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ metadata: { resourceVersion: '9' }, items: [item('a'), item('b')] }));
    };
    const t = kubeTransport(client, leaseTarget(), { parseList: parseSkippingManagedFields });
    const page = await t.list({ limit: 50, timeoutMs: 5000 }, new AbortController().signal);
    const want = [item('a'), item('b')].map((i) => ({
      ...i,
      metadata: { name: i.metadata.name, uid: i.metadata.uid },
    }));
    expect(page).toEqual({ metadata: { resourceVersion: '9' }, items: want });
  });

  it('watches with the right query and delivers the body as text, multi-byte characters intact', async () => {
    let url: URL | undefined;
    const body = '{"type":"ADDED","object":{"metadata":{"name":"é-ü-✓"}}}\n';
    const bytes = Buffer.from(body);
    handler = (req, res) => {
      url = new URL(req.url ?? '', 'http://x');
      res.writeHead(200, { 'content-type': 'application/json' });
      // Split inside a multi-byte character.
      const cut = bytes.indexOf(Buffer.from('é')) + 1;
      res.write(bytes.subarray(0, cut));
      setImmediate(() => res.end(bytes.subarray(cut)));
    };
    const t = kubeTransport(client, leaseTarget());
    const chunks = await t.watch(
      { resourceVersion: '42', timeoutSeconds: 321, allowWatchBookmarks: true },
      new AbortController().signal,
    );
    const all = await lastValueFrom(chunks.pipe(toArray()));
    expect(all.join('')).toBe(body);
    expect(url?.pathname).toBe('/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases');
    expect(Object.fromEntries(url!.searchParams)).toEqual({
      watch: 'true',
      resourceVersion: '42',
      allowWatchBookmarks: 'true',
      timeoutSeconds: '321',
    });
  });

  it('a connection cut mid-stream is an error, not a clean end', async () => {
    handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('{"type":"ADDED"');
      setImmediate(() => res.socket?.destroy());
    };
    const t = kubeTransport(client, leaseTarget());
    const chunks = await t.watch(
      { resourceVersion: '1', timeoutSeconds: 300, allowWatchBookmarks: true },
      new AbortController().signal,
    );
    await expect(lastValueFrom(chunks)).rejects.toBeInstanceOf(KubeTransportError);
  });

  it('a refused watch (410) rejects with KubeApiError', async () => {
    handler = (_req, res) => {
      res.writeHead(410, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'Status', code: 410, reason: 'Expired' }));
    };
    const t = kubeTransport(client, leaseTarget());
    const p = t.watch(
      { resourceVersion: '1', timeoutSeconds: 300, allowWatchBookmarks: true },
      new AbortController().signal,
    );
    await expect(p).rejects.toSatisfy((e: unknown) => e instanceof KubeApiError && e.status === 410);
  });

  it('unsubscribing or aborting closes the connection on the server side', async () => {
    let closed!: () => void;
    let closes = 0;
    const serverSawClose = () => new Promise<void>((r) => (closed = r));
    handler = (req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write('\n');
      req.socket.once('close', () => {
        closes++;
        closed();
      });
    };
    const t = kubeTransport(client, leaseTarget());
    for (const how of ['unsubscribe', 'abort'] as const) {
      const done = serverSawClose();
      const ac = new AbortController();
      const chunks = await t.watch(
        { resourceVersion: '1', timeoutSeconds: 300, allowWatchBookmarks: true },
        ac.signal,
      );
      const first = new Promise<void>((r) => {
        const sub = chunks.subscribe({
          next: () => {
            r();
            if (how === 'unsubscribe') sub.unsubscribe();
            else ac.abort();
          },
          error: () => undefined,
        });
      });
      await first;
      await done;
    }
    expect(closes).toBe(2);
  });
});
