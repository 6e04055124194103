import { Registry } from 'prom-client';
import { asyncScheduler } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../log/logger.js';
import { IdentityLeaseCollector, LEADER_LABEL } from './identity-gc.js';
import { LeaseApi } from './lease-api.js';
import { createLeaderElectionMetrics } from './metrics.js';
import { microTime } from './record.js';
import { FakeLeaseServer } from './testing/fake-lease-api.js';

const NS = 'nlc-system';
const T0 = Date.parse('2026-03-01T12:00:00.000Z');
const IDENTITY = 'node-lifecycle-controller.nlc.dev/identity';
const GC_AGE = 5_000;

let server: FakeLeaseServer;
const collectors: IdentityLeaseCollector[] = [];
beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
  server = new FakeLeaseServer();
});
afterEach(() => {
  for (const c of collectors.splice(0)) c.stop();
  vi.useRealTimers();
});

const advance = (ms: number) => vi.advanceTimersByTimeAsync(ms);

function collector(
  leadership: () => { leading: boolean; holder: string | undefined } = () => ({
    leading: false,
    holder: undefined,
  }),
): IdentityLeaseCollector {
  const c = new IdentityLeaseCollector({
    api: new LeaseApi(server.as('gc'), NS),
    clock: { scheduler: asyncScheduler, wall: () => Date.now() },
    log: silentLogger,
    metrics: createLeaderElectionMetrics(new Registry()),
    ownLease: 'ours',
    selector: `${IDENTITY}=node-lifecycle-controller`,
    gcAgeMs: GC_AGE,
    gcCheckIntervalMs: 1_000,
    leadership,
  });
  collectors.push(c);
  return c;
}

function put(name: string, holder: string, renewAt: number, leader?: 'true' | 'false'): void {
  server.put(NS, {
    metadata: {
      name,
      labels: { [IDENTITY]: 'node-lifecycle-controller', ...(leader ? { [LEADER_LABEL]: leader } : {}) },
    },
    spec: { holderIdentity: holder, renewTime: microTime(renewAt) },
  });
}

async function pass(c: IdentityLeaseCollector): Promise<string[]> {
  const p = c.collect();
  await advance(20);
  return await p;
}

describe('IdentityLeaseCollector: leases of dead replicas, judged by our own observation', () => {
  it('never collects our own lease, however long it stays unchanged', async () => {
    put('ours', 'me_1', T0);
    put('dead', 'dead_1', T0);
    const c = collector();
    expect(await pass(c)).toEqual([]);
    await advance(GC_AGE);
    expect(await pass(c)).toEqual(['dead']);
    await advance(10 * GC_AGE);
    expect(await pass(c)).toEqual([]);
    expect(server.get(NS, 'ours')).toBeDefined();
  });

  it('a renewal seen by the re-read before the delete restarts the clock from that read', async () => {
    put('slow', 'slow_1', T0);
    const c = collector();
    expect(await pass(c)).toEqual([]); // first seen at +0
    await advance(GC_AGE + 1_000);
    // Judged stale by the listing; it renews just before our re-read: kept, watched from now.
    server.fault = (req) => {
      if (req.method === 'GET' && req.path.endsWith('/slow')) {
        server.fault = undefined;
        put('slow', 'slow_1', T0 + 6_000);
      }
      return undefined;
    };
    expect(await pass(c)).toEqual([]);
    await advance(3_000);
    expect(await pass(c)).toEqual([]); // ~3 s after the renewal we saw
    await advance(GC_AGE - 3_000);
    // gcAge after the renewal the re-read saw (not after the next listing): collected.
    expect(await pass(c)).toEqual(['slow']);
  });

  it("resets another replica's stale leader=true only while we lead, and never the lock holder's", async () => {
    put('dead-leader', 'old_1', T0, 'true');
    put('holder', 'holder_1', T0, 'true');
    let leading = false;
    const c = collector(() => ({ leading, holder: 'holder_1' }));
    await pass(c);
    expect(server.get(NS, 'dead-leader')?.metadata.labels?.[LEADER_LABEL]).toBe('true');
    leading = true;
    await pass(c);
    expect(server.get(NS, 'dead-leader')?.metadata.labels?.[LEADER_LABEL]).toBe('false');
    expect(server.get(NS, 'holder')?.metadata.labels?.[LEADER_LABEL]).toBe('true');
  });

  it('runs a pass at start, then every check interval, and none after stop(), also when stopped during a pass', async () => {
    const c = collector();
    const lists = () =>
      server.calls.filter((call) => call.method === 'GET' && call.name === undefined).length;
    c.start();
    await advance(20);
    expect(lists()).toBe(1);
    await advance(3_000);
    expect(lists()).toBe(4);
    c.stop();
    await advance(5_000);
    expect(lists()).toBe(4);
    // Stopped while a pass is on the wire: that pass ends, no other follows.
    server.halfLatencyMs = 500;
    const d = collector();
    d.start();
    await advance(100);
    d.stop();
    await advance(10_000);
    expect(lists()).toBe(5);
  });
});
