import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/clock/clock.js';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { NODE_LEASE_NAMESPACE } from '../../src/fleet/kubelet.js';
import { type KubeClient, paths } from '../../src/kube/client.js';
import { createLogger } from '../../src/log/logger.js';
import { createWatchMetrics } from '../../src/watch/metrics.js';
import { WatchReadPacer } from '../../src/watch/read-pacer.js';
import { watchNodeLeases } from '../../src/watch/reflector.js';
import { isHealthy } from '../../src/watch/status.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { sleep, waitUntil } from '../support/wait.js';
import {
  apiserverMetric,
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

describe('lease watch on a real API server', () => {
  it('follows 200 renewing leases for 60 s without losing one update, then equals a fresh LIST', async () => {
    const { admin } = cluster;
    const leasePath = paths.leases(NODE_LEASE_NAMESPACE);
    // Every lease write the API server accepted, with the resourceVersion it answered.
    const recorder = recordWrites(admin, leasePath);
    const fleet = await SimulatedFleet.start(recorder.client, {
      nodes: 200,
      namePrefix: 'ingest-',
      timing: { renewIntervalMs: 1500, statusUpdateIntervalMs: 60_000 },
    });
    const registry = new Registry();
    // The resourceVersion the first watch starts from: the list's. The server sends as events
    // exactly the writes after it; the list holds everything up to it.
    let watchFrom: bigint | undefined;
    const leases = watchNodeLeases({
      client,
      clock: systemClock,
      logger,
      metrics: createWatchMetrics(registry),
      tuning: { pageSize: 50 }, // 200 leases -> 4 pages
      wrapTransport: (t) => ({
        list: (req, signal) => t.list(req, signal),
        watch: (req, signal) => {
          watchFrom ??= BigInt(req.resourceVersion);
          return t.watch(req, signal);
        },
      }),
    });
    let applies = 0;
    // Every version of every lease delivered: from the list or as an event.
    const delivered = new Map<string, Delivery[]>();
    leases.events$.subscribe((e) => {
      if (e.type === 'Apply') applies++;
      if (e.type !== 'Apply' && e.type !== 'InitApply') return;
      const { name, resourceVersion } = e.object.metadata;
      const d: Delivery = { rv: BigInt(resourceVersion ?? ''), via: e.type === 'Apply' ? 'event' : 'list' };
      delivered.set(name, [...(delivered.get(name) ?? []), d]);
    });
    const renewErrors = () => fleet.names.reduce((n, name) => n + fleet.node(name).stats.renewErrors, 0);
    const watches = () =>
      apiserverMetric(admin, 'apiserver_longrunning_requests', { resource: 'leases', verb: 'WATCH' });
    // The API server watches leases itself (identity leases); count ours on top of that.
    const baseline = await watches();
    try {
      leases.start();
      await leases.whenSynced();
      expect(leases.store.size).toBe(200);
      // Our watch request leaves right after InitDone; wait for the server to count it.
      await waitUntil(async () => (await watches()) === baseline + 1, {
        timeoutMs: 10_000,
        what: 'our lease watch on the API server',
      });

      // 60 s of renewals; the stream must look healthy the whole time (data within 5 s).
      let unhealthySamples = 0;
      for (let s = 0; s < 60; s++) {
        await sleep(1000);
        if (!isHealthy(leases.health(), systemClock.scheduler.now(), 5000)) unhealthySamples++;
      }
      fleet.stop();
      // No renewal on the wire any more; then wait for the watch to deliver the last one of every
      // lease (events come in resourceVersion order, so everything before them has arrived too).
      await recorder.settled();
      const stored = (name: string) =>
        BigInt(leases.store.getByName(name, NODE_LEASE_NAMESPACE)?.metadata.resourceVersion ?? '0');
      await waitUntil(
        () => {
          const behind = [...recorder.writes].filter(([name, rvs]) => stored(name) < rvs.at(-1)!);
          if (behind.length > 0)
            throw new Error(
              `${behind.length} behind: ${behind
                .slice(0, 5)
                .map(([n, rvs]) => `${n} ${stored(n)} < ${rvs.at(-1)}`)
                .join('; ')}`,
            );
          return true;
        },
        { timeoutMs: 15_000, what: 'the last renewal of every lease in the store' },
      );
      const size = await expectStoreEqualsList(admin, leasePath, leases.store);
      expect(size).toBe(200);

      // Each renewal written after the list arrived as its own event, in order, none twice; those
      // before it were in the list (or superseded by what was). Judged per lease and resourceVersion.
      const verdict = judgeDeliveries(recorder.writes, delivered);
      expect(verdict.problems).toEqual([]);
      // And as counts: one Apply per renewal written after the list, no slack for timing. A renewal
      // the kubelet gave up on (timeout, broken connection) may still have been committed: an Apply
      // with no recorded write, one renewal error each. Normally there are none and the counts are equal.
      expect(watchFrom).toBeDefined();
      const renewed = [...recorder.writes.values()].flat().filter((rv) => rv > watchFrom!).length;
      const unconfirmed = renewErrors();
      console.log(
        `renewals after the list (rv ${watchFrom}) ${renewed}, Apply events ${applies}, difference ${applies - renewed}, renewal errors ${unconfirmed}`,
      );
      expect(renewed).toBeGreaterThan(200 * 30);
      expect(applies).toBeGreaterThanOrEqual(renewed);
      expect(applies - renewed).toBeLessThanOrEqual(Math.min(unconfirmed, 50));
      expect(unhealthySamples).toBe(0);
      const h = leases.health();
      expect(h).toMatchObject({ connected: true, synced: true, relists: 0 });
      expect(leases.status.errors.size).toBe(0);
      const metrics = await registry.metrics();
      expect(metrics).toMatch(/nlc_watch_events_total\{resource="leases",type="MODIFIED"\} (\d+)/);
      expect(metrics).toMatch(/nlc_watch_connected\{resource="leases"\} 1/);
      expect(metrics).toMatch(/nlc_watch_store_objects\{resource="leases"\} 200/);
    } finally {
      fleet.stop();
      leases.dispose();
    }
    // Unsubscribed: the API server no longer serves our watch (no leaked connection).
    await waitUntil(
      async () => {
        const n = await watches();
        if (n !== baseline) throw new Error(`${n} lease watches, baseline ${baseline}`);
        return true;
      },
      { timeoutMs: 10_000, what: 'the lease watch to be gone from the API server' },
    );
    expect(leases.health().connected).toBe(false);
  });

  it('paced reads (every 200 ms): every renewal arrives, in batches on the ticks; re-watches reuse the one socket', async () => {
    const { admin } = cluster;
    // 40 nodes renewing every 400 ms: about 100 renewals a second, 20 per tick.
    const fleet = await SimulatedFleet.start(admin, {
      nodes: 40,
      namePrefix: 'paced-',
      timing: { renewIntervalMs: 400, statusUpdateIntervalMs: 60_000 },
    });
    // One socket for everything: each re-watch after the server ends one (timeoutSeconds=2) must
    // reuse the socket the pacer let go of, so it must be readable again. (The server's end is read
    // in a tick's turn; letting go of a stopped socket is covered in read-pacer.test.ts.)
    const oneSocket = await cluster.cp.client({ maxSockets: 1 });
    const pacer = new WatchReadPacer({
      onUnsupported: (why) => {
        throw new Error(`cannot pace: ${why}`);
      },
    });
    const ticker = setInterval(() => pacer.tick(), 200);
    const leases = watchNodeLeases({
      client: oneSocket,
      clock: systemClock,
      logger,
      readPacer: pacer,
      tuning: { watchTimeoutSeconds: { min: 2, max: 2 } },
    });
    const arrivals: number[] = [];
    leases.events$.subscribe((e) => {
      if (e.type === 'Apply' && e.object.metadata.name.startsWith('paced-')) arrivals.push(performance.now());
    });
    const renewals = () => fleet.names.reduce((n, name) => n + fleet.node(name).stats.renewals, 0);
    try {
      leases.start();
      await leases.whenSynced();
      // The watch request leaves right after the list; paced from its response headers on.
      await waitUntil(() => pacer.size === 1 || undefined, {
        timeoutMs: 10_000,
        what: 'the paced lease watch',
      });
      const from = arrivals.length;
      const renewalsAtStart = renewals();
      const t0 = performance.now();
      await sleep(10_000);
      fleet.stop();
      await sleep(1500); // the last renewals in flight, read on the next ticks
      const renewed = renewals() - renewalsAtStart;
      const seen = arrivals.slice(from);
      // Events read in one tick's turn arrive within a few ms of each other; ticks are 200 ms apart.
      const batches = seen.filter((t, i) => i === 0 || t - seen[i - 1]! > 50).length;
      const seconds = (performance.now() - t0) / 1000;
      console.log(
        `paced: ${seen.length} lease events for ${renewed} renewals in ${batches} batches over ${seconds.toFixed(1)} s ` +
          `(${(seen.length / batches).toFixed(1)} per batch); server-ended watches ${leases.health().reconnects}`,
      );
      expect(renewed).toBeGreaterThan(40 * 20);
      expect(Math.abs(seen.length - renewed)).toBeLessThanOrEqual(40);
      // As events arrive, ~1,000 separate reads; paced, at most one batch per tick (plus the odd
      // tick split by a slow turn).
      expect(batches).toBeLessThanOrEqual(Math.ceil((seconds * 1000) / 200) + 5);
      expect(seen.length / batches).toBeGreaterThanOrEqual(8);
      // The server ended the watch several times; each re-watch went out on the same socket and was read.
      expect(leases.health().reconnects).toBeGreaterThanOrEqual(3);
      expect(leases.status.errors.size).toBe(0);
    } finally {
      fleet.stop();
      leases.dispose();
      clearInterval(ticker);
    }
    // Let go of everything; the client still answers.
    expect(pacer.size).toBe(0);
    const list = await oneSocket.request<{ items: unknown[] }>({
      method: 'GET',
      path: paths.leases(NODE_LEASE_NAMESPACE),
      timeoutMs: 5000,
    });
    expect(list.items.length).toBeGreaterThanOrEqual(40);
    oneSocket.close();
  });

  it('a quiet watch is kept alive by the server bookmarks: no idle-timeout reconnect over 100 s', async () => {
    // Nothing lives in this namespace: the only traffic is the API server's periodic bookmarks.
    const quiet = watchNodeLeases({ client, clock: systemClock, logger }, { namespace: 'default' });
    const bookmarkAt: number[] = [];
    let last = 0;
    try {
      quiet.start();
      await quiet.whenSynced();
      const t0 = performance.now();
      while (performance.now() - t0 < 100_000) {
        await sleep(1000);
        const n = quiet.status.events.BOOKMARK;
        if (n > last) bookmarkAt.push(Math.round((performance.now() - t0) / 1000));
        last = n;
      }
      console.log(`bookmarks at seconds ${bookmarkAt.join(', ')} (idle timeout 90 s)`);
      // The server bookmarks each watch about once a minute (seen: at 60 s and 120 s). One bookmark
      // before 90 s is what keeps the 90 s idle timeout from firing.
      expect(quiet.status.events.BOOKMARK).toBeGreaterThanOrEqual(1);
      expect(quiet.status.errorCount('idle_timeout')).toBe(0);
      expect(quiet.health()).toMatchObject({ connected: true, reconnects: 0 });
      expect(bookmarkAt[0]).toBeLessThan(90);
    } finally {
      quiet.dispose();
    }
  });
});
