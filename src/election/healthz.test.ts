import { Registry } from 'prom-client';
import { asyncScheduler } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../log/logger.js';
import { resolveLeaderElectionConfig } from './config.js';
import { LeaderElector } from './elector.js';
import { DEFAULT_HEALTHZ_TOLERANCE_MS, LeaderHealthzAdaptor } from './healthz.js';
import { createLeaderElectionMetrics } from './metrics.js';
import { FakeLeaseServer } from './testing/fake-lease-api.js';

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-03-01T12:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

function elector(server: FakeLeaseServer, who: string): LeaderElector {
  return new LeaderElector({
    config: resolveLeaderElectionConfig({ namespace: 'ns', identity: who }),
    client: server.as(who),
    clock: { scheduler: asyncScheduler, wall: () => Date.now() },
    logger: silentLogger,
    metrics: createLeaderElectionMetrics(new Registry()),
    lockUpdates$: server.watch('ns', 'node-lifecycle-controller'),
  });
}

describe('LeaderHealthzAdaptor', () => {
  it('is healthy before it is bound, and uses a 20 s tolerance by default', () => {
    const h = new LeaderHealthzAdaptor();
    expect(h.name).toBe('leaderElection');
    expect(h.toleranceMs).toBe(DEFAULT_HEALTHZ_TOLERANCE_MS);
    expect(h.toleranceMs).toBe(20_000);
    expect(h.check()).toBeUndefined();
  });

  it('passes its tolerance to the bound source', () => {
    const h = new LeaderHealthzAdaptor(7_000);
    const asked: number[] = [];
    h.setLeaderElection({
      check: (t) => {
        asked.push(t);
        return new Error('stale');
      },
    });
    expect(h.check()?.message).toBe('stale');
    expect(asked).toEqual([7_000]);
  });

  it('fails for a leader whose renewals stopped for leaseDuration + tolerance; a standby stays healthy', async () => {
    const server = new FakeLeaseServer();
    const a = elector(server, 'a_1');
    const b = elector(server, 'b_2');
    const ha = new LeaderHealthzAdaptor();
    const hb = new LeaderHealthzAdaptor();
    ha.setLeaderElection(a);
    hb.setLeaderElection(b);
    a.start();
    // A fresh lock: a creates it one lease duration (15 s) after it found it missing.
    await vi.advanceTimersByTimeAsync(15_000 + 20);
    b.start();
    await vi.advanceTimersByTimeAsync(20);
    expect(a.isLeader()).toBe(true);
    const renewedAt = a.snapshot().renewedAt!;
    // The API server stops answering a: it loses leadership at the renew deadline but (here)
    // does not exit, so its /healthz turns red after leaseDuration + 20 s.
    server.fault = (_req, who) => (who === 'a_1' ? 'hang' : undefined);
    await vi.advanceTimersByTimeAsync(renewedAt + 15_000 + 20_000 - Date.now());
    expect(a.isLeader()).toBe(false);
    expect(ha.check()).toBeUndefined();
    await vi.advanceTimersByTimeAsync(1);
    expect(ha.check()?.message).toMatch(/failed election to renew leadership.*ns\/node-lifecycle-controller/);
    // b took over in the meantime and renews: healthy.
    expect(b.isLeader()).toBe(true);
    expect(hb.check()).toBeUndefined();
    a.stop();
    b.stop();
    expect(ha.check()).toBeUndefined();
  });
});
