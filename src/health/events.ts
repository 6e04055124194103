import type { Node, Pod } from '../kube/types.js';
import { EventMessage, EventReason, EventType } from './reasons.js';
import type { EventRecord, ObjectRef } from './types.js';

export function nodeRef(name: string, uid?: string): ObjectRef {
  const ref: ObjectRef = { apiVersion: 'v1', kind: 'Node', name, namespace: '' };
  if (uid) ref.uid = uid;
  return ref;
}

export function podRef(pod: Pod): ObjectRef {
  const ref: ObjectRef = {
    apiVersion: 'v1',
    kind: 'Pod',
    name: pod.metadata?.name ?? '',
    namespace: pod.metadata?.namespace ?? '',
  };
  if (pod.metadata?.uid) ref.uid = pod.metadata.uid;
  return ref;
}

/** Upstream RecordNodeStatusChange(node, "NodeNotReady"): Normal, on the Node. */
export function nodeNotReadyEvent(node: Node): EventRecord {
  const name = node.metadata?.name ?? '';
  return {
    involvedObject: nodeRef(name, node.metadata?.uid),
    type: EventType.Normal,
    reason: EventReason.NodeNotReady,
    message: EventMessage.nodeStatusNow(name, EventReason.NodeNotReady),
  };
}

/** Upstream MarkPodsNotReady's event: Warning "NodeNotReady" "Node is not ready", on the Pod. */
export function podNodeNotReadyEvent(pod: Pod): EventRecord {
  return {
    involvedObject: podRef(pod),
    type: EventType.Warning,
    reason: EventReason.NodeNotReady,
    message: EventMessage.PodNodeNotReady,
  };
}

/** Upstream: Normal "RegisteredNode" when the controller first sees a node. */
export function registeredNodeEvent(name: string, uid?: string): EventRecord {
  return {
    involvedObject: nodeRef(name, uid),
    type: EventType.Normal,
    reason: EventReason.RegisteredNode,
    message: EventMessage.registeredNode(name),
  };
}

/** Upstream: Normal "RemovingNode" when a node disappears from the controller's view. */
export function removingNodeEvent(name: string, uid?: string): EventRecord {
  return {
    involvedObject: nodeRef(name, uid),
    type: EventType.Normal,
    reason: EventReason.RemovingNode,
    message: EventMessage.removingNode(name),
  };
}
