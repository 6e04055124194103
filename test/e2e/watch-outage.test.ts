import { Registry } from 'prom-client';
import { Observable, type Subscriber } from 'rxjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock/clock.js';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { NODE_LEASE_NAMESPACE } from '../../src/fleet/kubelet.js';
import { type KubeClient, KubeTransportError, paths } from '../../src/kube/client.js';
import type { List } from '../../src/kube/types.js';
import { createLogger } from '../../src/log/logger.js';
import { createWatchMetrics } from '../../src/watch/metrics.js';
import { watchNodeLeases } from '../../src/watch/reflector.js';
import type { ListRequest, WatchHealth, WatchRequest, WatchTransport } from '../../src/watch/types.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { sleep, waitUntil } from '../support/wait.js';
import {
  type Delivery,
  expectStoreEqualsList,
  judgeDeliveries,
  recordWrites,
} from '../support/watch-store.js';

let cluster: TestCluster;
let client: KubeClient;
beforeAll(async () => {
  cluster = await startCluster();
  client = await cluster.cp.client();
});
afterAll(async () => {
  client?.close();
  await cluster?.stop();
});

const logger = createLogger({ format: 'text', verbosity: 1, write: (l) => console.error(l) });
const leasePath = paths.leases(NODE_LEASE_NAMESPACE);

/**
 * Wraps the real transport: while closed, new list/watch requests wait at the gate (the server
 * stays up); `cut()` breaks the open watch streams like a network failure would.
 */
class GatedTransport implements WatchTransport {
  held = 0;
  private open = true;
  private readonly inner: WatchTransport;
  private readonly waiters = new Set<() => void>();
  private readonly streams = new Set<Subscriber<string>>();

  constructor(inner: WatchTransport) {
    this.inner = inner;
  }
  close(): void {
    this.open = false;
  }
  release(): void {
    this.open = true;
    for (const w of this.waiters) w();
    this.waiters.clear();
  }
  cut(): void {
    for (const s of this.streams) s.error(new KubeTransportError('connection cut by the test', 'ECONNRESET'));
  }
  private async pass(signal: AbortSignal): Promise<void> {
    if (this.open) return;
    this.held++;
    await new Promise<void>((resolve, reject) => {
      const go = () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      };
      const onAbort = () => {
        this.waiters.delete(go);
        reject(new KubeTransportError('aborted at the gate', 'ABORTED'));
      };
      this.waiters.add(go);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }
  async list(req: ListRequest, signal: AbortSignal): Promise<List<unknown>> {
    await this.pass(signal);
    return await this.inner.list(req, signal);
  }
  async watch(req: WatchRequest, signal: AbortSignal): Promise<Observable<string>> {
    await this.pass(signal);
    const body = await this.inner.watch(req, signal);
    return new Observable<string>((sub) => {
      this.streams.add(sub);
      const s = body.subscribe(sub);
      return () => {
        this.streams.delete(sub);
        s.unsubscribe();
      };
    });
  }
}

describe('lease watch across control-plane trouble', () => {
  it('kube-apiserver SIGKILLed and restarted: reports the outage, resumes, loses nothing', async () => {
    const { admin, cp } = cluster;
    // Every renewal the API server accepted, with the resourceVersion it got.
    const recorder = recordWrites(admin, leasePath);
    const fleet = await SimulatedFleet.start(recorder.client, {
      nodes: 50,
      namePrefix: 'kill-',
      timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 60_000 },
    });
    const leases = watchNodeLeases({ client, clock: systemClock, logger });
    const seen: WatchHealth[] = [];
    leases.health$.subscribe((h) => seen.push(h));
    const renewals = () => fleet.names.reduce((n, name) => n + fleet.node(name).stats.renewals, 0);
    // Every version of every lease the watcher delivered, from a list (the first one, or a relist:
    // a restarted kube-apiserver answers the resume with 410 when its watch cache starts past our
    // resourceVersion) or from an event.
    const delivered = new Map<string, Delivery[]>();
    let relistsAfterSync = 0;
    leases.events$.subscribe((e) => {
      if (e.type === 'Init' && leases.store.isSynced) relistsAfterSync++;
      if (e.type !== 'Apply' && e.type !== 'InitApply') return;
      const { name, resourceVersion } = e.object.metadata;
      const d: Delivery = { rv: BigInt(resourceVersion ?? ''), via: e.type === 'Apply' ? 'event' : 'list' };
      delivered.set(name, [...(delivered.get(name) ?? []), d]);
    });
    try {
      leases.start();
      await leases.whenSynced();
      const renewalsAtSync = renewals();
      await sleep(3000);
      expect(leases.health().connected).toBe(true);

      await cp.stopApiServer('SIGKILL');
      await waitUntil(() => !leases.health().connected, { timeoutMs: 10_000, what: 'connected=false' });
      await sleep(3000);
      expect(leases.health().connected).toBe(false);
      const outage = seen.filter((h) => !h.connected && h.synced);
      expect(outage.length).toBeGreaterThan(0);

      cp.startApiServer();
      await cp.waitApiServerReady();
      await waitUntil(() => leases.health().connected, { timeoutMs: 60_000, what: 'connected again' });
      const restartedAt = Date.now();
      // Kubelets back off up to 7 s while the server is away: give each time to renew again.
      await sleep(10_000);
      fleet.stop();
      await recorder.settled();
      await expectStoreEqualsList(admin, leasePath, leases.store, 30_000);
      // Each accepted renewal arrived as its own event, or was folded into a relist's list (nothing
      // delivered for that lease in between). A resume from the wrong place would lose the renewals
      // written between the restart and the reconnect; a replay would deliver one twice. Judged per
      // lease and resourceVersion, so how far the events lag behind the writes does not matter.
      const verdict = judgeDeliveries(recorder.writes, delivered);
      const renewed = renewals() - renewalsAtSync;
      console.log(
        `renewals after sync ${renewed}; of all lease writes ${verdict.delivered} delivered as events or in the first list, ${verdict.folded} folded into a later list; relists after sync ${relistsAfterSync}`,
      );
      expect(verdict.problems).toEqual([]);
      expect(renewed).toBeGreaterThan(50 * 10);
      // Renewals written after the restart are in the store.
      const fresh = [...leases.store.values()].filter(
        (l) => Date.parse(String(l.spec?.renewTime)) > restartedAt,
      );
      expect(fresh.length).toBe(50);
      const h = leases.health();
      expect(h.reconnects + h.relists).toBeGreaterThan(0);
      expect(h.connected).toBe(true);
      console.log(`after the kill: reconnects=${h.reconnects} relists=${h.relists} lastError=${h.lastError}`);
    } finally {
      fleet.stop();
      leases.dispose();
    }
  });

  it('forced 410: held off while etcd is compacted and the API server restarted, relists and deletes what vanished', async () => {
    const { admin, cp } = cluster;
    const fleet = await SimulatedFleet.start(admin, {
      nodes: 30,
      namePrefix: 'gone-',
      timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 60_000 },
    });
    const registry = new Registry();
    let gate!: GatedTransport;
    const leases = watchNodeLeases({
      client,
      clock: systemClock,
      logger,
      metrics: createWatchMetrics(registry),
      wrapTransport: (t) => {
        gate = new GatedTransport(t);
        return gate;
      },
    });
    const deleted: string[] = [];
    leases.events$.subscribe((e) => {
      if (e.type === 'Delete') deleted.push(e.object.metadata.name);
    });
    try {
      leases.start();
      await leases.whenSynced();
      await sleep(2000);

      // Hold the watcher off and break its stream.
      gate.close();
      gate.cut();
      await waitUntil(() => gate.held > 0, { timeoutMs: 10_000, what: 'the watcher to wait at the gate' });
      expect(leases.health().connected).toBe(false);

      // Meanwhile: renewals continue, two nodes disappear with their leases.
      const victims = fleet.names.slice(0, 2);
      for (const v of victims) {
        fleet.node(v).kill();
        await admin.request({ method: 'DELETE', path: paths.lease(NODE_LEASE_NAMESPACE, v) });
      }
      await sleep(3000);
      const compactedAt = await cp.compactEtcd();
      await cp.restartApiServer();
      await sleep(2000);
      expect(leases.health().relists).toBe(0);

      gate.release();
      await waitUntil(
        () => {
          const h = leases.health();
          return h.relists >= 1 && h.connected && !h.listing;
        },
        { timeoutMs: 60_000, what: 'a relist after 410' },
      );
      await sleep(2000);
      fleet.stop();
      await expectStoreEqualsList(admin, leasePath, leases.store, 30_000);
      for (const v of victims) expect(leases.store.getByName(v, NODE_LEASE_NAMESPACE)).toBeUndefined();
      expect(deleted).toEqual(expect.arrayContaining(victims));
      expect(leases.status.errorCount('gone')).toBeGreaterThanOrEqual(1);
      const metrics = await registry.metrics();
      const relists = Number(/nlc_watch_relists_total\{resource="leases"\} (\d+)/.exec(metrics)?.[1]);
      expect(relists).toBeGreaterThanOrEqual(1);
      expect(metrics).toMatch(/nlc_watch_errors_total\{resource="leases",reason="gone"\} [1-9]/);
      console.log(`compacted at ${compactedAt}; relists=${relists} deleted=${deleted.join(',')}`);
    } finally {
      fleet.stop();
      leases.dispose();
    }
  });
});
