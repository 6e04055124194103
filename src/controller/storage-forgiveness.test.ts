/**
 * What the storage's outages forgive, and where it ends (issue 47): the controller wired as run.ts
 * does, against the in-memory API server, in virtual time.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { KubeApiError } from '../kube/client.js';
import { KUBELET_RECONNECT_MS } from './lease-recheck.js';
import { advance, GRACE_MS, type Harness, harness, metric } from './testing/harness.js';

const T0 = Date.parse('2026-05-01T08:00:00.000Z');
const MINUTE = 60_000;
const now = () => Date.now();

beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
});

const unknownPatches = (h: Harness) =>
  h.sim.patches.filter((p) => JSON.stringify(p.body).includes('"type":"Ready","status":"Unknown"'));

const isLeaseGet = (req: { method: string; path: string }) =>
  req.method === 'GET' && req.path.includes('/namespaces/kube-node-lease/leases/');

/** Stops every kubelet of `h`'s 10 nodes; their last renewals by name. */
function stopAll(h: Harness): Map<string, number> {
  const last = new Map<string, number>();
  for (let i = 0; i < 10; i++) last.set(`node-${i}`, h.sim.stopKubelet(`node-${i}`));
  return last;
}

describe('storage forgiveness: an API server in front of a dead fleet (virtual time)', () => {
  it('every node dead, etcd fine, lease GETs answered in 1.5 s: each node is marked by its last renewal + grace + the reconnect hold + a few re-reads, not never (issue 47, defect 2)', async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(20_000); // every kubelet renewed at 10 s and 20 s
      const last = stopAll(h);
      h.sim.onRequest = async (req) => {
        if (isLeaseGet(req)) await new Promise((r) => setTimeout(r, 1_500));
        return undefined;
      };
      await advance(10 * MINUTE);
      for (const [name, lastRenewal] of last) {
        const markedAt = h.sim.markedUnknownAt(name);
        expect(markedAt, `${name} marked`).toBeDefined();
        expect(markedAt! - lastRenewal, name).toBeGreaterThan(GRACE_MS);
        // The silence holds judgement 8 s after the first answer; then one more re-read (two for the
        // nodes that wait for one of the 8 workers) and the mark.
        expect(markedAt! - lastRenewal, name).toBeLessThanOrEqual(
          GRACE_MS + KUBELET_RECONNECT_MS + 3 * 1_500 + 500,
        );
      }
      expect(unknownPatches(h)).toHaveLength(10);
      // The fleet's silence held judgement once; two slow re-reads counted their own wait (the others
      // overlapped an answer).
      expect(await metric(h.registry, 'nlc_fleet_silences_total')).toBe(1);
      expect(await metric(h.registry, 'nlc_storage_outage_seconds_total')).toBe(2 * 1.5);
    } finally {
      await h.stop();
    }
  });

  it("etcd away from 21 s until the deadlines' re-reads are answered (slowly, at 71.5 s): the fleet's silence holds judgement for the reconnect back-off; kubelets back 6.5 s later are not marked, a dead node is, 8 s after the answer", async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(20_000); // every kubelet renewed at 10 s and 20 s
      const lastRenewal = stopAll(h).get('node-9')!;
      await advance(1_000);
      h.sim.setStorageDown(true); // 21 s: the deadlines (70 s) come while it is down
      await advance(50_500);
      h.sim.setStorageDown(false); // 71.5 s: the re-reads sent at 70 s are answered
      await advance(6_500);
      for (let i = 0; i < 9; i++) h.sim.startKubelet(`node-${i}`); // 78 s; node-9 is dead
      await advance(MINUTE);
      expect(unknownPatches(h).map((p) => p.path)).toEqual(['/api/v1/nodes/node-9/status']);
      expect(await metric(h.registry, 'nlc_fleet_silences_total')).toBe(1);
      const markedAt = h.sim.markedUnknownAt('node-9')!;
      expect(markedAt - T0).toBeGreaterThanOrEqual(71_500 + KUBELET_RECONNECT_MS);
      expect(markedAt - lastRenewal).toBeLessThanOrEqual(GRACE_MS + 1_500 + KUBELET_RECONNECT_MS + 1_000);
    } finally {
      await h.stop();
    }
  });

  it('every node dead behind an API server whose first re-read of each lease fails (500) and the retry answers at once: each node is marked by its last renewal + 2 x grace at the latest (every chain of forgiveness is capped)', async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(20_000);
      const last = stopAll(h);
      const failedOnce = new Set<string>();
      h.sim.onRequest = (req) => {
        if (!isLeaseGet(req)) return undefined;
        // Each deadline's first re-read fails; its retry (50 ms later) is answered at once.
        const key = `${req.path}@${Math.floor(now() / 10_000)}`;
        if (failedOnce.has(key)) return undefined;
        failedOnce.add(key);
        throw new KubeApiError(500, { kind: 'Status', code: 500 }, {}, `GET ${req.path}`);
      };
      await advance(10 * MINUTE);
      for (const [name, lastRenewal] of last) {
        const markedAt = h.sim.markedUnknownAt(name);
        expect(markedAt, `${name} marked`).toBeDefined();
        // The first outage (a whole grace: from the last write seen) uses up the cap; the next ends nothing.
        expect(markedAt! - lastRenewal, name).toBeGreaterThanOrEqual(2 * GRACE_MS);
        expect(markedAt! - lastRenewal, name).toBeLessThanOrEqual(2 * GRACE_MS + 1_000);
      }
      expect(unknownPatches(h)).toHaveLength(10);
    } finally {
      await h.stop();
    }
  });
});

describe('storage forgiveness: one outage after another (virtual time)', () => {
  it('etcd down 21-64 s, one kubelet renews at 64.5 s, etcd down again 64.7-108 s: the kubelets back at 115 s are not marked; a dead node is, by its last renewal + 2 x grace (issue 47, defect 3)', async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(20_000); // every kubelet renewed at 10 s and 20 s
      const lastRenewal = stopAll(h).get('node-9')!;
      await advance(1_000);
      h.sim.setStorageDown(true); // 21 s
      await advance(43_000);
      h.sim.setStorageDown(false); // 64 s
      await advance(500);
      h.sim.renew('node-0'); // 64.5 s: ends the first outage
      await advance(200);
      h.sim.setStorageDown(true); // 64.7 s
      await advance(43_300);
      h.sim.setStorageDown(false); // 108 s
      await advance(7_000);
      // 115 s: the kubelets are back from their back-off; node-9 is dead.
      for (let i = 0; i < 9; i++) h.sim.startKubelet(`node-${i}`);
      await advance(MINUTE);
      expect(unknownPatches(h).map((p) => p.path)).toEqual(['/api/v1/nodes/node-9/status']);
      const markedAt = h.sim.markedUnknownAt('node-9')!;
      expect(markedAt - lastRenewal).toBeGreaterThanOrEqual(2 * GRACE_MS);
      expect(markedAt - lastRenewal).toBeLessThanOrEqual(2 * GRACE_MS + 1_000);
    } finally {
      await h.stop();
    }
  });

  it.each([
    ['wait', 'the re-reads time out'],
    ['error', 'the re-reads are answered 500 at once'],
  ] as const)(
    'one storage outage of 2 x grace - renew interval - 8 s (82 s), from just before the renewals (%s: %s), kubelets back 7.9 s after it: no live node marked; a dead node is, at its last renewal + 2 x grace',
    async (answer, _how) => {
      const h = harness({ nodes: 10 });
      try {
        await advance(20_000); // every kubelet renewed at 10 s and 20 s
        const lastRenewal = stopAll(h).get('node-9')!;
        await advance(9_900);
        h.sim.setStorageDown(true, answer); // 29.9 s: the renewals from 30 s fail
        await advance(2 * GRACE_MS - 10_000 - KUBELET_RECONNECT_MS);
        h.sim.setStorageDown(false); // 111.9 s
        await advance(KUBELET_RECONNECT_MS - 100);
        for (let i = 0; i < 9; i++) h.sim.startKubelet(`node-${i}`); // 119.8 s; node-9 is dead
        await advance(MINUTE);
        expect(unknownPatches(h).map((p) => p.path)).toEqual(['/api/v1/nodes/node-9/status']);
        const markedAt = h.sim.markedUnknownAt('node-9')!;
        expect(markedAt - lastRenewal).toBeGreaterThanOrEqual(2 * GRACE_MS);
        expect(markedAt - lastRenewal).toBeLessThanOrEqual(2 * GRACE_MS + 1_000);
      } finally {
        await h.stop();
      }
    },
  );

  it('a fleet that died but for one kubelet, whose renewals get through only every 20 s (a flapping storage): each gap counts as an outage, and the dead nodes are still marked by their last renewal + 2 x grace', async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(20_000);
      const lastRenewal = stopAll(h).get('node-9')!;
      for (let t = 0; t < 10; t++) {
        await advance(20_000);
        h.sim.renew('node-0'); // 40, 60, ... 220 s
      }
      expect(h.sim.readyOf('node-0')).toBe('True');
      const marked = unknownPatches(h).map((p) => p.path);
      expect(marked).toHaveLength(9);
      expect(marked).not.toContain('/api/v1/nodes/node-0/status');
      // Each 20 s gap of node-0's renewals was a fleet-wide silence (the fleet had been renewing),
      // counted as an outage; what they forgive the dead nodes ends at the cap.
      expect(await metric(h.registry, 'nlc_storage_outage_seconds_total')).toBeGreaterThanOrEqual(40);
      const markedAt = h.sim.markedUnknownAt('node-9')!;
      expect(markedAt - lastRenewal).toBeLessThanOrEqual(2 * GRACE_MS + 1_000);
    } finally {
      await h.stop();
    }
  });
});

describe('storage forgiveness: the lease watch stalls without going blind (virtual time)', () => {
  it('a lease watch stalled 30 s (under the silence threshold) that then delivers the held renewals at once counts no storage outage: a dead node is marked at its grace (issue 47, suspected point)', async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(20_000);
      const lastRenewal = h.sim.stopKubelet('node-9');
      await advance(1_000);
      h.sim.stallWatch('leases', true); // 21 s: the renewals at 30, 40 and 50 s are held back (45 s makes it blind)
      for (let t = 0; t < 30; t++) {
        await advance(1_000);
        expect(h.controller.sight.blind, `blind ${t + 1} s into the stall`).toBeUndefined();
      }
      h.sim.stallWatch('leases', false); // 51 s: delivered at once
      await advance(1_000);
      expect(await metric(h.registry, 'nlc_storage_outage_seconds_total')).toBe(0);
      await advance(GRACE_MS);
      const markedAt = h.sim.markedUnknownAt('node-9');
      expect(markedAt).toBeDefined();
      expect(markedAt! - lastRenewal).toBeLessThanOrEqual(GRACE_MS + 1_000);
      expect(unknownPatches(h)).toHaveLength(1);
    } finally {
      await h.stop();
    }
  });
});
