import { describe, expect, it } from 'vitest';
import { LABEL_TOPOLOGY_REGION, LABEL_TOPOLOGY_ZONE, zoneKeyOf } from '../disruption/index.js';
import type { Node, Taint } from '../kube/types.js';
import { companionPolicy, upstreamPolicy } from '../policy/index.js';
import { APPLIED_ANNOTATION, OUT_OF_SERVICE_TAINT } from '../remediation/index.js';
import { taintsInPlace } from './taints-in-place.js';

const UR = 'node.kubernetes.io/unreachable';
const NR = 'node.kubernetes.io/not-ready';
const upstream = upstreamPolicy({ markPodsNotReady: 'always' });
const labels = { [LABEL_TOPOLOGY_REGION]: 'r1', [LABEL_TOPOLOGY_ZONE]: 'a' };
const ZONE = zoneKeyOf(labels);
const at = (s: string) => Date.parse(s);

function node(name: string, taints: Taint[], annotations: Record<string, string> = {}): Node {
  return { metadata: { name, labels, annotations }, spec: { taints }, status: { conditions: [] } };
}

describe('taintsInPlace: the NoExecute steps of ours the nodes carry, dated', () => {
  it("a node's NoExecute taint under its name; our out-of-service taint under its queue name, a second taint of the node", () => {
    const list = taintsInPlace(
      [
        node(
          'n1',
          [
            { key: UR, effect: 'NoSchedule', timeAdded: '2026-05-01T07:00:00Z' },
            { key: UR, effect: 'NoExecute', timeAdded: '2026-05-01T08:00:00Z' },
            { ...OUT_OF_SERVICE_TAINT, timeAdded: '2026-05-01T08:01:00Z' },
          ],
          { [APPLIED_ANNOTATION]: 'fence-annotation' },
        ),
        node('n2', [{ key: 'example.com/x', effect: 'NoExecute', timeAdded: '2026-05-01T08:00:00Z' }]),
      ],
      upstream,
    );
    expect(list).toEqual([
      { name: 'n1', node: 'n1', zone: ZONE, addedAt: at('2026-05-01T08:00:00Z'), second: false },
      {
        name: 'out-of-service:n1',
        node: 'n1',
        zone: ZONE,
        addedAt: at('2026-05-01T08:01:00Z'),
        second: true,
      },
    ]);
  });

  it('one entry per node for its step, the latest when it carries both NoExecute taints, in any order', () => {
    const nr = { key: NR, effect: 'NoExecute', timeAdded: '2026-05-01T08:00:05Z' };
    const ur = { key: UR, effect: 'NoExecute', timeAdded: '2026-05-01T08:00:00.500Z' };
    for (const taints of [
      [nr, ur],
      [ur, nr],
    ]) {
      expect(taintsInPlace([node('n1', taints)], upstream)).toEqual([
        { name: 'n1', node: 'n1', zone: ZONE, addedAt: at('2026-05-01T08:00:05Z'), second: false },
      ]);
    }
  });

  it('a taint that cannot be dated is left out; one that can is kept beside it', () => {
    const undated = { key: NR, effect: 'NoExecute' };
    const junk = { key: UR, effect: 'NoExecute', timeAdded: 'yesterday' };
    expect(taintsInPlace([node('n1', [undated, junk])], upstream)).toEqual([]);
    expect(
      taintsInPlace([node('n1', [junk, { ...undated, timeAdded: '2026-05-01T08:00:00Z' }])], upstream),
    ).toEqual([{ name: 'n1', node: 'n1', zone: ZONE, addedAt: at('2026-05-01T08:00:00Z'), second: false }]);
    // Our out-of-service taint written before it was dated; and one that is not ours (no annotation).
    const ours = { [APPLIED_ANNOTATION]: 'fence-annotation' };
    expect(taintsInPlace([node('n1', [OUT_OF_SERVICE_TAINT], ours)], upstream)).toEqual([]);
    const dated = { ...OUT_OF_SERVICE_TAINT, timeAdded: '2026-05-01T08:00:00Z' };
    expect(taintsInPlace([node('n1', [dated])], upstream)).toEqual([]);
  });

  it("companion mode: our taint's evicting value is the step; upstream's NoExecute taints are the provider's", () => {
    const companion = companionPolicy({
      taintKey: 'example.com/lost',
      identity: 'nlc-0',
      evictAfterMs: 60_000,
      markPodsNotReady: false,
    });
    const n = node('n1', [
      { key: UR, effect: 'NoExecute', timeAdded: '2026-05-01T07:00:00Z' },
      { key: 'example.com/lost', value: 'evicting', effect: 'NoSchedule', timeAdded: '2026-05-01T08:00:00Z' },
    ]);
    expect(taintsInPlace([n], companion)).toEqual([
      { name: 'n1', node: 'n1', zone: ZONE, addedAt: at('2026-05-01T08:00:00Z'), second: false },
    ]);
  });
});
