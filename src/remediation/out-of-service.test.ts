import { describe, expect, it } from 'vitest';
import type { Node, NodeCondition, Taint } from '../kube/types.js';
import {
  APPLIED_ANNOTATION,
  announcesShutdown,
  CLOUD_SHUTDOWN_TAINT_KEY,
  carriesOurTaint,
  FENCE_SIGNALS,
  FENCED_ANNOTATION,
  type FenceSignal,
  OUT_OF_SERVICE_TAINT,
  OutOfServiceCore,
  type OutOfServiceFacts,
  ourTaintAddedAt,
  outOfServicePatch,
} from './index.js';

const AFTER = 60_000;
/** Our wall clock when a decision is asked for, and the taint it writes (dated to the second). */
const WALL = Date.parse('2026-05-01T08:00:00.750Z');
const DATED: Taint = { ...OUT_OF_SERVICE_TAINT, timeAdded: '2026-05-01T08:00:00Z' };
const UNKNOWN: NodeCondition = {
  type: 'Ready',
  status: 'Unknown',
  message: 'Kubelet stopped posting node status.',
};
const READY: NodeCondition = { type: 'Ready', status: 'True' };
const SHUTTING_DOWN: NodeCondition = { type: 'Ready', status: 'False', message: 'node is shutting down' };

function node(
  o: { ready?: NodeCondition; taints?: Taint[]; annotations?: Record<string, string> } = {},
): Node {
  return {
    metadata: { name: 'n1', uid: 'u1', annotations: o.annotations ?? {} },
    spec: { taints: o.taints ?? [{ key: 'node.kubernetes.io/unreachable', effect: 'NoExecute' }] },
    status: { conditions: [o.ready ?? UNKNOWN] },
  } as Node;
}

const fencedBy: Record<Exclude<FenceSignal, 'kubelet-shutdown'>, () => Node> = {
  'cloud-shutdown-taint': () =>
    node({
      taints: [
        { key: 'node.kubernetes.io/unreachable', effect: 'NoExecute' },
        { key: CLOUD_SHUTDOWN_TAINT_KEY, effect: 'NoSchedule' },
      ],
    }),
  'fence-annotation': () => node({ annotations: { [FENCED_ANNOTATION]: 'true' } }),
};

const facts = (n: Node, o: Partial<OutOfServiceFacts> = {}): OutOfServiceFacts => ({
  node: n,
  marked: true,
  silent: true,
  blind: undefined,
  admitted: false,
  wallNow: WALL,
  ...o,
});

const core = (signals: readonly FenceSignal[] = FENCE_SIGNALS) =>
  new OutOfServiceCore({ signals, afterMs: AFTER });

describe('OutOfServiceCore: applied only to a marked, silent, fenced node, after the delay', () => {
  for (const [signal, make] of Object.entries(fencedBy)) {
    it(`${signal}: waits out the delay, asks the zone pass, then writes the taint naming the signal`, () => {
      const c = core();
      expect(c.decide(facts(make()), 1_000)).toEqual({ kind: 'wait', signal, inMs: AFTER });
      expect(c.decide(facts(make()), 1_000 + AFTER - 1)).toEqual({ kind: 'wait', signal, inMs: 1 });
      expect(c.decide(facts(make()), 1_000 + AFTER)).toEqual({ kind: 'request', signal });
      const d = c.decide(facts(make(), { admitted: true }), 1_000 + AFTER);
      expect(d.kind).toBe('apply');
      if (d.kind !== 'apply') return;
      const patch = d.patch as {
        metadata: { annotations: Record<string, string> };
        spec: { taints: Taint[] };
      };
      expect(patch.metadata.annotations[APPLIED_ANNOTATION]).toBe(signal);
      expect(patch.spec.taints).toContainEqual(DATED);
      // Every taint it had is kept.
      expect(patch.spec.taints).toEqual([...(make().spec?.taints ?? []), DATED]);
    });
  }

  it("kubelet-shutdown: the kubelet's announcement, seen before our mark overwrote Ready, still counts", () => {
    const c = core();
    c.observe(node({ ready: SHUTTING_DOWN }));
    c.observe(node()); // our mark: Ready Unknown
    expect(c.decide(facts(node()), 0)).toEqual({ kind: 'wait', signal: 'kubelet-shutdown', inMs: AFTER });
    expect(c.decide(facts(node(), { admitted: true }), AFTER).kind).toBe('apply');
  });

  it('kubelet-shutdown: the message within an aggregate of errors counts; Ready=True since forgets it', () => {
    const c = core(['kubelet-shutdown']);
    c.observe(
      node({ ready: { ...SHUTTING_DOWN, message: '[container runtime is down, node is shutting down]' } }),
    );
    expect(c.signal(node())).toBe('kubelet-shutdown');
    c.observe(node({ ready: READY }));
    expect(c.signal(node())).toBeUndefined();
    c.observe(node({ ready: { type: 'Ready', status: 'False', message: 'container runtime is down' } }));
    expect(c.signal(node())).toBeUndefined();
  });

  it("kubelet-shutdown: KEP-5683's GracefulNodeShutdownInProgress=True counts as the announcement (False or absent does not)", () => {
    const gnsip = (status: string): Node => ({
      ...node(),
      status: { conditions: [UNKNOWN, { type: 'GracefulNodeShutdownInProgress', status }] },
    });
    expect(announcesShutdown(gnsip('True'))).toBe(true);
    expect(announcesShutdown(gnsip('False'))).toBe(false);
    expect(announcesShutdown(node())).toBe(false);
    const c = core(['kubelet-shutdown']);
    c.observe(gnsip('True'));
    expect(c.signal(node())).toBe('kubelet-shutdown');
  });

  it('never on lease silence alone: a marked, silent node without a signal is never tainted', () => {
    const c = core();
    for (const t of [0, AFTER, 10 * AFTER, 1000 * AFTER]) {
      expect(c.decide(facts(node(), { admitted: true }), t)).toEqual({ kind: 'none' });
    }
  });

  it('kubelet-shutdown: the kubelet running again (Ready=False for another reason) ends the announcement; our mark (Unknown) does not', () => {
    const c = core(['kubelet-shutdown']);
    c.observe(node({ ready: SHUTTING_DOWN }));
    c.observe(node({ ready: UNKNOWN }));
    expect(c.signal(node())).toBe('kubelet-shutdown');
    c.observe(
      node({ ready: { type: 'Ready', status: 'False', message: 'container runtime network not ready' } }),
    );
    expect(c.signal(node())).toBeUndefined();
  });

  it('only the signals chosen count; an annotation that is not "true" is no fence', () => {
    const c = core(['cloud-shutdown-taint']);
    expect(c.decide(facts(fencedBy['fence-annotation'](), { admitted: true }), AFTER)).toEqual({
      kind: 'none',
    });
    const maybe = node({ annotations: { [FENCED_ANNOTATION]: 'yes' } });
    expect(core().decide(facts(maybe, { admitted: true }), AFTER)).toEqual({ kind: 'none' });
  });

  it('not on a node we did not mark, nor on one whose lease renews', () => {
    const n = fencedBy['fence-annotation']();
    const c = core();
    expect(c.decide(facts(n, { marked: false, admitted: true }), 10 * AFTER)).toEqual({ kind: 'none' });
    expect(c.decide(facts(n, { silent: false, admitted: true }), 10 * AFTER)).toEqual({ kind: 'none' });
  });

  it('not while blind or not leading: nothing decided, and no delay runs meanwhile', () => {
    const c = core();
    const n = fencedBy['cloud-shutdown-taint']();
    for (const blind of ['silent', 'not_leader']) {
      expect(c.decide(facts(n, { blind, admitted: true }), 0)).toEqual({ kind: 'none', why: blind });
    }
    // The delay starts when we see and lead.
    expect(c.decide(facts(n), 5 * AFTER)).toEqual({
      kind: 'wait',
      signal: 'cloud-shutdown-taint',
      inMs: AFTER,
    });
  });

  it('a kubelet heard answering (a second opinion) drops a pending request, whatever the signal', () => {
    const c = core();
    const n = fencedBy['fence-annotation']();
    expect(c.decide(facts(n), 0).kind).toBe('wait');
    expect(c.decide({ ...facts(n, { admitted: true }), kubeletAnswers: true }, 2 * AFTER)).toEqual({
      kind: 'none',
      why: 'its kubelet answers (second opinion)',
      cancel: true,
    });
  });

  it('a fence signal that goes before the taint drops the request and starts the delay again', () => {
    const c = core();
    expect(c.decide(facts(fencedBy['fence-annotation']()), 0).kind).toBe('wait');
    expect(c.decide(facts(node()), AFTER)).toEqual({ kind: 'none', why: 'fence signal gone', cancel: true });
    expect(c.decide(facts(fencedBy['fence-annotation']()), 2 * AFTER)).toEqual({
      kind: 'wait',
      signal: 'fence-annotation',
      inMs: AFTER,
    });
  });

  it('warranted: the same question on any copy of the node (a fresher one after a 409): we act, our mark, silent, a signal', () => {
    const c = core();
    const n = fencedBy['fence-annotation']();
    const check = { node: n, marked: true, silent: true, blind: undefined };
    expect(c.warranted(check)).toBe('fence-annotation');
    expect(c.warranted({ ...check, blind: 'not_leader' })).toBeUndefined();
    expect(c.warranted({ ...check, marked: false })).toBeUndefined();
    expect(c.warranted({ ...check, silent: false })).toBeUndefined();
    expect(c.warranted({ ...check, node: node() })).toBeUndefined();
    // A second opinion heard its kubelet answer: a veto, whatever the signal.
    expect(c.warranted({ ...check, kubeletAnswers: true })).toBeUndefined();
    expect(c.warranted({ ...check, kubeletAnswers: false })).toBe('fence-annotation');
    // The signal of the copy asked about, not of the one the decision was made on.
    expect(c.warranted({ ...check, node: fencedBy['cloud-shutdown-taint']() })).toBe('cloud-shutdown-taint');
  });

  it('a node that carries the taint already gets nothing more', () => {
    const n = node({ taints: [OUT_OF_SERVICE_TAINT], annotations: { [FENCED_ANNOTATION]: 'true' } });
    const c = core();
    expect(c.decide(facts(n, { admitted: true }), 10 * AFTER)).toEqual({ kind: 'none' });
  });
});

describe('OutOfServiceCore: removal once the node renewed and is Ready', () => {
  const ours = (ready: NodeCondition) =>
    node({
      ready,
      taints: [{ key: 'x', effect: 'NoSchedule' }, OUT_OF_SERVICE_TAINT],
      annotations: { [APPLIED_ANNOTATION]: 'fence-annotation', [FENCED_ANNOTATION]: 'true' },
    });

  it('renewed and Ready: our taint, our annotation and the fence annotation come off, other taints stay', () => {
    const d = core().decide(facts(ours(READY), { silent: false }), 0);
    expect(d).toEqual({
      kind: 'remove',
      ours: true,
      patch: {
        metadata: { annotations: { [APPLIED_ANNOTATION]: null, [FENCED_ANNOTATION]: null } },
        spec: { taints: [{ key: 'x', effect: 'NoSchedule' }] },
      },
    });
  });

  it('back right after our taint went on (its delay still on record): the taint comes off', () => {
    const c = core();
    const fenced = fencedBy['fence-annotation']();
    expect(c.decide(facts(fenced), 0).kind).toBe('wait');
    expect(c.decide(facts(fenced, { admitted: true }), AFTER).kind).toBe('apply');
    expect(c.decide(facts(ours(READY), { silent: false }), AFTER + 1).kind).toBe('remove');
  });

  it('not while the lease is silent, nor while renewed but not Ready', () => {
    expect(core().decide(facts(ours(READY), { silent: true }), 0)).toEqual({ kind: 'none' });
    expect(core().decide(facts(ours(UNKNOWN), { silent: false }), 0)).toEqual({ kind: 'none' });
  });

  it('removalPatch asks the same question of the copy it is given (a fresher one after a 409): no patch unless back', () => {
    const c = core();
    expect(c.removalPatch(facts(ours(READY), { silent: false }))).toBeDefined();
    expect(c.removalPatch(facts(ours(READY), { silent: true }))).toBeUndefined();
    expect(c.removalPatch(facts(ours(READY), { silent: false, blind: 'not_leader' }))).toBeUndefined();
    expect(c.removalPatch(facts(ours(SHUTTING_DOWN), { silent: false }))).toBeUndefined();
  });

  it('renewing but not Ready (a pod it needs kept off by the taint): off once a renewal was seen and no signal is left', () => {
    const notReady: NodeCondition = { type: 'Ready', status: 'False', message: 'NetworkReady=false' };
    const n = ours(notReady);
    const unfenced = node({
      ready: notReady,
      taints: [{ key: 'x', effect: 'NoSchedule' }, OUT_OF_SERVICE_TAINT],
      annotations: { [APPLIED_ANNOTATION]: 'fence-annotation' },
    });
    const c = core();
    // No renewal seen (a fresh grace after a restart or a handover is no renewal): stays.
    expect(c.decide(facts(unfenced, { silent: false }), 0)).toEqual({ kind: 'none' });
    c.renewed('n1');
    // The fence annotation still says it is down: stays.
    expect(c.decide(facts(n, { silent: false }), 0)).toEqual({ kind: 'none' });
    expect(c.decide(facts(unfenced, { silent: false }), 0)).toEqual({
      kind: 'remove',
      ours: true,
      patch: {
        metadata: { annotations: { [APPLIED_ANNOTATION]: null } },
        spec: { taints: [{ key: 'x', effect: 'NoSchedule' }] },
      },
    });
  });

  it('a renewal counts only until a decision finds the node silent again; forget drops it', () => {
    const notReady: NodeCondition = { type: 'Ready', status: 'False' };
    const back = node({
      ready: notReady,
      taints: [OUT_OF_SERVICE_TAINT],
      annotations: { [APPLIED_ANNOTATION]: 'x' },
    });
    const c = core();
    c.renewed('n1');
    expect(c.back({ node: back, marked: false, silent: false, blind: undefined })).toBe(true);
    // Blind, or silent: not back.
    expect(c.back({ node: back, marked: false, silent: false, blind: 'silent' })).toBe(false);
    expect(c.back({ node: back, marked: false, silent: true, blind: undefined })).toBe(false);
    expect(c.decide(facts(back, { silent: true }), 0)).toEqual({ kind: 'none' });
    expect(c.decide(facts(back, { silent: false }), 0)).toEqual({ kind: 'none' });
    c.renewed('n1');
    c.forget('n1');
    expect(c.decide(facts(back, { silent: false }), 0)).toEqual({ kind: 'none' });
    // Ready=True needs no renewal seen: the kubelet posted it.
    expect(c.back({ node: node({ ready: READY }), marked: false, silent: false, blind: undefined })).toBe(
      true,
    );
  });

  it('an out-of-service taint an operator put there is not ours: left alone, and the fence too', () => {
    const n = node({
      ready: READY,
      taints: [OUT_OF_SERVICE_TAINT],
      annotations: { [FENCED_ANNOTATION]: 'true' },
    });
    expect(core().decide(facts(n, { silent: false }), 0)).toEqual({ kind: 'none' });
    expect(core().removalPatch(facts(n, { silent: false }))).toBeUndefined();
  });
});

describe('OutOfServiceCore: what it reads from a node, and the names users write', () => {
  it('the names operators and agents write are exactly the documented ones', () => {
    expect(FENCED_ANNOTATION).toBe('node-lifecycle-controller.io/fenced');
    expect(APPLIED_ANNOTATION).toBe('node-lifecycle-controller.io/out-of-service');
    expect(CLOUD_SHUTDOWN_TAINT_KEY).toBe('node.cloudprovider.kubernetes.io/shutdown');
    expect(OUT_OF_SERVICE_TAINT).toEqual({
      key: 'node.kubernetes.io/out-of-service',
      value: 'nodeshutdown',
      effect: 'NoExecute',
    });
  });

  it('a node with no spec, taints that are not a list, or junk entries: read without a throw, junk kept', () => {
    const bare = { metadata: { name: 'n1' }, status: { conditions: [UNKNOWN] } } as Node;
    expect(outOfServicePatch(bare, 'fence-annotation', WALL)).toEqual({
      metadata: { annotations: { [APPLIED_ANNOTATION]: 'fence-annotation' } },
      spec: { taints: [DATED] },
    });
    const notAList = { ...bare, spec: { taints: 'x' } } as unknown as Node;
    expect(outOfServicePatch(notAList, 'fence-annotation', WALL)).toEqual({
      metadata: { annotations: { [APPLIED_ANNOTATION]: 'fence-annotation' } },
      spec: { taints: [DATED] },
    });
    const junk = [null, 'a string', 7, { key: CLOUD_SHUTDOWN_TAINT_KEY }] as unknown as Taint[];
    const n = node({ taints: junk, annotations: { [FENCED_ANNOTATION]: 'true' } });
    // A key without an effect is no taint: not the cloud provider's signal.
    expect(core(['cloud-shutdown-taint']).signal(n)).toBeUndefined();
    const d = core(['fence-annotation']).decide(facts(n, { admitted: true }), AFTER);
    expect(d).toEqual({ kind: 'wait', signal: 'fence-annotation', inMs: AFTER });
    expect(outOfServicePatch(n, 'fence-annotation', WALL)).toEqual({
      metadata: { annotations: { [APPLIED_ANNOTATION]: 'fence-annotation' } },
      spec: { taints: [...junk, DATED] },
    });
    // Removal keeps the junk too, and takes off only the taint.
    const back = node({
      ready: READY,
      taints: [...junk, OUT_OF_SERVICE_TAINT],
      annotations: { [APPLIED_ANNOTATION]: 'fence-annotation' },
    });
    expect(core().removalPatch(facts(back, { silent: false }))).toEqual({
      metadata: { annotations: { [APPLIED_ANNOTATION]: null } },
      spec: { taints: junk },
    });
  });

  it('carriesOurTaint: the taint and the annotation that says it is ours, both', () => {
    expect(
      carriesOurTaint(node({ taints: [OUT_OF_SERVICE_TAINT], annotations: { [APPLIED_ANNOTATION]: 'x' } })),
    ).toBe(true);
    expect(carriesOurTaint(node({ taints: [OUT_OF_SERVICE_TAINT] }))).toBe(false);
    expect(carriesOurTaint(node({ annotations: { [APPLIED_ANNOTATION]: 'x' } }))).toBe(false);
    const bare = node({ taints: [OUT_OF_SERVICE_TAINT] });
    delete bare.metadata.annotations;
    expect(carriesOurTaint(bare)).toBe(false);
  });

  it('a node that carries the taint already gets no patch that adds it', () => {
    expect(
      outOfServicePatch(node({ taints: [OUT_OF_SERVICE_TAINT] }), 'fence-annotation', WALL),
    ).toBeUndefined();
  });

  it("ourTaintAddedAt: our taint's timeAdded as written; none for a taint not ours or written undated", () => {
    const ours = { [APPLIED_ANNOTATION]: 'fence-annotation' };
    const other = { key: 'x', effect: 'NoExecute', timeAdded: '2026-05-01T07:00:00Z' };
    expect(ourTaintAddedAt(node({ taints: [other, DATED], annotations: ours }))).toBe('2026-05-01T08:00:00Z');
    expect(ourTaintAddedAt(node({ taints: [other, DATED] }))).toBeUndefined();
    expect(
      ourTaintAddedAt(node({ taints: [other, OUT_OF_SERVICE_TAINT], annotations: ours })),
    ).toBeUndefined();
    const junk = { ...OUT_OF_SERVICE_TAINT, timeAdded: 7 } as unknown as Taint;
    expect(ourTaintAddedAt(node({ taints: [junk], annotations: ours }))).toBeUndefined();
    expect(ourTaintAddedAt(node({ taints: [other], annotations: ours }))).toBeUndefined();
  });

  it('a node with no annotations at all is not fenced by annotation (and no throw)', () => {
    const n = node();
    delete n.metadata.annotations;
    expect(core(['fence-annotation']).signal(n)).toBeUndefined();
  });

  it('each signal counts only when chosen: a cloud shutdown taint is not a fence when only the others are trusted', () => {
    const cloud = fencedBy['cloud-shutdown-taint']();
    expect(core(['fence-annotation']).signal(cloud)).toBeUndefined();
    expect(core(['kubelet-shutdown']).signal(cloud)).toBeUndefined();
    expect(core(['cloud-shutdown-taint']).signal(cloud)).toBe('cloud-shutdown-taint');
  });

  it("the kubelet's announcement is Ready=False with its message: the message on another status, or no Ready condition, is none", () => {
    const withReady = (ready: NodeCondition | undefined) =>
      ({ metadata: { name: 'n1' }, status: { conditions: ready ? [ready] : [] } }) as Node;
    expect(announcesShutdown(withReady(SHUTTING_DOWN))).toBe(true);
    expect(announcesShutdown(withReady({ ...SHUTTING_DOWN, status: 'True' }))).toBe(false);
    expect(announcesShutdown(withReady({ ...SHUTTING_DOWN, status: 'Unknown' }))).toBe(false);
    expect(announcesShutdown(withReady(undefined))).toBe(false);
    expect(announcesShutdown(withReady({ type: 'Ready', status: 'False' }))).toBe(false);
  });

  it('forget: a deleted node leaves nothing behind (its announcement, its delay)', () => {
    const c = core();
    c.observe(node({ ready: SHUTTING_DOWN }));
    expect(c.decide(facts(node()), 0)).toEqual({ kind: 'wait', signal: 'kubelet-shutdown', inMs: AFTER });
    c.forget('n1');
    // A node of the same name later: no announcement remembered, and no delay already run.
    expect(c.signal(node())).toBeUndefined();
    expect(c.decide(facts(fencedBy['fence-annotation']()), 5 * AFTER)).toEqual({
      kind: 'wait',
      signal: 'fence-annotation',
      inMs: AFTER,
    });
  });

  it('a node back (renewed and Ready) before the taint starts its delay again when it goes down again', () => {
    const c = core();
    const fenced = fencedBy['fence-annotation'];
    expect(c.decide(facts(fenced()), 0).kind).toBe('wait');
    // Its request (or admission) is dropped, as when the signal goes.
    expect(c.decide(facts(node({ ready: READY }), { silent: false }), AFTER / 2)).toEqual({
      kind: 'none',
      why: 'node back',
      cancel: true,
    });
    // Once: it is no longer fenced.
    expect(c.decide(facts(node({ ready: READY }), { silent: false }), AFTER)).toEqual({ kind: 'none' });
    expect(c.decide(facts(fenced()), 2 * AFTER)).toEqual({
      kind: 'wait',
      signal: 'fence-annotation',
      inMs: AFTER,
    });
  });

  it('removal: without a fence annotation only ours comes off; with our taint gone already, no taint list is written', () => {
    const n = node({
      ready: READY,
      taints: [{ key: 'x', effect: 'NoSchedule' }, OUT_OF_SERVICE_TAINT],
      annotations: { [APPLIED_ANNOTATION]: 'cloud-shutdown-taint' },
    });
    expect(core().removalPatch(facts(n, { silent: false }))).toEqual({
      metadata: { annotations: { [APPLIED_ANNOTATION]: null } },
      spec: { taints: [{ key: 'x', effect: 'NoSchedule' }] },
    });
    const untainted = node({
      ready: READY,
      taints: [{ key: 'x', effect: 'NoSchedule' }],
      annotations: { [APPLIED_ANNOTATION]: 'fence-annotation', [FENCED_ANNOTATION]: 'true' },
    });
    expect(core().decide(facts(untainted, { silent: false }), 0)).toEqual({
      kind: 'remove',
      ours: false,
      patch: { metadata: { annotations: { [APPLIED_ANNOTATION]: null, [FENCED_ANNOTATION]: null } } },
    });
  });
});
