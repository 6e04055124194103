/**
 * Wire shapes (JSON as the API server sends it: times are RFC 3339 strings) of the parts of
 * Kubernetes objects this controller reads or writes. The store keeps objects in these shapes,
 * stripped of everything else (managedFields, images, ...).
 */

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
}

export interface ListMeta {
  resourceVersion?: string;
  continue?: string;
  remainingItemCount?: number;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
}

export interface List<T> {
  apiVersion?: string;
  kind?: string;
  metadata: ListMeta;
  items: T[];
}

export interface LeaseSpec {
  holderIdentity?: string | null;
  leaseDurationSeconds?: number | null;
  /** MicroTime, e.g. 2026-11-30T10:00:00.123456Z */
  renewTime?: string | null;
  acquireTime?: string | null;
  leaseTransitions?: number | null;
  strategy?: string | null;
  preferredHolder?: string | null;
}

export interface Lease extends KubeObject {
  spec?: LeaseSpec;
}

export type ConditionStatus = 'True' | 'False' | 'Unknown';

export interface NodeCondition {
  type: string;
  status: ConditionStatus | string;
  reason?: string;
  message?: string;
  lastHeartbeatTime?: string | null;
  lastTransitionTime?: string | null;
}

export type TaintEffect = 'NoSchedule' | 'PreferNoSchedule' | 'NoExecute';

export interface Taint {
  key: string;
  value?: string;
  effect: TaintEffect | string;
  timeAdded?: string | null;
}

export interface NodeAddress {
  type: string;
  address: string;
}

export interface Node extends KubeObject {
  spec?: { unschedulable?: boolean; taints?: Taint[]; providerID?: string };
  status?: {
    conditions?: NodeCondition[];
    /** Kept by the node watch only with --second-opinion (stripNodeWithKubelet): InternalIP entries. */
    addresses?: NodeAddress[];
    /** Kept only with --second-opinion: where the kubelet serves. */
    daemonEndpoints?: { kubeletEndpoint?: { Port?: number } };
  };
}

export interface PodCondition {
  type: string;
  status: ConditionStatus | string;
  reason?: string;
  message?: string;
  lastProbeTime?: string | null;
  lastTransitionTime?: string | null;
}

export interface Pod extends KubeObject {
  spec?: { nodeName?: string; tolerations?: unknown[] };
  status?: { phase?: string; conditions?: PodCondition[] };
}

/** Where kubelets keep their heartbeat Leases (one per node, named like the node). */
export const NODE_LEASE_NAMESPACE = 'kube-node-lease';

/** The event types of a Kubernetes watch stream. */
export type RawWatchType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';
