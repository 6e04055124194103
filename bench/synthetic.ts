/**
 * Synthetic kube-apiserver watch data for the benchmarks: lease and node objects shaped like the
 * real ones (managedFields included), and the stream as a socket delivers it.
 */
import { StringDecoder } from 'node:string_decoder';
import { Observable } from 'rxjs';
import type { List } from '../src/kube/types.js';
import type { ListRequest, WatchRequest, WatchTransport } from '../src/watch/types.js';

export const CHUNK_BYTES = 64 * 1024;

export function uid(i: number, salt: number): string {
  const h = ((i + 1) * 2654435761 + salt * 40503) >>> 0;
  const x = h.toString(16).padStart(8, '0');
  return `${x}-${x.slice(0, 4)}-4${x.slice(1, 4)}-a${x.slice(2, 5)}-${x}${x.slice(0, 4)}`;
}

/** A lease watch line shaped like kube-apiserver's (managedFields included). */
export function leaseLine(type: string, i: number, rv: number, renewMs: number): string {
  const name = `sim-zone-${'abc'[i % 3]}-${String(i).padStart(6, '0')}`;
  const nodeUid = uid(i, 1);
  const obj = {
    kind: 'Lease',
    apiVersion: 'coordination.k8s.io/v1',
    metadata: {
      name,
      namespace: 'kube-node-lease',
      uid: uid(i, 2),
      resourceVersion: String(rv),
      creationTimestamp: '2026-11-30T09:00:00Z',
      ownerReferences: [{ apiVersion: 'v1', kind: 'Node', name, uid: nodeUid }],
      managedFields: [
        {
          manager: 'kubelet',
          operation: 'Update',
          apiVersion: 'coordination.k8s.io/v1',
          time: new Date(renewMs).toISOString().replace(/\.\d+Z$/, 'Z'),
          fieldsType: 'FieldsV1',
          fieldsV1: {
            'f:metadata': { 'f:ownerReferences': { '.': {}, [`k:{"uid":"${nodeUid}"}`]: {} } },
            'f:spec': { 'f:holderIdentity': {}, 'f:leaseDurationSeconds': {}, 'f:renewTime': {} },
          },
        },
      ],
    },
    spec: {
      holderIdentity: name,
      leaseDurationSeconds: 40,
      renewTime: `${new Date(renewMs).toISOString().slice(0, 23)}123Z`,
    },
  };
  return JSON.stringify({ type, object: obj });
}

/** A realistic Node (what a kubelet posts: images, nodeInfo, addresses, capacity...). */
export function nodeObject(i: number, rv: number): unknown {
  const name = `sim-zone-${'abc'[i % 3]}-${String(i).padStart(6, '0')}`;
  const t = '2026-11-30T09:00:00Z';
  const cond = (type: string, status: string, reason: string, message: string) => ({
    type,
    status,
    lastHeartbeatTime: t,
    lastTransitionTime: t,
    reason,
    message,
  });
  return {
    kind: 'Node',
    apiVersion: 'v1',
    metadata: {
      name,
      uid: uid(i, 3),
      resourceVersion: String(rv),
      creationTimestamp: t,
      labels: {
        'beta.kubernetes.io/arch': 'amd64',
        'beta.kubernetes.io/os': 'linux',
        'kubernetes.io/arch': 'amd64',
        'kubernetes.io/hostname': name,
        'kubernetes.io/os': 'linux',
        'node.kubernetes.io/instance-type': 'm6i.xlarge',
        'topology.kubernetes.io/region': 'region-1',
        'topology.kubernetes.io/zone': `zone-${'abc'[i % 3]}`,
        'node-pool': 'general',
      },
      annotations: {
        'node.alpha.kubernetes.io/ttl': '0',
        'volumes.kubernetes.io/controller-managed-attach-detach': 'true',
        'csi.volume.kubernetes.io/nodeid': `{"ebs.csi.aws.com":"i-${uid(i, 4).slice(0, 17)}"}`,
      },
      managedFields: [
        {
          manager: 'kubelet',
          operation: 'Update',
          apiVersion: 'v1',
          time: t,
          fieldsType: 'FieldsV1',
          fieldsV1: { 'f:status': { 'f:conditions': {}, 'f:images': {}, 'f:nodeInfo': {} } },
        },
        {
          manager: 'kube-controller-manager',
          operation: 'Update',
          apiVersion: 'v1',
          time: t,
          fieldsType: 'FieldsV1',
          fieldsV1: { 'f:metadata': { 'f:annotations': { 'f:node.alpha.kubernetes.io/ttl': {} } } },
        },
      ],
    },
    spec: {
      podCIDR: `10.${i >> 8}.${i & 255}.0/24`,
      podCIDRs: [`10.${i >> 8}.${i & 255}.0/24`],
      providerID: `aws:///zone/i-${i}`,
    },
    status: {
      capacity: {
        cpu: '4',
        'ephemeral-storage': '104845292Ki',
        'hugepages-2Mi': '0',
        memory: '16093508Ki',
        pods: '110',
      },
      allocatable: {
        cpu: '3920m',
        'ephemeral-storage': '95551679124',
        'hugepages-2Mi': '0',
        memory: '15076676Ki',
        pods: '110',
      },
      conditions: [
        cond(
          'MemoryPressure',
          'False',
          'KubeletHasSufficientMemory',
          'kubelet has sufficient memory available',
        ),
        cond('DiskPressure', 'False', 'KubeletHasNoDiskPressure', 'kubelet has no disk pressure'),
        cond('PIDPressure', 'False', 'KubeletHasSufficientPID', 'kubelet has sufficient PID available'),
        cond('Ready', 'True', 'KubeletReady', 'kubelet is posting ready status'),
      ],
      addresses: [
        { type: 'InternalIP', address: `10.0.${i >> 8}.${i & 255}` },
        { type: 'Hostname', address: name },
        { type: 'InternalDNS', address: `${name}.ec2.internal` },
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: 10250 } },
      nodeInfo: {
        machineID: uid(i, 5),
        systemUUID: uid(i, 6),
        bootID: uid(i, 7),
        kernelVersion: '6.1.112-122.189.amzn2023.x86_64',
        osImage: 'Amazon Linux 2023.6.20241031',
        containerRuntimeVersion: 'containerd://1.7.23',
        kubeletVersion: 'v1.37.2',
        kubeProxyVersion: '',
        operatingSystem: 'linux',
        architecture: 'amd64',
      },
      images: Array.from({ length: 12 }, (_, k) => ({
        names: [
          `registry.example.com/team/image-${k}@sha256:${uid(k, 8).replace(/-/g, '')}${uid(k, 9).replace(/-/g, '')}`,
          `registry.example.com/team/image-${k}:v1.${k}.0`,
        ],
        sizeBytes: 10_000_000 + k * 1_234_567,
      })),
    },
  };
}

/**
 * The stream as the socket would deliver it: 64 KiB Buffers cut anywhere (mid-line), kept outside
 * the JS heap so that a 500 MB synthetic stream does not distort garbage collection.
 */
export function toChunks(lines: string[]): Buffer[] {
  const all = Buffer.from(lines.map((l) => `${l}\n`).join(''), 'utf8');
  const chunks: Buffer[] = [];
  for (let off = 0; off < all.length; off += CHUNK_BYTES) chunks.push(all.subarray(off, off + CHUNK_BYTES));
  return chunks;
}

/**
 * A transport whose list is empty and whose watch pushes every chunk synchronously on subscribe,
 * decoding each Buffer to text inside the timed loop (what setEncoding('utf8') does for real).
 */
export function memoryTransport(chunks: Buffer[], timing: { ms: number }): WatchTransport {
  return {
    list: async (_req: ListRequest): Promise<List<unknown>> => ({
      metadata: { resourceVersion: '1' },
      items: [],
    }),
    watch: async (_req: WatchRequest): Promise<Observable<string>> =>
      new Observable<string>((sub) => {
        const decoder = new StringDecoder('utf8');
        const t0 = performance.now();
        for (let i = 0; i < chunks.length; i++) sub.next(decoder.write(chunks[i]!));
        timing.ms = performance.now() - t0;
      }),
  };
}
