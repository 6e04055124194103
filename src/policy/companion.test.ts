import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Node, NodeCondition, Pod, Taint } from '../kube/types.js';
import { companionPolicy } from './companion.js';
import type { NodeView, TaintContext } from './types.js';

/** Pure: no clock, no I/O; wall times are plain numbers, the tracker's verdict comes in the view. */
const WALL = Date.UTC(2026, 0, 1, 12, 0, 0);
const KEY = 'example.com/lost';
const TYPE = 'NodeLeaseExpired';
const UR = 'node.kubernetes.io/unreachable';
const RENEWED = '2026-01-01T11:59:40.123456Z';
const policy = companionPolicy({ taintKey: KEY, identity: 'nlc-0', evictAfterMs: 0, markPodsNotReady: true });
const evicting = companionPolicy({
  taintKey: KEY,
  identity: 'nlc-0',
  evictAfterMs: 60_000,
  markPodsNotReady: false,
});
const lostView: NodeView = { timedOut: true, lastRenewal: RENEWED, graceMs: 20_000, overdueMs: 0 };
const aliveView: NodeView = { ...lostView, timedOut: false, overdueMs: undefined };

function node(o: { ready?: string; lost?: boolean; recorded?: string; taints?: Taint[] } = {}): Node {
  const conditions: NodeCondition[] = [
    {
      type: 'Ready',
      status: o.ready ?? 'True',
      lastHeartbeatTime: '2026-01-01T11:59:40Z',
      lastTransitionTime: 'x',
    },
  ];
  if (o.lost) {
    // As the API server stores it: metav1.Time, to the second.
    conditions.push({ type: TYPE, status: 'True', lastHeartbeatTime: o.recorded ?? '2026-01-01T11:59:40Z' });
  }
  return {
    metadata: { name: 'n1', uid: 'u1', resourceVersion: '7' },
    spec: { taints: o.taints ?? [] },
    status: { conditions },
  };
}
function pod(
  name: string,
  o: Partial<Pod['metadata']> & { tolerations?: unknown[]; phase?: string } = {},
): Pod {
  const { tolerations, phase, ...meta } = o;
  return {
    metadata: { name, namespace: 'ns', uid: `uid-${name}`, ...meta },
    spec: { nodeName: 'n1', ...(tolerations ? { tolerations } : {}) },
    status: {
      ...(phase ? { phase } : {}),
      conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: '2026-01-01T11:00:00Z' }],
    },
  };
}
const keys = (ts: Taint[] | undefined) =>
  (ts ?? []).map((t) => `${t.key}${t.value ? `=${t.value}` : ''}:${t.effect}`);
const ctx = (o: Partial<TaintContext> = {}): TaintContext => ({
  view: lostView,
  admitted: false,
  master: false,
  ...o,
});

describe('companion policy: its own condition, never Ready', () => {
  it('marks a lost node with our condition only, saying what was seen', () => {
    const w = policy.status(node(), lostView, WALL);
    expect(w?.kind).toBe('lost');
    expect(w?.transition).toBe('marked_lost');
    const written =
      (w?.patch as { status: { conditions: NodeCondition[] } } | undefined)?.status.conditions ?? [];
    expect(written.map((c) => c.type)).toEqual([TYPE]);
    expect(written[0]).toMatchObject({
      status: 'True',
      reason: 'LeaseNotRenewed',
      lastHeartbeatTime: RENEWED,
      lastTransitionTime: '2026-01-01T12:00:00Z',
    });
    expect(written[0]?.message).toBe(
      `Lease kube-node-lease/n1 not renewed within 20s (last renewal observed: ${RENEWED}); marked by nlc-0 in companion mode`,
    );
    expect(w?.events.map((e) => `${e.type} ${e.reason}`)).toEqual(['Warning NodeLeaseExpired']);
    expect(w?.flippedFromTrue).toBe(true);
    expect(w?.after.status?.conditions?.map((c) => `${c.type}=${c.status}`)).toEqual([
      'Ready=True',
      `${TYPE}=True`,
    ]);
    expect(w?.unknown).toBeUndefined();
  });

  it('writes nothing for a node within its grace, or one already marked', () => {
    expect(policy.status(node(), aliveView, WALL)).toBeUndefined();
    expect(policy.status(node({ lost: true }), lostView, WALL)).toBeUndefined();
  });

  it('keeps the marks of a node whose recorded renewal is still its last (a restart gives a fresh grace)', () => {
    // Stored to the second; the Lease says the same instant to the microsecond.
    expect(policy.status(node({ lost: true }), aliveView, WALL)).toBeUndefined();
  });

  it('removes our condition, and nothing else, once the node renewed', () => {
    const w = policy.status(
      node({ lost: true }),
      { ...aliveView, lastRenewal: '2026-01-01T12:00:05.000001Z' },
      WALL,
    );
    expect(w?.kind).toBe('renewed');
    expect(w?.transition).toBe('lost_cleared');
    expect(w?.patch).toEqual({ status: { conditions: [{ type: TYPE, $patch: 'delete' }] } });
    expect(w?.events.map((e) => `${e.type} ${e.reason}`)).toEqual(['Normal NodeLeaseRenewed']);
    expect(w?.after.status?.conditions?.map((c) => c.type)).toEqual(['Ready']);
  });

  it('counts a lost node as not ready in its zone, whatever Ready says', () => {
    expect(policy.zoneReady(node({ lost: true }))).toBe('Unknown');
    expect(policy.zoneReady(node())).toBe('True');
    expect(policy.zoneReady(node({ ready: 'False' }))).toBe('False');
  });

  it('records none of upstream node events', () => {
    expect(policy.nodeEvent('registered', 'n1', 'u1')).toBeUndefined();
    expect(policy.nodeEvent('removing', 'n1', 'u1')).toBeUndefined();
  });
});

describe('companion policy: its own taint', () => {
  const upstream: Taint[] = [
    { key: UR, effect: 'NoSchedule', timeAdded: 't0' },
    { key: UR, effect: 'NoExecute', timeAdded: 't0' },
    { key: 'team/x', value: 'y', effect: 'NoSchedule' },
  ];

  it('adds our NoSchedule taint to a lost node, every other taint kept as it is', () => {
    const t = policy.taints(node({ lost: true, taints: upstream }), WALL, ctx());
    expect(t.taints?.slice(0, 3)).toEqual(upstream);
    expect(t.taints?.[3]).toEqual({ key: KEY, effect: 'NoSchedule', timeAdded: '2026-01-01T12:00:00Z' });
    expect(t.admission).toBe('none');
    expect(t.addsNoExecute).toBe(false);
  });

  it('removes only ours once the node is no longer lost; nothing to write when already so', () => {
    const t = policy.taints(node({ taints: [...upstream, { key: KEY, effect: 'NoSchedule' }] }), WALL, ctx());
    expect(t.taints).toEqual(upstream);
    expect(policy.taints(node({ taints: upstream }), WALL, ctx()).taints).toBeUndefined();
    expect(
      policy.taints(node({ lost: true, taints: [{ key: KEY, effect: 'NoSchedule' }] }), WALL, ctx()).taints,
    ).toBeUndefined();
  });

  it('asks for evictions only once the further delay has passed, and marks them on our taint when admitted', () => {
    const lost = node({ lost: true, taints: [{ key: KEY, effect: 'NoSchedule' }] });
    const early = evicting.taints(lost, WALL, ctx({ view: { ...lostView, overdueMs: 45_000 } }));
    expect(early).toEqual({
      admission: 'none',
      taints: undefined,
      addsNoExecute: false,
      recheckInMs: 15_000,
    });
    const due = evicting.taints(lost, WALL, ctx({ view: { ...lostView, overdueMs: 60_000 } }));
    expect(due.admission).toBe('request');
    expect(due.taints).toBeUndefined();
    const admitted = evicting.taints(
      lost,
      WALL,
      ctx({ view: { ...lostView, overdueMs: 61_000 }, admitted: true }),
    );
    expect(keys(admitted.taints)).toEqual([`${KEY}=evicting:NoSchedule`]);
    expect(admitted.addsNoExecute).toBe(true);
    expect(admitted.admission).toBe('none');
    // Its kubelet still answers (a second opinion): no evicting step while held, a pending ask dropped.
    for (const a of [false, true]) {
      const held = evicting.taints(
        lost,
        WALL,
        ctx({ view: { ...lostView, overdueMs: 61_000, heldMs: 4_000 }, admitted: a }),
      );
      expect(held).toEqual({
        admission: 'cancel',
        taints: undefined,
        addsNoExecute: false,
        recheckInMs: 4_000,
      });
    }
    // Not timed out on our clock (a restart): nothing asked until it is.
    expect(evicting.taints(lost, WALL, ctx({ view: aliveView })).admission).toBe('none');
  });

  it('master disruption: nothing asked, evictions withdrawn; a renewed node drops a pending ask', () => {
    const inStep = node({ lost: true, taints: [{ key: KEY, value: 'evicting', effect: 'NoSchedule' }] });
    const m = evicting.taints(inStep, WALL, ctx({ view: { ...lostView, overdueMs: 90_000 }, master: true }));
    expect(keys(m.taints)).toEqual([`${KEY}:NoSchedule`]);
    expect(m.admission).toBe('none');
    expect(evicting.taints(inStep, WALL, ctx()).taints).toBeUndefined();
    expect(evicting.taints(node(), WALL, ctx({ view: aliveView })).admission).toBe('cancel');
  });

  it('never touches a taint that is not ours (property)', () => {
    const taint = fc.record({
      key: fc.constantFrom(KEY, UR, 'node.kubernetes.io/not-ready', 'team/x'),
      value: fc.option(fc.constantFrom('evicting', 'v'), { nil: undefined }),
      effect: fc.constantFrom('NoSchedule', 'NoExecute', 'PreferNoSchedule'),
    });
    fc.assert(
      fc.property(
        fc.array(taint, { maxLength: 6 }),
        fc.boolean(),
        fc.boolean(),
        fc.boolean(),
        fc.option(fc.integer({ min: 0, max: 120_000 }), { nil: undefined }),
        (list, lost, admitted, master, overdueMs) => {
          const taints = list.map((t) => (t.value === undefined ? { key: t.key, effect: t.effect } : t));
          const t = evicting.taints(
            node({ lost, taints }),
            WALL,
            ctx({ admitted, master, view: { ...lostView, overdueMs } }),
          );
          const notOurs = (ts: Taint[]) => ts.filter((x) => x.key !== KEY);
          if (t.taints) expect(notOurs(t.taints)).toEqual(notOurs(taints));
          const ours = (t.taints ?? taints).filter((x) => x.key === KEY);
          expect(ours.length).toBe(lost ? 1 : 0);
        },
      ),
    );
  });
});

describe('companion policy: pods', () => {
  const lost = node({ lost: true });
  const inStep = node({ lost: true, taints: [{ key: KEY, value: 'evicting', effect: 'NoSchedule' }] });

  it("marks a lost node's Ready pods not ready, with our own Event, when asked to", () => {
    expect(policy.podsWanted(lost, false, false)).toBe(true);
    expect(policy.podsWanted(node(), true, true)).toBe(false);
    const w = policy.pods(lost, [pod('a')], WALL, { trigger: 'resync', master: false });
    expect(w.marks.map((m) => m.name)).toEqual(['a']);
    expect(w.marks[0]?.patch.status.conditions).toEqual([
      { type: 'Ready', status: 'False', lastTransitionTime: '2026-01-01T12:00:00Z' },
    ]);
    expect(`${w.marks[0]?.event.type} ${w.marks[0]?.event.reason}`).toBe('Warning NodeLeaseExpired');
    expect(w.evictions).toEqual([]);
    // Off: no pods looked at until evictions begin.
    expect(evicting.podsWanted(lost, true, false)).toBe(false);
    expect(evicting.pods(lost, [pod('a')], WALL, { trigger: 'resync', master: false }).marks).toEqual([]);
  });

  it('evicts once admitted, but never DaemonSet, mirror, finished or terminating pods', () => {
    expect(evicting.podsWanted(inStep, false, false)).toBe(true);
    const ds = { apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'kube-proxy', uid: 'd', controller: true };
    const rs = { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web', uid: 'r', controller: true };
    const pods = [
      pod('web', { ownerReferences: [rs] }),
      pod('proxy', { ownerReferences: [ds] }),
      pod('static', { annotations: { 'kubernetes.io/config.mirror': 'x' } }),
      pod('done', { phase: 'Succeeded' }),
      pod('going', { deletionTimestamp: '2026-01-01T11:00:00Z' }),
      { ...pod('elsewhere'), spec: { nodeName: 'n2' } },
    ];
    const w = evicting.pods(inStep, pods, WALL, { trigger: 'resync', master: false, evictingForMs: 0 });
    expect(w.evictions).toEqual([{ namespace: 'ns', name: 'web', uid: 'uid-web', node: 'n1' }]);
    expect(evicting.pods(inStep, pods, WALL, { trigger: 'resync', master: true }).evictions).toEqual([]);
    expect(evicting.pods(lost, pods, WALL, { trigger: 'resync', master: false }).evictions).toEqual([]);
  });

  it('a toleration of our NoExecute key opts a pod out, for ever or for its tolerationSeconds', () => {
    const forever = pod('forever', { tolerations: [{ key: KEY, operator: 'Exists', effect: 'NoExecute' }] });
    const all = pod('all', { tolerations: [{ operator: 'Exists' }] });
    const minute = pod('minute', {
      tolerations: [
        { key: KEY, operator: 'Exists' },
        { key: KEY, operator: 'Equal', value: '', effect: 'NoExecute', tolerationSeconds: 60 },
      ],
    });
    const other = pod('other', {
      tolerations: [{ key: UR, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 }],
    });
    const noSchedule = pod('nosched', {
      tolerations: [{ key: KEY, operator: 'Exists', effect: 'NoSchedule' }],
    });
    const at = (ms: number) =>
      evicting.pods(inStep, [forever, all, minute, other, noSchedule], WALL, {
        trigger: 'resync',
        master: false,
        evictingForMs: ms,
      });
    const early = at(20_000);
    expect(early.evictions.map((e) => e.name)).toEqual(['other', 'nosched']);
    expect(early.recheckInMs).toBe(40_000);
    expect(at(60_000).evictions.map((e) => e.name)).toEqual(['minute', 'other', 'nosched']);
  });
});

describe('companion policy: the rate-limited step a node shows (counted by a new leader)', () => {
  it('our taint with its evicting value, whatever --companion-evict-after says now; nothing else', () => {
    const step = { key: KEY, value: 'evicting', effect: 'NoSchedule', timeAdded: '2026-01-01T11:59:00Z' };
    const others = [
      { key: KEY, effect: 'NoSchedule', timeAdded: '2026-01-01T11:58:00Z' },
      { key: UR, effect: 'NoExecute', timeAdded: '2026-01-01T11:58:00Z' },
      { key: 'example.com/other', value: 'evicting', effect: 'NoSchedule' },
    ];
    for (const p of [policy, evicting]) {
      expect(p.rateLimitedStepTaints(node({ lost: true, taints: [...others, step] }))).toEqual([step]);
      expect(p.rateLimitedStepTaints(node({ lost: true, taints: others }))).toEqual([]);
    }
  });
});
