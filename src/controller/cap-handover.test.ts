import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Harness } from './testing/harness.js';
import { advance, harness } from './testing/harness.js';

// Found by the fault simulator (test/sim): the blast-radius cap's grants and the zones' token
// buckets lived in the leader's memory only, so a replica that led again (or a new leader) started
// with an empty window and full buckets. The NoExecute taints the leaders before it put on the
// nodes are what it counts now, at their timeAdded.

const T0 = Date.parse('2026-05-01T08:00:00.000Z');
const UR = 'node.kubernetes.io/unreachable';

beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
});

/** Seconds since T0 of the NoExecute taint on `name`, by its timeAdded (undefined: none). */
function noExecuteAt(h: Harness, name: string): number | undefined {
  const t = (h.sim.nodes.get(name)?.spec?.taints ?? []).find((x) => x.key === UR && x.effect === 'NoExecute');
  return t?.timeAdded ? (Date.parse(t.timeAdded) - T0) / 1000 : undefined;
}

/** Another replica, leading while this one does not, marks `name` lost and taints it (as we would). */
function taintedByAnotherLeader(h: Harness, name: string): void {
  h.sim.stopKubelet(name);
  const now = new Date(Date.now()).toISOString().replace(/\.\d+Z$/, 'Z');
  h.sim.updateNode(name, (n) => ({
    ...n,
    spec: {
      ...n.spec,
      taints: [
        { key: UR, effect: 'NoSchedule', timeAdded: now },
        { key: UR, effect: 'NoExecute', timeAdded: now },
      ],
    },
    status: {
      ...n.status,
      conditions: (n.status?.conditions ?? []).map((c) =>
        c.type === 'Ready'
          ? { ...c, status: 'Unknown', reason: 'NodeStatusUnknown', lastTransitionTime: now }
          : c,
      ),
    },
  }));
}

describe('the cap and the zone rates across a handover (virtual time)', () => {
  it('cap 3 per 300 s: we taint node-6 and node-11, another leader node-5, we lead again: node-12 waits until node-6 leaves the window', async () => {
    const h = harness({ nodes: 13, cap: { maxNodes: 3, windowMs: 300_000 } });
    try {
      await advance(10_000);
      h.sim.stopKubelet('node-6');
      h.sim.stopKubelet('node-11');
      await advance(70_000); // 80 s
      const ours = [noExecuteAt(h, 'node-6'), noExecuteAt(h, 'node-11')];
      expect(ours.every((t) => t !== undefined && t >= 60 && t < 80)).toBe(true);
      h.controller.setLeading(false);
      await advance(10_000); // 90 s
      taintedByAnotherLeader(h, 'node-5');
      await advance(10_000); // 100 s
      h.controller.setLeading(true);
      h.sim.stopKubelet('node-12');
      await advance(100_000); // 200 s: node-12 lost on our clock since 150 s
      expect(h.sim.readyOf('node-12')).toBe('Unknown');
      expect(noExecuteAt(h, 'node-12')).toBeUndefined();
      expect(h.disruption.queued()).toEqual([expect.objectContaining({ name: 'node-12', reason: 'cap' })]);
      // Our own two taints count once each (memory and node agree), node-5's once.
      expect(h.disruption.capUsed(Date.now())).toBe(3);
      // node-6's grant leaves the window 300 s after it was made: node-12's turn.
      await advance(170_000); // 370 s
      const at = noExecuteAt(h, 'node-12');
      expect(at).toBeDefined();
      expect(at! - Math.min(...(ours as number[]))).toBeGreaterThanOrEqual(299);
    } finally {
      await h.stop();
    }
  });

  it("a zone's rate (one every 100 s): another leader tainted node-1 at 30 s, we lead again at 40 s: node-2, lost at 90 s, waits for 130 s", async () => {
    const h = harness({ nodes: 5, nodeEvictionRate: 0.01 });
    try {
      await advance(20_000);
      h.controller.setLeading(false);
      await advance(10_000); // 30 s
      taintedByAnotherLeader(h, 'node-1');
      await advance(10_000); // 40 s
      h.controller.setLeading(true);
      h.sim.stopKubelet('node-2');
      await advance(60_000); // 100 s: node-2 lost on our clock since 90 s
      expect(h.sim.readyOf('node-2')).toBe('Unknown');
      expect(noExecuteAt(h, 'node-2')).toBeUndefined();
      await advance(25_000); // 125 s
      expect(noExecuteAt(h, 'node-2')).toBeUndefined();
      await advance(15_000); // 140 s
      expect(noExecuteAt(h, 'node-2')).toBe(130);
    } finally {
      await h.stop();
    }
  });
});
