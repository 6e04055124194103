import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { advance, GRACE_MS, harness } from './testing/harness.js';

// Found by the fault simulator (test/sim, seed 1 of family lifecycle): a node marked Unknown whose
// kubelet renews its lease while the mark is on the wire (a slow API server) is not lost on our
// clock any more; the same reconcile must not go on to mark its pods not ready or add the
// unreachable NoExecute taint, nor may a later one while its lease keeps renewing (its kubelet's
// own status update, which brings Ready back, may come later or fail).

const T0 = Date.parse('2026-05-01T08:00:00.000Z');

beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('a node that renews after it was marked Unknown (virtual time)', () => {
  it('renewing while its mark is on the wire: its pods are not marked, no NoExecute taint, while its lease keeps renewing', async () => {
    const h = harness({ nodes: 3 });
    for (let i = 0; i < 2; i++) h.sim.addPod('default', `web-${i}`, 'node-1');
    let renewedAt: number | undefined;
    h.sim.onRequest = async (req) => {
      if (req.method === 'PATCH' && req.path === '/api/v1/nodes/node-1/status') {
        // The API server takes 2 s to store the mark; the kubelet's lease renewal gets through at 1 s.
        setTimeout(() => {
          renewedAt = Date.now();
          h.sim.startKubelet('node-1');
        }, 1_000);
        await new Promise((r) => setTimeout(r, 2_000));
      }
      return undefined;
    };
    try {
      await advance(20_000);
      h.sim.stopKubelet('node-1');
      await advance(GRACE_MS + 60_000);
      // It was marked (decided on silence: the renewal came after the re-read) ...
      expect(h.sim.readyOf('node-1')).toBe('Unknown');
      expect(renewedAt).toBeDefined();
      // ... and nothing more was done to it after its renewal came in.
      const after = h.sim.patches.filter((p) => p.at > renewedAt!);
      const noExecute = after.filter(
        (p) => p.path === '/api/v1/nodes/node-1' && JSON.stringify(p.body).includes('"effect":"NoExecute"'),
      );
      expect(noExecute).toEqual([]);
      expect(after.filter((p) => p.path.startsWith('/api/v1/namespaces/default/pods/'))).toEqual([]);
      expect(h.sim.podReadyOf('default/web-0')).toBe('True');
      expect(h.sim.podReadyOf('default/web-1')).toBe('True');
    } finally {
      await h.stop();
    }
  });

  it('a kubelet that renews but never posts Ready again, then dies for good: tainted and its pods marked once it is lost again on our clock', async () => {
    const h = harness({ nodes: 3 });
    for (let i = 0; i < 2; i++) h.sim.addPod('default', `web-${i}`, 'node-1');
    try {
      await advance(20_000);
      h.sim.stopKubelet('node-1');
      await advance(GRACE_MS + 1_000); // marked at 70 s, its pods too, tainted
      expect(h.sim.readyOf('node-1')).toBe('Unknown');
      // Back at 71 s without a status update (the kubelet's Ready post keeps failing), its pods
      // Ready again by the kubelet at 72 s; dead for good at 100 s.
      h.sim.startKubelet('node-1');
      await advance(1_000);
      for (const pod of ['web-0', 'web-1']) {
        const p = h.sim.pods.get(`default/${pod}`)!;
        p.status = { ...p.status, conditions: [{ type: 'Ready', status: 'True' }] };
      }
      await advance(28_000);
      const lastRenewal = h.sim.stopKubelet('node-1');
      const before = h.sim.patches.length;
      await advance(GRACE_MS + 10_000);
      const later = h.sim.patches.slice(before);
      const podMarks = later.filter((p) => p.path.startsWith('/api/v1/namespaces/default/pods/'));
      expect(podMarks.length).toBe(2);
      // Not before it was lost again on our clock (its last renewal + the grace).
      for (const p of podMarks) expect(p.at).toBeGreaterThan(lastRenewal + GRACE_MS);
    } finally {
      await h.stop();
    }
  });
});

describe('a node that renews after it was marked Unknown from NotReady (virtual time)', () => {
  it('its not-ready NoExecute taint is not swapped for the unreachable one once its lease renewed', async () => {
    // Found by the fault simulator (family storage, seed 14): the swap, written at once (not rate
    // limited), went out 1.6 s after the replica was shown the node's renewal.
    const h = harness({ nodes: 3 });
    let renewedAt: number | undefined;
    h.sim.onRequest = async (req) => {
      if (req.method === 'PATCH' && req.path === '/api/v1/nodes/node-1/status') {
        setTimeout(() => {
          renewedAt = Date.now();
          h.sim.startKubelet('node-1');
        }, 1_000);
        await new Promise((r) => setTimeout(r, 2_000));
      }
      return undefined;
    };
    try {
      await advance(20_000);
      // NotReady at 20 s (its not-ready NoExecute taint at the zone's token), silent from 30 s.
      h.sim.setReady('node-1', 'False');
      await advance(10_000);
      h.sim.stopKubelet('node-1');
      await advance(GRACE_MS + 30_000);
      expect(h.sim.readyOf('node-1')).toBe('Unknown');
      expect(renewedAt).toBeDefined();
      const taints = (h.sim.nodes.get('node-1')?.spec?.taints ?? []).map((t) => `${t.key}:${t.effect}`);
      expect(taints).toContain('node.kubernetes.io/not-ready:NoExecute');
      expect(taints).not.toContain('node.kubernetes.io/unreachable:NoExecute');
    } finally {
      await h.stop();
    }
  });
});
