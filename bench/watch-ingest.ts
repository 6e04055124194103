/**
 * Watch ingest benchmark: lease watch events per second through the real parse + watcher + store
 * path (Reflector over a synthetic in-memory watch stream), against a bare JSON.parse loop over the
 * same lines in the same process; and memory per stored lease and per stored node.
 *
 * Run (from the repo root, Node 24):
 *   node --expose-gc --experimental-transform-types --no-warnings --import ./bench/ts-hooks.mjs bench/watch-ingest.ts
 * Options: --runs=N (default 5), --rounds=R renewals per lease (default 5), --quick (10k only, 3 runs),
 * --json=FILE (also write the figures as a results record, bench/results.ts).
 * The image runs Node.js with flags (the Dockerfile's ENTRYPOINT) that change these figures: put
 * them before --expose-gc to measure what the image does.
 */
import { monotonicScheduler } from '../src/clock/clock.js';
import { parseSkippingManagedFields } from '../src/kube/json.js';
import type { KubeObject, Lease, Node } from '../src/kube/types.js';
import { Reflector } from '../src/watch/reflector.js';
import { stripLease, stripNode } from '../src/watch/strip.js';
import type { StripFn } from '../src/watch/types.js';
import type { WatchIngestRecord } from './records.js';
import { jsonOption, recorder, writeResults } from './results.js';
import { CHUNK_BYTES, leaseLine, memoryTransport, nodeObject, toChunks } from './synthetic.js';

const args = new Map(
  process.argv.slice(2).map((a) => {
    const [k, v] = a.replace(/^--/, '').split('=');
    return [k!, v ?? 'true'] as const;
  }),
);
const quick = args.has('quick');
const RUNS = Number(args.get('runs') ?? (quick ? 3 : 5));
const ROUNDS = Number(args.get('rounds') ?? 5);
/** --full-parse: JSON.parse every line whole (the watch path before managedFields was skipped). */
const PARSE = args.has('full-parse') ? JSON.parse : parseSkippingManagedFields;
const SIZES = quick ? [10_000] : [10_000, 100_000];
const JSON_FILE = jsonOption();
const record = recorder('watch-ingest');

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  console.error('run node with --expose-gc');
  process.exit(1);
}
function fullGc(): void {
  for (let i = 0; i < 3; i++) gc!();
}

// ------------------------------------------------------------------ the path under test

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
    parse: PARSE,
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
  console.log(
    `node ${process.version}, ${RUNS} runs, ${ROUNDS} renewal rounds after the ADDED round; parse: ${PARSE === JSON.parse ? 'whole line' : 'managedFields skipped'}`,
  );
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
  if (JSON_FILE) {
    writeResults(
      JSON_FILE,
      record({
        options: {
          runs: RUNS,
          rounds: ROUNDS,
          parse: PARSE === JSON.parse ? 'whole line' : 'managedFields skipped',
        },
        throughput: rows.map((r) => ({
          leases: r.leases,
          events: r.events,
          bytesPerEvent: Math.round(r.bytesPerEvent),
          pathEventsPerS: Math.round(r.pathRate),
          bareParseLinesPerS: Math.round(r.parseRate),
          ratio: Math.round(r.ratio * 100) / 100,
          pathRuns: r.pathRuns.map((x) => Math.round(x)),
        })),
        memory: [
          {
            object: 'Lease',
            strip: 'stripLease',
            count: memN,
            heapBytes: Math.round(leaseMem.bytes),
            wireBytes: Math.round(leaseMem.lineBytes),
          },
          {
            object: 'Node',
            strip: 'stripNode',
            count: nodeN,
            heapBytes: Math.round(nodeMem.bytes),
            wireBytes: Math.round(nodeMem.lineBytes),
          },
        ],
      }) satisfies WatchIngestRecord,
    );
    console.log(`\nresults: ${JSON_FILE}`);
  }
}

await main();
