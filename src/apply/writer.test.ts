import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { KubeClient } from '../kube/client.js';
import { type LoopbackServer, loopbackServer } from '../kube/testing.js';
import type { Node } from '../kube/types.js';
import { memoryLogger } from '../log/logger.js';
import { createRegistry } from '../metrics/registry.js';
import { ApiWriter, createWriterMetrics } from './writer.js';

/** A scripted stand-in for the API server's HTTP edge (the real server is exercised in e2e). */
type Reply = { status: number; body: unknown; headers?: Record<string, string> };
let script: Reply[] = [];
const requests: { method: string; url: string; body: unknown }[] = [];
let stub: LoopbackServer;
let client: KubeClient;

beforeAll(async () => {
  stub = await loopbackServer((req, res) => {
    let raw = '';
    req.on('data', (c) => {
      raw += c;
    });
    req.on('end', () => {
      requests.push({
        method: req.method ?? '',
        url: req.url ?? '',
        body: raw ? JSON.parse(raw) : undefined,
      });
      const r = script.shift() ?? { status: 500, body: { message: 'script exhausted' } };
      res.writeHead(r.status, { 'content-type': 'application/json', ...r.headers });
      res.end(JSON.stringify(r.body));
    });
  });
  client = stub.client;
});
afterAll(async () => {
  await stub?.close();
});
beforeEach(() => {
  script = [];
  requests.length = 0;
});

function writer(
  opts: {
    dryRun?: boolean;
    fence?: (now: number) => string | undefined;
    fenceDeadline?: () => number | undefined;
    qps?: number;
    burst?: number;
    term?: () => number;
  } = {},
) {
  const sleeps: number[] = [];
  const registry = createRegistry({ defaultMetrics: false });
  let now = 0;
  const w = new ApiWriter({
    client,
    fence: () => opts.fence?.(now),
    fenceDeadline: opts.fenceDeadline,
    ...(opts.term ? { term: opts.term } : {}),
    dryRun: opts.dryRun ?? false,
    logger: memoryLogger(),
    metrics: createWriterMetrics(registry),
    clock: {
      scheduler: { now: () => now, schedule: () => ({ unsubscribe() {}, closed: false }) } as never,
      wall: () => 0,
    },
    qps: opts.qps ?? 1000,
    burst: opts.burst ?? 1000,
    component: 'node-controller',
    instance: 'test',
    sleep: async (ms) => {
      sleeps.push(ms);
      now += ms;
    },
  });
  return { w, sleeps, registry, now: () => now };
}

const pathOf = (url: string) => new URL(url, 'http://x').pathname;
const timeoutOf = (url: string) => new URL(url, 'http://x').searchParams.get('timeout');

const node = (rv: string, taints: { key: string; effect: string }[] = []): Node => ({
  metadata: { name: 'n1', resourceVersion: rv },
  spec: { taints },
});

/** Adds our taint to whatever taints the node has. */
const addOurTaint = (n: Node) => {
  const taints = n.spec?.taints ?? [];
  if (taints.some((t) => t.key === 'ours')) return undefined;
  return { spec: { taints: [...taints, { key: 'ours', effect: 'NoSchedule' }] } };
};

describe('ApiWriter', () => {
  it('sends a patch with a resourceVersion precondition', async () => {
    const { w } = writer();
    script = [{ status: 200, body: node('2') }];
    const out = await w.patchNode('n1', node('1'), addOurTaint);
    expect(out.kind).toBe('applied');
    expect(requests).toHaveLength(1);
    expect(requests[0]!.method).toBe('PATCH');
    expect(requests[0]!.body).toEqual({
      metadata: { resourceVersion: '1' },
      spec: { taints: [{ key: 'ours', effect: 'NoSchedule' }] },
    });
  });

  it('on 409 re-reads and recomputes, keeping a taint someone else added meanwhile', async () => {
    const { w, registry } = writer();
    script = [
      { status: 409, body: { reason: 'Conflict', code: 409 } },
      { status: 200, body: node('5', [{ key: 'theirs', effect: 'NoSchedule' }]) },
      { status: 200, body: node('6') },
    ];
    const out = await w.patchNode('n1', node('4'), addOurTaint);
    expect(out).toMatchObject({ kind: 'applied', attempts: 2 });
    expect(requests.map((r) => r.method)).toEqual(['PATCH', 'GET', 'PATCH']);
    expect(requests[2]!.body).toEqual({
      metadata: { resourceVersion: '5' },
      spec: {
        taints: [
          { key: 'theirs', effect: 'NoSchedule' },
          { key: 'ours', effect: 'NoSchedule' },
        ],
      },
    });
    expect(await registry.getSingleMetricAsString('nlc_write_conflicts_total')).toContain(
      'resource="nodes"} 1',
    );
  });

  it("reads answers (the patched object, a conflict's re-read) without their managedFields", async () => {
    const { w } = writer();
    const managed = (rv: string) => ({
      ...node(rv),
      metadata: {
        name: 'n1',
        resourceVersion: rv,
        managedFields: [{ manager: 'kubelet', fieldsV1: { 'f:spec': { 'f:taints': {} } } }],
        labels: { zone: 'a' },
      },
    });
    script = [
      { status: 409, body: { reason: 'Conflict', code: 409 } },
      { status: 200, body: managed('5') },
      { status: 200, body: managed('6') },
    ];
    const out = await w.patchNode('n1', node('4'), (n) => {
      // The re-read object is what mutate sees after the conflict.
      if (n.metadata.resourceVersion === '5') expect(n.metadata).not.toHaveProperty('managedFields');
      return addOurTaint(n);
    });
    expect(out.kind).toBe('applied');
    expect(requests.map((r) => r.method)).toEqual(['PATCH', 'GET', 'PATCH']);
    const written = (out as { object: Node }).object;
    expect(written.metadata).toEqual({ name: 'n1', resourceVersion: '6', labels: { zone: 'a' } });
  });

  it('waits out 429 Retry-After before retrying', async () => {
    const { w, sleeps } = writer();
    script = [
      { status: 429, body: { reason: 'TooManyRequests' }, headers: { 'retry-after': '3' } },
      { status: 200, body: node('1') },
      { status: 200, body: node('2') },
    ];
    const out = await w.patchNode('n1', node('1'), addOurTaint);
    expect(out.kind).toBe('applied');
    expect(sleeps).toContain(3000);
  });

  it('does not retry a 403 and reports failure', async () => {
    const { w } = writer();
    script = [{ status: 403, body: { reason: 'Forbidden', message: 'nope' } }];
    const out = await w.patchNode('n1', node('1'), addOurTaint);
    expect(out.kind).toBe('failed');
    expect(requests).toHaveLength(1);
  });

  it('treats 404 as gone and unchanged objects as no write', async () => {
    const { w } = writer();
    script = [{ status: 404, body: { reason: 'NotFound' } }];
    expect((await w.patchNode('n1', node('1'), addOurTaint)).kind).toBe('gone');
    expect(
      (await w.patchNode('n1', node('1', [{ key: 'ours', effect: 'NoSchedule' }]), addOurTaint)).kind,
    ).toBe('unchanged');
    expect(requests).toHaveLength(1);
  });

  it('sends nothing when the fence refuses, or in dry-run', async () => {
    const fenced = writer({ fence: () => 'not the leader' });
    expect(await fenced.w.patchNode('n1', node('1'), addOurTaint)).toEqual({
      kind: 'fenced',
      reason: 'not the leader',
    });
    const dry = writer({ dryRun: true });
    const out = await dry.w.patchNode('n1', node('1'), addOurTaint);
    expect(out.kind).toBe('dry-run');
    await dry.w.event({
      involved: { kind: 'Node', name: 'n1', apiVersion: 'v1' },
      type: 'Normal',
      reason: 'NodeNotReady',
      message: 'x',
    });
    expect(requests).toHaveLength(0);
    expect(await dry.registry.getSingleMetricAsString('nlc_writes_total')).toContain('outcome="dry-run"} 1');
  });

  it('creates an Event once, then bumps its count for repeats', async () => {
    const { w } = writer();
    script = [
      { status: 201, body: {} },
      { status: 200, body: {} },
    ];
    const spec = {
      involved: { kind: 'Node' as const, name: 'n1', apiVersion: 'v1' },
      type: 'Normal' as const,
      reason: 'NodeNotReady',
      message: 'Node n1 status is now: NodeNotReady',
    };
    await w.event(spec);
    await w.event(spec);
    expect(requests.map((r) => r.method)).toEqual(['POST', 'PATCH']);
    expect(requests[0]!.body).toMatchObject({
      reason: 'NodeNotReady',
      source: { component: 'node-controller' },
      count: 1,
      involvedObject: { kind: 'Node', name: 'n1' },
    });
    expect(requests[1]!.body).toMatchObject({ count: 2 });
    expect(pathOf(requests[0]!.url)).toBe('/api/v1/namespaces/default/events');
  });

  it('puts Events about cluster-scoped objects (an empty namespace) in default', async () => {
    const { w } = writer();
    script = [{ status: 201, body: {} }];
    await w.event({
      involved: { kind: 'Node', name: 'n2', namespace: '', apiVersion: 'v1' },
      type: 'Normal',
      reason: 'NodeNotReady',
      message: 'm',
    });
    expect(pathOf(requests[0]!.url)).toBe('/api/v1/namespaces/default/events');
    expect(
      (requests[0]!.body as { involvedObject: Record<string, unknown> }).involvedObject,
    ).not.toHaveProperty('namespace');
  });

  describe('inside the leadership fence', () => {
    const spec = {
      involved: { kind: 'Node' as const, name: 'n1', apiVersion: 'v1' },
      type: 'Normal' as const,
      reason: 'NodeNotReady',
      message: 'm',
    };

    it("a write may take only until the fence deadline, on our side and the API server's", async () => {
      let deadline: number | undefined = 3_500;
      const { w } = writer({ fenceDeadline: () => deadline });
      script = [
        { status: 200, body: node('2') },
        { status: 201, body: {} },
        { status: 200, body: node('3') },
      ];
      expect((await w.patchNode('n1', node('1'), addOurTaint)).kind).toBe('applied');
      await w.event(spec);
      deadline = 60_000; // renewed: the default 10 s cap applies again
      expect((await w.patchNodeStatus('n1', node('2'), () => ({ status: {} }))).kind).toBe('applied');
      expect(requests.map((r) => timeoutOf(r.url))).toEqual(['3.5s', '3.5s', '10s']);
    });

    it('sends nothing once the fence is closed or about to close', async () => {
      let deadline: number | undefined = 50; // less than MIN_WRITE_BUDGET_MS left
      const { w, registry } = writer({ fenceDeadline: () => deadline });
      expect(await w.patchNode('n1', node('1'), addOurTaint)).toEqual({
        kind: 'fenced',
        reason: 'leadership fence closes in 50ms',
      });
      deadline = undefined;
      expect((await w.patchNode('n1', node('1'), addOurTaint)).kind).toBe('fenced');
      await w.event(spec);
      expect(requests).toHaveLength(0);
      expect(await registry.getSingleMetricAsString('nlc_writes_total')).toContain(
        'resource="events",outcome="fenced"} 1',
      );
    });

    it('an Event that waited for a rate-limit token is fenced if leadership ended meanwhile', async () => {
      // One token, one more per second; the fence closes at 500 ms.
      const { w, sleeps, now } = writer({
        qps: 1,
        burst: 1,
        fence: (t) => (t >= 500 ? 'not the leader' : undefined),
      });
      script = [{ status: 201, body: {} }];
      await w.event(spec);
      await w.event({ ...spec, reason: 'Other' });
      expect(sleeps.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(900);
      expect(now()).toBeGreaterThanOrEqual(500);
      expect(requests.map((r) => (r.body as { reason: string }).reason)).toEqual(['NodeNotReady']);
    });

    it('a patch decided in one leadership term that waited for a token into the next is fenced, not sent', async () => {
      let term = 1;
      const { w } = writer({ qps: 1, burst: 1, term: () => term });
      script = [{ status: 200, body: node('2') }];
      expect((await w.patchNode('n1', node('1'), addOurTaint)).kind).toBe('applied');
      // The next write waits ~1 s for its token; meanwhile leadership was lost and won again.
      const pending = w.patchNode('n1', node('2'), addOurTaint);
      term = 2;
      expect(await pending).toEqual({
        kind: 'fenced',
        reason: 'leadership changed since the write was decided',
      });
      expect(requests).toHaveLength(1);
    });

    it('a patch whose reason went away while it waited for a token is withdrawn, not sent (stillWanted after the wait)', async () => {
      const { w, registry } = writer({ qps: 1, burst: 1 });
      script = [{ status: 200, body: node('2') }];
      let renewed = false;
      const still = () => (renewed ? 'node renewed' : undefined);
      expect((await w.patchNodeStatus('n1', node('1'), addOurTaint, still)).kind).toBe('applied');
      const pending = w.patchNodeStatus('n1', node('2'), addOurTaint, still);
      renewed = true; // seen while the write waited for its token
      expect(await pending).toEqual({ kind: 'withdrawn', reason: 'node renewed' });
      expect(requests).toHaveLength(1);
      expect(await registry.getSingleMetricAsString('nlc_writes_total')).toContain(
        'resource="nodes/status",outcome="withdrawn"} 1',
      );
    });

    it("stillWanted is asked after this attempt's mutate: a question about what the write would do holds on the first attempt and after a 409 re-read", async () => {
      // The node renewed: a write that adds our taint is no longer wanted, any other write is.
      let adds = false;
      const mutate = (n: Node) => {
        const body = addOurTaint(n);
        adds = body !== undefined;
        return body ?? { metadata: { labels: { other: 'change' } } };
      };
      const still = () => (adds ? 'node renewed' : undefined);
      const { w } = writer();
      // First attempt, from the caller's copy.
      expect(await w.patchNode('n1', node('1'), mutate, still)).toEqual({
        kind: 'withdrawn',
        reason: 'node renewed',
      });
      expect(requests).toEqual([]);
      // A write that adds nothing meets a 409; the re-read shows our taint gone: now it would add it.
      adds = false;
      script = [
        { status: 409, body: { reason: 'Conflict', code: 409 } },
        { status: 200, body: node('5') },
      ];
      expect(
        await w.patchNode('n1', node('4', [{ key: 'ours', effect: 'NoSchedule' }]), mutate, still),
      ).toEqual({ kind: 'withdrawn', reason: 'node renewed' });
      expect(requests.map((r) => r.method)).toEqual(['PATCH', 'GET']);
    });

    it('a patch retried after a backoff is fenced if leadership ended during the backoff', async () => {
      const { w, sleeps } = writer({ fence: (t) => (t > 0 ? 'not the leader' : undefined) });
      script = [
        { status: 503, body: { reason: 'ServiceUnavailable' } },
        { status: 200, body: node('2') },
      ];
      expect(await w.patchNode('n1', node('1'), addOurTaint)).toEqual({
        kind: 'fenced',
        reason: 'not the leader',
      });
      expect(sleeps).toHaveLength(1);
      // The re-read after the backoff is a read; the write itself was not sent again.
      expect(requests.map((r) => r.method)).toEqual(['PATCH', 'GET']);
    });

    it('idle() resolves when no write is on the wire', async () => {
      const { w } = writer();
      script = [{ status: 200, body: node('2') }];
      expect(w.inFlight).toBe(0);
      const write = w.patchNode('n1', node('1'), addOurTaint);
      await new Promise((r) => setImmediate(r));
      expect(w.inFlight).toBe(1);
      let idle = false;
      const waiting = w.idle().then(() => {
        idle = true;
      });
      expect(idle).toBe(false);
      await write;
      await waiting;
      expect(idle).toBe(true);
      expect(w.inFlight).toBe(0);
    });
  });
});

describe('ApiWriter.evict (Eviction API)', () => {
  it('an eviction whose node renewed while it waited for a token is withdrawn; one decided in an earlier term is fenced', async () => {
    let term = 1;
    const { w } = writer({ qps: 1, burst: 1, term: () => term });
    script = [{ status: 201, body: { kind: 'Status', status: 'Success' } }];
    let renewed = false;
    const still = () => (renewed ? 'node renewed' : undefined);
    expect(await w.evict('ns', 'a', 'u', still)).toEqual({ kind: 'applied' });
    const withdrawn = w.evict('ns', 'b', 'u', still);
    renewed = true;
    expect(await withdrawn).toEqual({ kind: 'withdrawn', reason: 'node renewed' });
    renewed = false;
    const fenced = w.evict('ns', 'c', 'u', still);
    term = 2;
    expect(await fenced).toEqual({
      kind: 'fenced',
      reason: 'leadership changed since the write was decided',
    });
    expect(requests.map((r) => pathOf(r.url))).toEqual(['/api/v1/namespaces/ns/pods/a/eviction']);
  });

  it('posts a policy/v1 Eviction with the uid as a precondition', async () => {
    const { w } = writer();
    script = [{ status: 201, body: { kind: 'Status', status: 'Success' } }];
    expect(await w.evict('ns', 'web', 'uid-1')).toEqual({ kind: 'applied' });
    expect(requests.map((r) => `${r.method} ${pathOf(r.url)}`)).toEqual([
      'POST /api/v1/namespaces/ns/pods/web/eviction',
    ]);
    expect(requests[0]?.body).toEqual({
      apiVersion: 'policy/v1',
      kind: 'Eviction',
      metadata: { name: 'web', namespace: 'ns' },
      deleteOptions: { preconditions: { uid: 'uid-1' } },
    });
  });

  it('a PodDisruptionBudget refusal (429) is reported at once, not retried; a gone pod is gone', async () => {
    const { w, sleeps } = writer();
    script = [
      {
        status: 429,
        body: {
          kind: 'Status',
          code: 429,
          message: "Cannot evict pod as it would violate the pod's disruption budget.",
        },
      },
    ];
    expect((await w.evict('ns', 'db', 'u')).kind).toBe('blocked');
    expect(sleeps).toEqual([]);
    script = [{ status: 404, body: { kind: 'Status', code: 404, reason: 'NotFound' } }];
    expect((await w.evict('ns', 'db', 'u')).kind).toBe('gone');
    // The uid precondition failed: another pod now has that name.
    script = [{ status: 409, body: { kind: 'Status', code: 409, reason: 'Conflict' } }];
    expect((await w.evict('ns', 'db', 'u')).kind).toBe('gone');
    expect(requests.length).toBe(3);
  });

  it('a fence that closes between its check and the last moment (the client asks it again): the patch, the eviction and the Event are fenced, nothing is sent nor retried', async () => {
    let calls = 0;
    const lastMoment = () => (++calls % 2 === 0 ? 'refused at the last moment' : undefined);
    const { w, sleeps, registry } = writer({ fence: lastMoment });
    expect(await w.patchNodeStatus('n1', node('7'), () => ({ status: {} }))).toEqual({
      kind: 'fenced',
      reason: 'refused at the last moment',
    });
    expect(await w.evict('ns', 'web', 'u')).toEqual({ kind: 'fenced', reason: 'refused at the last moment' });
    await w.event({
      involved: { kind: 'Node', name: 'n1', apiVersion: 'v1' },
      type: 'Normal',
      reason: 'NodeNotReady',
      message: 'm',
    });
    expect(requests).toEqual([]);
    expect(sleeps).toEqual([]);
    const writes = (await registry.getSingleMetric('nlc_writes_total')?.get())?.values ?? [];
    expect(
      writes.filter((v) => v.labels.outcome === 'fenced').map((v) => [v.labels.resource, v.value]),
    ).toEqual([
      ['nodes/status', 1],
      ['pods/eviction', 1],
      ['events', 1],
    ]);
  });

  it('retries a 5xx with backoff; fenced and dry-run send nothing', async () => {
    const { w, sleeps } = writer();
    script = [
      { status: 503, body: { kind: 'Status', code: 503 } },
      { status: 201, body: { kind: 'Status', status: 'Success' } },
    ];
    expect((await w.evict('ns', 'web', 'u')).kind).toBe('applied');
    expect(sleeps.length).toBe(1);
    requests.length = 0;
    expect((await writer({ fence: () => 'not the leader' }).w.evict('ns', 'web', 'u')).kind).toBe('fenced');
    expect((await writer({ dryRun: true }).w.evict('ns', 'web', 'u')).kind).toBe('dry-run');
    expect(requests).toEqual([]);
  });
});
