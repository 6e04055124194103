import { describe, expect, it } from 'vitest';
import { registeredNodeEvent, removingNodeEvent } from './events.js';
import { EventMessage, NodeConditionMessage, NodeConditionReason, TaintKey } from './reasons.js';

describe('upstream spellings', () => {
  // The zone and disruption label keys are src/disruption/zones.ts's (zones.test.ts).
  it('taint keys, reasons and messages are exactly upstream', () => {
    expect(Object.values(TaintKey).sort()).toEqual([
      'node.kubernetes.io/disk-pressure',
      'node.kubernetes.io/memory-pressure',
      'node.kubernetes.io/network-unavailable',
      'node.kubernetes.io/not-ready',
      'node.kubernetes.io/pid-pressure',
      'node.kubernetes.io/unreachable',
      'node.kubernetes.io/unschedulable',
    ]);
    expect(NodeConditionReason).toEqual({
      NodeStatusUnknown: 'NodeStatusUnknown',
      NodeStatusNeverUpdated: 'NodeStatusNeverUpdated',
    });
    expect(NodeConditionMessage).toEqual({
      StoppedPosting: 'Kubelet stopped posting node status.',
      NeverPosted: 'Kubelet never posted node status.',
    });
    expect(EventMessage.PodNodeNotReady).toBe('Node is not ready');
  });

  it('RegisteredNode / RemovingNode events as upstream words them', () => {
    expect(registeredNodeEvent('n1', 'u')).toEqual({
      involvedObject: { apiVersion: 'v1', kind: 'Node', name: 'n1', namespace: '', uid: 'u' },
      type: 'Normal',
      reason: 'RegisteredNode',
      message: 'Node n1 event: Registered Node n1 in Controller',
    });
    expect(removingNodeEvent('n1')).toEqual({
      involvedObject: { apiVersion: 'v1', kind: 'Node', name: 'n1', namespace: '' },
      type: 'Normal',
      reason: 'RemovingNode',
      message: 'Node n1 event: Removing Node n1 from Controller',
    });
  });
});
