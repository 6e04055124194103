import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  describeRequest,
  KubeApiError,
  type KubeClient,
  KubeTransportError,
  parseRetryAfter,
} from './client.js';
import { type LoopbackServer, loopbackServer } from './testing.js';

describe('describeRequest', () => {
  it.each([
    ['GET', '/api/v1/nodes', undefined, 'list', 'nodes'],
    ['GET', '/api/v1/nodes', { watch: true }, 'watch', 'nodes'],
    ['GET', '/api/v1/nodes/n1', undefined, 'get', 'nodes'],
    ['PATCH', '/api/v1/nodes/n1/status', undefined, 'patch', 'nodes/status'],
    [
      'PUT',
      '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1',
      undefined,
      'update',
      'leases',
    ],
    ['POST', '/apis/coordination.k8s.io/v1/namespaces/x/leases', undefined, 'create', 'leases'],
    ['PATCH', '/api/v1/namespaces/default/pods/p/status', undefined, 'patch', 'pods/status'],
    ['DELETE', '/api/v1/namespaces/default/pods/p', undefined, 'delete', 'pods'],
    ['GET', '/api/v1/namespaces', undefined, 'list', 'namespaces'],
  ] as const)('%s %s -> %s %s', (method, path, query, verb, resource) => {
    expect(describeRequest(method, path, query)).toEqual({ verb, resource });
  });
});

describe('KubeApiError.isTooLargeResourceVersion', () => {
  const err = (status: number, body: unknown) => new KubeApiError(status, body, {}, 'GET /x');
  it("reads the ResourceVersionTooLarge cause, or an older server's 504 message; nothing else", () => {
    const cause = { details: { causes: [{ reason: 'ResourceVersionTooLarge' }] } };
    expect(
      err(504, { ...cause, reason: 'Timeout', message: 'Timeout: the request timed out' })
        .isTooLargeResourceVersion,
    ).toBe(true);
    expect(
      err(504, { reason: 'Timeout', message: 'Timeout: Too large resource version: 9, current: 3' })
        .isTooLargeResourceVersion,
    ).toBe(true);
    expect(
      err(504, { reason: 'Timeout', message: 'Timeout: request did not complete' }).isTooLargeResourceVersion,
    ).toBe(false);
    expect(err(500, { message: 'Too large resource version' }).isTooLargeResourceVersion).toBe(false);
    expect(err(504, 'not json').isTooLargeResourceVersion).toBe(false);
  });
});

describe('parseRetryAfter', () => {
  it('reads seconds and HTTP dates, ignores garbage', () => {
    expect(parseRetryAfter('3')).toBe(3);
    expect(parseRetryAfter(undefined)).toBeUndefined();
    expect(parseRetryAfter('soon')).toBeUndefined();
    const future = new Date(Date.now() + 10_000).toUTCString();
    expect(parseRetryAfter(future)).toBeGreaterThan(8);
  });
});

describe('KubeClient over plain HTTP', () => {
  let stub: LoopbackServer;
  let client: KubeClient;
  const seen: { method?: string; url?: string; auth?: string; body: string }[] = [];
  const observations: { verb: string; resource: string; code: string }[] = [];
  beforeAll(async () => {
    stub = await loopbackServer(
      (req, res) => {
        let body = '';
        req.on('data', (c) => {
          body += c;
        });
        req.on('end', () => {
          seen.push({ method: req.method, url: req.url, auth: req.headers.authorization, body });
          if (req.url?.startsWith('/api/v1/nodes/busy')) {
            res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '2' });
            res.end(
              JSON.stringify({ kind: 'Status', reason: 'TooManyRequests', message: 'slow down', code: 429 }),
            );
          } else if (req.url?.startsWith('/api/v1/nodes/hang')) {
            // never answers
          } else {
            res.writeHead(200, { 'content-type': 'application/json' });
            res.end(JSON.stringify({ ok: true, path: req.url }));
          }
        });
      },
      { token: 'secret-token', client: { observer: (o) => observations.push(o), defaultTimeoutMs: 300 } },
    );
    client = stub.client;
  });
  afterAll(async () => {
    await stub?.close();
  });

  it('sends the bearer token, query and JSON body, and reports metrics', async () => {
    const out = await client.request<{ path: string }>({
      method: 'PATCH',
      path: '/api/v1/nodes/n1',
      query: { fieldManager: 'nlc', dryRun: undefined },
      body: { a: 1 },
      contentType: 'application/merge-patch+json',
    });
    expect(out.path).toBe('/api/v1/nodes/n1?fieldManager=nlc');
    const last = seen.at(-1)!;
    expect(last.auth).toBe('Bearer secret-token');
    expect(JSON.parse(last.body)).toEqual({ a: 1 });
    expect(observations.at(-1)).toMatchObject({ verb: 'patch', resource: 'nodes', code: '200' });
  });

  it('turns a 429 into KubeApiError with Retry-After', async () => {
    const err = await client.request({ method: 'GET', path: '/api/v1/nodes/busy' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeApiError);
    expect((err as KubeApiError).isTooManyRequests).toBe(true);
    expect((err as KubeApiError).retryAfterSeconds).toBe(2);
    expect((err as KubeApiError).message).toContain('slow down');
  });

  it('times out a request that never answers', async () => {
    const err = await client.request({ method: 'GET', path: '/api/v1/nodes/hang' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KubeTransportError);
    expect((err as KubeTransportError).code).toBe('TIMEOUT');
    expect(observations.at(-1)).toMatchObject({ verb: 'get', code: '<error:TIMEOUT>' });
  });

  it('aborts on signal', async () => {
    const ac = new AbortController();
    const p = client.request({
      method: 'GET',
      path: '/api/v1/nodes/hang',
      signal: ac.signal,
      timeoutMs: 5000,
    });
    ac.abort();
    await expect(p).rejects.toMatchObject({ code: 'ABORTED' });
  });
});
