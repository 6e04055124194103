import { Registry } from 'prom-client';
import { asyncScheduler, config, map } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { KubeClient } from '../kube/client.js';
import type { Lease, Pod } from '../kube/types.js';
import { memoryLogger } from '../log/logger.js';
import { createWatchMetrics } from './metrics.js';
import { POD_NODE_INDEX, Reflector, watchNodeLeases, watchPods } from './reflector.js';
import { isHealthy } from './status.js';
import { stripLease } from './strip.js';
import { listPage, ScriptedTransport } from './testing.js';
import type { WatchEvent, WatchHealth } from './types.js';

const flush = () => vi.advanceTimersByTimeAsync(0);
const advance = (ms: number) => vi.advanceTimersByTimeAsync(ms);

const lease = (name: string, rv: string, renewTime = '2026-01-01T00:00:00.000000Z') => ({
  apiVersion: 'coordination.k8s.io/v1',
  kind: 'Lease',
  metadata: {
    name,
    namespace: 'kube-node-lease',
    resourceVersion: rv,
    managedFields: [{ manager: 'kubelet' }],
  },
  spec: { holderIdentity: name, leaseDurationSeconds: 40, renewTime },
});
const ev = (type: string, object: unknown) => ({ type, object });

function leaseReflector(registry?: Registry) {
  const t = new ScriptedTransport();
  const log = memoryLogger();
  const r = new Reflector<Lease>({
    resource: 'leases',
    transport: t,
    scheduler: asyncScheduler,
    strip: stripLease,
    logger: log,
    metrics: registry ? createWatchMetrics(registry) : undefined,
    random: () => 0.5,
  });
  return { t, r, log };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('Reflector', () => {
  it('fills the store with stripped objects, opens the synced gate, follows the watch', async () => {
    const { t, r } = leaseReflector();
    r.start();
    let synced = false;
    void r.whenSynced().then(() => {
      synced = true;
    });
    await flush();
    t.lastList().resolve(listPage([lease('n1', '1'), lease('n2', '2')], '5'));
    await flush();
    expect(synced).toBe(true);
    const n1 = r.store.getByName('n1', 'kube-node-lease')!;
    expect(n1.spec?.holderIdentity).toBe('n1');
    expect(JSON.stringify(n1)).not.toMatch(/managedFields|apiVersion/);
    t.lastWatch()
      .open()
      .send(ev('MODIFIED', lease('n1', '6', 'later')), ev('DELETED', lease('n2', '7')));
    await flush();
    expect(r.store.get('kube-node-lease/n1')?.spec?.renewTime).toBe('later');
    expect(r.store.size).toBe(1);
    r.stop();
    expect(t.lastWatch().signal.aborted).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('after a relist the store equals the new list: vanished objects are deleted', async () => {
    const { t, r } = leaseReflector();
    const types: string[] = [];
    r.events$.subscribe((e) => types.push(e.type));
    r.start();
    await flush();
    t.lastList().resolve(listPage([lease('a', '1'), lease('b', '2'), lease('c', '3')], '5'));
    await flush();
    t.lastWatch()
      .open()
      .send(ev('ERROR', { kind: 'Status', code: 410, reason: 'Expired' }));
    await flush();
    t.lastList().resolve(listPage([lease('a', '9'), lease('d', '10')], '11'));
    await flush();
    expect([...r.store.keys()].sort()).toEqual(['kube-node-lease/a', 'kube-node-lease/d']);
    expect(r.store.getByName('a', 'kube-node-lease')?.metadata.resourceVersion).toBe('9');
    expect(types.slice(5)).toEqual(['Init', 'InitApply', 'InitApply', 'Delete', 'Delete', 'InitDone']);
    expect(r.health()).toMatchObject({ relists: 1, synced: true, connected: true });
  });

  it('a throwing events$ subscriber hurts neither the store, other subscribers, nor the process', async () => {
    const onUnhandled = vi.fn();
    const previous = config.onUnhandledError;
    config.onUnhandledError = onUnhandled;
    try {
      const registry = new Registry();
      const { t, r } = leaseReflector(registry);
      const good: string[] = [];
      r.events$.subscribe(() => {
        throw new Error('bad consumer');
      });
      r.events$.subscribe((e) => good.push(e.type));
      r.health$.subscribe(() => {
        throw new Error('bad health consumer');
      });
      r.start();
      await flush();
      t.lastList().resolve(listPage([lease('a', '1')], '2'));
      await flush();
      t.lastWatch()
        .open()
        .send(ev('MODIFIED', lease('a', '3')));
      await flush();
      expect(good).toEqual(['Init', 'InitApply', 'InitDone', 'Apply']);
      expect(r.store.get('kube-node-lease/a')?.metadata.resourceVersion).toBe('3');
      expect(r.health().connected).toBe(true);
      expect(r.status.errorCount('subscriber')).toBeGreaterThanOrEqual(4);
      const metrics = await registry.getSingleMetricAsString('nlc_watch_errors_total');
      expect(metrics).toMatch(/nlc_watch_errors_total\{resource="leases",reason="subscriber"\} \d+/);
      await advance(1000);
      expect(onUnhandled).not.toHaveBeenCalled();
    } finally {
      config.onUnhandledError = previous;
    }
  });

  it('a consumer chain that throws inside an operator only ends that chain', async () => {
    const onUnhandled = vi.fn();
    const previous = config.onUnhandledError;
    config.onUnhandledError = onUnhandled;
    try {
      const { t, r } = leaseReflector();
      const chainErrors: unknown[] = [];
      const other: string[] = [];
      r.events$
        .pipe(
          map((e) => {
            if (e.type === 'Apply') throw new Error('operator bug');
            return e;
          }),
        )
        .subscribe({ error: (err) => chainErrors.push(err) });
      r.events$.subscribe((e) => other.push(e.type));
      r.start();
      await flush();
      t.lastList().resolve(listPage([lease('a', '1')], '2'));
      await flush();
      t.lastWatch()
        .open()
        .send(ev('MODIFIED', lease('a', '3')), ev('MODIFIED', lease('a', '4')));
      await flush();
      expect(chainErrors).toHaveLength(1);
      expect(other).toEqual(['Init', 'InitApply', 'InitDone', 'Apply', 'Apply']);
      expect(r.store.get('kube-node-lease/a')?.metadata.resourceVersion).toBe('4');
      await advance(1000);
      expect(onUnhandled).not.toHaveBeenCalled();
    } finally {
      config.onUnhandledError = previous;
    }
  });

  it('a throwing indexer is counted as a store error and the stream goes on', async () => {
    const t = new ScriptedTransport();
    const r = new Reflector<Pod>({
      resource: 'pods',
      transport: t,
      scheduler: asyncScheduler,
      indexers: {
        boom: (p) => {
          if (p.metadata.name === 'bad') throw new Error('indexer bug');
          return 'ok';
        },
      },
    }).start();
    await flush();
    t.lastList().resolve(
      listPage(
        [{ metadata: { name: 'bad', namespace: 'x' } }, { metadata: { name: 'good', namespace: 'x' } }],
        '2',
      ),
    );
    await flush();
    expect(r.status.errorCount('store')).toBe(1);
    expect(r.store.get('x/good')).toBeDefined();
    expect(r.store.isSynced).toBe(true);
  });

  it('health$ follows connect, sync, outage and recovery; isHealthy gates on silence', async () => {
    const { t, r } = leaseReflector();
    const seen: WatchHealth[] = [];
    r.health$.subscribe((h) => seen.push(h));
    r.start();
    await flush();
    expect(seen.at(-1)).toMatchObject({ connected: false, synced: false, listing: true });
    t.lastList().resolve(listPage([lease('a', '1')], '2'));
    await flush();
    t.lastWatch().open();
    await flush();
    const h = r.health();
    expect(h).toMatchObject({ connected: true, synced: true, listing: false });
    const t0 = asyncScheduler.now();
    expect(isHealthy(h, t0, 40_000)).toBe(true);
    await advance(30_000);
    t.lastWatch().send(ev('MODIFIED', lease('a', '3')));
    // data-only updates are throttled but do reach health$
    expect(seen.at(-1)?.lastEventAt).toBe(t0 + 30_000);
    expect(isHealthy(r.health(), t0 + 69_000, 40_000)).toBe(true);
    expect(isHealthy(r.health(), t0 + 70_001, 40_000)).toBe(false);
    t.lastWatch().fail(new Error('reset'));
    await flush();
    expect(seen.at(-1)).toMatchObject({ connected: false, since: t0 + 30_000, lastError: 'unknown' });
    expect(isHealthy(r.health(), t0 + 30_000, 40_000)).toBe(false);
    await advance(800);
    t.lastWatch().open();
    await flush();
    expect(seen.at(-1)).toMatchObject({ connected: true, reconnects: 1, since: t0 + 30_800 });
  });
});

describe('convenience constructors', () => {
  const fakeClient = {} as KubeClient;

  it('leases: resource label, lease strip, ns/name keys', async () => {
    const t = new ScriptedTransport();
    const r = watchNodeLeases({
      client: fakeClient,
      clock: { scheduler: asyncScheduler },
      wrapTransport: () => t,
    });
    expect(r.resource).toBe('leases');
    r.start();
    await flush();
    t.lastList().resolve(listPage([lease('n1', '1')], '2'));
    await flush();
    expect(r.store.get('kube-node-lease/n1')?.metadata).not.toHaveProperty('managedFields');
    r.dispose();
  });

  it('pods: indexed by spec.nodeName', async () => {
    const t = new ScriptedTransport();
    const r = watchPods({ client: fakeClient, clock: { scheduler: asyncScheduler }, wrapTransport: () => t });
    r.start();
    await flush();
    const pod = (name: string, node?: string) => ({
      metadata: { name, namespace: 'default', resourceVersion: '1' },
      spec: { nodeName: node, containers: [{ name: 'c' }] },
      status: { phase: 'Running' },
    });
    t.lastList().resolve(listPage([pod('a', 'n1'), pod('b', 'n1'), pod('c', 'n2'), pod('pending')], '5'));
    await flush();
    expect(
      r.store
        .byIndex(POD_NODE_INDEX, 'n1')
        .map((p) => p.metadata.name)
        .sort(),
    ).toEqual(['a', 'b']);
    expect(r.store.indexValues(POD_NODE_INDEX).sort()).toEqual(['n1', 'n2']);
    r.dispose();
  });

  it('the real transport is built from the client for the right paths', async () => {
    const calls: unknown[] = [];
    const client = {
      request: async (req: unknown) => {
        calls.push(req);
        return listPage([], '1');
      },
    } as unknown as KubeClient;
    const r = watchPods(
      { client, clock: { scheduler: asyncScheduler } },
      { fieldSelector: 'spec.nodeName=n1' },
    );
    const events: WatchEvent<Pod>[] = [];
    r.events$.subscribe((e) => events.push(e));
    r.start();
    await flush();
    expect(calls[0]).toMatchObject({
      method: 'GET',
      path: '/api/v1/pods',
      query: { limit: 100, fieldSelector: 'spec.nodeName=n1' },
    });
    expect(events.map((e) => e.type)).toEqual(['Init', 'InitDone']);
    r.dispose();
  });
});
