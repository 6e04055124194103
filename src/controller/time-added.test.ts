import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { advance, GRACE_MS, harness } from './testing/harness.js';

// A NoExecute taint is dated (timeAdded) when its zone admitted it, not when its write got through
// the client's rate limiter: a new leader counts it against the cap and the zone rates from then,
// and so can anyone watching (the fault simulator judges the guardrails on it).

const T0 = Date.parse('2026-05-01T08:00:00.000Z');

beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('timeAdded of a NoExecute taint (virtual time)', () => {
  it('admitted at 70 s, written at 90 s behind the client limiter (0.1 QPS): dated 70 s', async () => {
    // The mark takes the burst token at 70 s, the NoSchedule taint the next at 80 s, the NoExecute
    // taint (admitted by its zone at 70 s) the one at 90 s.
    const h = harness({ nodes: 3, qps: 0.1, burst: 1 });
    try {
      await advance(20_000);
      h.sim.stopKubelet('node-1');
      await advance(GRACE_MS + 25_000); // 95 s
      const patch = h.sim.patches.find(
        (p) => p.path === '/api/v1/nodes/node-1' && JSON.stringify(p.body).includes('"effect":"NoExecute"'),
      );
      expect(patch).toBeDefined();
      expect(Math.round((patch!.at - T0) / 1000)).toBe(90);
      const taint = (h.sim.nodes.get('node-1')?.spec?.taints ?? []).find((t) => t.effect === 'NoExecute');
      expect(taint?.timeAdded).toBe('2026-05-01T08:01:10Z');
    } finally {
      await h.stop();
    }
  });
});
