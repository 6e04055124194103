import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Registry } from 'prom-client';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Clock } from '../../clock/clock.js';
import type { Ticker } from '../../clock/ticker.js';
import { FlagError, loadConfig } from '../../config/index.js';
import { createControllerMetrics } from '../../controller/metrics.js';
import { SimApiServer } from '../../controller/testing/sim-api.js';
import { createDisruptionMetrics } from '../../disruption/index.js';
import type { LeaderElector } from '../../election/elector.js';
import type { KubeClient, KubeRequest, KubeResponse } from '../../kube/client.js';
import { RequestRateLimiter } from '../../kube/rate-limit.js';
import type { Node } from '../../kube/types.js';
import { memoryLogger } from '../../log/logger.js';
import { asyncScheduler, BehaviorSubject, Subject } from '../../rx/index.js';
import { createWatchMetrics, type WatchEvent } from '../../watch/index.js';
import {
  assembleNodeHealth,
  assembleNodeLifecycle,
  type NodeLifecycle,
  type NodeLifecycleOptions,
  openPoolConfig,
  poolGrace,
} from './node-lifecycle.js';
import { assembleWatches, type Watches } from './watches.js';

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-12-01T00:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

const clock: Clock = { scheduler: asyncScheduler, wall: () => Date.now() };
const configOf = (flags: string[]) =>
  loadConfig(flags, { POD_NAME: 'nlc-0', POD_NAMESPACE: 'nlc-system' }, 'host-0').config;
/** The process's tick (each second), on the fake timers. */
function everySecond(): Ticker & { stop(): void } {
  const fns = new Set<() => void>();
  const timer = setInterval(() => {
    for (const fn of [...fns]) fn();
  }, 1000);
  return {
    intervalMs: 1000,
    onTick: (fn) => {
      fns.add(fn);
      return () => fns.delete(fn);
    },
    stop: () => clearInterval(timer),
  };
}

/** kube-controller-manager's managedFields entry for a node's Ready status, written at `at`. */
const kcmMarked = (at: number) => [
  {
    manager: 'kube-controller-manager',
    operation: 'Update',
    subresource: 'status',
    time: new Date(at).toISOString(),
    fieldsV1: { 'f:status': { 'f:conditions': { 'k:{"type":"Ready"}': { 'f:status': {} } } } },
  },
];

interface Setup {
  sim: SimApiServer;
  watches: Watches;
  lifecycle: NodeLifecycle;
  logs: Array<Record<string, unknown>>;
  limiter: RequestRateLimiter;
  /** What the rival check's node list shows in each node's managedFields (empty: nothing). */
  managedFields: Map<string, unknown[]>;
  /** The rival check's reads of one node. */
  nodeReads: string[];
  stopping: { value: boolean };
  requests: KubeRequest[];
  ticker: ReturnType<typeof everySecond>;
}

/** The assembly on the in-memory API server (two nodes), its watches started. */
async function setup(
  o: {
    flags?: string[];
    elector?: Partial<LeaderElector>;
    election?: NodeLifecycleOptions['election'];
    /** The rival check's node list is answered once this resolves. */
    rivalGate?: Promise<void>;
    /** Each node's managedFields as the rival check reads them. */
    managedFields?: Record<string, unknown[]>;
  } = {},
): Promise<Setup> {
  const sim = new SimApiServer();
  sim.addNode('node-0');
  sim.addNode('node-1');
  const config = configOf(o.flags ?? []);
  const registry = new Registry();
  const log = memoryLogger(2);
  const managedFields = new Map<string, unknown[]>(Object.entries(o.managedFields ?? {}));
  const nodeReads: string[] = [];
  const requests: KubeRequest[] = [];
  sim.onRequest = (req) => {
    requests.push(req);
    return undefined;
  };
  const client = {
    request: sim.client.request,
    // The rival check's reads: the metadata-only node list, a node that turned Unknown.
    raw: async <T>(req: KubeRequest): Promise<KubeResponse<T>> => {
      const withFields = (n: Node) => ({
        ...n,
        metadata: { ...n.metadata, managedFields: managedFields.get(n.metadata.name) ?? [] },
      });
      const headers = { date: new Date().toUTCString() };
      const one = /^\/api\/v1\/nodes\/([^/]+)$/.exec(req.path)?.[1];
      if (one) {
        nodeReads.push(one);
        return { status: 200, headers, body: withFields(sim.nodes.get(one)!) as T };
      }
      await o.rivalGate;
      const items = [...sim.nodes.values()].map((n) => ({ metadata: withFields(n).metadata }));
      return { status: 200, headers, body: { metadata: {}, items } as T };
    },
  } as unknown as KubeClient;
  const ticker = everySecond();
  const watches = assembleWatches({
    config,
    client,
    clock,
    logger: log,
    metrics: createWatchMetrics(registry),
    ticker,
    transport: (r) => sim.transport(r),
  });
  const stopping = { value: false };
  const limiter = new RequestRateLimiter(config.kubeApi.qps, config.kubeApi.burst, clock.scheduler);
  const lifecycle = assembleNodeLifecycle({
    config,
    clock,
    logger: log,
    registry,
    metrics: createControllerMetrics(registry),
    client,
    limiter,
    health: await assembleNodeHealth({
      config,
      clock,
      logger: log,
      metrics: createDisruptionMetrics(registry),
    }),
    nodes: watches.nodes,
    leases: watches.leases,
    ticker,
    elector: o.elector as LeaderElector | undefined,
    election: o.election,
    stopping: () => stopping.value,
  });
  const signal = new AbortController().signal;
  await lifecycle.reconciler.start?.(signal);
  await lifecycle.rivalCheck?.start?.(signal);
  void watches.nodesRunnable.start?.(signal);
  await watches.leasesRunnable.start?.(signal);
  await vi.advanceTimersByTimeAsync(100);
  return {
    ...{ sim, watches, lifecycle, logs: log.lines, limiter, managedFields, nodeReads, stopping, requests },
    ticker,
  };
}

async function teardown(s: Setup) {
  s.ticker.stop();
  s.sim.stopAll();
  s.watches.nodes.dispose();
  s.watches.leases.dispose();
  s.lifecycle.rivalCheck?.stop?.close?.();
  const drained = s.lifecycle.reconciler.stop?.drain?.();
  await vi.advanceTimersByTimeAsync(1_000);
  await drained;
}

/** A status patch of node-0 through the writer: what its fence says right now (after any wait). */
const probeWrite = (l: NodeLifecycle) =>
  l.writer.patch<Node>({
    resource: 'nodes/status',
    path: '/api/v1/nodes/node-0/status',
    getPath: '/api/v1/nodes/node-0',
    initial: undefined,
    mutate: () => ({ status: { conditions: [{ type: 'Probe', status: 'True' }] } }),
    log: {},
  });

describe('assembleNodeLifecycle: the reconciler runnable', () => {
  let s: Setup | undefined;
  afterEach(async () => {
    if (s) await teardown(s);
    s = undefined;
  });

  it('group subscribers, needs leadership; contributes the probes of its sight (and lock access with leader election)', async () => {
    s = await setup({ flags: ['--mode=companion'] });
    const r = s.lifecycle.reconciler;
    expect([r.name, r.group, r.needLeaderElection]).toEqual(['node-lifecycle', 'subscribers', true]);
    expect(r.healthz?.map((c) => c.name)).toEqual(['api-access']);
    expect(r.readyz?.map((c) => c.name)).toEqual(['nodes-watch', 'leases-watch']);
    expect(r.readyz?.map((c) => c.check())).toEqual([undefined, undefined]);
    expect(s.lifecycle.rival).toBeUndefined();
    expect(s.lifecycle.rivalCheck).toBeUndefined();
    await teardown(s);
    const access = { since: 0, okAt: undefined, authenticatedAt: undefined, lastError: 'ECONNREFUSED' };
    s = await setup({
      flags: ['--mode=companion'],
      elector: { apiAccess: () => access, canWrite: () => false, isLeader: () => false },
      election: { setEligible: () => {}, stepDown: () => {} },
    });
    const ready = s.lifecycle.reconciler.readyz!;
    expect(ready.map((c) => c.name)).toEqual(['nodes-watch', 'leases-watch', 'lock-access']);
    expect(ready[2]!.check()).toContain('no answer to a leader-election lock request yet');
  });

  it('acts while elected, and marks a dead node; not after the edge goes back', async () => {
    s = await setup({ flags: ['--mode=companion'] });
    const { lifecycle, sim } = s;
    expect(lifecycle.controller.sight.leading).toBe(false);
    lifecycle.reconciler.setLeading?.(true);
    expect(lifecycle.controller.sight.leading).toBe(true);
    expect(s.logs.map((l) => l.msg)).toContain('Started leading: reconciling nodes');
    sim.stopKubelet('node-1');
    await vi.advanceTimersByTimeAsync(60_000);
    expect(sim.nodes.get('node-1')?.status?.conditions?.some((c) => c.type === 'NodeLeaseExpired')).toBe(
      true,
    );
    lifecycle.reconciler.setLeading?.(false);
    expect(lifecycle.controller.sight.leading).toBe(false);
  });

  it('upstream mode: does not act before the rival check ran, nor while another node-lifecycle controller is seen; the fence and /readyz say why', async () => {
    let release: () => void = () => {};
    s = await setup({ rivalGate: new Promise<void>((r) => (release = r)) });
    const { lifecycle, managedFields } = s;
    expect(lifecycle.rivalCheck).toMatchObject({ name: 'concurrent-controller-check', group: 'watches' });
    const ready = lifecycle.rivalCheck!.readyz!;
    expect(ready.map((c) => c.name)).toEqual(['concurrent-node-lifecycle']);
    lifecycle.reconciler.setLeading?.(true);
    expect(lifecycle.controller.sight.leading).toBe(false); // not checked yet
    release();
    await vi.advanceTimersByTimeAsync(10);
    expect(lifecycle.controller.sight.leading).toBe(true);
    expect(ready[0]!.check()).toBeUndefined();
    // While running: node-1 turns Unknown, set so by kube-controller-manager.
    managedFields.set('node-1', kcmMarked(Date.now()));
    s.sim.updateNode('node-1', (n) => ({
      ...n,
      status: { conditions: [{ type: 'Ready', status: 'Unknown', reason: 'NodeStatusUnknown' }] },
    }));
    await vi.advanceTimersByTimeAsync(100);
    expect(lifecycle.controller.sight.leading).toBe(false);
    const refused = await probeWrite(lifecycle);
    expect(refused).toMatchObject({ kind: 'fenced' });
    expect((refused as { reason: string }).reason).toContain(
      "another node-lifecycle controller is running: kube-controller-manager set node node-1's Ready condition",
    );
    expect(ready[0]!.check()).toBe((refused as { reason: string }).reason);
    expect(s.nodeReads).toEqual(['node-1']);
    // Stopped with its runnable: a node turning Unknown is no longer read.
    await lifecycle.rivalCheck!.stop?.close?.();
    s.sim.updateNode('node-0', (n) => ({
      ...n,
      status: { conditions: [{ type: 'Ready', status: 'Unknown', reason: 'NodeStatusUnknown' }] },
    }));
    await vi.advanceTimersByTimeAsync(100);
    expect(s.nodeReads).toEqual(['node-1']);
  });

  it('upstream mode: a mark by kube-controller-manager within the hour before start keeps it from acting', async () => {
    s = await setup({ managedFields: { 'node-1': kcmMarked(Date.now() - 600_000) } });
    s.lifecycle.reconciler.setLeading?.(true);
    expect(s.lifecycle.controller.sight.leading).toBe(false);
    expect(s.lifecycle.rivalCheck!.readyz![0]!.check()).toContain(
      "set node node-1's Ready condition 10m0s ago",
    );
  });

  it('the writer is fenced by the shutdown (stopping) and by leader election', async () => {
    s = await setup({ flags: ['--mode=companion'] });
    s.lifecycle.reconciler.setLeading?.(true);
    expect(await probeWrite(s.lifecycle)).toMatchObject({ kind: 'applied' });
    s.stopping.value = true;
    expect(await probeWrite(s.lifecycle)).toEqual({ kind: 'fenced', reason: 'shutting down' });
    // After the stop began, an edge never makes it act again.
    s.lifecycle.reconciler.setLeading?.(false);
    s.lifecycle.reconciler.setLeading?.(true);
    expect(s.lifecycle.controller.sight.leading).toBe(false);
    await teardown(s);
    s = await setup({
      flags: ['--mode=companion'],
      elector: { canWrite: () => false, isLeader: () => false, fenceDeadline: () => undefined },
      election: { setEligible: () => {}, stepDown: () => {} },
    });
    expect(await probeWrite(s.lifecycle)).toEqual({ kind: 'fenced', reason: 'not the leader' });
  });

  it('each start of acting is a new term: a write decided before the replica stopped and resumed acting is never sent', async () => {
    s = await setup({ flags: ['--mode=companion', '--kube-api-qps=1', '--kube-api-burst=1'] });
    const { lifecycle, limiter } = s;
    lifecycle.reconciler.setLeading?.(true);
    await limiter.acquire(); // the token the write would take
    const write = probeWrite(lifecycle); // waits ~1 s for the next one
    await vi.advanceTimersByTimeAsync(100);
    lifecycle.reconciler.setLeading?.(false);
    lifecycle.reconciler.setLeading?.(true);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(await write).toEqual({ kind: 'fenced', reason: 'leadership changed since the write was decided' });
    // Acting throughout (told again, or the rival check changed with nothing found): the same term.
    await limiter.acquire();
    const again = probeWrite(lifecycle);
    await vi.advanceTimersByTimeAsync(100);
    lifecycle.reconciler.setLeading?.(true);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(await again).toMatchObject({ kind: 'applied' });
  });

  it('Events carry the source component of the mode: node-controller upstream, node-lifecycle-controller in companion mode', async () => {
    const involved = { kind: 'Node' as const, name: 'node-0', apiVersion: 'v1' };
    for (const [flags, component] of [
      [['--allow-concurrent-node-lifecycle-controller'], 'node-controller'],
      [['--mode=companion'], 'node-lifecycle-controller'],
    ] as const) {
      s = await setup({ flags: [...flags] });
      s.lifecycle.reconciler.setLeading?.(true);
      await s.lifecycle.writer.event({ involved, type: 'Normal', reason: 'Probe', message: 'probe' });
      const sent = s.requests.find((r) => r.method === 'POST' && r.path.endsWith('/events'));
      expect((sent?.body as { source?: { component?: string } } | undefined)?.source?.component).toBe(
        component,
      );
      await teardown(s);
      s = undefined;
    }
  });

  it('with leader election: eligible while it sees; a leader blind for --blind-step-down-after steps down', async () => {
    const calls: string[] = [];
    s = await setup({
      flags: ['--mode=companion', '--blind-step-down-after=2m30s'],
      elector: { canWrite: () => true, isLeader: () => true, fenceDeadline: () => Date.now() + 60_000 },
      election: {
        setEligible: (e) => calls.push(`eligible ${e}`),
        stepDown: (why) => calls.push(`stepDown ${why}`),
      },
    });
    s.lifecycle.reconciler.setLeading?.(true);
    await vi.advanceTimersByTimeAsync(2_000);
    expect(calls).toEqual(['eligible false', 'eligible true']); // not before both lists were in
    s.sim.setPath('refuse');
    s.sim.cut();
    await vi.advanceTimersByTimeAsync(148_000);
    expect(calls.filter((c) => c.startsWith('stepDown'))).toEqual([]);
    await vi.advanceTimersByTimeAsync(4_000);
    expect(calls.filter((c) => c.startsWith('stepDown'))).toHaveLength(1);
    s.sim.setPath('up');
  });

  it('the drain stops the reconciler (a node that dies after it is never marked) and waits for the writes on the wire', async () => {
    s = await setup({ flags: ['--mode=companion'] });
    const { stop } = s.lifecycle.reconciler;
    s.lifecycle.reconciler.setLeading?.(true);
    expect(stop?.inFlight?.()).toBe(0);
    const drained = stop?.drain?.();
    await vi.advanceTimersByTimeAsync(1_000);
    await drained;
    s.sim.stopKubelet('node-1');
    await vi.advanceTimersByTimeAsync(120_000);
    expect(s.sim.patches).toEqual([]);
  });
});

describe('assembleNodeHealth', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'nlc-pools-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const health = (flags: string[]) =>
    assembleNodeHealth({
      config: configOf(flags),
      clock,
      logger: memoryLogger(),
      metrics: createDisruptionMetrics(new Registry()),
    });

  it('per-pool grace from --node-pool-config, the defaults without it', async () => {
    const none = await health([]);
    expect(none.pools).toBeUndefined();
    expect(none.grace.resolve({ pool: 'gpu' })).toMatchObject({ monitorGraceMs: 50_000 });
    const file = path.join(dir, 'pools.json');
    writeFileSync(
      file,
      JSON.stringify({
        pools: [{ name: 'gpu', selector: { matchLabels: { pool: 'gpu' } }, nodeMonitorGracePeriod: '5m' }],
      }),
    );
    const withPools = await health([`--node-pool-config=${file}`]);
    expect(withPools.grace.resolve({ pool: 'gpu' })).toMatchObject({ monitorGraceMs: 300_000 });
    expect(withPools.grace.resolve({ pool: 'cpu' })).toMatchObject({ monitorGraceMs: 50_000 });
    withPools.pools?.close();
  });

  it('a pool file that is missing or invalid at start is a usage error naming the flag, the file and the problem', async () => {
    const missing = path.join(dir, 'absent.json');
    await expect(health([`--node-pool-config=${missing}`])).rejects.toThrow(FlagError);
    await expect(health([`--node-pool-config=${missing}`])).rejects.toThrow(
      `invalid value ${JSON.stringify(missing)} for flag --node-pool-config`,
    );
    const bad = path.join(dir, 'bad.json');
    writeFileSync(bad, '{"pools": [{"name": "x"}]}');
    await expect(health([`--node-pool-config=${bad}`])).rejects.toThrow(/--node-pool-config .*selector/);
  });
});

describe('openPoolConfig', () => {
  it('what is not about the file (here: a logger that fails) is no usage error: thrown as it is', async () => {
    const fs = {
      stat: async () => ({ mtimeMs: 1, size: 13, ino: 1 }),
      readFile: async () => '{"pools": []}',
      watch: () => () => {},
    };
    const failing = memoryLogger();
    failing.with = () => {
      const l = memoryLogger();
      l.info = () => {
        throw new Error('log sink closed');
      };
      return l;
    };
    const opened = openPoolConfig('/etc/nlc/pools.json', { fs, logger: failing });
    await expect(opened).rejects.toThrow('log sink closed');
    await expect(openPoolConfig('/etc/nlc/pools.json', { fs, logger: failing })).rejects.not.toBeInstanceOf(
      FlagError,
    );
    // The same file, readable: opened.
    const ok = await openPoolConfig('/etc/nlc/pools.json', { fs });
    expect(ok.current).toEqual({ pools: [] });
    ok.close();
  });
});

describe('poolGrace', () => {
  it('group subscribers: a deleted node leaves the per-pool counts; a new pool file gives every node its grace again; the stop closes the file', async () => {
    const events = new Subject<WatchEvent<Node>>();
    const config$ = new BehaviorSubject({ pools: [] });
    const calls: string[] = [];
    const r = poolGrace({
      health: {
        grace: {
          untrack: (n: string) => calls.push(`untrack ${n}`),
          setConfig: (c: unknown) => calls.push(`setConfig ${JSON.stringify(c)}`),
        } as never,
        pools: { config$, close: () => calls.push('close') } as never,
      },
      nodes: { events$: events },
      controller: { refreshGrace: () => calls.push('refreshGrace') },
    });
    expect([r.name, r.group]).toEqual(['pool-grace', 'subscribers']);
    events.next({ type: 'Delete', object: { metadata: { name: 'before-start' } } } as WatchEvent<Node>);
    await r.start?.(new AbortController().signal);
    expect(calls).toEqual(['setConfig {"pools":[]}', 'refreshGrace']);
    events.next({ type: 'Apply', object: { metadata: { name: 'n1' } } } as WatchEvent<Node>);
    events.next({ type: 'Delete', object: { metadata: { name: 'n1' } } } as WatchEvent<Node>);
    config$.next({ pools: [{ name: 'gpu' }] } as never);
    expect(calls.slice(2)).toEqual(['untrack n1', 'setConfig {"pools":[{"name":"gpu"}]}', 'refreshGrace']);
    await r.stop?.close?.();
    expect(calls.at(-1)).toBe('close');
    events.next({ type: 'Delete', object: { metadata: { name: 'n2' } } } as WatchEvent<Node>);
    config$.next({ pools: [] });
    expect(calls.at(-1)).toBe('close');
  });
});
