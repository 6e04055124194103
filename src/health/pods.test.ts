import { describe, expect, it } from 'vitest';
import type { Node, Pod, PodCondition } from '../kube/types.js';
import { unknownConditionsDecision } from './conditions.js';
import { nodeAfterStatusDecision, podNeedsNotReady, podsToMarkNotReady } from './pods.js';

const WALL = Date.UTC(2026, 0, 1, 12, 0, 0);
const NOW = '2026-01-01T12:00:00Z';

function node(status?: string, since = '2026-01-01T10:00:00Z'): Node {
  return {
    metadata: { name: 'n1', uid: 'nu', creationTimestamp: '2025-01-01T00:00:00Z' },
    status: status
      ? { conditions: [{ type: 'Ready', status, lastHeartbeatTime: since, lastTransitionTime: since }] }
      : {},
  };
}
function pod(name: string, ready?: Partial<PodCondition> | null, nodeName = 'n1'): Pod {
  const conditions: PodCondition[] = [{ type: 'PodScheduled', status: 'True' }];
  if (ready !== null) {
    conditions.push({
      type: 'Ready',
      status: 'True',
      reason: '',
      lastProbeTime: null,
      lastTransitionTime: '2026-01-01T09:00:00Z',
      ...ready,
    });
  }
  return {
    metadata: { name, namespace: 'ns', uid: `uid-${name}`, resourceVersion: '5' },
    spec: { nodeName },
    status: { phase: 'Running', conditions },
  };
}

describe('podsToMarkNotReady', () => {
  it('marks pods whose Ready is not False on an Unknown node: patch and event as upstream', () => {
    const pods = [
      pod('a'),
      pod('b', { status: 'Unknown' }),
      pod('c', { status: 'False' }),
      pod('d', null),
      pod('e', {}, 'other'),
    ];
    const out = podsToMarkNotReady(node('Unknown'), pods, WALL);
    expect(out.map((d) => d.name)).toEqual(['a', 'b']);
    expect(out[0]).toEqual({
      namespace: 'ns',
      name: 'a',
      uid: 'uid-a',
      resourceVersion: '5',
      node: 'n1',
      patch: { status: { conditions: [{ type: 'Ready', status: 'False', lastTransitionTime: NOW }] } },
      event: {
        involvedObject: { apiVersion: 'v1', kind: 'Pod', name: 'a', namespace: 'ns', uid: 'uid-a' },
        type: 'Warning',
        reason: 'NodeNotReady',
        message: 'Node is not ready',
      },
    });
  });

  it('nothing on a Ready node or a node without Ready', () => {
    expect(podsToMarkNotReady(node('True'), [pod('a')], WALL)).toEqual([]);
    expect(podsToMarkNotReady(node(), [pod('a')], WALL)).toEqual([]);
  });

  it('level mode (default) covers a restart, False->Unknown (#112733) and kubelet-reported False (#125618)', () => {
    // After a restart, or after False->Unknown: the cluster state alone says what to do.
    expect(podNeedsNotReady(node('Unknown'), pod('a'), { trigger: 'resync' })).toBe(true);
    // Kubelet reported Ready=False at 10:00; the pod was Ready since 09:00: mark it.
    expect(podNeedsNotReady(node('False'), pod('a'), { trigger: 'resync' })).toBe(true);
    // Same second counts as "not after".
    expect(podNeedsNotReady(node('False'), pod('a', { lastTransitionTime: '2026-01-01T10:00:00Z' }))).toBe(
      true,
    );
  });

  it('level mode does not fight a live kubelet that re-asserted a pod after the node went False', () => {
    const reasserted = pod('a', { lastTransitionTime: '2026-01-01T10:00:30Z' });
    expect(podNeedsNotReady(node('False'), reasserted)).toBe(false);
    // unknown times on a False node: leave it to the kubelet
    expect(podNeedsNotReady(node('False'), pod('a', { lastTransitionTime: null }))).toBe(false);
    expect(podNeedsNotReady(node('False', 'bad'), pod('a'))).toBe(false);
    // on an Unknown node the kubelet is not talking: mark regardless
    expect(podNeedsNotReady(node('Unknown'), reasserted)).toBe(true);
  });

  it("upstream mode: only on the controller's own flip, a retry, or a newly bound pod", () => {
    const up = { mode: 'upstream' as const };
    expect(podNeedsNotReady(node('Unknown'), pod('a'), { ...up, trigger: 'resync' })).toBe(false);
    expect(podNeedsNotReady(node('False'), pod('a'), { ...up, trigger: 'resync' })).toBe(false);
    expect(podNeedsNotReady(node('Unknown'), pod('a'), { ...up, trigger: 'node-flipped' })).toBe(true);
    expect(podNeedsNotReady(node('Unknown'), pod('a'), { ...up, trigger: 'retry' })).toBe(true);
    // upstream processPod marks a newly bound pod on any not-True node, including kubelet-reported False
    expect(
      podNeedsNotReady(node('False'), pod('a', { lastTransitionTime: '2026-01-01T11:00:00Z' }), {
        ...up,
        trigger: 'pod-bound',
      }),
    ).toBe(true);
    expect(podNeedsNotReady(node('True'), pod('a'), { ...up, trigger: 'node-flipped' })).toBe(false);
  });

  it('works on the node as it will be after our own status write', () => {
    const n = node('True');
    const d = unknownConditionsDecision(n, WALL)!;
    expect(podsToMarkNotReady(n, [pod('a')], WALL)).toEqual([]);
    const after = nodeAfterStatusDecision(n, d);
    expect(
      podsToMarkNotReady(after, [pod('a')], WALL, { mode: 'upstream', trigger: 'node-flipped' }),
    ).toHaveLength(1);
    expect(podsToMarkNotReady(after, [pod('a')], WALL)).toHaveLength(1);
  });

  it('bad data never throws', () => {
    const junk = [
      { metadata: {} },
      { metadata: { name: 'x' }, spec: { nodeName: 'n1' }, status: { conditions: 'no' } },
      {
        metadata: { name: 'y' },
        spec: { nodeName: 'n1' },
        status: { conditions: [null, { type: 'Ready', status: 'True' }] },
      },
    ] as unknown as Pod[];
    const out = podsToMarkNotReady(node('Unknown'), junk, WALL);
    expect(out.map((d) => d.name)).toEqual(['y']);
    expect(out[0]?.namespace).toBe('');
    expect(podsToMarkNotReady({ metadata: { name: '' } }, [pod('a', {}, '')], WALL)).toEqual([]);
  });
});
