/**
 * Watch ingest benchmark: lease watch events per second through the real parse + watcher + store
 * path (Reflector over a synthetic in-memory watch stream), against a bare JSON.parse loop over the
 * same lines in the same process; and memory per stored lease and per stored node.
 *
 * Run (from the repo root, Node 24):
 *   node --expose-gc --experimental-transform-types --no-warnings --import ./bench/ts-hooks.mjs bench/watch-ingest.ts
 * Options: --runs=N (default 5), --rounds=R renewals per lease (default 5), --quick (10k only, 3 runs).
 */
import { StringDecoder } from 'node:string_decoder';
import { Observable } from 'rxjs';
import { monotonicScheduler } from '../src/clock/clock.js';
import type { KubeObject, Lease, List, Node } from '../src/kube/types.js';
import { Reflector } from '../src/watch/reflector.js';
import { stripLease, stripNode } from '../src/watch/strip.js';
import type { ListRequest, StripFn, WatchRequest, WatchTransport } from '../src/watch/types.js';

const args = new Map(
  process.argv.slice(2).map((a) => {
    const [k, v] = a.replace(/^--/, '').split('=');
    return [k!, v ?? 'true'] as const;
  }),
);
const quick = args.has('quick');
const RUNS = Number(args.get('runs') ?? (quick ? 3 : 5));
const ROUNDS = Number(args.get('rounds') ?? 5);
const SIZES = quick ? [10_000] : [10_000, 100_000];
const CHUNK_BYTES = 64 * 1024;

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  console.error('run node with --expose-gc');
  process.exit(1);
}
function fullGc(): void {
  for (let i = 0; i < 3; i++) gc!();
}

// ------------------------------------------------------------------ synthetic wire data

function uid(i: number, salt: number): string {
  const h = ((i + 1) * 2654435761 + salt * 40503) >>> 0;
  const x = h.toString(16).padStart(8, '0');
  return `${x}-${x.slice(0, 4)}-4${x.slice(1, 4)}-a${x.slice(2, 5)}-${x}${x.slice(0, 4)}`;
}

/** A lease watch line shaped like kube-apiserver's (managedFields included). */
function leaseLine(type: string, i: number, rv: number, renewMs: number): string {
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
function nodeObject(i: number, rv: number): unknown {
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
function toChunks(lines: string[]): Buffer[] {
  const all = Buffer.from(lines.map((l) => `${l}\n`).join(''), 'utf8');
  const chunks: Buffer[] = [];
  for (let off = 0; off < all.length; off += CHUNK_BYTES) chunks.push(all.subarray(off, off + CHUNK_BYTES));
  return chunks;
}

// ------------------------------------------------------------------ the path under test

/**
 * A transport whose list is empty and whose watch pushes every chunk synchronously on subscribe,
 * decoding each Buffer to text inside the timed loop (what setEncoding('utf8') does for real).
 */
function memoryTransport(chunks: Buffer[], timing: { ms: number }): WatchTransport {
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

async function ingest<T extends KubeObject>(
  chunks: Buffer[],
  strip: StripFn<T>,
  resource: string,
): Promise<{ ms: number; reflector: Reflector<T> }> {
  const timing = { ms: -1 };
  const reflector = new Reflector<T>({
    resource,
    transport: memoryTransport(chunks, timing),
    scheduler: monotonicScheduler,
    strip,
  });
  reflector.start();
  await reflector.whenSynced();
  while (timing.ms < 0) await new Promise((r) => setImmediate(r));
  return { ms: timing.ms, reflector };
}

/** Bare JSON.parse over the same lines (pre-split strings, one round at a time); returns ms. */
function bareParse(rounds: Buffer[]): number {
  let ms = 0;
  let sink = 0;
  for (const round of rounds) {
    const lines = round.toString('utf8').split('\n');
    lines.pop();
    const t0 = performance.now();
    for (let i = 0; i < lines.length; i++) {
      const ev = JSON.parse(lines[i]!) as { object: { metadata: { name: string } } };
      sink += ev.object.metadata.name.length;
    }
    ms += performance.now() - t0;
  }
  if (sink === 0) throw new Error('unreachable');
  return ms;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

interface Row {
  leases: number;
  events: number;
  bytesPerEvent: number;
  pathRate: number;
  parseRate: number;
  ratio: number;
  pathRuns: number[];
}

async function throughput(n: number): Promise<Row> {
  let rv = 2;
  let events = 0;
  let bytes = 0;
  const t0 = Date.parse('2026-11-30T10:00:00Z');
  const rounds: Buffer[] = [];
  for (let r = 0; r <= ROUNDS; r++) {
    const lines: string[] = [];
    for (let i = 0; i < n; i++)
      lines.push(leaseLine(r === 0 ? 'ADDED' : 'MODIFIED', i, rv++, t0 + r * 10_000 + i));
    rounds.push(Buffer.from(lines.map((l) => `${l}\n`).join(''), 'utf8'));
    events += lines.length;
  }
  const all = Buffer.concat(rounds);
  bytes = all.length;
  const chunks: Buffer[] = [];
  for (let off = 0; off < all.length; off += CHUNK_BYTES) chunks.push(all.subarray(off, off + CHUNK_BYTES));
  const pathRates: number[] = [];
  const parseRates: number[] = [];
  // Warm-up (JIT) on the same data, not measured.
  (await ingest(chunks, stripLease, 'leases')).reflector.dispose();
  bareParse(rounds);
  let reflector: Reflector<Lease> | undefined;
  for (let run = 0; run < RUNS; run++) {
    fullGc();
    const res = await ingest<Lease>(chunks, stripLease, 'leases');
    const ms = res.ms;
    reflector = res.reflector;
    if (reflector.store.size !== n) throw new Error(`store has ${reflector.store.size}, want ${n}`);
    const first = reflector.store.get(`kube-node-lease/sim-zone-a-${'0'.repeat(6)}`);
    if (first?.metadata.resourceVersion !== String(2 + ROUNDS * n)) throw new Error('store missed updates');
    reflector.dispose();
    reflector = undefined;
    pathRates.push(events / (ms / 1000));
    fullGc();
    parseRates.push(events / (bareParse(rounds) / 1000));
  }
  const pathRate = median(pathRates);
  const parseRate = median(parseRates);
  return {
    leases: n,
    events,
    bytesPerEvent: bytes / events,
    pathRate,
    parseRate,
    ratio: pathRate / parseRate,
    pathRuns: pathRates,
  };
}

/**
 * Heap growth per stored object after GC. Only a number leaves this function: an async caller
 * holding the reflector in a promise or frame slot would keep it alive into the next measurement.
 */
async function heapPerObject<T extends KubeObject>(
  chunks: Buffer[],
  n: number,
  strip: StripFn<T>,
  resource: string,
): Promise<number> {
  fullGc();
  const before = process.memoryUsage().heapUsed;
  const { reflector } = await ingest<T>(chunks, strip, resource);
  fullGc();
  const after = process.memoryUsage().heapUsed;
  if (reflector.store.size !== n) throw new Error('store incomplete');
  reflector.dispose();
  return (after - before) / n;
}

async function memoryPer<T extends KubeObject>(
  n: number,
  makeLine: (i: number) => string,
  strip: StripFn<T>,
  resource: string,
): Promise<{ bytes: number; runs: number[]; lineBytes: number }> {
  const lines = Array.from({ length: n }, (_, i) => makeLine(i));
  const chunks = toChunks(lines);
  const lineBytes = chunks.reduce((a, c) => a + c.length, 0) / n;
  lines.length = 0;
  const runs: number[] = [];
  for (let run = 0; run < Math.max(3, Math.min(RUNS, 5)); run++)
    runs.push(await heapPerObject(chunks, n, strip, resource));
  return { bytes: median(runs), runs, lineBytes };
}

async function main(): Promise<void> {
  console.log(`node ${process.version}, ${RUNS} runs, ${ROUNDS} renewal rounds after the ADDED round`);
  const rows: Row[] = [];
  for (const n of SIZES) {
    const row = await throughput(n);
    rows.push(row);
    console.log(
      `${fmt(n)} leases, ${fmt(row.events)} events (${Math.round(row.bytesPerEvent)} B/line): ` +
        `path ${fmt(row.pathRate)}/s, bare JSON.parse ${fmt(row.parseRate)}/s, ratio ${row.ratio.toFixed(2)} ` +
        `(runs: ${row.pathRuns.map(fmt).join(', ')})`,
    );
  }
  const memN = quick ? 10_000 : 100_000;
  const leaseMem = await memoryPer<Lease>(
    memN,
    (i) => leaseLine('ADDED', i, i + 2, 1_780_000_000_000 + i),
    stripLease,
    'leases',
  );
  console.log(
    `memory per stored lease: ${Math.round(leaseMem.bytes)} B (wire ${Math.round(leaseMem.lineBytes)} B; runs ${leaseMem.runs.map((b) => Math.round(b)).join(', ')})`,
  );
  const nodeN = quick ? 2_000 : 10_000;
  const nodeMem = await memoryPer<Node>(
    nodeN,
    (i) => JSON.stringify({ type: 'ADDED', object: nodeObject(i, i + 2) }),
    stripNode,
    'nodes',
  );
  console.log(
    `memory per stored node: ${Math.round(nodeMem.bytes)} B (wire ${Math.round(nodeMem.lineBytes)} B; runs ${nodeMem.runs.map((b) => Math.round(b)).join(', ')})`,
  );

  console.log('\nMarkdown:\n');
  console.log('| leases | events | path events/s (median) | bare JSON.parse lines/s | path / bare |');
  console.log('|---:|---:|---:|---:|---:|');
  for (const r of rows) {
    console.log(
      `| ${fmt(r.leases)} | ${fmt(r.events)} | ${fmt(r.pathRate)} | ${fmt(r.parseRate)} | ${r.ratio.toFixed(2)} |`,
    );
  }
  console.log('');
  console.log('| stored object | count | heap per object (median) | wire size per object |');
  console.log('|---|---:|---:|---:|');
  console.log(
    `| Lease (stripLease) | ${fmt(memN)} | ${fmt(leaseMem.bytes)} B | ${fmt(leaseMem.lineBytes)} B |`,
  );
  console.log(`| Node (stripNode) | ${fmt(nodeN)} | ${fmt(nodeMem.bytes)} B | ${fmt(nodeMem.lineBytes)} B |`);
}

await main();
