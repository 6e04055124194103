import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { advance, GRACE_MS, harness } from './testing/harness.js';

/** KEP-5683's maintenance conditions and the zone's disruption, in the controller as run.ts wires it (virtual time). */
const T0 = Date.parse('2026-05-01T08:00:00.000Z');

beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
});

const noExecute = (h: ReturnType<typeof harness>, name: string) =>
  (h.sim.nodes.get(name)?.spec?.taints ?? []).some(
    (t) => t.key === 'node.kubernetes.io/unreachable' && t.effect === 'NoExecute',
  );

describe('nodes under maintenance (MaintenanceInProgress, DrainInProgress, Drained) do not count in their zone', () => {
  for (const maintenance of [true, false]) {
    it(`6 of 10 nodes silent, 4 of them ${maintenance ? 'under maintenance: the zone stays Normal and the other 2 get NoExecute' : 'not under maintenance: the small zone is partially disrupted, no NoExecute'}`, async () => {
      const h = harness({ nodes: 10, nodeEvictionRate: 1 });
      try {
        await advance(20_000);
        const silent = ['node-0', 'node-1', 'node-2', 'node-3', 'node-4', 'node-5'];
        for (const [i, n] of silent.entries()) {
          if (maintenance && i < 4) {
            h.sim.updateNode(n, (node) => ({
              ...node,
              status: {
                ...node.status,
                conditions: [
                  ...(node.status?.conditions ?? []),
                  {
                    type: ['MaintenanceInProgress', 'DrainInProgress', 'Drained', 'MaintenanceInProgress'][
                      i
                    ]!,
                    status: 'True',
                  },
                ],
              },
            }));
          }
          h.sim.stopKubelet(n);
        }
        await advance(GRACE_MS + 30_000);
        // Every silent node is marked, maintenance or not.
        for (const n of silent) expect(h.sim.readyOf(n), n).toBe('Unknown');
        const tainted = silent.filter((n) => noExecute(h, n));
        if (maintenance) {
          expect(h.disruption.zoneState('')).toBe('Normal');
          expect(tainted.filter((n) => ['node-4', 'node-5'].includes(n))).toEqual(['node-4', 'node-5']);
        } else {
          expect(h.disruption.zoneState('')).toBe('PartialDisruption');
          expect(tainted).toEqual([]);
        }
      } finally {
        await h.stop();
      }
    });
  }
});
