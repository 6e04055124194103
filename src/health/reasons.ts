/**
 * Every string this controller writes into, or matches in, Kubernetes objects on behalf of node
 * health: taint keys, condition types/reasons/messages, Event reasons/messages, label keys, and the
 * kinds of bad data we report. Upstream values are spelled exactly as kube-controller-manager's
 * node-lifecycle controller spells them; do not "improve" them, users alert on them.
 */

/** Namespace holding one Lease per node, named after the node (kubelet heartbeats). */
export { NODE_LEASE_NAMESPACE } from '../kube/types.js';

/** Event source component, as upstream's node lifecycle controller reports it (src/names). */
export { EVENT_SOURCE_COMPONENT } from '../names/index.js';

/** Taint keys (core/v1 well-known taints). */
export const TaintKey = {
  NotReady: 'node.kubernetes.io/not-ready',
  Unreachable: 'node.kubernetes.io/unreachable',
  MemoryPressure: 'node.kubernetes.io/memory-pressure',
  DiskPressure: 'node.kubernetes.io/disk-pressure',
  PIDPressure: 'node.kubernetes.io/pid-pressure',
  NetworkUnavailable: 'node.kubernetes.io/network-unavailable',
  Unschedulable: 'node.kubernetes.io/unschedulable',
} as const;
export type TaintKey = (typeof TaintKey)[keyof typeof TaintKey];

export const TaintEffectName = {
  NoSchedule: 'NoSchedule',
  PreferNoSchedule: 'PreferNoSchedule',
  NoExecute: 'NoExecute',
} as const;

/** Node condition types. */
export const NodeConditionType = {
  Ready: 'Ready',
  MemoryPressure: 'MemoryPressure',
  DiskPressure: 'DiskPressure',
  PIDPressure: 'PIDPressure',
  NetworkUnavailable: 'NetworkUnavailable',
} as const;

/**
 * KEP-5683's node lifecycle conditions (alpha in Kubernetes 1.37, feature gate
 * NodeLifecycleConditions): set True by an admin or a maintenance controller, False or removed
 * when over. GracefulNodeShutdownInProgress: the kubelet's graceful node shutdown is under way.
 */
export const NodeLifecycleCondition = {
  GracefulNodeShutdownInProgress: 'GracefulNodeShutdownInProgress',
  DrainInProgress: 'DrainInProgress',
  Drained: 'Drained',
  MaintenancePlanned: 'MaintenancePlanned',
  MaintenanceInProgress: 'MaintenanceInProgress',
} as const;

/** Pod condition types. */
export const PodConditionType = {
  Ready: 'Ready',
} as const;

export const ConditionStatusValue = {
  True: 'True',
  False: 'False',
  Unknown: 'Unknown',
} as const;

/** Reasons the controller writes on node conditions it sets to Unknown. */
export const NodeConditionReason = {
  /** The condition existed and the kubelet stopped posting it. */
  NodeStatusUnknown: 'NodeStatusUnknown',
  /** The condition never existed: appended by the controller. */
  NodeStatusNeverUpdated: 'NodeStatusNeverUpdated',
} as const;

export const NodeConditionMessage = {
  StoppedPosting: 'Kubelet stopped posting node status.',
  NeverPosted: 'Kubelet never posted node status.',
} as const;

/** Event types (core/v1 EventTypeNormal / EventTypeWarning). */
export const EventType = {
  Normal: 'Normal',
  Warning: 'Warning',
} as const;
export type EventType = (typeof EventType)[keyof typeof EventType];

/** Event reasons. The first three are upstream's, spelled identically. */
export const EventReason = {
  /** On the Node (Normal) when the controller flips Ready away from True; on each Pod (Warning). */
  NodeNotReady: 'NodeNotReady',
  /** On the Node (Normal) when the controller first sees it. */
  RegisteredNode: 'RegisteredNode',
  /** On the Node (Normal) when it disappears from the controller's view. */
  RemovingNode: 'RemovingNode',
  /** Companion mode (ours, not upstream's): on the Node (Warning) when it is marked lost. */
  NodeLeaseExpired: 'NodeLeaseExpired',
  /** Companion mode: on the Node (Normal) when it renewed and our marks came off. */
  NodeLeaseRenewed: 'NodeLeaseRenewed',
  /** Companion mode: on each Pod (Warning) set Ready=False on a lost node. */
  PodNodeLeaseExpired: 'NodeLeaseExpired',
  /** --out-of-service (ours): on the Node (Warning) when the out-of-service taint is added. */
  OutOfServiceTaintApplied: 'OutOfServiceTaintApplied',
  /** --out-of-service: on the Node (Normal) when it renewed, is Ready and our taint came off. */
  OutOfServiceTaintRemoved: 'OutOfServiceTaintRemoved',
  /** --out-of-service: on the Node (Normal) once no VolumeAttachment is left on it. */
  OutOfServiceVolumesDetached: 'OutOfServiceVolumesDetached',
  /**
   * --second-opinion (ours): on the Node (Warning) when its lease is past the grace but its kubelet
   * still answers on the node network: cut off from the control plane, its NoExecute held.
   */
  KubeletStillAnswering: 'KubeletStillAnswering',
} as const;
export type EventReason = (typeof EventReason)[keyof typeof EventReason];

/** Event messages (upstream wording; node messages are built by the functions below). */
export const EventMessage = {
  /** Upstream's pod event message (MarkPodsNotReady). */
  PodNodeNotReady: 'Node is not ready',
  /** Upstream's RecordNodeStatusChange: "Node %s status is now: %s". */
  nodeStatusNow: (node: string, status: string): string => `Node ${node} status is now: ${status}`,
  /** Upstream's RecordNodeEvent: "Node %s event: %s" with "Registered Node %v in Controller". */
  registeredNode: (node: string): string => `Node ${node} event: Registered Node ${node} in Controller`,
  /** Upstream's RecordNodeEvent with "Removing Node %v from Controller". */
  removingNode: (node: string): string => `Node ${node} event: Removing Node ${node} from Controller`,
} as const;

/**
 * Bad or surprising data seen by the health core. Each is returned as an {@link Anomaly} record
 * (never thrown); the caller turns them into metrics (`kind` as a label) and logs.
 */
export const AnomalyKind = {
  /** A Lease in kube-node-lease whose Node we do not know (tracked, never marked). */
  LeaseWithoutNode: 'lease_without_node',
  /** A Lease outside kube-node-lease was passed in (ignored). */
  LeaseWrongNamespace: 'lease_wrong_namespace',
  /** Object without metadata.name (ignored). */
  MissingName: 'missing_name',
  /** Lease without spec.renewTime (ignored). */
  RenewTimeMissing: 'renew_time_missing',
  /** Lease whose spec.renewTime does not parse as RFC 3339 (ignored). */
  RenewTimeUnparsable: 'renew_time_unparsable',
  /** renewTime moved backwards (kubelet clock stepped back): still counted as a renewal. */
  RenewTimeBackward: 'renew_time_backward',
  /** renewTime equal to a value already seen before the current one (stale replay): not a renewal. */
  RenewTimeReplayed: 'renew_time_replayed',
  /** renewTime changed but did not advance, ignored because leaseRule = 'advanced' (upstream). */
  RenewTimeNotAdvanced: 'renew_time_not_advanced',
  /** spec.holderIdentity is null or empty (renewals still counted, as upstream). */
  HolderMissing: 'holder_missing',
  /** spec.holderIdentity differs from the node name (renewals still counted, as upstream). */
  HolderMismatch: 'holder_mismatch',
  /** A Node's Ready condition disappeared after we had seen it. */
  ReadyConditionRemoved: 'ready_condition_removed',
  /** Ready lastHeartbeatTime does not parse; compared as raw text instead. */
  HeartbeatUnparsable: 'heartbeat_unparsable',
  /** A condition type appears more than once; the first one is used. */
  DuplicateCondition: 'duplicate_condition',
  /** The grace resolver threw or returned unusable numbers; defaults used. */
  InvalidGrace: 'invalid_grace',
  /** A non-finite `now` was passed in (observation ignored). */
  InvalidNow: 'invalid_now',
  /**
   * The Lease re-read before marking a node was answered (2xx) with something else than that
   * node's Lease: a non-JSON body (a proxy's HTML page), another object. It shows nothing: the
   * node is not marked on it.
   */
  LeaseReadInvalid: 'lease_read_invalid',
} as const;
export type AnomalyKind = (typeof AnomalyKind)[keyof typeof AnomalyKind];

/**
 * Companion mode (beside a live provider's node-lifecycle controller): the only fields it writes
 * are its own taint (key configurable, under a domain this project owns, never node.kubernetes.io),
 * its own Node condition, and (optionally) pods' Ready=False.
 */
export const Companion = {
  /** Default --companion-taint-key. */
  DefaultTaintKey: 'node-lifecycle-controller.io/unreachable',
  /** The taint's value once the node's evictions were admitted (zone rates, cap, master disruption). */
  EvictingValue: 'evicting',
  /** Our Node condition: True while the node is lost as we see it. */
  ConditionType: 'NodeLeaseExpired',
  ConditionReason: 'LeaseNotRenewed',
  /** Pods mirrored from static manifests: the kubelet owns them, there is nothing to evict. */
  MirrorPodAnnotation: 'kubernetes.io/config.mirror',
} as const;
