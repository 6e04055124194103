/**
 * The published benchmark figures, generated from the committed results records: every block
 * between `<!-- figures:NAME:begin -->` and `<!-- figures:NAME:end -->` in README.md and
 * docs/benchmarks.md. Which records are published is bench/results/published.json (bench/fair-set.ts
 * writes it after a complete set); a figure without a record says "pending re-run" and names the
 * command that makes it. test/unit/figures.test.ts fails when a doc's block differs from this.
 *
 *   npx tsx bench/figures.ts            # print every block
 *   npx tsx bench/figures.ts --check    # exit 1 when a doc's block is not what the records give
 *   npx tsx bench/figures.ts --write    # rewrite the blocks in README.md and docs/benchmarks.md
 *   npx tsx bench/figures.ts --preview DIR   # the side-by-side tables of a set folder, published
 *                                            # or not, complete or not (problems listed)
 *
 * Side by side: per fleet size, medians (min-max) of the runs of each controller; latency
 * percentiles pooled over every failed node of every run (nearest rank), with the count behind
 * them; ours / kcm is the ratio of the two medians (or pooled values). A published set must hold at
 * least MIN_RUNS runs of each controller per size in alternating order, the same options in every
 * run, at least MIN_FAILURES failures behind each pooled percentile, and ours built from one clean
 * commit; otherwise generating fails.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ControllerName } from './compare/controllers.js';
import type { CompareRecord } from './compare/record.js';
import { percentile } from './compare/stats.js';
import { ratio } from './compare/table.js';
import { DEFAULT_SET, describePlan, formatMinutes, MASS_LOSS, type Part, plan } from './published.js';
import type {
  DecisionsRecord,
  HandoverRecord,
  ReplicasRecord,
  SteadyRecord,
  WatchIngestRecord,
} from './records.js';
import { REPO_ROOT, RESULTS_DIR, type RecordHeader } from './results.js';

export const MIN_RUNS = 5;
export const MIN_FAILURES = 100;
/** The docs that carry generated blocks, relative to the repository root. */
export const DOCS = ['README.md', 'docs/benchmarks.md'] as const;
export const PUBLISHED_FILE = 'published.json';
/** The one command that makes every published record. */
export const SET_COMMAND = 'npm run bench:fair-set';

/**
 * bench/results/published.json: for each part, what the docs show, as paths under bench/results:
 * set folders for "side-by-side" (every side-by-side record in them), records for the others.
 */
export type Published = Partial<Record<Part, string[]>>;

// ------------------------------------------------------------------ numbers

/** A figure for a table: thousands separated from 1,000, whole from 100, else 3 significant digits. */
export function num(v: number | undefined | null): string {
  if (v === undefined || v === null || !Number.isFinite(v)) return '-';
  const a = Math.abs(v);
  if (a >= 1000) return Math.round(v).toLocaleString('en-US');
  if (a >= 100) return String(Math.round(v));
  if (a >= 10) return String(Math.round(v * 10) / 10);
  return String(Math.round(v * 100) / 100);
}

export interface Spread {
  median: number;
  min: number;
  max: number;
  n: number;
}
export function spread(values: ReadonlyArray<number | null | undefined>): Spread {
  const v = values.filter((x): x is number => x !== null && x !== undefined && Number.isFinite(x));
  const s = [...v].sort((a, b) => a - b);
  return { median: percentile(s, 0.5), min: s[0] ?? Number.NaN, max: s.at(-1) ?? Number.NaN, n: s.length };
}
const spreadCell = (s: Spread) =>
  s.n === 0 ? '-' : s.min === s.max ? num(s.median) : `${num(s.median)} (${num(s.min)}-${num(s.max)})`;

export interface Pooled {
  p50: number;
  p99: number;
  max: number;
  n: number;
}
/** Nearest-rank percentiles over every value of every run. */
export function pooled(values: ReadonlyArray<number | null | undefined>): Pooled {
  const s = values
    .filter((x): x is number => x !== null && x !== undefined && Number.isFinite(x))
    .sort((a, b) => a - b);
  return { p50: percentile(s, 0.5), p99: percentile(s, 0.99), max: s.at(-1) ?? Number.NaN, n: s.length };
}

/** The 1-minute load average of a record's "load average: a, b, c". */
export function load1(text: string): number {
  const m = /load average:\s*([\d.]+)/.exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

// ------------------------------------------------------------------ reading records

export interface Loaded<T> {
  /** Path relative to the repository root. */
  file: string;
  record: T;
}

function readRecord<T extends RecordHeader>(root: string, rel: string, bench: string): Loaded<T> {
  const abs = path.join(root, rel);
  let record: T;
  try {
    record = JSON.parse(readFileSync(abs, 'utf8')) as T;
  } catch (err) {
    throw new Error(`${rel}: not a readable results record (${(err as Error).message})`);
  }
  if (record.bench !== bench)
    throw new Error(`${rel}: a "${record.bench}" record where "${bench}" was expected`);
  return { file: path.relative(REPO_ROOT, abs), record };
}

export function readPublished(root = RESULTS_DIR): Published {
  const file = path.join(root, PUBLISHED_FILE);
  if (!existsSync(file)) return {};
  return JSON.parse(readFileSync(file, 'utf8')) as Published;
}

/** Every side-by-side record in a set folder (relative to root), in file-name order; other records skipped. */
export function readSet(root: string, set: string): Loaded<CompareRecord>[] {
  const dir = path.join(root, set);
  if (!existsSync(dir)) throw new Error(`bench/results/${set}: no such set folder`);
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .filter(
      (f) =>
        (JSON.parse(readFileSync(path.join(dir, f), 'utf8')) as { bench?: string }).bench === 'side-by-side',
    )
    .map((f) => readRecord<CompareRecord>(root, path.join(set, f), 'side-by-side'));
}

// ------------------------------------------------------------------ side by side

export interface SideBySide {
  set: string;
  nodes: number;
  files: string[];
  /** Controllers in the order their runs started. */
  sequence: ControllerName[];
  kcm: CompareRecord[];
  ours: CompareRecord[];
  options: CompareRecord['options'];
  /** Why this is not a valid published comparison (empty when it is). */
  problems: string[];
}

/** Why a run order is not alternating in pairs (each pair both controllers, neither always first). */
export function orderProblems(sequence: readonly ControllerName[]): string[] {
  const problems: string[] = [];
  const firsts: ControllerName[] = [];
  for (let i = 0; i + 1 < sequence.length; i += 2) {
    if (sequence[i] === sequence[i + 1])
      problems.push(`runs ${i + 1} and ${i + 2} are both ${sequence[i]}: not alternating`);
    firsts.push(sequence[i]!);
  }
  if (firsts.length >= 2 && firsts.every((f) => f === firsts[0]))
    problems.push(`${firsts[0]} went first in every pair of runs`);
  return problems;
}

const OPTION_KEYS: Array<keyof CompareRecord['options']> = [
  'zones',
  'pods',
  'fail',
  'waves',
  'simulator',
  'preclean',
  'recover',
  'graceMs',
  'startupGraceMs',
  'renewMs',
  'steadyMs',
  'qps',
  'burst',
];

export function sideBySide(set: string, loaded: ReadonlyArray<Loaded<CompareRecord>>): SideBySide[] {
  const bySize = new Map<number, Loaded<CompareRecord>[]>();
  for (const l of loaded)
    bySize.set(l.record.options.nodes, [...(bySize.get(l.record.options.nodes) ?? []), l]);
  return [...bySize.entries()]
    .sort((a, b) => a[0] - b[0])
    .map(([nodes, group]) => {
      const runs = [...group].sort((a, b) => a.record.startedAt.localeCompare(b.record.startedAt));
      const records = runs.map((l) => l.record);
      const kcm = records.filter((r) => r.controller === 'kcm');
      const ours = records.filter((r) => r.controller === 'ours');
      const problems: string[] = [];
      for (const [c, rs] of [
        ['kcm', kcm],
        ['ours', ours],
      ] as const) {
        if (rs.length < MIN_RUNS) problems.push(`${c}: ${rs.length} runs, fewer than ${MIN_RUNS}`);
        const failures = rs.flatMap((r) => r.failures).filter((f) => f.overheadMs !== null).length;
        if (failures < MIN_FAILURES)
          problems.push(`${c}: ${failures} detected failures, fewer than ${MIN_FAILURES} behind the p99`);
      }
      const sequence = records.map((r) => r.controller);
      problems.push(...orderProblems(sequence));
      const first = records[0]!.options;
      for (const k of OPTION_KEYS) {
        const values = new Set(records.map((r) => String(r.options[k])));
        if (values.size > 1) problems.push(`option ${k} differs between runs: ${[...values].join(', ')}`);
      }
      const commits = new Set(ours.map((r) => r.environment.commit));
      if (commits.size > 1) problems.push(`ours ran on several commits: ${[...commits].join(', ')}`);
      for (const c of commits)
        if (c.includes('uncommitted')) problems.push(`ours ran with uncommitted changes (${c})`);
      return {
        set,
        nodes,
        files: runs.map((l) => l.file),
        sequence,
        kcm,
        ours,
        options: first,
        problems,
      };
    });
}

type Cell = { value: number | undefined; text: string };
interface SbsRow {
  label: string;
  /** The figure moves with the client rate limit (marked †). */
  qps?: boolean;
  /** No ours / kcm ratio (conditions of the run, sums). */
  noRatio?: boolean;
  cell: (runs: CompareRecord[]) => Cell;
}

const perRun = (f: (r: CompareRecord) => number | null | undefined) => (runs: CompareRecord[]) => {
  const s = spread(runs.map(f));
  return { value: s.n ? s.median : undefined, text: spreadCell(s) };
};
const pooledCell =
  (f: (r: CompareRecord) => Array<number | null>, which: 'p50' | 'p99' | 'max') =>
  (runs: CompareRecord[]) => {
    const p = pooled(runs.flatMap(f));
    return { value: p.n ? p[which] : undefined, text: p.n ? `${num(p[which])} (n=${p.n})` : '-' };
  };
const overheads = (r: CompareRecord) => r.failures.map((f) => f.overheadMs);
/** A run's worst wave: failure to that wave's last NoExecute taint (seconds); undefined if one is missing. */
export function lastTaintS(r: CompareRecord): number | undefined {
  let worst = 0;
  for (const f of r.failures) {
    if (f.taintAfterFailMs === null) return undefined;
    worst = Math.max(worst, f.taintAfterFailMs / 1000);
  }
  return r.failures.length ? worst : undefined;
}
const pct = (part: number, whole: number) => (whole > 0 ? (100 * part) / whole : Number.NaN);

export const SBS_ROWS: SbsRow[] = [
  { label: 'detection overhead p50, pooled (ms)', cell: pooledCell(overheads, 'p50') },
  { label: 'detection overhead p99, pooled (ms)', cell: pooledCell(overheads, 'p99') },
  { label: 'detection overhead max (ms)', cell: pooledCell(overheads, 'max') },
  {
    label: 'Unknown to NoExecute taint p50, pooled (ms)',
    cell: pooledCell((r) => r.failures.map((f) => f.taintAfterUnknownMs), 'p50'),
  },
  { label: 'failure to the last NoExecute taint of a wave, worst wave (s)', cell: perRun(lastTaintS) },
  {
    label: 'Unknown to pod Ready=False p99, pooled (ms)',
    cell: pooledCell((r) => r.failures.flatMap((f) => f.podsNotReadyAfterUnknownMs), 'p99'),
  },
  {
    label: 'Ready=True to taints removed p99, pooled (ms)',
    cell: pooledCell((r) => r.failures.map((f) => f.taintsRemovedAfterReadyMs), 'p99'),
  },
  {
    label: 'start to first correct decision (s)',
    cell: perRun((r) => (r.firstDecisionMs === null ? null : r.firstDecisionMs / 1000)),
  },
  {
    label: 'start to converged: last start-up write (s)',
    qps: true,
    cell: perRun((r) => (r.convergedAfterMs === null ? null : r.convergedAfterMs / 1000)),
  },
  { label: 'API writes until converged', cell: perRun((r) => r.startupWrites) },
  { label: 'controller CPU, whole run (s)', qps: true, cell: perRun((r) => r.cpuSeconds) },
  { label: 'controller CPU per renewal, steady (µs)', cell: perRun((r) => r.steady.cpuMicrosPerRenewal) },
  {
    label: 'controller CPU, steady (% of a core)',
    cell: perRun((r) => pct(r.steady.controllerCpuSeconds, r.steady.seconds)),
  },
  { label: 'peak RSS (MiB)', qps: true, cell: perRun((r) => r.peakRssMiB) },
  { label: 'API writes per failed node', cell: perRun((r) => r.writes.perFailedNode) },
  {
    label: 'API writes to never-failed nodes (+ their pods, events)',
    cell: perRun((r) => r.writes.onHealthyNodes),
  },
  {
    label: 'kube-apiserver CPU, steady (% of a core)',
    cell: perRun((r) => pct(r.steady.apiserverCpuSeconds, r.steady.seconds)),
  },
  {
    label: 'machine CPU busy, steady (% of all CPUs)',
    noRatio: true,
    cell: perRun((r) => r.machineCpu.steady?.busyPct),
  },
  {
    label: 'load average (1 min) at the start of the run',
    noRatio: true,
    cell: perRun((r) => load1(r.load.start)),
  },
  {
    label: 'false positives / missed Unknown, taint, pods (all runs)',
    noRatio: true,
    cell: (runs) => {
      const sum = (f: (r: CompareRecord) => number) => runs.reduce((s, r) => s + f(r), 0);
      return {
        value: undefined,
        text: `${sum((r) => r.falsePositives.length)} / ${sum((r) => r.missed.unknown)}, ${sum((r) => r.missed.taint)}, ${sum((r) => r.missed.pods)}`,
      };
    },
  },
];

const nodesLabel = (n: number) => `${n.toLocaleString('en-US')} nodes`;
const rateLimit = (o: CompareRecord['options']) => `\`--kube-api-qps=${o.qps} --kube-api-burst=${o.burst}\``;
const kcmControllers = (g: SideBySide) =>
  g.kcm[0]?.args.find((a) => a.startsWith('--controllers='))?.slice('--controllers='.length) ?? '?';
/** The files of a group as one glob when they share a folder and a name prefix. */
const filesOf = (g: SideBySide) => `\`bench/results/${g.set}/n${g.nodes}-*.json\` (${g.files.length} files)`;

export function sideBySideTable(g: SideBySide): string {
  const o = g.options;
  const ours0 = g.ours[0] ?? g.kcm[0]!;
  const loads = spread([...g.kcm, ...g.ours].map((r) => load1(r.load.start)));
  const head = [
    `**${nodesLabel(g.nodes)}**: ${g.kcm.length} runs of kube-controller-manager (\`--controllers=${kcmControllers(g)}\`) and ${g.ours.length} of ours, each on a fresh local control plane and fleet, in the order ${g.sequence.join(', ')}; both at ${rateLimit(o)}.`,
    `Per run ${o.fail} nodes failed x ${o.waves} waves (+ a canary at start-up), grace ${o.graceMs / 1000} s, steady window ${o.steadyMs / 1000} s, ${o.pods} pods per node, simulator ${o.simulator}; Kubernetes ${ours0.software.k8s}, ours at ${ours0.environment.commit} on Node.js ${ours0.environment.node}; ${ours0.environment.nproc} CPUs (${ours0.environment.cpuModel}), load average at the start of a run ${spreadCell(loads)}. Records: ${filesOf(g)}.`,
  ];
  const lines = ['| metric | kcm | ours | ours / kcm |', '| --- | --- | --- | --- |'];
  for (const row of SBS_ROWS) {
    const k = row.cell(g.kcm);
    const u = row.cell(g.ours);
    lines.push(
      `| ${row.label}${row.qps ? ' †' : ''} | ${k.text} | ${u.text} | ${row.noRatio ? '-' : ratio(u.value, k.value)} |`,
    );
  }
  const notes = [...g.kcm, ...g.ours].flatMap((r) =>
    r.notes.filter((n) => !n.startsWith('peak RSS')).map((n) => `${r.controller}: ${n}`),
  );
  return [
    head.join('\n'),
    '',
    lines.join('\n'),
    '',
    `† moved by the client rate limit, here ${rateLimit(o)} for both (kube-controller-manager's default; ours' own default is 50/100).`,
    ...(notes.length ? ['', `Notes from the runs: ${notes.join('; ')}.`] : []),
    ...(g.problems.length ? ['', `**Not a valid published set:** ${g.problems.join('; ')}.`] : []),
  ].join('\n');
}

// ------------------------------------------------------------------ the other benches

const flagsOf = (r: RecordHeader) => {
  const f = r.environment.nodeFlags.filter(
    (x) => !['--expose-gc', '--experimental-transform-types', '--no-warnings'].includes(x),
  );
  return f.length ? `Node.js flags \`${f.join(' ')}\`` : 'no Node.js flags';
};
/** How busy the machine was: a figure taken at a load average above its CPU count is mostly the machine's. */
const loadNote = (r: RecordHeader) =>
  `measured at load average ${num(load1(r.load.start))} on ${r.environment.nproc} CPUs`;
const when = (r: RecordHeader) =>
  `${r.startedAt.slice(0, 10)}, ${r.environment.commit}, Node.js ${r.environment.node}, ${r.environment.nproc} CPUs (${r.environment.cpuModel}), ${r.load.start} at the start and ${r.load.end.replace('load average: ', '')} at the end`;
const source = (l: Loaded<RecordHeader>) =>
  `Command: \`${l.record.command}\`. Record: \`${l.file}\` (${when(l.record)}).`;

/** "a-b" of two or more figures, or the one figure. */
const range = (xs: number[]) => {
  const s = spread(xs);
  return s.min === s.max ? num(s.min) : `${num(s.min)}-${num(s.max)}`;
};

function watchIngestBlock(l: Loaded<WatchIngestRecord>): string {
  const r = l.record;
  return [
    `With ${flagsOf(r)}; medians of ${r.options.runs} runs after a warm-up.`,
    '',
    '| leases | path events/s | bare JSON.parse lines/s | path / bare |',
    '| ---: | ---: | ---: | ---: |',
    ...r.throughput.map(
      (t) =>
        `| ${num(t.leases)} | ${num(t.pathEventsPerS)} | ${num(t.bareParseLinesPerS)} | ${t.ratio.toFixed(2)} |`,
    ),
    '',
    '| stored object | count | heap per object | wire size per object |',
    '| --- | ---: | ---: | ---: |',
    ...r.memory.map(
      (m) => `| ${m.object} | ${num(m.count)} | ${num(m.heapBytes)} B | ${num(m.wireBytes)} B |`,
    ),
    '',
    source(l),
  ].join('\n');
}

function decisionsBlock(l: Loaded<DecisionsRecord>): string {
  const r = l.record;
  const out = [`With ${flagsOf(r)}.`, ''];
  if (r.throughput.length)
    out.push(
      '| nodes | watch + store + tracker events/s | watch + store events/s | bare JSON.parse lines/s | decisions / bare |',
      '| ---: | ---: | ---: | ---: | ---: |',
      ...r.throughput.map(
        (t) =>
          `| ${num(t.nodes)} | ${num(t.decisionsEventsPerS)} | ${num(t.watchStoreEventsPerS)} | ${num(t.bareParseLinesPerS)} | ${t.ratio.toFixed(2)} |`,
      ),
      '',
    );
  if (r.heapPerNode.length)
    out.push(
      '| nodes | heap per node (node + lease + tracker) |',
      '| ---: | ---: |',
      ...r.heapPerNode.map((h) => `| ${num(h.nodes)} | ${num(h.bytes)} B |`),
      '',
    );
  if (r.precision.length)
    out.push(
      '| nodes | lease events/s | silent nodes found | lateness p50 | p99 | max | event-loop utilization |',
      '| ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
      ...r.precision.map(
        (p) =>
          `| ${num(p.nodes)} | ${num(p.eventsPerS)} | ${p.found} / ${p.stopped} | ${num(p.latenessMs.p50)} ms | ${num(p.latenessMs.p99)} ms | ${num(p.latenessMs.max)} ms | ${Math.round(p.eventLoopUtilization * 100)}% |`,
      ),
      '',
    );
  out.push(source(l));
  return out.join('\n');
}

const medianOf = <T>(xs: T[], f: (x: T) => number) => spread(xs.map(f));

function steadyBlock(ls: Loaded<SteadyRecord>[]): string {
  const out: string[] = [];
  for (const l of ls) {
    const r = l.record;
    out.push(
      `**${nodesLabel(r.options.nodes)}**, ${r.options.rounds} rounds of ${r.options.windowMs / 1000} s, median (min-max):`,
      '',
      '| variant | CPU per renewal (µs) | CPU (% of a core) | wake-ups/s | peak RSS (MiB) |',
      '| --- | --- | --- | --- | --- |',
      ...r.variants.map(
        (v) =>
          `| ${v.name}: \`${v.command}\` | ${spreadCell(medianOf(v.rounds, (x) => x.cpuMicrosPerRenewal))} | ${spreadCell(medianOf(v.rounds, (x) => x.corePct))} | ${spreadCell(medianOf(v.rounds, (x) => x.wakeupsPerS))} | ${spreadCell(medianOf(v.rounds, (x) => x.peakRssMiB))} |`,
      ),
      '',
      source(l),
      '',
    );
  }
  return out.join('\n').trimEnd();
}

function handoverBlock(ls: Loaded<HandoverRecord>[]): string {
  const out = [
    '| from SIGTERM to (ms), median / p90 / max | ' +
      ls
        .map(
          (l) =>
            `${nodesLabel(l.record.options.nodes)}, ${l.record.options.replicas} replicas, ${l.record.rounds.length} rounds`,
        )
        .join(' | ') +
      ' |',
    `| --- | ${ls.map(() => '---:').join(' | ')} |`,
  ];
  const row = (label: string, f: (x: HandoverRecord['rounds'][number]) => number | null) => {
    const cells = ls.map((l) => {
      const v = l.record.rounds
        .map(f)
        .filter((x): x is number => x !== null)
        .sort((a, b) => a - b);
      return `${num(percentile(v, 0.5))} / ${num(percentile(v, 0.9))} / ${num(v.at(-1))}`;
    });
    out.push(`| ${label} | ${cells.join(' | ')} |`);
  };
  row("lock held by another replica (the bench's watch)", (x) => x.lockMovedMs);
  row('new leader logs "Started leading"', (x) => x.startedLeadingMs);
  row('old process exited (code 0)', (x) => x.oldExitedMs);
  out.push('', ...ls.map(source));
  return out.join('\n');
}

function replicasBlock(ls: Loaded<ReplicasRecord>[]): string {
  const out: string[] = [];
  for (const l of ls) {
    const r = l.record;
    const none = r.replicas.find((x) => x.name === 'no-election');
    const base = none ? spread(none.rounds.map((x) => x.cpuMicrosPerRenewal)).median : Number.NaN;
    out.push(
      `**${nodesLabel(r.options.nodes)}**, ${r.options.rounds} rounds of ${r.options.windowMs / 1000} s, the three at once, median (min-max):`,
      '',
      '| replica | CPU per renewal (µs) | / no election | CPU (% of a core) | peak RSS (MiB) |',
      '| --- | --- | --- | --- | --- |',
      ...r.replicas.map((x) => {
        const cpu = spread(x.rounds.map((y) => y.cpuMicrosPerRenewal));
        return `| ${x.name} | ${spreadCell(cpu)} | ${ratio(cpu.median, base)} | ${spreadCell(medianOf(x.rounds, (y) => y.corePct))} | ${spreadCell(medianOf(x.rounds, (y) => y.peakRssMiB))} |`;
      }),
      '',
      source(l),
      '',
    );
  }
  return out.join('\n').trimEnd();
}

/** Seconds from the failure until every lost node was marked (Unknown, NoSchedule, pods), worst node. */
export function allMarkedS(r: CompareRecord): number | undefined {
  let worst: number | undefined;
  for (const f of r.failures) {
    if (f.markedAfterFailMs === undefined || f.markedAfterFailMs === null) return undefined;
    worst = Math.max(worst ?? 0, f.markedAfterFailMs / 1000);
  }
  return worst;
}

/** kube-controller-manager's mass-loss run of the same case (nodes lost of nodes) as `r`. */
function kcmOfCase(ls: ReadonlyArray<Loaded<CompareRecord>>, r: CompareRecord): CompareRecord | undefined {
  return ls.find(
    (k) =>
      k.record.controller === 'kcm' &&
      k.record.options.fail === r.options.fail &&
      k.record.options.nodes === r.options.nodes,
  )?.record;
}

/** Ours at its shipped client rate limit (MASS_LOSS's first run of ours) in each mass-loss case. */
const OURS_DEFAULT_QPS = MASS_LOSS.runs.find((x) => x.controller === 'ours')!.qps;

/**
 * The headline of each mass-loss case: ours at its defaults, its overheads pooled, beside
 * kube-controller-manager's at its own (undefined without its run).
 */
function massLossHeadlines(ls: ReadonlyArray<Loaded<CompareRecord>>) {
  return ls
    .filter((l) => l.record.controller === 'ours' && l.record.options.qps === OURS_DEFAULT_QPS)
    .map((l) => {
      const kcm = kcmOfCase(ls, l.record);
      return {
        file: l.file,
        options: l.record.options,
        ours: pooled(overheads(l.record)),
        kcm: kcm ? pooled(overheads(kcm)) : undefined,
      };
    });
}

/**
 * The mass-loss runs, one row each, grouped by case: overhead percentiles over the run's lost
 * nodes (the observer's watch), time until every lost node is marked, CPU and peak RSS beside
 * kube-controller-manager's run of the same case.
 */
export function massLossBlock(ls: ReadonlyArray<Loaded<CompareRecord>>): string {
  const out = [
    '| lost at once | controller | client QPS / burst | overhead p50 / p99 / max (ms) | every lost node marked after (s) | Unknown to NoSchedule, max (ms) | Unknown to pods not ready, max (ms) | kube-apiserver per write p50 / p99 (ms) | CPU, whole run (s) | peak RSS (MiB) | CPU / RSS vs kcm |',
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const l of ls) {
    const r = l.record;
    const o = pooled(overheads(r));
    const max = (xs: Array<number | null | undefined>) => pooled(xs).max;
    const kcm = kcmOfCase(ls, r);
    const vs =
      r.controller === 'kcm' || !kcm
        ? '-'
        : `${ratio(r.cpuSeconds, kcm.cpuSeconds)} / ${ratio(r.peakRssMiB, kcm.peakRssMiB)}`;
    out.push(
      `| ${r.options.fail} of ${r.options.nodes.toLocaleString('en-US')} | ${r.controller === 'kcm' ? 'kube-controller-manager' : 'ours'} | ${r.options.qps} / ${r.options.burst} | ${num(o.p50)} / ${num(o.p99)} / ${num(o.max)} | ${num(allMarkedS(r))} | ${num(max(r.failures.map((f) => f.noScheduleAfterUnknownMs)))} | ${num(max(r.failures.flatMap((f) => f.podsNotReadyAfterUnknownMs)))} | ${num(r.writes.serverMs?.p50)} / ${num(r.writes.serverMs?.p99)} | ${num(r.cpuSeconds)} | ${num(r.peakRssMiB)} (${r.peakRssPhase ?? '-'}) | ${vs} |`,
    );
  }
  const first = ls[0]!.record;
  out.push(
    '',
    `Grace ${first.options.graceMs / 1000} s, ${first.options.zones} zones, ${first.options.pods} pods a node, one wave, one run each (${ls.map((l) => l.record.failures.length).join(', ')} failed nodes behind the percentiles); ${loadNote(first)}.`,
    `Records: ${ls.map((l) => `\`${l.file}\``).join(', ')}.`,
  );
  return out.join('\n');
}

// ------------------------------------------------------------------ blocks

export const pendingText = (part: Part) =>
  `Pending re-run: no published record yet. \`${SET_COMMAND} -- --parts ${part}\` makes it (see "How the figures are made" above).`;

interface Material {
  groups: SideBySide[];
  watchIngest?: Loaded<WatchIngestRecord>;
  decisions?: Loaded<DecisionsRecord>;
  steady: Loaded<SteadyRecord>[];
  handover: Loaded<HandoverRecord>[];
  replicas: Loaded<ReplicasRecord>[];
  massLoss: Loaded<CompareRecord>[];
}

export function loadMaterial(root = RESULTS_DIR, published = readPublished(root)): Material {
  const files = <T extends RecordHeader>(part: Part) =>
    (published[part] ?? []).map((f) => readRecord<T>(root, f, part));
  return {
    groups: (published['side-by-side'] ?? []).flatMap((set) => sideBySide(set, readSet(root, set))),
    watchIngest: files<WatchIngestRecord>('watch-ingest')[0],
    decisions: files<DecisionsRecord>('ingest-decisions')[0],
    steady: files<SteadyRecord>('steady-cost'),
    handover: files<HandoverRecord>('handover'),
    replicas: files<ReplicasRecord>('replicas-cost'),
    // Side-by-side records, one run each, kept apart from the side-by-side set.
    massLoss: (published['mass-loss'] ?? []).map((f) => readRecord<CompareRecord>(root, f, 'side-by-side')),
  };
}

const groupHeadline = (g: SideBySide) => {
  const p = (rs: CompareRecord[]) => pooled(rs.flatMap(overheads));
  const k = p(g.kcm);
  const u = p(g.ours);
  const med = (rs: CompareRecord[], f: (r: CompareRecord) => number | null) => spread(rs.map(f)).median;
  const cpuK = med(g.kcm, (r) => r.steady.cpuMicrosPerRenewal);
  const cpuU = med(g.ours, (r) => r.steady.cpuMicrosPerRenewal);
  const rssK = med(g.kcm, (r) => r.peakRssMiB);
  const rssU = med(g.ours, (r) => r.peakRssMiB);
  const convK = med(g.kcm, (r) => (r.convergedAfterMs === null ? null : r.convergedAfterMs / 1000));
  const convU = med(g.ours, (r) => (r.convergedAfterMs === null ? null : r.convergedAfterMs / 1000));
  return (
    `detection overhead p99 ${num(u.p99)} ms against kube-controller-manager's ${num(k.p99)} ms (pooled over ${u.n} and ${k.n} failed nodes), ` +
    `CPU per renewal ${ratio(cpuU, cpuK)} of its (${num(cpuU)} vs ${num(cpuK)} µs), ` +
    `peak RSS ${ratio(rssU, rssK)} (${num(rssU)} vs ${num(rssK)} MiB), ` +
    `converged ${num(convU)} s vs ${num(convK)} s after start`
  );
};

function summaryBlock(m: Material): string {
  const rows = ['| figure | today | command | results record |', '| --- | --- | --- | --- |'];
  const pending = (label: string, part: Part) =>
    rows.push(`| ${label} | pending re-run | \`${SET_COMMAND} -- --parts ${part}\` | - |`);
  if (m.groups.length === 0) pending('side by side with kube-controller-manager', 'side-by-side');
  for (const g of m.groups)
    rows.push(
      `| side by side, ${nodesLabel(g.nodes)}, ${g.kcm.length} + ${g.ours.length} runs, both at ${rateLimit(g.options)} | ${groupHeadline(g)} | \`${SET_COMMAND} -- --parts side-by-side\` | ${filesOf(g)} |`,
    );
  if (!m.watchIngest) pending('lease watch ingest, one core', 'watch-ingest');
  else {
    const r = m.watchIngest.record;
    rows.push(
      `| lease watch ingest, one core | ${r.throughput.map((t) => `${num(t.pathEventsPerS)} events/s at ${num(t.leases)} leases`).join(', ')} through watch + store (${flagsOf(r)}; ${loadNote(r)}) | \`${r.command}\` | \`${m.watchIngest.file}\` |`,
    );
  }
  if (!m.decisions) pending('ingest through the decision code', 'ingest-decisions');
  else {
    const r = m.decisions.record;
    const parts: string[] = [];
    if (r.throughput.length)
      parts.push(
        `${range(r.throughput.map((t) => t.decisionsEventsPerS))} events/s at ${range(r.throughput.map((t) => t.nodes))} nodes`,
      );
    if (r.heapPerNode.length) parts.push(`${range(r.heapPerNode.map((h) => h.bytes))} B of heap per node`);
    if (r.precision.length)
      parts.push(
        `a silent node found ${range(r.precision.map((p) => p.latenessMs.p99 ?? Number.NaN))} ms (p99) after its deadline`,
      );
    rows.push(
      `| ingest through the decision code, one core | ${parts.join('; ')} (${flagsOf(r)}; ${loadNote(r)}) | \`${r.command}\` | \`${m.decisions.file}\` |`,
    );
  }
  if (m.steady.length === 0) pending('steady-state cost', 'steady-cost');
  for (const l of m.steady) {
    const cells = l.record.variants.map(
      (v) =>
        `${v.name} ${num(spread(v.rounds.map((x) => x.cpuMicrosPerRenewal)).median)} µs per renewal, ${num(spread(v.rounds.map((x) => x.peakRssMiB)).median)} MiB peak`,
    );
    rows.push(
      `| steady-state cost, ${nodesLabel(l.record.options.nodes)} | ${cells.join('; ')} | \`${l.record.command}\` | \`${l.file}\` |`,
    );
  }
  if (m.handover.length === 0) pending('graceful leader handover', 'handover');
  for (const l of m.handover) {
    const v = l.record.rounds.map((x) => x.lockMovedMs).filter((x): x is number => x !== null);
    const s = spread(v);
    rows.push(
      `| graceful leader handover, ${nodesLabel(l.record.options.nodes)} | the lock moves ${num(s.median)} ms after SIGTERM (median of ${s.n} rounds, max ${num(s.max)}) | \`${l.record.command}\` | \`${l.file}\` |`,
    );
  }
  if (m.replicas.length === 0) pending("leader election's cost", 'replicas-cost');
  for (const l of m.replicas) {
    const cpu = (name: string) =>
      spread(l.record.replicas.find((x) => x.name === name)?.rounds.map((x) => x.cpuMicrosPerRenewal) ?? [])
        .median;
    rows.push(
      `| leader election's cost, ${nodesLabel(l.record.options.nodes)} | CPU per renewal: leader ${ratio(cpu('leader'), cpu('no-election'))}, standby ${ratio(cpu('standby'), cpu('no-election'))} of a replica without election | \`${l.record.command}\` | \`${l.file}\` |`,
    );
  }
  if (m.massLoss.length === 0) pending('mass loss', 'mass-loss');
  for (const { file, options: o, ours, kcm: k } of massLossHeadlines(m.massLoss)) {
    rows.push(
      `| mass loss, ${o.fail} of ${nodesLabel(o.nodes)} at once, ours at its defaults | marked ${num(ours.p50)} / ${num(ours.p99)} ms (p50 / p99) past the grace${k ? `; kube-controller-manager at its defaults ${num(k.p50)} / ${num(k.p99)} ms` : ''} | \`${SET_COMMAND} -- --parts mass-loss\` | \`${file}\` |`,
    );
  }
  return rows.join('\n');
}

function readmeBlock(m: Material): string {
  const items: string[] = [];
  if (m.groups.length === 0)
    items.push(
      'Side by side with upstream kube-controller-manager: **pending re-run**. The published set is 5 runs of each ' +
        'controller at 100 and 1,000 nodes in alternating order, both at the same client rate limit, ' +
        'kube-controller-manager with only its node-lifecycle-controller, p99 pooled over at least 100 failed nodes (`' +
        SET_COMMAND +
        '`). The earlier figures, from runs that controlled none of these, are in ' +
        '[docs/benchmarks-history.md](docs/benchmarks-history.md).',
    );
  else {
    const o = m.groups[0]!.options;
    items.push(
      `Side by side with upstream kube-controller-manager (only its node-lifecycle-controller), each on a fresh local control plane and simulated fleet, ${m.groups[0]!.ours.length} runs of each in alternating order, both at ${rateLimit(o)}: ` +
        m.groups.map((g) => `at ${nodesLabel(g.nodes)} ${groupHeadline(g)}`).join('; ') +
        '.',
    );
  }
  if (m.watchIngest) {
    const r = m.watchIngest.record;
    items.push(
      `Lease-event ingest on one core: ${r.throughput.map((t) => `${num(t.pathEventsPerS)} events/s at ${num(t.leases)} leases`).join(', ')} through watch + store (${flagsOf(r)}; ${loadNote(r)}).`,
    );
  } else items.push('Lease-event ingest on one core: pending re-run.');
  if (m.decisions?.record.throughput.length) {
    const r = m.decisions.record;
    items.push(
      `Through the decision code as well: ${range(r.throughput.map((t) => t.decisionsEventsPerS))} events/s at ${range(r.throughput.map((t) => t.nodes))} nodes` +
        (r.heapPerNode.length ? `, ${range(r.heapPerNode.map((h) => h.bytes))} B of heap per node` : '') +
        ` (${flagsOf(r)}; ${loadNote(r)}).`,
    );
  } else items.push('Ingest through the decision code: pending re-run.');
  items.push(
    m.steady.length
      ? `Steady-state cost against the runtime's floor (\`bench/steady-cost.ts\`): ${m.steady
          .map(
            (l) =>
              `${nodesLabel(l.record.options.nodes)} ${l.record.variants
                .map(
                  (v) =>
                    `${v.name} ${num(spread(v.rounds.map((x) => x.cpuMicrosPerRenewal)).median)} µs per renewal`,
                )
                .join(', ')}`,
          )
          .join('; ')}.`
      : "Steady-state cost against the runtime's floor (`bench/steady-cost.ts`): pending re-run.",
  );
  items.push(
    m.handover.length
      ? `Graceful leader handover (\`bench/handover.ts\`): the lock moves ${m.handover
          .map((l) => {
            const s = spread(l.record.rounds.map((x) => x.lockMovedMs));
            return `${num(s.median)} ms (median, max ${num(s.max)}) after SIGTERM at ${nodesLabel(l.record.options.nodes)}`;
          })
          .join(', ')}.`
      : 'Graceful leader handover (`bench/handover.ts`): pending re-run.',
  );
  items.push(
    m.replicas.length
      ? `Leader election's cost (\`bench/replicas-cost.ts\`): ${m.replicas
          .map((l) => {
            const cpu = (name: string) =>
              spread(
                l.record.replicas.find((x) => x.name === name)?.rounds.map((x) => x.cpuMicrosPerRenewal) ??
                  [],
              ).median;
            return `at ${nodesLabel(l.record.options.nodes)} the leader spends ${ratio(cpu('leader'), cpu('no-election'))} and the standby ${ratio(cpu('standby'), cpu('no-election'))} the CPU per renewal of a replica without election`;
          })
          .join('; ')}.`
      : "Leader election's cost (`bench/replicas-cost.ts`): pending re-run.",
  );
  const massOurs = massLossHeadlines(m.massLoss);
  items.push(
    massOurs.length
      ? `Many nodes lost at once, ours at its defaults and kube-controller-manager at its own: ${massOurs
          .map(
            ({ options: o, ours, kcm: k }) =>
              `${o.fail} of ${nodesLabel(o.nodes)} marked ${num(ours.p50)} / ${num(ours.p99)} ms (p50 / p99) past the grace${k ? ` (kube-controller-manager ${num(k.p50)} / ${num(k.p99)} ms)` : ''}`,
          )
          .join('; ')} ([docs/benchmarks.md](docs/benchmarks.md#mass-loss-many-nodes-lost-at-once)).`
      : 'Many nodes lost at once (`bench/compare/run.ts --wave-until marked`): pending re-run.',
  );
  return items.map((i) => `- ${i}`).join('\n');
}

/** What the one command runs with its defaults, and how long that should take (bench/published.ts). */
function setPlanBlock(): string {
  const steps = plan({ ...DEFAULT_SET, set: 'SET', raw: 'RAW' });
  const total = steps.reduce((a, s) => a + s.estimateS, 0);
  return [
    `With its defaults \`${SET_COMMAND}\` runs ${steps.length} steps, expected to take about ${formatMinutes(total)} on a quiet 2-CPU machine:`,
    '',
    ...describePlan(steps).map((l) => `- ${l}`),
  ].join('\n');
}

/** Every generated block by name. Throws when a published side-by-side set is not valid. */
export function generate(root = RESULTS_DIR, published = readPublished(root)): Map<string, string> {
  const m = loadMaterial(root, published);
  const invalid = m.groups.filter((g) => g.problems.length > 0);
  if (invalid.length > 0)
    throw new Error(
      invalid
        .map((g) => `${g.set}, ${nodesLabel(g.nodes)}: not a valid published set: ${g.problems.join('; ')}`)
        .join('\n'),
    );
  return new Map([
    ['summary', summaryBlock(m)],
    ['set-plan', setPlanBlock()],
    ['readme', readmeBlock(m)],
    [
      'side-by-side',
      m.groups.length ? m.groups.map(sideBySideTable).join('\n\n') : pendingText('side-by-side'),
    ],
    ['watch-ingest', m.watchIngest ? watchIngestBlock(m.watchIngest) : pendingText('watch-ingest')],
    ['ingest-decisions', m.decisions ? decisionsBlock(m.decisions) : pendingText('ingest-decisions')],
    ['steady-cost', m.steady.length ? steadyBlock(m.steady) : pendingText('steady-cost')],
    ['handover', m.handover.length ? handoverBlock(m.handover) : pendingText('handover')],
    ['replicas-cost', m.replicas.length ? replicasBlock(m.replicas) : pendingText('replicas-cost')],
    ['mass-loss', m.massLoss.length ? massLossBlock(m.massLoss) : pendingText('mass-loss')],
  ]);
}

// ------------------------------------------------------------------ markers in the docs

const BLOCK = /<!-- figures:([a-z-]+):begin -->\n([\s\S]*?)\n?<!-- figures:\1:end -->/g;

/** The generated blocks a document carries, by name (their text between the markers). */
export function blocksIn(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of text.matchAll(BLOCK)) {
    if (out.has(m[1]!)) throw new Error(`block ${m[1]} appears twice`);
    out.set(m[1]!, m[2]!);
  }
  return out;
}

/** `text` with each named block's content replaced; throws on a block name it does not know. */
export function replaceBlocks(text: string, blocks: ReadonlyMap<string, string>): string {
  return text.replace(BLOCK, (_all, name: string) => {
    const body = blocks.get(name);
    if (body === undefined) throw new Error(`unknown figures block "${name}"`);
    return `<!-- figures:${name}:begin -->\n${body}\n<!-- figures:${name}:end -->`;
  });
}

// ------------------------------------------------------------------ command line

/** The DOCS whose blocks differ from `blocks`; with write, rewrites them. */
export function syncDocs(blocks: ReadonlyMap<string, string>, write: boolean): string[] {
  const changed: string[] = [];
  for (const doc of DOCS) {
    const file = path.join(REPO_ROOT, doc);
    const text = readFileSync(file, 'utf8');
    const next = replaceBlocks(text, blocks);
    if (next === text) continue;
    changed.push(doc);
    if (write) writeFileSync(file, next);
  }
  return changed;
}

function main(argv: string[]): number {
  const previewAt = argv.indexOf('--preview');
  if (previewAt >= 0) {
    const dir = argv[previewAt + 1];
    if (!dir) throw new Error('--preview needs a set folder');
    const abs = path.resolve(dir);
    for (const g of sideBySide(path.basename(abs), readSet(path.dirname(abs), path.basename(abs))))
      console.log(`${sideBySideTable(g)}\n`);
    return 0;
  }
  const blocks = generate();
  if (argv.includes('--write')) {
    for (const doc of syncDocs(blocks, true)) console.log(`${doc}: figures rewritten`);
    return 0;
  }
  if (argv.includes('--check')) {
    const stale = syncDocs(blocks, false);
    for (const doc of stale)
      console.error(`${doc}: figures differ from bench/results (npx tsx bench/figures.ts --write)`);
    return stale.length > 0 ? 1 : 0;
  }
  for (const [name, body] of blocks) console.log(`<!-- figures:${name} -->\n${body}\n`);
  return 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(REPO_ROOT, 'bench', 'figures.ts')) {
  try {
    process.exitCode = main(process.argv.slice(2));
  } catch (err) {
    console.error(err instanceof Error ? err.message : String(err));
    process.exitCode = 1;
  }
}
