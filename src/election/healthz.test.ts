import { Registry } from 'prom-client';
import { asyncScheduler } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { KubeApiError } from '../kube/client.js';
import { silentLogger } from '../log/logger.js';
import { leaderlessLimitMs, resolveLeaderElectionConfig } from './config.js';
import { LeaderElector } from './elector.js';
import { DEFAULT_HEALTHZ_TOLERANCE_MS, LeaderHealthzAdaptor, undecidedTooLong } from './healthz.js';
import { createLeaderElectionMetrics } from './metrics.js';
import { microTime } from './record.js';
import { FakeLeaseServer } from './testing/fake-lease-api.js';

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-03-01T12:00:00Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

function elector(server: FakeLeaseServer, who: string, o: { coordinated?: boolean } = {}): LeaderElector {
  return new LeaderElector({
    config: resolveLeaderElectionConfig({ namespace: 'ns', identity: who }),
    client: server.as(who),
    clock: { scheduler: asyncScheduler, wall: () => Date.now() },
    logger: silentLogger,
    metrics: createLeaderElectionMetrics(new Registry()),
    lockUpdates$: server.watch('ns', 'node-lifecycle-controller'),
    coordinated: o.coordinated,
  });
}

const status = (code: number) => new KubeApiError(code, { kind: 'Status', code }, {}, 'lock request');

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

  describe('nobody leads for long (10 lease durations, at least 2 minutes: 2m30s at the defaults)', () => {
    const LIMIT = 150_000;
    const lockName = 'node-lifecycle-controller';

    it('the limit', () => {
      expect(leaderlessLimitMs(15_000)).toBe(LIMIT);
      expect(leaderlessLimitMs(4_000)).toBe(120_000);
      expect(leaderlessLimitMs(60_000)).toBe(600_000);
    });

    it('a coordinated candidate the coordinator never names: /healthz fails once nobody has led for more than the limit', async () => {
      const server = new FakeLeaseServer();
      const a = elector(server, 'a_1', { coordinated: true });
      const h = new LeaderHealthzAdaptor();
      h.setLeaderElection(a);
      a.start();
      // Its first look (answered at +4 ms) finds no lock; nobody ever writes it.
      await vi.advanceTimersByTimeAsync(LIMIT);
      expect(h.check()).toBeUndefined();
      await vi.advanceTimersByTimeAsync(10);
      expect(h.check()?.message).toBe(
        'nobody has led the lock ns/node-lifecycle-controller for 2m30s (limit 2m30s): the lock is missing; ' +
          'coordinated leader election: the coordinator has named nobody',
      );
      a.stop();
      expect(h.check()).toBeUndefined();
    });

    it('the leader dies and the coordinator names nobody: counted from the end of its lease as we observed it', async () => {
      const server = new FakeLeaseServer();
      const a = elector(server, 'a_1', { coordinated: true });
      const h = new LeaderHealthzAdaptor();
      h.setLeaderElection(a);
      a.start();
      await vi.advanceTimersByTimeAsync(10);
      // Another replica, named by the coordinator, renews for 5 minutes, then dies.
      const put = () =>
        server.put('ns', {
          metadata: { name: lockName, resourceVersion: server.get('ns', lockName)?.metadata.resourceVersion },
          spec: { holderIdentity: 'b_2', leaseDurationSeconds: 15, renewTime: microTime(Date.now()) },
        });
      for (let t = 0; t < 5 * 60_000; t += 2_000) {
        put();
        await vi.advanceTimersByTimeAsync(2_000);
      }
      expect(h.check()).toBeUndefined();
      const lastRenewal = Date.now() - 2_000;
      // Its lease runs out 15 s after we saw the last renewal (+1 ms: the watch); then the limit.
      await vi.advanceTimersByTimeAsync(lastRenewal + 1 + 15_000 + LIMIT - Date.now());
      expect(h.check()).toBeUndefined();
      await vi.advanceTimersByTimeAsync(200);
      expect(h.check()?.message).toMatch(
        /^nobody has led the lock ns\/node-lifecycle-controller for 2m30\.2s \(limit 2m30s\): its holder b_2 stopped renewing; coordinated/,
      );
      a.stop();
    });

    it('ordinary election whose writes are refused (403) while reads work: fails, naming the last error', async () => {
      const server = new FakeLeaseServer();
      server.fault = (req) => (req.method === 'GET' ? undefined : status(403));
      const a = elector(server, 'a_1');
      const h = new LeaderHealthzAdaptor();
      h.setLeaderElection(a);
      a.start();
      await vi.advanceTimersByTimeAsync(LIMIT + 10 * 1_000);
      expect(a.isLeader()).toBe(false);
      expect(h.check()?.message).toMatch(
        /^nobody has led the lock ns\/node-lifecycle-controller for 2m\d+(\.\d)?s \(limit 2m30s\): the lock is missing; ordinary leader election: this replica could not take it \(last error: .*403/,
      );
      a.stop();
    });

    it('a standby with a live leader stays healthy however long it does not lead (ordinary and coordinated)', async () => {
      for (const coordinated of [false, true]) {
        const server = new FakeLeaseServer();
        const a = elector(server, 'a_1', { coordinated });
        const b = elector(server, 'b_2', { coordinated });
        const [ha, hb] = [new LeaderHealthzAdaptor(), new LeaderHealthzAdaptor()];
        ha.setLeaderElection(a);
        hb.setLeaderElection(b);
        a.start();
        await vi.advanceTimersByTimeAsync(10);
        if (coordinated) {
          server.put('ns', {
            metadata: { name: lockName },
            spec: { holderIdentity: 'a_1', leaseDurationSeconds: 5, renewTime: microTime(Date.now()) },
          });
        }
        await vi.advanceTimersByTimeAsync(15_020);
        b.start();
        for (let i = 0; i < 20; i++) {
          await vi.advanceTimersByTimeAsync(60_000);
          expect(a.isLeader()).toBe(true);
          expect(b.isLeader()).toBe(false);
          expect(hb.check()).toBeUndefined();
          expect(ha.check()).toBeUndefined();
          expect(b.leaderlessFor()).toBeUndefined();
        }
        a.stop();
        b.stop();
      }
    });

    it('a replica that cannot see (not eligible) or cannot reach the API server is not judged by it; eligible, it is', async () => {
      const server = new FakeLeaseServer();
      const a = elector(server, 'a_1', { coordinated: true });
      const h = new LeaderHealthzAdaptor();
      h.setLeaderElection(a);
      a.setEligible(false);
      a.start();
      await vi.advanceTimersByTimeAsync(10 * 60_000);
      expect(a.leaderlessFor()).toBeGreaterThan(LIMIT);
      expect(h.check()).toBeUndefined();
      // Eligible: it could lead, and nobody has for 10 minutes.
      a.setEligible(true);
      expect(h.check()?.message).toMatch(/^nobody has led the lock ns\/node-lifecycle-controller for 10m0s /);
      // The API server stops answering (an outage): nothing observed, nothing judged here (the
      // api-access and lock-access probes judge an outage).
      server.fault = () => status(503);
      await vi.advanceTimersByTimeAsync(30_000);
      expect(h.check()).toBeUndefined();
      await vi.advanceTimersByTimeAsync(10 * 60_000);
      expect(h.check()).toBeUndefined();
      // Back: counted from the first answer after the outage, not from before it.
      server.fault = undefined;
      await vi.advanceTimersByTimeAsync(10_000);
      expect(h.check()).toBeUndefined();
      expect(a.leaderlessFor()).toBeLessThan(10_000);
      await vi.advanceTimersByTimeAsync(LIMIT);
      expect(h.check()).toBeDefined();
      a.stop();
    });

    it('a leader is judged by its renewals alone (client-go), never as leaderless', async () => {
      const server = new FakeLeaseServer();
      const a = elector(server, 'a_1');
      const h = new LeaderHealthzAdaptor();
      h.setLeaderElection(a);
      a.start();
      await vi.advanceTimersByTimeAsync(15_020);
      expect(a.isLeader()).toBe(true);
      await vi.advanceTimersByTimeAsync(20 * 60_000);
      expect(h.check()).toBeUndefined();
      expect(a.leaderlessFor()).toBeUndefined();
      a.stop();
    });

    it('an explicit limit', async () => {
      const server = new FakeLeaseServer();
      const a = elector(server, 'a_1', { coordinated: true });
      const h = new LeaderHealthzAdaptor(20_000, 30_000);
      h.setLeaderElection(a);
      a.start();
      await vi.advanceTimersByTimeAsync(30_010);
      expect(h.check()?.message).toMatch(/for 30s \(limit 30s\)/);
      a.stop();
    });
  });

  it('undecided about coordinated election for longer than the limit (5 minutes in run.ts): fails, with the last failure', () => {
    const limit = 5 * 60_000;
    expect(undecidedTooLong(undefined, 10 * limit, 'ns/l', limit)).toBeUndefined();
    expect(undecidedTooLong({ since: 1_000 }, 1_000 + limit, 'ns/l', limit)).toBeUndefined();
    expect(undecidedTooLong({ since: 1_000, lastError: 'GET x: 503' }, 2_000 + limit, 'ns/l', limit)).toBe(
      'nobody has led the lock ns/l as far as this replica knows for 5m1s: it has not campaigned, coordinated ' +
        'leader election undecided (no real answer yet whether the API server serves LeaseCandidates and runs a ' +
        'coordinator; last: GET x: 503)',
    );
  });
});
