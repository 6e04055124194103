/**
 * Ingest benchmark of the decision path, without an API server: a synthetic lease watch stream
 * for N nodes renewing every 10 s, fed through the real watch layer (Reflector: parse, strip,
 * store) AND the real decision code (NodeHealthTracker: renewal detection, deadline heap), as the
 * controller wires them.
 *
 *   A. throughput ceiling on one core: events/s through watch + store + tracker, as fast as possible,
 *      next to watch + store alone and a bare JSON.parse loop over the same lines;
 *   B. memory per node: heap held by the node store, the lease store and the tracker, per node;
 *   C. deadline precision under that load, in real time: N nodes renewing every 10 s (N/10 events/s),
 *      50 of them stop; ONE timer armed at the earliest deadline (as the controller does) reports
 *      how late after its deadline each silent node was found.
 *
 * Run (from the repo root, Node 24):
 *   node --expose-gc --experimental-transform-types --no-warnings --import ./bench/ts-hooks.mjs bench/ingest-decisions.ts
 * Options: --sizes=10000,50000,100000  --runs=3  --realtime-seconds=40  --grace-seconds=15  --sections=A,B,C
 *          --json=FILE (also write the figures as a results record, bench/results.ts)
 * The image runs Node.js with flags (the Dockerfile's ENTRYPOINT) that change these figures: put
 * them before --expose-gc to measure what the image does.
 */
import { Observable, type Subscription } from 'rxjs';
import { monotonicScheduler } from '../src/clock/clock.js';
import { NodeHealthTracker } from '../src/health/tracker.js';
import { parseSkippingManagedFields } from '../src/kube/json.js';
import type { Lease, Node } from '../src/kube/types.js';
import { Reflector } from '../src/watch/reflector.js';
import { Store } from '../src/watch/store.js';
import { stripLease, stripNode } from '../src/watch/strip.js';
import type { WatchTransport } from '../src/watch/types.js';
import type { DecisionsRecord } from './records.js';
import { jsonOption, recorder, writeResults } from './results.js';
import { leaseLine, memoryTransport, nodeObject, toChunks } from './synthetic.js';

const args = new Map(
  process.argv.slice(2).map((a) => {
    const [k, v] = a.replace(/^--/, '').split('=');
    return [k!, v ?? 'true'] as const;
  }),
);
const SIZES = (args.get('sizes') ?? '10000,50000,100000').split(',').map(Number);
const RUNS = Number(args.get('runs') ?? 3);
const ROUNDS = 3;
const REALTIME_S = Number(args.get('realtime-seconds') ?? 40);
const GRACE_MS = Number(args.get('grace-seconds') ?? 15) * 1000;
const STOPPED = 50;
const SECTIONS = new Set((args.get('sections') ?? 'A,B,C').split(','));
/** --full-parse: JSON.parse every line whole (the watch path before managedFields was skipped). */
const PARSE = args.has('full-parse') ? JSON.parse : parseSkippingManagedFields;
const JSON_FILE = jsonOption();
const record = recorder('ingest-decisions');

const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) {
  console.error('run node with --expose-gc');
  process.exit(1);
}
const fullGc = () => {
  for (let i = 0; i < 3; i++) gc!();
};
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};
const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

/** Stripped nodes the tracker knows (a node without a Node object is never scheduled). */
function nodes(n: number): Node[] {
  const out: Node[] = [];
  for (let i = 0; i < n; i++) out.push(stripNode(nodeObject(i, i + 1))!);
  return out;
}

function leaseRounds(n: number, rounds: number): Buffer[] {
  const t0 = Date.parse('2026-11-30T10:00:00Z');
  let rv = 10;
  const lines: string[] = [];
  for (let r = 0; r <= rounds; r++) {
    for (let i = 0; i < n; i++)
      lines.push(leaseLine(r === 0 ? 'ADDED' : 'MODIFIED', i, rv++, t0 + r * 10_000 + i));
  }
  return toChunks(lines);
}

/** Feeds the chunks through a Reflector; with `tracker`, every lease also goes through the decision code. */
async function run(
  chunks: Buffer[],
  tracker: NodeHealthTracker | undefined,
): Promise<{ ms: number; events: number }> {
  const timing = { ms: -1 };
  const reflector = new Reflector<Lease>({
    resource: 'leases',
    transport: memoryTransport(chunks, timing),
    scheduler: monotonicScheduler,
    strip: stripLease,
    parse: PARSE, // as watchNodeLeases wires it
  });
  let events = 0;
  let sub: Subscription | undefined;
  if (tracker) {
    sub = reflector.events$.subscribe((ev) => {
      if (ev.type !== 'Apply' && ev.type !== 'InitApply') return;
      events++;
      tracker.observeLease(ev.object, monotonicScheduler.now());
      // What the controller does after each observation: look at the earliest deadline.
      tracker.nextDeadline();
    });
  } else {
    sub = reflector.events$.subscribe((ev) => {
      if (ev.type === 'Apply' || ev.type === 'InitApply') events++;
    });
  }
  reflector.start();
  await reflector.whenSynced();
  while (timing.ms < 0) await new Promise((r) => setImmediate(r));
  sub.unsubscribe();
  reflector.dispose();
  return { ms: timing.ms, events };
}

function bare(chunks: Buffer[]): number {
  const lines = Buffer.concat(chunks).toString('utf8').split('\n');
  lines.pop();
  let sink = 0;
  const t0 = performance.now();
  for (const l of lines)
    sink += (JSON.parse(l) as { object: { metadata: { name: string } } }).object.metadata.name.length;
  const ms = performance.now() - t0;
  if (sink === 0) throw new Error('unreachable');
  return (lines.length / ms) * 1000;
}

async function throughput(n: number) {
  const ns = nodes(n);
  const chunks = leaseRounds(n, ROUNDS);
  const withDecisions: number[] = [];
  const watchOnly: number[] = [];
  const parse: number[] = [];
  await run(leaseRounds(Math.min(n, 5000), 1), undefined); // warm-up
  for (let r = 0; r < RUNS; r++) {
    fullGc();
    const tracker = new NodeHealthTracker({ grace: { monitorGraceMs: 50_000, startupGraceMs: 60_000 } });
    const now = monotonicScheduler.now();
    for (const node of ns) tracker.observeNode(node, now);
    const a = await run(chunks, tracker);
    withDecisions.push((a.events / a.ms) * 1000);
    if (tracker.stats().nodes !== n) throw new Error('tracker lost nodes');
    fullGc();
    const b = await run(chunks, undefined);
    watchOnly.push((b.events / b.ms) * 1000);
    parse.push(bare(chunks));
  }
  return {
    n,
    events: n * (ROUNDS + 1),
    withDecisions: median(withDecisions),
    watchOnly: median(watchOnly),
    parse: median(parse),
  };
}

async function memoryPerNode(n: number): Promise<number> {
  const leaseChunks = leaseRounds(n, 0);
  fullGc();
  const before = process.memoryUsage().heapUsed;
  const ns = nodes(n);
  const nodeStore = new Store<Node>();
  for (const node of ns) nodeStore.upsert(node);
  const tracker = new NodeHealthTracker();
  const now = monotonicScheduler.now();
  for (const node of ns) tracker.observeNode(node, now);
  const timing = { ms: -1 };
  const leases = new Reflector<Lease>({
    resource: 'leases',
    transport: memoryTransport(leaseChunks, timing),
    scheduler: monotonicScheduler,
    strip: stripLease,
    parse: PARSE, // as watchNodeLeases wires it
  });
  const sub = leases.events$.subscribe((ev) => {
    if (ev.type === 'InitApply' || ev.type === 'Apply')
      tracker.observeLease(ev.object, monotonicScheduler.now());
  });
  leases.start();
  await leases.whenSynced();
  while (timing.ms < 0) await new Promise((r) => setImmediate(r));
  ns.length = 0;
  fullGc();
  const after = process.memoryUsage().heapUsed;
  if (nodeStore.size !== n || leases.store.size !== n || tracker.stats().nodes !== n)
    throw new Error('lost objects');
  sub.unsubscribe();
  leases.dispose();
  return (after - before) / n;
}

/**
 * Real time: N nodes renew every 10 s (spread evenly), streamed in 50 ms batches through the watch
 * layer and the tracker; STOPPED nodes stop renewing at t = 10 s. One timer, re-armed at the
 * earliest deadline after each batch, pops due nodes; lateness = found - deadline.
 */
async function precision(n: number) {
  const ns = nodes(n);
  const tracker = new NodeHealthTracker({
    grace: { monitorGraceMs: GRACE_MS, startupGraceMs: GRACE_MS * 2 },
  });
  const start = monotonicScheduler.now();
  for (const node of ns) tracker.observeNode(node, start);
  ns.length = 0;
  const stopped = new Set<number>();
  for (let k = 0; k < STOPPED; k++) stopped.add(Math.floor((k * n) / STOPPED));
  const lateness: number[] = [];
  let timer: Subscription | undefined;
  let armedAt: number | undefined;
  const arm = () => {
    const next = tracker.nextDeadline();
    if (next === armedAt) return;
    timer?.unsubscribe();
    armedAt = next;
    if (next === undefined) return;
    timer = monotonicScheduler.schedule(
      () => {
        armedAt = undefined;
        const now = monotonicScheduler.now();
        for (const name of tracker.popDue(now)) {
          const d = tracker.health(name)?.deadline;
          if (d !== undefined) lateness.push(now - d);
        }
        arm();
      },
      Math.max(0, next - monotonicScheduler.now()),
    );
  };
  let emitted = 0;
  const wallT0 = Date.parse('2026-11-30T10:00:00Z');
  const transport: WatchTransport = {
    list: async () => ({ metadata: { resourceVersion: '1' }, items: [] }),
    watch: async () =>
      new Observable<string>((sub) => {
        const batchMs = 50;
        let cursor = 0;
        let rv = 10;
        const tick = setInterval(() => {
          const elapsed = monotonicScheduler.now() - start;
          if (elapsed > REALTIME_S * 1000) {
            clearInterval(tick);
            return;
          }
          const until = Math.floor(((elapsed + batchMs) / 10_000) * n);
          let text = '';
          for (; cursor < until; cursor++) {
            const i = cursor % n;
            if (elapsed > 10_000 && stopped.has(i)) continue;
            text += `${leaseLine('MODIFIED', i, rv++, wallT0 + cursor * (10_000 / n))}\n`;
            emitted++;
          }
          if (text) sub.next(text);
        }, batchMs);
        return () => clearInterval(tick);
      }),
  };
  const reflector = new Reflector<Lease>({
    resource: 'leases',
    transport,
    scheduler: monotonicScheduler,
    strip: stripLease,
    parse: PARSE, // as watchNodeLeases wires it
  });
  const s = reflector.events$.subscribe((ev) => {
    if (ev.type === 'Apply' || ev.type === 'InitApply')
      tracker.observeLease(ev.object, monotonicScheduler.now());
  });
  // Re-arm after each batch (the controller re-arms after each event; the heap makes it cheap).
  const rearm = setInterval(arm, 10);
  const elu0 = performance.eventLoopUtilization();
  reflector.start();
  await new Promise((r) => setTimeout(r, REALTIME_S * 1000 + 500));
  const elu = performance.eventLoopUtilization(elu0).utilization;
  clearInterval(rearm);
  timer?.unsubscribe();
  s.unsubscribe();
  reflector.dispose();
  return {
    n,
    eventsPerSecond: emitted / REALTIME_S,
    found: lateness.length,
    p50: lateness.length ? pct(lateness, 50) : Number.NaN,
    p99: lateness.length ? pct(lateness, 99) : Number.NaN,
    max: lateness.length ? Math.max(...lateness) : Number.NaN,
    elu,
  };
}

console.log(
  `node ${process.version}; sizes ${SIZES.join(', ')}; ${RUNS} runs; ${ROUNDS + 1} events per lease; parse: ${PARSE === JSON.parse ? 'whole line' : 'managedFields skipped'}`,
);
const results: Pick<DecisionsRecord, 'throughput' | 'heapPerNode' | 'precision'> = {
  throughput: [],
  heapPerNode: [],
  precision: [],
};
const r1 = (x: number) => Math.round(x * 10) / 10;
if (SECTIONS.has('A')) {
  console.log('\n### A. Throughput ceiling (one core)\n');
  console.log(
    '| nodes | events | watch + store + tracker events/s | watch + store events/s | bare JSON.parse lines/s | decisions / bare |',
  );
  console.log('|---:|---:|---:|---:|---:|---:|');
  for (const n of SIZES) {
    const r = await throughput(n);
    results.throughput.push({
      nodes: n,
      events: r.events,
      decisionsEventsPerS: Math.round(r.withDecisions),
      watchStoreEventsPerS: Math.round(r.watchOnly),
      bareParseLinesPerS: Math.round(r.parse),
      ratio: Math.round((r.withDecisions / r.parse) * 100) / 100,
    });
    console.log(
      `| ${fmt(n)} | ${fmt(r.events)} | ${fmt(r.withDecisions)} | ${fmt(r.watchOnly)} | ${fmt(r.parse)} | ${(r.withDecisions / r.parse).toFixed(2)} |`,
    );
  }
}
if (SECTIONS.has('B')) {
  console.log('\n### B. Memory per node (node store + lease store + tracker, heap after GC)\n');
  console.log('| nodes | heap per node |');
  console.log('|---:|---:|');
  for (const n of SIZES) {
    const bytes = await memoryPerNode(n);
    results.heapPerNode.push({ nodes: n, bytes: Math.round(bytes) });
    console.log(`| ${fmt(n)} | ${fmt(bytes)} B |`);
  }
}
if (SECTIONS.has('C')) {
  console.log(
    `\n### C. Deadline precision in real time (${REALTIME_S} s, renew 10 s, grace ${GRACE_MS / 1000} s, ${STOPPED} nodes stop at t=10 s)\n`,
  );
  console.log(
    '| nodes | lease events/s | silent nodes found | lateness p50 | p99 | max | event-loop utilization |',
  );
  console.log('|---:|---:|---:|---:|---:|---:|---:|');
  for (const n of SIZES) {
    fullGc();
    const r = await precision(n);
    results.precision.push({
      nodes: n,
      eventsPerS: Math.round(r.eventsPerSecond),
      found: r.found,
      stopped: STOPPED,
      latenessMs: { p50: r1(r.p50), p99: r1(r.p99), max: r1(r.max) },
      eventLoopUtilization: Math.round(r.elu * 100) / 100,
    });
    console.log(
      `| ${fmt(n)} | ${fmt(r.eventsPerSecond)} | ${r.found} / ${STOPPED} | ${r.p50.toFixed(1)} ms | ${r.p99.toFixed(1)} ms | ${r.max.toFixed(1)} ms | ${(r.elu * 100).toFixed(0)}% |`,
    );
  }
}
if (JSON_FILE) {
  writeResults(
    JSON_FILE,
    record({
      options: {
        sizes: SIZES,
        runs: RUNS,
        eventsPerLease: ROUNDS + 1,
        sections: [...SECTIONS],
        realtimeSeconds: REALTIME_S,
        graceMs: GRACE_MS,
        parse: PARSE === JSON.parse ? 'whole line' : 'managedFields skipped',
      },
      ...results,
    }) satisfies DecisionsRecord,
  );
  console.log(`\nresults: ${JSON_FILE}`);
}
process.exit(0);
