import { describe, expect, it } from 'vitest';
import { stripLease, stripNode, stripNodeWithKubelet, stripPod, stripToMeta } from './strip.js';

const managedFields = [{ manager: 'kubelet', operation: 'Update', fieldsV1: { 'f:spec': {} } }];
const meta = {
  name: 'n1',
  uid: 'u1',
  resourceVersion: '42',
  creationTimestamp: '2026-01-01T00:00:00Z',
  labels: { 'topology.kubernetes.io/zone': 'a' },
  annotations: { 'node.alpha.kubernetes.io/ttl': '0' },
  ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name: 'n1', uid: 'u0' }],
  managedFields,
  generation: 3,
};

describe('strip functions', () => {
  it('node: keeps what the controller reads, drops images, nodeInfo, addresses, capacity...', () => {
    const raw = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: meta,
      spec: { taints: [{ key: 'k', effect: 'NoSchedule' }], unschedulable: true, podCIDR: '10.0.0.0/24' },
      status: {
        conditions: [{ type: 'Ready', status: 'True' }],
        images: [{ names: ['x'], sizeBytes: 1 }],
        nodeInfo: { kubeletVersion: 'v1' },
        addresses: [{ type: 'InternalIP', address: '10.0.0.1' }],
        capacity: { cpu: '4' },
        allocatable: { cpu: '4' },
        daemonEndpoints: {},
      },
    };
    const n = stripNode(raw)!;
    expect(JSON.parse(JSON.stringify(n))).toEqual({
      metadata: {
        name: 'n1',
        uid: 'u1',
        resourceVersion: '42',
        creationTimestamp: '2026-01-01T00:00:00Z',
        labels: meta.labels,
        annotations: meta.annotations,
        ownerReferences: meta.ownerReferences,
      },
      spec: { taints: [{ key: 'k', effect: 'NoSchedule' }], unschedulable: true },
      status: { conditions: [{ type: 'Ready', status: 'True' }] },
    });
  });

  it('node with its kubelet endpoint (--second-opinion): the InternalIP entries and the port, nothing more', () => {
    const raw = {
      metadata: { name: 'n1' },
      status: {
        conditions: [{ type: 'Ready', status: 'True' }],
        addresses: [
          { type: 'Hostname', address: 'n1' },
          { type: 'InternalIP', address: '10.0.0.1' },
          { type: 'ExternalIP', address: '203.0.113.9' },
          { type: 'InternalIP', address: 'fd00::1' },
          null,
        ],
        daemonEndpoints: { kubeletEndpoint: { Port: 10250 }, other: 1 },
        images: [{ names: ['x'] }],
      },
    };
    const n = stripNodeWithKubelet(raw)!;
    expect(n.status).toEqual({
      conditions: [{ type: 'Ready', status: 'True' }],
      addresses: [
        { type: 'InternalIP', address: '10.0.0.1' },
        { type: 'InternalIP', address: 'fd00::1' },
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
    });
    // Junk where the endpoint should be: kept out, never a throw (kubeletTargetOf judges what is kept).
    for (const status of [
      null,
      { addresses: 'x', daemonEndpoints: 7 },
      { daemonEndpoints: { kubeletEndpoint: null } },
    ]) {
      const j = stripNodeWithKubelet({ metadata: { name: 'n' }, status })!;
      expect(j.status?.addresses).toBeUndefined();
      expect(j.status?.daemonEndpoints).toBeUndefined();
    }
    expect(stripNodeWithKubelet({ metadata: {} })).toBeUndefined();
  });

  it('lease: metadata basics and spec, no annotations or managedFields', () => {
    const spec = { holderIdentity: 'n1', leaseDurationSeconds: 40, renewTime: '2026-01-01T00:00:00.000000Z' };
    const l = stripLease({ kind: 'Lease', metadata: { ...meta, namespace: 'kube-node-lease' }, spec })!;
    expect(l.spec).toEqual(spec);
    expect(l.metadata.namespace).toBe('kube-node-lease');
    expect(l.metadata.ownerReferences).toEqual(meta.ownerReferences);
    expect(JSON.stringify(l)).not.toMatch(/managedFields|annotations|generation|"kind":"Lease"/);
  });

  it('pod: nodeName, tolerations, phase, conditions; no containers or annotations', () => {
    const p = stripPod({
      metadata: { ...meta, namespace: 'default' },
      spec: { nodeName: 'n1', containers: [{ name: 'c', image: 'x' }], tolerations: [{ key: 't' }] },
      status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }], containerStatuses: [{}] },
    })!;
    expect(JSON.parse(JSON.stringify(p.spec))).toEqual({ nodeName: 'n1', tolerations: [{ key: 't' }] });
    expect(p.status).toEqual({ phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] });
    expect(JSON.stringify(p)).not.toMatch(/containers|containerStatuses|annotations/);
  });

  it('returns undefined for objects without metadata.name, never throws', () => {
    for (const f of [stripLease, stripNode, stripPod, stripToMeta]) {
      expect(f(null)).toBeUndefined();
      expect(f(42)).toBeUndefined();
      expect(f({})).toBeUndefined();
      expect(f({ metadata: { name: 7 } })).toBeUndefined();
      expect(f({ metadata: { name: 'x' }, spec: null, status: null })).toBeDefined();
    }
  });
});
