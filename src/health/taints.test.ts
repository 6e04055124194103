import { describe, expect, it } from 'vitest';
import type { Node, NodeCondition, Taint } from '../kube/types.js';
import {
  applyTaintChanges,
  desiredNoExecuteTaint,
  planTaints,
  taintsPatch,
  withoutHealthNoExecute,
} from './taints.js';

const WALL = Date.UTC(2026, 0, 1, 12, 0, 0);
const NOW = '2026-01-01T12:00:00Z';
const NR = 'node.kubernetes.io/not-ready';
const UR = 'node.kubernetes.io/unreachable';

function c(type: string, status: string): NodeCondition {
  return { type, status };
}
function node(conditions: NodeCondition[], taints?: Taint[], unschedulable?: boolean): Node {
  return {
    metadata: { name: 'n1', uid: 'u1', resourceVersion: '7' },
    spec: { taints, unschedulable },
    status: { conditions },
  };
}
const keys = (ts: Taint[] | undefined) => (ts ?? []).map((t) => `${t.key}:${t.effect}`);

describe('NoSchedule set', () => {
  it('maps each condition and spec.unschedulable', () => {
    const cases: Array<[NodeCondition[], boolean, string[]]> = [
      [[c('Ready', 'True')], false, []],
      [[c('Ready', 'False')], false, [`${NR}:NoSchedule`]],
      [[c('Ready', 'Unknown')], false, [`${UR}:NoSchedule`]],
      [
        [c('Ready', 'True'), c('MemoryPressure', 'True')],
        false,
        ['node.kubernetes.io/memory-pressure:NoSchedule'],
      ],
      [
        [c('Ready', 'True'), c('DiskPressure', 'True')],
        false,
        ['node.kubernetes.io/disk-pressure:NoSchedule'],
      ],
      [[c('Ready', 'True'), c('PIDPressure', 'True')], false, ['node.kubernetes.io/pid-pressure:NoSchedule']],
      [
        [c('Ready', 'True'), c('NetworkUnavailable', 'True')],
        false,
        ['node.kubernetes.io/network-unavailable:NoSchedule'],
      ],
      [[c('Ready', 'True'), c('MemoryPressure', 'False'), c('NetworkUnavailable', 'Unknown')], false, []],
      [[c('Ready', 'True')], true, ['node.kubernetes.io/unschedulable:NoSchedule']],
    ];
    for (const [conds, unsched, want] of cases) {
      const p = planTaints(node(conds, [], unsched), WALL);
      expect(keys(p.desiredNoSchedule)).toEqual(want);
      expect(keys(p.noScheduleAdd)).toEqual(want);
      for (const t of p.noScheduleAdd) expect(t.timeAdded).toBe(NOW);
    }
  });

  it('removes only managed NoSchedule taints no longer wanted; unmanaged taints are untouched', () => {
    const existing: Taint[] = [
      { key: 'dedicated', value: 'gpu', effect: 'NoSchedule' },
      { key: 'node.kubernetes.io/memory-pressure', effect: 'NoSchedule', timeAdded: 'x' },
      { key: 'node.kubernetes.io/memory-pressure', effect: 'PreferNoSchedule' }, // not ours (effect)
      { key: NR, effect: 'NoSchedule' },
      { key: 'example.com/other', effect: 'NoExecute' },
    ];
    const p = planTaints(node([c('Ready', 'Unknown')], existing), WALL);
    expect(keys(p.noScheduleRemove)).toEqual([
      'node.kubernetes.io/memory-pressure:NoSchedule',
      `${NR}:NoSchedule`,
    ]);
    expect(keys(p.noScheduleAdd)).toEqual([`${UR}:NoSchedule`]);
    expect(p.immediateTaints).toEqual([
      { key: 'dedicated', value: 'gpu', effect: 'NoSchedule' },
      { key: 'node.kubernetes.io/memory-pressure', effect: 'PreferNoSchedule' },
      { key: 'example.com/other', effect: 'NoExecute' },
      { key: UR, effect: 'NoSchedule', timeAdded: NOW },
    ]);
  });

  it('an existing matching taint (any value/timeAdded) is kept as is', () => {
    const existing: Taint[] = [{ key: NR, value: 'v', effect: 'NoSchedule', timeAdded: 'old' }];
    const p = planTaints(node([c('Ready', 'False')], [...existing, { key: NR, effect: 'NoExecute' }]), WALL);
    expect(p.noScheduleAdd).toEqual([]);
    expect(p.noScheduleRemove).toEqual([]);
    expect(p.noExecute).toEqual({ kind: 'none' });
    expect(p.immediateTaints).toBeUndefined();
    expect(p.finalTaints).toBeUndefined();
  });
});

describe('NoExecute pair', () => {
  it('Ready False -> NR, Unknown -> UR: a new one is a rate-limited addition, kept apart', () => {
    const f = planTaints(node([c('Ready', 'False')], [{ key: NR, effect: 'NoSchedule' }]), WALL);
    expect(f.noExecute).toEqual({ kind: 'add', taint: { key: NR, effect: 'NoExecute', timeAdded: NOW } });
    expect(f.immediateTaints).toBeUndefined(); // the NoSchedule part is already right
    expect(keys(f.finalTaints)).toEqual([`${NR}:NoSchedule`, `${NR}:NoExecute`]);
    const u = planTaints(node([c('Ready', 'Unknown')]), WALL);
    expect(u.noExecute).toEqual({ kind: 'add', taint: { key: UR, effect: 'NoExecute', timeAdded: NOW } });
    expect(keys(u.immediateTaints)).toEqual([`${UR}:NoSchedule`]);
    expect(keys(u.finalTaints)).toEqual([`${UR}:NoSchedule`, `${UR}:NoExecute`]);
  });

  it('swaps NR<->UR at once (not rate limited), in one list so the swap is atomic', () => {
    const toUR = planTaints(
      node(
        [c('Ready', 'Unknown')],
        [
          { key: 'keep', effect: 'NoExecute' },
          { key: NR, effect: 'NoExecute', timeAdded: 'old' },
        ],
      ),
      WALL,
    );
    expect(toUR.noExecute).toEqual({
      kind: 'swap',
      add: { key: UR, effect: 'NoExecute', timeAdded: NOW },
      remove: [{ key: NR, effect: 'NoExecute', timeAdded: 'old' }],
    });
    expect(keys(toUR.immediateTaints)).toEqual(['keep:NoExecute', `${UR}:NoSchedule`, `${UR}:NoExecute`]);
    expect(toUR.finalTaints).toEqual(toUR.immediateTaints);
    const toNR = planTaints(node([c('Ready', 'False')], [{ key: UR, effect: 'NoExecute' }]), WALL);
    expect(toNR.noExecute.kind).toBe('swap');
    expect(keys(toNR.immediateTaints)).toEqual([`${NR}:NoSchedule`, `${NR}:NoExecute`]);
  });

  it('both present (bad state): the wrong one is removed at once', () => {
    const p = planTaints(
      node(
        [c('Ready', 'False')],
        [
          { key: NR, effect: 'NoExecute' },
          { key: UR, effect: 'NoExecute' },
        ],
      ),
      WALL,
    );
    expect(p.noExecute).toEqual({ kind: 'remove', remove: [{ key: UR, effect: 'NoExecute' }] });
  });

  it('recovery (Ready True) removes all of ours and nothing else', () => {
    const existing: Taint[] = [
      { key: UR, effect: 'NoExecute' },
      { key: UR, effect: 'NoSchedule' },
      { key: 'dedicated', effect: 'NoSchedule' },
      { key: 'node.kubernetes.io/disk-pressure', effect: 'NoSchedule' },
    ];
    const p = planTaints(node([c('Ready', 'True')], existing), WALL);
    expect(p.noExecute).toEqual({ kind: 'remove', remove: [{ key: UR, effect: 'NoExecute' }] });
    expect(p.immediateTaints).toEqual([{ key: 'dedicated', effect: 'NoSchedule' }]);
    expect(p.desiredNoExecute).toBeNull();
  });

  it('no Ready condition or an odd status: NoExecute left alone', () => {
    expect(desiredNoExecuteTaint(node([]))).toBeUndefined();
    expect(desiredNoExecuteTaint(node([c('Ready', 'Maybe')]))).toBeUndefined();
    const p = planTaints(node([], [{ key: UR, effect: 'NoExecute' }]), WALL);
    expect(p.noExecute).toEqual({ kind: 'none' });
    expect(p.finalTaints).toBeUndefined();
  });

  it('withoutHealthNoExecute (master disruption / markNodeAsReachable)', () => {
    const n = node(
      [c('Ready', 'Unknown')],
      [
        { key: 'a', effect: 'NoExecute' },
        { key: UR, effect: 'NoExecute' },
        { key: UR, effect: 'NoSchedule' },
      ],
    );
    expect(keys(withoutHealthNoExecute(n))).toEqual(['a:NoExecute', `${UR}:NoSchedule`]);
    expect(
      withoutHealthNoExecute(node([c('Ready', 'Unknown')], [{ key: UR, effect: 'NoSchedule' }])),
    ).toBeUndefined();
  });
});

describe('patch helpers and bad data', () => {
  it('taintsPatch carries the resourceVersion precondition', () => {
    expect(taintsPatch([{ key: 'a', effect: 'NoSchedule' }], '9')).toEqual({
      metadata: { resourceVersion: '9' },
      spec: { taints: [{ key: 'a', effect: 'NoSchedule' }] },
    });
    expect(taintsPatch([])).toEqual({ spec: { taints: [] } });
  });

  it('junk taints are preserved untouched, never crash', () => {
    const junk = {
      metadata: { name: 'j' },
      spec: { taints: [null, 5, { key: NR, effect: 'NoSchedule' }] },
      status: { conditions: [c('Ready', 'True')] },
    };
    const p = planTaints(junk as unknown as Node, WALL);
    expect(p.immediateTaints).toEqual([null, 5]);
    expect(() =>
      planTaints({ metadata: { name: 'x' }, spec: { taints: 'no' } } as unknown as Node, WALL),
    ).not.toThrow();
    expect(
      applyTaintChanges(
        [],
        [
          { key: 'a', effect: 'X' },
          { key: 'a', effect: 'X' },
        ],
        [],
      ),
    ).toHaveLength(1);
  });
});
