/**
 * What the storage's outages forgive, and where it ends (issue 47): the controller wired as run.ts
 * does, against the in-memory API server, in virtual time.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { KubeApiError } from '../kube/client.js';
import { advance, GRACE_MS, type Harness, harness } from './testing/harness.js';

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
