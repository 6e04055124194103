import { describe, expect, it } from 'vitest';
import type { Node, Taint } from '../kube/types.js';
import { cleanupPlan, writes } from './cleanup.js';
import { APPLIED_ANNOTATION, FENCED_ANNOTATION } from './out-of-service.js';

const KEY = 'example.com/lost';
const o = { companionTaintKey: KEY };
const UR = 'node.kubernetes.io/unreachable';
const NR = 'node.kubernetes.io/not-ready';
const OOS = 'node.kubernetes.io/out-of-service';

function node(
  ready: string | undefined,
  taints: Taint[] = [],
  extra: { annotations?: Record<string, string>; conditions?: { type: string; status: string }[] } = {},
): Node {
  return {
    metadata: { name: 'n1', ...(extra.annotations ? { annotations: extra.annotations } : {}) },
    spec: { taints },
    status: {
      conditions: [...(ready ? [{ type: 'Ready', status: ready }] : []), ...(extra.conditions ?? [])],
    },
  };
}

describe('cleanupPlan: only what this controller wrote', () => {
  it('nothing of ours: nothing to do (other taints, an operator out-of-service taint, a fence annotation)', () => {
    const n = node(
      'True',
      [
        { key: 'dedicated', effect: 'NoSchedule' },
        { key: OOS, effect: 'NoExecute' },
      ],
      {
        annotations: { [FENCED_ANNOTATION]: 'true' },
      },
    );
    expect(cleanupPlan(n, o)).toBeUndefined();
  });

  it('companion mode: our taint (any value, any effect) and our condition, whatever Ready says', () => {
    const n = node(
      'Unknown',
      [
        { key: KEY, effect: 'NoSchedule', value: 'evicting' },
        { key: 'dedicated', effect: 'NoSchedule' },
      ],
      { conditions: [{ type: 'NodeLeaseExpired', status: 'True' }] },
    );
    const p = cleanupPlan(n, o)!;
    expect(p.taintsRemoved).toEqual([`${KEY}:NoSchedule`]);
    expect(p.taints).toEqual([{ key: 'dedicated', effect: 'NoSchedule' }]);
    expect(p.conditionsRemoved).toEqual(['NodeLeaseExpired']);
    expect(writes(p)).toBe(true);
  });

  it('our out-of-service taint and its annotation; the fence annotation stays', () => {
    const n = node('Unknown', [{ key: OOS, effect: 'NoExecute', value: 'nodeshutdown' }], {
      annotations: { [APPLIED_ANNOTATION]: 'fence-annotation', [FENCED_ANNOTATION]: 'true' },
    });
    const p = cleanupPlan(n, o)!;
    expect(p.taintsRemoved).toEqual([`${OOS}:NoExecute`]);
    expect(p.annotationsRemoved).toEqual([APPLIED_ANNOTATION]);
    expect(p.taints).toEqual([]);
  });

  it('unreachable and not-ready taints: off a Ready node (stale), kept and said on one that is not', () => {
    const health = [
      { key: UR, effect: 'NoSchedule' },
      { key: UR, effect: 'NoExecute' },
      { key: NR, effect: 'NoSchedule' },
    ];
    const back = cleanupPlan(node('True', health), o)!;
    expect(back.taintsRemoved).toEqual([`${UR}:NoSchedule`, `${UR}:NoExecute`, `${NR}:NoSchedule`]);
    expect(back.taints).toEqual([]);
    for (const r of ['Unknown', 'False', undefined]) {
      const down = cleanupPlan(node(r, health), o)!;
      expect(down.taints).toBeUndefined();
      expect(down.kept).toEqual([`${UR}:NoSchedule`, `${UR}:NoExecute`, `${NR}:NoSchedule`]);
      expect(writes(down)).toBe(false);
    }
  });

  it('malformed taints are skipped, never thrown on', () => {
    const n = { metadata: { name: 'n1' }, spec: { taints: [null, 7, { key: KEY, effect: 'NoSchedule' }] } };
    const p = cleanupPlan(n as unknown as Node, o)!;
    expect(p.taintsRemoved).toEqual([`${KEY}:NoSchedule`]);
    // What it does not understand it leaves as it was.
    expect(p.taints).toEqual([null, 7]);
    expect(
      cleanupPlan({ metadata: { name: 'n2' }, spec: { taints: 'x' } } as unknown as Node, o),
    ).toBeUndefined();
  });
});
