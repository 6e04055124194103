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

/** A RegisteredNode Event for `node` as kube-controller-manager's recorder writes it (or ours, `by`). */
const registered = (node: string, at: number, by = 'kube-controller-manager') => ({
  metadata: {
    name: `${node}.${at}`,
    namespace: 'default',
    creationTimestamp: new Date(at).toISOString(),
    managedFields: [{ manager: by, operation: 'Update', time: new Date(at).toISOString() }],
  },
  involvedObject: { kind: 'Node', name: node, apiVersion: 'v1' },
  reason: 'RegisteredNode',
  message: `Node ${node} event: Registered Node ${node} in Controller`,
  source: { component: 'node-controller' },
  firstTimestamp: new Date(at).toISOString().replace(/\.\d{3}Z$/, 'Z'),
  lastTimestamp: new Date(at).toISOString().replace(/\.\d{3}Z$/, 'Z'),
  count: 1,
  type: 'Normal',
});

/** kube-controller-manager's leader-election lock: its leader took it at `acquired`, renewed at `renewed`. */
const kcmLock = (holder: string, acquired: number, renewed: number) => ({
  metadata: { name: 'kube-controller-manager', namespace: 'kube-system' },
  spec: {
    holderIdentity: holder,
    leaseDurationSeconds: 15,
    acquireTime: new Date(acquired).toISOString().replace('Z', '000Z'),
    renewTime: new Date(renewed).toISOString().replace('Z', '000Z'),
  },
});

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
  /** The path of every read of the rival checks (client.raw). */
  rawPaths: string[];
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
    /** The RegisteredNode Events in `default` (default: none), or the status that answers their list. */
    events?: () => unknown[] | number;
    /** kube-system/kube-controller-manager (default: 404), or the status that answers it. */
    kcmLease?: () => unknown;
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
  const rawPaths: string[] = [];
  const requests: KubeRequest[] = [];
  sim.onRequest = (req) => {
    requests.push(req);
    return undefined;
  };
  const client = {
    request: sim.client.request,
    // The rival check's reads: the metadata-only node list, a node that turned Unknown.
    raw: async <T>(req: KubeRequest): Promise<KubeResponse<T>> => {
      rawPaths.push(req.path);
      const withFields = (n: Node) => ({
        ...n,
        metadata: { ...n.metadata, managedFields: managedFields.get(n.metadata.name) ?? [] },
      });
      const headers = { date: new Date().toUTCString() };
      const answer = (v: unknown): KubeResponse<T> =>
        typeof v === 'number' || v === undefined
          ? { status: (v as number | undefined) ?? 404, headers, body: { kind: 'Status' } as T }
          : { status: 200, headers, body: v as T };
      if (req.path === '/api/v1/namespaces/default/events') {
        const items = o.events?.() ?? [];
        return answer(typeof items === 'number' ? items : { metadata: {}, items });
      }
      if (req.path === '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager') {
        return answer(o.kcmLease?.());
      }
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
    ...{
      sim,
      watches,
      lifecycle,
      logs: log.lines,
      limiter,
      managedFields,
      nodeReads,
      rawPaths,
      stopping,
      requests,
    },
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

  it("upstream mode: kube-controller-manager's current leader recorded RegisteredNode (no node marked yet): it does not act from the start, the fence and /readyz say why; its lock handed to a leader that records none ends it", async () => {
    const t0 = Date.now();
    let lock = kcmLock('kcm-a_1', t0 - 600_000, t0);
    s = await setup({
      events: () => [registered('node-0', t0 - 590_000), registered('node-1', t0 - 590_000)],
      kcmLease: () => lock,
    });
    const { lifecycle } = s;
    lifecycle.reconciler.setLeading?.(true);
    expect(lifecycle.controller.sight.leading).toBe(false);
    const refused = await probeWrite(lifecycle);
    expect(refused).toMatchObject({ kind: 'fenced' });
    const reason = (refused as { reason: string }).reason;
    expect(reason).toContain(
      "another node-lifecycle controller is running: kube-controller-manager's node-lifecycle-controller recorded RegisteredNode for node node",
    );
    expect(reason).toContain(
      'since its leader kcm-a_1 took its lock; refusing to write while that leader leads',
    );
    expect(reason).toContain('--controllers=*,-node-lifecycle-controller');
    expect(lifecycle.rivalCheck!.readyz![0]!.check()).toBe(reason);
    expect(s.logs.filter((l) => l.level === 'error')).toMatchObject([
      {
        msg: "kube-controller-manager's node-lifecycle-controller is on (it records RegisteredNode): refusing to write",
        manager: 'kube-controller-manager',
        leader: 'kcm-a_1',
        recordedAgo: '9m50s',
      },
    ]);
    // It keeps renewing: still refused a minute later.
    lock = kcmLock('kcm-a_1', t0 - 600_000, Date.now());
    await vi.advanceTimersByTimeAsync(60_000);
    expect(lifecycle.controller.sight.leading).toBe(false);
    // The hand-over: kube-controller-manager restarted with the controller off, a new leader.
    lock = kcmLock('kcm-b_2', Date.now(), Date.now());
    await vi.advanceTimersByTimeAsync(15_000);
    expect(lifecycle.controller.sight.leading).toBe(true);
    expect(await probeWrite(lifecycle)).toMatchObject({ kind: 'applied' });
    expect(
      s.logs.find((l) => String(l.msg).endsWith('RegisteredNode evidence no longer holds')),
    ).toMatchObject({
      why: 'its lock changed hands (kcm-a_1 -> kcm-b_2)',
    });
  });

  it("upstream mode: the current leader's RegisteredNode holds while that leader renews its lock (past the Events' hour), and ends an hour after its last renewal seen", async () => {
    const t0 = Date.now();
    let renewing = true;
    let renewed = t0;
    s = await setup({
      events: () => (Date.now() - t0 < 3_000_000 ? [registered('node-0', t0 - 590_000)] : []),
      kcmLease: () => {
        if (renewing) renewed = Date.now();
        return kcmLock('kcm-a_1', t0 - 600_000, renewed);
      },
    });
    s.lifecycle.reconciler.setLeading?.(true);
    await vi.advanceTimersByTimeAsync(2 * 3_600_000);
    expect(s.lifecycle.controller.sight.leading).toBe(false);
    renewing = false; // kube-controller-manager is down (its lock is not renewed)
    await vi.advanceTimersByTimeAsync(3_600_000 - 30_000);
    expect(s.lifecycle.controller.sight.leading).toBe(false);
    await vi.advanceTimersByTimeAsync(60_000);
    expect(s.lifecycle.controller.sight.leading).toBe(true);
    expect(
      s.logs.find((l) => String(l.msg).endsWith('RegisteredNode evidence no longer holds')),
    ).toMatchObject({
      why: 'its leader kcm-a_1 has not renewed its lock for an hour',
    });
  });

  it('upstream mode: RegisteredNode from before the current leader took its lock, or recorded by us, is no evidence; without a lock, one of the last hour is', async () => {
    const t0 = Date.now();
    s = await setup({
      events: () => [
        registered('node-0', t0 - 700_000), // the leader before (its lock was taken at -600 s)
        registered('node-1', t0 - 60_000, 'node-lifecycle-controller'), // ours
      ],
      kcmLease: () => kcmLock('kcm-b_2', t0 - 600_000, t0),
    });
    s.lifecycle.reconciler.setLeading?.(true);
    expect(s.lifecycle.controller.sight.leading).toBe(true);
    await teardown(s);
    s = await setup({ events: () => [registered('node-0', t0 - 3_000_000)], kcmLease: () => 404 });
    s.lifecycle.reconciler.setLeading?.(true);
    expect(s.lifecycle.controller.sight.leading).toBe(false);
    expect(s.lifecycle.rivalCheck!.readyz![0]!.check()).toMatch(
      /recorded RegisteredNode for node node-0 50m[01]s ago; refusing to write until an hour after that/,
    );
    // An hour after it was recorded (the Event itself is gone by then): acting.
    await vi.advanceTimersByTimeAsync(600_000 + 15_000);
    expect(s.lifecycle.controller.sight.leading).toBe(true);
  });

  it('upstream mode: nodes that join while it runs, registered by kube-controller-manager and lost: refused within a read, before any write to them', async () => {
    const t0 = Date.now();
    const events: unknown[] = [];
    s = await setup({ events: () => events, kcmLease: () => kcmLock('kcm-a_1', t0 - 7_200_000, Date.now()) });
    s.lifecycle.reconciler.setLeading?.(true);
    expect(s.lifecycle.controller.sight.leading).toBe(true);
    // Ten quiet minutes: its lock read every 15 s, the Events listed only in the first 30 s.
    await vi.advanceTimersByTimeAsync(600_000);
    const listed = () => s!.rawPaths.filter((p) => p.endsWith('/events')).length;
    expect(listed()).toBe(3);
    expect(s.rawPaths.filter((p) => p.endsWith('/leases/kube-controller-manager')).length).toBe(41);
    const joined = Array.from({ length: 8 }, (_, i) => `new-${i}`);
    for (const n of joined) s.sim.addNode(n);
    await vi.advanceTimersByTimeAsync(5_000);
    // kube-controller-manager's node-lifecycle-controller registers them within its 5 s period.
    for (const n of joined) events.push(registered(n, Date.now()));
    for (const n of joined) s.sim.stopKubelet(n);
    await vi.advanceTimersByTimeAsync(15_000);
    expect(s.lifecycle.controller.sight.leading).toBe(false);
    expect(listed()).toBeGreaterThan(3);
    await vi.advanceTimersByTimeAsync(120_000);
    expect(s.sim.patches.filter((p) => joined.some((n) => p.path.includes(`/nodes/${n}`)))).toEqual([]);
    expect(s.logs.filter((l) => l.level === 'error')).toMatchObject([
      { node: expect.stringMatching(/^new-/), leader: 'kcm-a_1', seenIn: 'the RegisteredNode Events' },
    ]);
  });

  it('upstream mode: kube-controller-manager restarted with its node-lifecycle-controller on while it runs (a new leader that registers every node): refused within a read or two', async () => {
    const t0 = Date.now();
    const events: unknown[] = [];
    let lock = kcmLock('kcm-a_1', t0 - 7_200_000, t0);
    s = await setup({ events: () => events, kcmLease: () => lock });
    s.lifecycle.reconciler.setLeading?.(true);
    await vi.advanceTimersByTimeAsync(600_000);
    expect(s.lifecycle.controller.sight.leading).toBe(true);
    // A kubeadm upgrade put the old flags back: the new process takes the lock, registers the nodes.
    const restarted = Date.now();
    lock = kcmLock('kcm-b_2', restarted, restarted);
    await vi.advanceTimersByTimeAsync(5_000);
    events.push(registered('node-0', Date.now()), registered('node-1', Date.now()));
    await vi.advanceTimersByTimeAsync(30_000);
    expect(s.lifecycle.controller.sight.leading).toBe(false);
    expect(s.logs.filter((l) => l.level === 'error')).toMatchObject([{ leader: 'kcm-b_2' }]);
  });

  it('upstream mode: Events that may not be listed (403) keep nothing from acting (said once); a failing read keeps it from acting until one is answered', async () => {
    s = await setup({ events: () => 403 });
    s.lifecycle.reconciler.setLeading?.(true);
    expect(s.lifecycle.controller.sight.leading).toBe(true);
    expect(s.logs.filter((l) => String(l.msg).startsWith('Cannot list Events (403)'))).toHaveLength(1);
    await teardown(s);
    let status = 503;
    s = await setup({ events: () => (status === 200 ? [] : status) });
    s.lifecycle.reconciler.setLeading?.(true);
    expect(s.lifecycle.controller.sight.leading).toBe(false);
    expect(s.lifecycle.rivalCheck!.readyz![0]!.check()).toContain(
      'could not yet check for another node-lifecycle controller (not acting until it can)',
    );
    status = 200;
    await vi.advanceTimersByTimeAsync(5_000);
    expect(s.lifecycle.controller.sight.leading).toBe(true);
  });

  it('--allow-concurrent-node-lifecycle-controller: RegisteredNode of the current leader is a warning, and it acts', async () => {
    const t0 = Date.now();
    s = await setup({
      flags: ['--allow-concurrent-node-lifecycle-controller'],
      events: () => [registered('node-0', t0 - 5_000)],
      kcmLease: () => kcmLock('kcm-a_1', t0 - 10_000, t0),
    });
    s.lifecycle.reconciler.setLeading?.(true);
    expect(s.lifecycle.controller.sight.leading).toBe(true);
    expect(s.logs.filter((l) => l.level === 'error')).toEqual([]);
    expect(s.logs.filter((l) => String(l.msg).includes('acting anyway'))).toMatchObject([
      { level: 'warn', node: 'node-0', leader: 'kcm-a_1' },
    ]);
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

  it('with --second-opinion=kubelet, a pool too short to confirm a node down before its grace is warned about', async () => {
    const file = path.join(dir, 'short-pool.json');
    writeFileSync(
      file,
      JSON.stringify({
        pools: [{ name: 'edge', selector: { matchLabels: { pool: 'edge' } }, nodeMonitorGracePeriod: '50s' }],
      }),
    );
    const warned = async (flags: string[]) => {
      const logger = memoryLogger();
      const h = await assembleNodeHealth({
        config: configOf([`--node-pool-config=${file}`, ...flags]),
        clock,
        logger,
        metrics: createDisruptionMetrics(new Registry()),
      });
      h.pools?.close();
      return logger.lines
        .filter((l) => l.msg === 'Pool config warning')
        .some((l) => String(l.warning).includes('the second opinion cannot confirm a node down'));
    };
    // --confirm-after 44s + 3s + 3s = 50s: at the pool's grace.
    expect(
      await warned(['--second-opinion=kubelet', '--confirm-after=44s', '--node-monitor-grace-period=1m']),
    ).toBe(true);
    expect(
      await warned(['--second-opinion=kubelet', '--confirm-after=43s', '--node-monitor-grace-period=1m']),
    ).toBe(false);
    expect(await warned(['--node-monitor-grace-period=1m'])).toBe(false);
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
