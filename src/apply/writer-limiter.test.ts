import { VirtualTimeScheduler } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RequestRateLimiter } from '../kube/rate-limit.js';
import { type LoopbackServer, loopbackServer } from '../kube/testing.js';
import type { Node } from '../kube/types.js';
import { memoryLogger } from '../log/logger.js';
import { createRegistry } from '../metrics/registry.js';
import { ApiWriter, createWriterMetrics } from './writer.js';

/**
 * The writer and the API client share one rate limiter (reads and writes, as in client-go): a write
 * takes one token, in the writer, before its fence check, and is not made to wait again in the
 * client.
 */
const scheduler = new VirtualTimeScheduler();
const limiter = new RequestRateLimiter(1, 1, scheduler);
const arrived: string[] = [];
let stub: LoopbackServer;

beforeAll(async () => {
  stub = await loopbackServer(
    (req, res) => {
      arrived.push(`${req.method} ${req.url}`);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ metadata: { name: 'n1', resourceVersion: '2' } }));
    },
    { client: { rateLimiter: limiter } },
  );
});
afterAll(async () => {
  await stub?.close();
});

async function advance(ms: number): Promise<void> {
  scheduler.schedule(() => undefined, ms);
  scheduler.maxFrames = scheduler.now() + ms;
  scheduler.flush();
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

async function until(check: () => boolean): Promise<void> {
  const end = performance.now() + 2000;
  while (!check() && performance.now() < end) await new Promise((r) => setTimeout(r, 5));
}

function writer(fence: () => string | undefined) {
  return new ApiWriter({
    client: stub.client,
    fence,
    dryRun: false,
    logger: memoryLogger(),
    metrics: createWriterMetrics(createRegistry({ defaultMetrics: false })),
    clock: { scheduler, wall: () => 0 },
    qps: 1000,
    burst: 1000,
    limiter,
    component: 'node-controller',
    instance: 'test',
  });
}

const node: Node = { metadata: { name: 'n1', resourceVersion: '1' }, spec: {} };
const addTaint = () => ({ spec: { taints: [{ key: 'ours', effect: 'NoSchedule' }] } });

describe('ApiWriter with the client rate limiter', () => {
  it('a write waits for one shared token, then is sent without a second wait in the client', async () => {
    // A read takes the only token.
    await stub.client.request({ method: 'GET', path: '/api/v1/nodes' });
    arrived.length = 0;
    const out = writer(() => undefined).patchNode('n1', node, addTaint);
    await new Promise((r) => setTimeout(r, 50));
    expect(arrived).toEqual([]); // waiting for the token
    await advance(1000);
    await until(() => arrived.length > 0);
    // (?timeout= is the write's fence-capped budget, sent to the API server too.)
    expect(arrived).toEqual(['PATCH /api/v1/nodes/n1?timeout=10s']);
    expect((await out).kind).toBe('applied');
    // And the next read waits for the token after that one: reads and writes share the bucket.
    const read = stub.client.request({ method: 'GET', path: '/api/v1/pods' });
    await new Promise((r) => setTimeout(r, 50));
    expect(arrived).toHaveLength(1);
    await advance(1000);
    await read;
    expect(arrived).toEqual(['PATCH /api/v1/nodes/n1?timeout=10s', 'GET /api/v1/pods']);
  });

  it('checks the fence after the wait: a fence that closed meanwhile stops the write', async () => {
    arrived.length = 0;
    let fenced: string | undefined;
    const out = writer(() => fenced).patchNode('n1', node, addTaint);
    await new Promise((r) => setTimeout(r, 20));
    fenced = 'not the leader';
    await advance(1000);
    expect(await out).toEqual({ kind: 'fenced', reason: 'not the leader' });
    expect(arrived).toEqual([]);
  });
});
