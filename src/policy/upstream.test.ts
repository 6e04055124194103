import { describe, expect, it } from 'vitest';
import type { Node, NodeCondition, Pod, Taint } from '../kube/types.js';
import type { NodeView } from './types.js';
import { upstreamPolicy } from './upstream.js';

/** Pure: no clock, no I/O; wall times are plain numbers, the tracker's verdict comes in the view. */
const WALL = Date.UTC(2026, 0, 1, 12, 0, 0);
const NR = 'node.kubernetes.io/not-ready';
const UR = 'node.kubernetes.io/unreachable';
const policy = upstreamPolicy({ markPodsNotReady: 'always' });
const lost: NodeView = {
  timedOut: true,
  lastRenewal: '2026-01-01T11:59:00.000000Z',
  graceMs: 50_000,
  overdueMs: 0,
};
const alive: NodeView = { ...lost, timedOut: false, overdueMs: undefined };

function node(ready: string | undefined, taints: Taint[] = []): Node {
  const conditions: NodeCondition[] = ready
    ? [{ type: 'Ready', status: ready, lastHeartbeatTime: '2026-01-01T11:59:00Z', lastTransitionTime: 'x' }]
    : [];
  return {
    metadata: { name: 'n1', uid: 'u1', resourceVersion: '7' },
    spec: { taints },
    status: { conditions },
  };
}
function pod(name: string, ready: string): Pod {
  return {
    metadata: { name, namespace: 'ns', uid: `uid-${name}` },
    spec: { nodeName: 'n1' },
    status: { conditions: [{ type: 'Ready', status: ready, lastTransitionTime: '2026-01-01T11:00:00Z' }] },
  };
}
const keys = (ts: Taint[] | undefined) => (ts ?? []).map((t) => `${t.key}:${t.effect}`);

describe('upstream policy: status', () => {
  it('writes nothing for a node within its grace', () => {
    expect(policy.status(node('True'), alive, WALL)).toBeUndefined();
  });

  it("marks a lost node's conditions Unknown, with upstream's event, as kube-controller-manager does", () => {
    const w = policy.status(node('True'), lost, WALL);
    expect(w?.kind).toBe('lost');
    expect(w?.transition).toBe('marked_unknown');
    expect(w?.flippedFromTrue).toBe(true);
    expect(w?.readyBefore).toBe('True');
    const conditions =
      (w?.patch as { status: { conditions: NodeCondition[] } } | undefined)?.status.conditions ?? [];
    expect(conditions.map((c) => `${c.type}=${c.status}`)).toEqual([
      'Ready=Unknown',
      'MemoryPressure=Unknown',
      'DiskPressure=Unknown',
      'PIDPressure=Unknown',
    ]);
    expect(w?.events.map((e) => e.reason)).toEqual(['NodeNotReady']);
    expect(w?.after.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('Unknown');
    expect(w?.unknown?.node).toBe('n1');
    expect(w?.said.applied).toBe('Marked node Unknown');
  });

  it("a second opinion's confirmation: upstream's message on Ready, with what the probes found", () => {
    const note = 'Confirmed down: its kubelet (10.0.0.5:10250) did not answer 2 probes (connection refused).';
    const w = policy.status(node('True'), { ...lost, confirmedDown: note }, WALL);
    const conditions =
      (w?.patch as { status: { conditions: NodeCondition[] } } | undefined)?.status.conditions ?? [];
    expect(conditions.map((c) => c.message)).toEqual([
      `Kubelet stopped posting node status. ${note}`,
      'Kubelet never posted node status.',
      'Kubelet never posted node status.',
      'Kubelet never posted node status.',
    ]);
    expect(w?.after.status?.conditions?.find((c) => c.type === 'Ready')?.message).toContain(note);
  });

  it('writes nothing when Ready is already Unknown', () => {
    expect(policy.status(node('Unknown'), lost, WALL)).toBeUndefined();
  });
});

describe('upstream policy: zones, taints, pods, events', () => {
  it('counts Ready as the zone statistics do (missing or other: Unknown)', () => {
    expect(['True', 'False', 'Unknown', undefined].map((r) => policy.zoneReady(node(r)))).toEqual([
      'True',
      'False',
      'Unknown',
      'Unknown',
    ]);
  });

  it('adds NoSchedule at once and asks the disruption controller before adding NoExecute', () => {
    const t = policy.taints(node('Unknown'), WALL, { view: lost, admitted: false, master: false });
    expect(t.admission).toBe('request');
    expect(keys(t.taints)).toEqual([`${UR}:NoSchedule`]);
    expect(t.addsNoExecute).toBe(false);
    const a = policy.taints(node('Unknown'), WALL, { view: lost, admitted: true, master: false });
    expect(a.admission).toBe('none');
    expect(keys(a.taints)).toEqual([`${UR}:NoSchedule`, `${UR}:NoExecute`]);
    expect(a.addsNoExecute).toBe(true);
  });

  it('a kubelet that still answers (held): NoSchedule, no NoExecute, a pending ask dropped, looked at when the hold ends', () => {
    const held: NodeView = { ...lost, heldMs: 7_000 };
    for (const admitted of [false, true]) {
      const t = policy.taints(node('Unknown'), WALL, { view: held, admitted, master: false });
      expect(t).toEqual({
        admission: 'cancel',
        taints: [expect.objectContaining({ key: UR, effect: 'NoSchedule' })],
        addsNoExecute: false,
        recheckInMs: 7_000,
      });
    }
    // A NoExecute taint already on stays (the hold only keeps a new one off).
    const has = [
      { key: UR, effect: 'NoSchedule' },
      { key: UR, effect: 'NoExecute' },
    ];
    expect(
      policy.taints(node('Unknown', has), WALL, { view: held, admitted: false, master: false }).taints,
    ).toBeUndefined();
    // Master disruption still takes ours off.
    const m = policy.taints(node('Unknown', has), WALL, { view: held, admitted: false, master: true });
    expect(keys(m.taints)).toEqual([`${UR}:NoSchedule`]);
  });

  it('master disruption: no NoExecute taint is added and the ones present come off', () => {
    const has = [
      { key: UR, effect: 'NoSchedule' },
      { key: UR, effect: 'NoExecute' },
      { key: 'mine', effect: 'NoExecute' },
    ];
    const t = policy.taints(node('Unknown', has), WALL, { view: lost, admitted: true, master: true });
    expect(t.admission).toBe('cancel'); // it has its NoExecute taint: nothing to ask for
    expect(
      policy.taints(node('Unknown'), WALL, { view: lost, admitted: false, master: true }).admission,
    ).toBe('none');
    expect(t.addsNoExecute).toBe(false);
    expect(keys(t.taints)).toEqual([`${UR}:NoSchedule`, 'mine:NoExecute']);
  });

  it('a Ready node: pending asks cancelled, health taints removed, others kept', () => {
    const has = [
      { key: NR, effect: 'NoSchedule' },
      { key: NR, effect: 'NoExecute' },
      { key: 'mine', effect: 'NoSchedule' },
    ];
    const t = policy.taints(node('True', has), WALL, { view: lost, admitted: false, master: false });
    expect(t.admission).toBe('cancel');
    expect(keys(t.taints)).toEqual(['mine:NoSchedule']);
    expect(
      policy.taints(node('True'), WALL, { view: lost, admitted: false, master: false }).taints,
    ).toBeUndefined();
  });

  it('looks at pods of a node that is not Ready; --mark-pods-not-ready=upstream only after its own flip', () => {
    expect(policy.podsWanted(node('True'), true, true)).toBe(false);
    expect(policy.podsWanted(node('Unknown'), false, false)).toBe(true);
    const strict = upstreamPolicy({ markPodsNotReady: 'upstream' });
    expect(strict.podsWanted(node('Unknown'), false, false)).toBe(false);
    expect(strict.podsWanted(node('Unknown'), true, false)).toBe(true);
    expect(strict.podsWanted(node('Unknown'), false, true)).toBe(true);
  });

  it('marks the Ready pods of a node that is not Ready, evicts none', () => {
    const w = policy.pods(node('Unknown'), [pod('a', 'True'), pod('b', 'False')], WALL, {
      trigger: 'resync',
      master: false,
    });
    expect(w.marks.map((m) => m.name)).toEqual(['a']);
    expect(w.marks[0]?.event.reason).toBe('NodeNotReady');
    expect(w.evictions).toEqual([]);
    const strict = upstreamPolicy({ markPodsNotReady: 'upstream' });
    expect(
      strict.pods(node('Unknown'), [pod('a', 'True')], WALL, { trigger: 'resync', master: false }).marks,
    ).toEqual([]);
  });

  it("records upstream's node events", () => {
    expect(policy.nodeEvent('registered', 'n1', 'u1')?.reason).toBe('RegisteredNode');
    expect(policy.nodeEvent('removing', 'n1', 'u1')?.reason).toBe('RemovingNode');
    expect(policy.inRateLimitedStep(node('Unknown'))).toBe(false);
  });
});

describe('upstream policy: the rate-limited step a node shows (counted by a new leader)', () => {
  it('the not-ready and unreachable NoExecute taints, whoever added them; nothing else', () => {
    const ur = { key: UR, effect: 'NoExecute', timeAdded: '2026-01-01T11:59:00Z' };
    const nr = { key: NR, effect: 'NoExecute', timeAdded: '2026-01-01T11:58:00Z' };
    const others = [
      { key: UR, effect: 'NoSchedule', timeAdded: '2026-01-01T11:59:00Z' },
      { key: 'node.kubernetes.io/out-of-service', value: 'nodeshutdown', effect: 'NoExecute' },
      { key: 'example.com/x', effect: 'NoExecute' },
    ];
    const junk = [null, 'x', { key: UR }] as unknown as Taint[];
    expect(policy.rateLimitedStepTaints(node('Unknown', [...others, ur, ...junk, nr]))).toEqual([ur, nr]);
    expect(policy.rateLimitedStepTaints(node('Unknown', others))).toEqual([]);
    expect(policy.rateLimitedStepTaints({ metadata: { name: 'n1' } } as Node)).toEqual([]);
  });
});
