import type { KubeObject, Lease, Node, ObjectMeta, Pod } from '../kube/types.js';

/**
 * Strip functions: build the compact object the store keeps from a freshly parsed wire object,
 * copying references to the kept parts (no deep copy: the parsed object is ours alone) and
 * dropping the rest (managedFields, images, nodeInfo, container specs, ...). Every function
 * returns undefined for an object without metadata.name (counted as malformed by the watcher).
 *
 * Object literals always have the same keys (absent fields are undefined) so that every stored
 * object of a kind shares one hidden class.
 */

interface RawObject {
  metadata?: ObjectMeta;
  spec?: Record<string, unknown> | null;
  status?: Record<string, unknown> | null;
}

function rawMeta(raw: unknown): ObjectMeta | undefined {
  const m = (raw as RawObject | null | undefined)?.metadata;
  return m && typeof m === 'object' && typeof m.name === 'string' ? m : undefined;
}

/** name, namespace, uid, resourceVersion, creation/deletion timestamps, labels, ownerReferences. */
export function basicMeta(m: ObjectMeta): ObjectMeta {
  return {
    name: m.name,
    namespace: m.namespace,
    uid: m.uid,
    resourceVersion: m.resourceVersion,
    creationTimestamp: m.creationTimestamp,
    deletionTimestamp: m.deletionTimestamp,
    labels: m.labels,
    annotations: undefined,
    ownerReferences: m.ownerReferences,
  };
}

/** Keeps only the metadata basics (any kind). */
export function stripToMeta(raw: unknown): KubeObject | undefined {
  const m = rawMeta(raw);
  return m ? { metadata: basicMeta(m) } : undefined;
}

/** Lease: metadata basics and the whole spec (holderIdentity, renewTime, durations...). */
export function stripLease(raw: unknown): Lease | undefined {
  const m = rawMeta(raw);
  if (!m) return undefined;
  const spec = (raw as Lease).spec;
  return { metadata: basicMeta(m), spec: spec && typeof spec === 'object' ? spec : undefined };
}

/**
 * As {@link stripNode}, and where the node's kubelet serves (--second-opinion probes it): the
 * InternalIP entries of status.addresses and status.daemonEndpoints.kubeletEndpoint.Port, as sent
 * (judged by src/second-opinion/kubelet-probe.ts kubeletTargetOf).
 */
export function stripNodeWithKubelet(raw: unknown): Node | undefined {
  const node = stripNode(raw);
  if (!node) return undefined;
  const status = (raw as Node).status;
  const addresses: unknown = status?.addresses;
  const endpoints: unknown = status?.daemonEndpoints;
  const port: unknown =
    endpoints && typeof endpoints === 'object'
      ? (endpoints as { kubeletEndpoint?: { Port?: unknown } }).kubeletEndpoint?.Port
      : undefined;
  node.status = {
    conditions: node.status?.conditions,
    addresses: Array.isArray(addresses)
      ? addresses.filter((a: unknown) => (a as { type?: unknown } | null)?.type === 'InternalIP')
      : undefined,
    daemonEndpoints: port === undefined ? undefined : { kubeletEndpoint: { Port: port as number } },
  };
  return node;
}

/**
 * Node: metadata basics plus annotations; spec.taints and spec.unschedulable; status.conditions.
 * Dropped: images, nodeInfo, addresses, capacity, allocatable, daemonEndpoints, volumes, podCIDRs...
 */
export function stripNode(raw: unknown): Node | undefined {
  const m = rawMeta(raw);
  if (!m) return undefined;
  const r = raw as Node;
  const meta = basicMeta(m);
  meta.annotations = m.annotations;
  return {
    metadata: meta,
    spec: { unschedulable: r.spec?.unschedulable, taints: r.spec?.taints },
    status: { conditions: r.status?.conditions },
  };
}

/**
 * Pod: metadata basics; spec.nodeName and spec.tolerations (needed to judge NoExecute taints);
 * status.phase and status.conditions. Dropped: containers, volumes, annotations, statuses...
 */
export function stripPod(raw: unknown): Pod | undefined {
  const m = rawMeta(raw);
  if (!m) return undefined;
  const r = raw as Pod;
  return {
    metadata: basicMeta(m),
    spec: { nodeName: r.spec?.nodeName, tolerations: r.spec?.tolerations },
    status: { phase: r.status?.phase, conditions: r.status?.conditions },
  };
}
