import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { microsBetween } from '../../bench/compare/audit.js';
import type { ControllerName } from '../../bench/compare/controllers.js';
import type { CompareRecord, FailureRecord } from '../../bench/compare/record.js';
import {
  blocksIn,
  DOCS,
  generate,
  MIN_FAILURES,
  MIN_RUNS,
  orderProblems,
  type Published,
  readSet,
  replaceBlocks,
  sideBySide,
  sideBySideTable,
} from '../../bench/figures.js';
import { controllerOfRun, DEFAULT_SET, PARTS } from '../../bench/published.js';
import { MAX_RESULTS_BYTES, recordText, scrubPaths, writeResults } from '../../bench/results.js';
import { REPO } from './manifests.support.js';

/**
 * Every benchmark figure README.md and docs/benchmarks.md publish sits in a generated block that
 * bench/figures.ts makes from the committed records in bench/results/ (bench/results/published.json
 * says which). These tests keep the docs equal to what the records give, and hold the rules a
 * published side-by-side set must meet: enough runs, in alternating order, one setting, enough
 * failures behind each pooled percentile.
 */

describe('the docs carry exactly the figures bench/figures.ts generates from bench/results', () => {
  const blocks = generate();
  const docs = DOCS.map((d) => ({ doc: d, found: blocksIn(readFileSync(join(REPO, d), 'utf8')) }));

  it.each(DOCS)('%s: each generated block is what the records give', (doc) => {
    const found = docs.find((d) => d.doc === doc)!.found;
    expect(found.size).toBeGreaterThan(0);
    for (const [name, body] of found) expect(body, `${doc}, block ${name}`).toBe(blocks.get(name));
  });

  it('every generated block is published somewhere, where the docs expect it', () => {
    const where = (doc: string) => [...docs.find((d) => d.doc === doc)!.found.keys()].sort();
    expect(where('README.md')).toEqual(['readme']);
    expect(where('docs/benchmarks.md')).toEqual([...blocks.keys()].filter((b) => b !== 'readme').sort());
  });
});

// ------------------------------------------------------------------ synthetic sets

const failure = (i: number, overheadMs: number): FailureRecord => ({
  node: `sim-${i}`,
  wave: `wave-${1 + (i % 2)}`,
  overheadMs,
  unknownAfterFailMs: 17_000,
  taintAfterUnknownMs: 30,
  taintAfterFailMs: 17_030 + 10_000 * (i % 4),
  podsNotReadyAfterUnknownMs: [12, 14],
  taintsRemovedAfterReadyMs: 20,
});

interface RunSpec {
  controller: ControllerName;
  overheads: number[];
  cpu?: number;
  qps?: number;
  commit?: string;
}

function record(spec: RunSpec, seq: number): CompareRecord {
  const start = new Date(Date.UTC(2026, 11, 2, 10, seq)).toISOString();
  return {
    bench: 'side-by-side',
    schema: 1,
    command: 'npx tsx bench/compare/run.ts',
    startedAt: start,
    endedAt: start,
    load: { start: 'load average: 0.50, 0.40, 0.30', end: 'load average: 0.60, 0.40, 0.30' },
    environment: {
      nproc: 2,
      cpuModel: 'Test CPU',
      memGiB: 8,
      node: 'v24.0.0',
      nodeFlags: [],
      commit: spec.commit ?? 'abc1234',
    },
    controller: spec.controller,
    version: spec.controller,
    args:
      spec.controller === 'kcm'
        ? ['kube-controller-manager', '--controllers=node-lifecycle-controller']
        : ['node'],
    options: {
      nodes: 100,
      zones: 3,
      pods: 2,
      fail: 12,
      waves: 2,
      simulator: 'fleet',
      preclean: false,
      recover: true,
      graceMs: 20_000,
      startupGraceMs: 60_000,
      renewMs: 10_000,
      steadyMs: 60_000,
      qps: spec.qps ?? 20,
      burst: 30,
    },
    software: { k8s: 'v1.37.2', etcd: 'v3.6.16', oursBuiltAt: start },
    machineCpu: { steady: { busyPct: 10, stealPct: 0 } },
    healthyAfterMs: 200,
    firstDecisionMs: 21_000,
    convergedAfterMs: 25_000,
    startupWrites: 100,
    cpuSeconds: 2,
    peakRssMiB: 80,
    peakRssPhase: 'start-up',
    steady: {
      seconds: 60,
      beats: 600,
      controllerCpuSeconds: 0.3,
      cpuMicrosPerRenewal: spec.cpu ?? 500,
      apiserverCpuSeconds: 3,
      simulatorCpuSeconds: 1,
      writes: 0,
    },
    writes: {
      total: 300,
      byKind: {},
      perFailedNode: 9,
      perFailedNodeByKind: {},
      unattributedInWaves: 0,
      onHealthyNodes: 84,
      canary: 9,
    },
    canary: failure(0, 10),
    failures: spec.overheads.map((o, i) => failure(i, o)),
    missed: { unknown: 0, taint: 0, pods: 0 },
    falsePositives: [],
    observerErrors: 0,
    simulatorRenewErrors: 0,
    notes: [],
  };
}

const roots: string[] = [];
afterAll(() => {
  for (const r of roots) rmSync(r, { recursive: true, force: true });
});

/** Writes the runs (in this order, one minute apart) as a set folder; returns the results root. */
function writeSet(runs: RunSpec[], set = 'test-set'): string {
  const root = mkdtempSync(join(tmpdir(), 'nlc-figures-'));
  roots.push(root);
  mkdirSync(join(root, set));
  for (const [i, spec] of runs.entries()) {
    const name = `n100-${String(i + 1).padStart(2, '0')}-${spec.controller}.json`;
    writeFileSync(join(root, set, name), JSON.stringify(record(spec, i)));
  }
  // A record of another bench in the same folder is not a side-by-side run.
  writeFileSync(join(root, set, 'set.json'), JSON.stringify({ bench: 'set' }));
  return root;
}

const range = <T>(n: number, f: (i: number) => T): T[] => Array.from({ length: n }, (_, i) => f(i));
/** 5 + 5 runs in the fair-set order, 24 failures each. */
function fairRuns(overheads: (c: ControllerName, run: number) => number[]): RunSpec[] {
  const oursCpu = [500, 2000, 490, 510, 505];
  let k = 0;
  return range(10, (i) => i + 1).map((i) => {
    const c = controllerOfRun(i);
    return { controller: c, overheads: overheads(c, i), cpu: c === 'kcm' ? 700 : oursCpu[k++] };
  });
}

describe('side by side: pooled percentiles and medians of runs', () => {
  it('the p99 is pooled over every failed node of every run, with the count behind it', () => {
    // ours: 24 failures per run at 1..24 ms, and one run with a 1,000 ms outlier. Pooled over 120:
    // nearest rank 119 is the second largest (24), not the outlier (the maximum) nor a per-run
    // figure; rank 60 (p50) is 13, as four 1s and five of each other value come before it.
    const root = writeSet(
      fairRuns((c, run) =>
        c === 'kcm'
          ? range(24, (i) => 2000 + 100 * i)
          : range(24, (i) => (run === 4 && i === 0 ? 1000 : i + 1)),
      ),
    );
    const [g] = sideBySide('test-set', readSet(root, 'test-set'));
    expect(g!.problems).toEqual([]);
    const table = sideBySideTable(g!);
    expect(table).toContain('| detection overhead p99, pooled (ms) | 4,300 (n=120) | 24 (n=120) | 0.0056x |');
    expect(table).toContain('| detection overhead max (ms) | 4,300 (n=120) | 1,000 (n=120) | 0.23x |');
    expect(table).toContain('| detection overhead p50, pooled (ms) | 3,100 (n=120) | 13 (n=120) |');
  });

  it('other figures are the median (min-max) of the runs, and the rate limit is shown where it moves one', () => {
    const root = writeSet(fairRuns((c) => range(24, (i) => (c === 'kcm' ? 3000 : 10) + i)));
    const [g] = sideBySide('test-set', readSet(root, 'test-set'));
    const table = sideBySideTable(g!);
    // ours' CPU per renewal over its five runs: 500, 2000, 490, 510, 505.
    expect(table).toContain('| controller CPU per renewal, steady (µs) | 700 | 505 (490-2,000) | 0.72x |');
    expect(table).toContain('| peak RSS (MiB) † |');
    expect(table).toContain('| start to converged: last start-up write (s) † |');
    expect(table).toContain('both at `--kube-api-qps=20 --kube-api-burst=30`');
    expect(table).toContain('`--controllers=node-lifecycle-controller`');
    expect(table).toContain('in the order ours, kcm, kcm, ours, ours, kcm, kcm, ours, ours, kcm');
  });
});

describe('side by side: what a published set must be', () => {
  const ok = (c: ControllerName) => range(24, (i) => (c === 'kcm' ? 3000 : 10) + i);

  it("the fair set's own order passes, and the order rule catches the unfair ones", () => {
    const fair = range(2 * DEFAULT_SET.runs, (i) => controllerOfRun(i + 1));
    expect(fair).toEqual(['ours', 'kcm', 'kcm', 'ours', 'ours', 'kcm', 'kcm', 'ours', 'ours', 'kcm']);
    expect(orderProblems(fair)).toEqual([]);
    expect(orderProblems(['kcm', 'ours', 'kcm', 'ours', 'kcm', 'ours'])).toEqual([
      'kcm went first in every pair of runs',
    ]);
    expect(orderProblems(['ours', 'ours', 'kcm', 'kcm'])).toEqual([
      'runs 1 and 2 are both ours: not alternating',
      'runs 3 and 4 are both kcm: not alternating',
    ]);
  });

  it(`fewer than ${MIN_RUNS} runs, or fewer than ${MIN_FAILURES} failures behind a p99, is not publishable`, () => {
    const runs = fairRuns(ok).slice(0, 8); // 4 of each
    const [few] = sideBySide('s', readSet(writeSet(runs), 'test-set'));
    expect(few!.problems).toContain(`kcm: 4 runs, fewer than ${MIN_RUNS}`);
    expect(few!.problems).toContain(`ours: 96 detected failures, fewer than ${MIN_FAILURES} behind the p99`);
  });

  it('runs with different rate limits, several commits or uncommitted changes are not one set', () => {
    const runs = fairRuns(ok);
    runs[1] = { ...runs[1]!, qps: 50 };
    runs[3] = { ...runs[3]!, commit: 'def5678 (uncommitted changes in tree)' };
    const [g] = sideBySide('s', readSet(writeSet(runs), 'test-set'));
    expect(g!.problems).toContain('option qps differs between runs: 20, 50');
    expect(g!.problems).toContain(
      'ours ran on several commits: abc1234, def5678 (uncommitted changes in tree)',
    );
    expect(g!.problems).toContain(
      'ours ran with uncommitted changes (def5678 (uncommitted changes in tree))',
    );
  });

  it('generating refuses a published set that is not valid, and publishes a valid one', () => {
    const bad = writeSet(fairRuns(ok).slice(0, 8));
    const published: Published = { 'side-by-side': ['test-set'] };
    expect(() => generate(bad, published)).toThrow(/not a valid published set: kcm: 4 runs/);
    const good = writeSet(fairRuns(ok));
    const blocks = generate(good, published);
    expect(blocks.get('side-by-side')).toContain('**100 nodes**: 5 runs of kube-controller-manager');
    expect(blocks.get('summary')).not.toMatch(/side by side.*pending re-run/);
    expect(blocks.get('readme')).toContain('at 100 nodes detection overhead p99 33 ms');
  });

  it('without records every figure says "pending re-run" and names the command that makes it', () => {
    const root = mkdtempSync(join(tmpdir(), 'nlc-figures-'));
    roots.push(root);
    const blocks = generate(root, {});
    for (const name of PARTS)
      expect(blocks.get(name), name).toMatch(
        /^Pending re-run: .*`npm run bench:fair-set -- --parts [a-z-]+`/,
      );
    expect(blocks.get('summary')!.match(/\| pending re-run \|/g)).toHaveLength(PARTS.length);
  });
});

describe('mass loss: one row a run, beside kube-controller-manager', () => {
  it('renders each run with its pooled overheads, the time every lost node was marked and its CPU and RSS against kcm', () => {
    const root = mkdtempSync(join(tmpdir(), 'nlc-figures-'));
    roots.push(root);
    mkdirSync(join(root, 'set', 'mass-loss'), { recursive: true });
    const write = (
      name: string,
      spec: RunSpec,
      marked: (i: number) => number | null,
      cpu: number,
      rss: number,
    ) => {
      const r = record(spec, 0);
      r.options = { ...r.options, nodes: 1000, fail: 300, waves: 1, zones: 5, waveUntil: 'marked' };
      r.options.burst = r.options.qps === 50 ? 100 : 30;
      r.failures = r.failures.map((f, i) => ({
        ...f,
        markedAfterFailMs: marked(i),
        noScheduleAfterUnknownMs: 100 + i,
      }));
      r.cpuSeconds = cpu;
      r.peakRssMiB = rss;
      r.peakRssPhase = 'wave-1 failed';
      r.writes = { ...r.writes, serverMs: { n: 1500, p50: 4.5, p90: 12, p99: 31, max: 80, min: 1, mean: 6 } };
      writeFileSync(join(root, 'set', 'mass-loss', name), JSON.stringify(r));
      return join('set', 'mass-loss', name);
    };
    const files = [
      write(
        'ours.json',
        { controller: 'ours', overheads: range(300, (i) => i), qps: 50 },
        (i) => 20_000 + i,
        6,
        100,
      ),
      write(
        'kcm.json',
        { controller: 'kcm', overheads: range(300, (i) => 10 * i), qps: 20 },
        (i) => 40_000 + i,
        15,
        125,
      ),
    ];
    const blocks = generate(root, { 'mass-loss': files });
    const block = blocks.get('mass-loss')!;
    // p50 / p99 / max over the run's 300 overheads; worst marked 20.299 s; 6/15 CPU, 100/125 RSS.
    expect(block).toContain(
      '| 300 of 1,000 | ours | 50 / 100 | 149 / 296 / 299 | 20.3 | 399 | 14 | 4.5 / 31 | 6 | 100 (wave-1 failed) | 0.4x / 0.8x |',
    );
    expect(block).toContain(
      '| 300 of 1,000 | kube-controller-manager | 20 / 30 | 1,490 / 2,960 / 2,990 | 40.3 |',
    );
    expect(blocks.get('summary')).toContain(
      'mass loss, 300 of 1,000 nodes at once, ours at its defaults | marked 149 / 296 ms',
    );
    expect(blocks.get('summary')).toContain('kube-controller-manager at its defaults 1,490 / 2,960 ms');
    expect(blocks.get('readme')).toContain(
      '300 of 1,000 nodes marked 149 / 296 ms (p50 / p99) past the grace (kube-controller-manager 1,490 / 2,960 ms)',
    );
    // A node never marked: no time for the run.
    files.push(
      write(
        'ours-20.json',
        { controller: 'ours', overheads: [1, 2], qps: 20 },
        (i) => (i === 1 ? null : 1),
        1,
        1,
      ),
    );
    expect(generate(root, { 'mass-loss': files }).get('mass-loss')).toMatch(
      /\| ours \| 20 \/ 30 \| [^|]+\| - \|/,
    );
  });
});

describe("kube-apiserver's time for a write, from its audit log", () => {
  it('is stageTimestamp - requestReceivedTimestamp to the microsecond, across a second and an offset', () => {
    expect(microsBetween('2026-12-07T04:50:01.999950Z', '2026-12-07T04:50:02.004450Z')).toBe(4.5);
    expect(microsBetween('2026-12-07T04:50:01Z', '2026-12-07T04:50:01.0312Z')).toBe(31.2);
    expect(microsBetween('2026-12-07T05:50:01.000000+01:00', '2026-12-07T04:50:01.002000Z')).toBe(2);
    expect(microsBetween('', '2026-12-07T04:50:01Z')).toBeUndefined();
    expect(microsBetween('2026-12-07T04:50:01Z', 'not a time')).toBeUndefined();
  });
});

describe('generated blocks in a document', () => {
  it('finds and replaces only what lies between its markers', () => {
    const doc = 'before\n<!-- figures:readme:begin -->\nold\n<!-- figures:readme:end -->\nafter\n';
    expect(blocksIn(doc)).toEqual(new Map([['readme', 'old']]));
    expect(replaceBlocks(doc, new Map([['readme', 'new']]))).toBe(
      'before\n<!-- figures:readme:begin -->\nnew\n<!-- figures:readme:end -->\nafter\n',
    );
    expect(() => replaceBlocks(doc, new Map())).toThrow('unknown figures block "readme"');
  });
});

describe('results records hold no machine paths and stay small', () => {
  const dir = mkdtempSync(join(tmpdir(), 'nlc-results-'));
  roots.push(dir);

  it('a record naming a temporary or checkout path is refused, and nothing is written', () => {
    const file = join(dir, 'a.json');
    expect(() => writeResults(file, { out: join(tmpdir(), 'nlc-compare', 'x') })).toThrow(
      /names machine paths/,
    );
    expect(() => writeResults(file, { entry: join(REPO, 'dist', 'controller.mjs') })).toThrow(
      /names machine paths/,
    );
    expect(() => readFileSync(file)).toThrow();
  });

  it('paths in messages are rewritten as public names', () => {
    expect(
      scrubPaths(`log ${join(REPO, 'bench', 'x.ts')} and ${join(tmpdir(), 'run-1', 'kcm.log')} end`),
    ).toBe('log bench/x.ts and kcm.log end');
  });

  it(`a record over ${MAX_RESULTS_BYTES} bytes is refused`, () => {
    const file = join(dir, 'big.json');
    expect(() => writeResults(file, { raw: 'x'.repeat(MAX_RESULTS_BYTES) })).toThrow(
      /a results file is a summary/,
    );
    writeResults(file, { raw: 'x'.repeat(100) });
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ raw: 'x'.repeat(100) });
  });

  it('a record keeps each object of an array (one failed node) on one line, and reads back the same', () => {
    const failures = Array.from({ length: 300 }, (_, i) => ({
      node: `sim-zone-a-${String(i).padStart(4, '0')}`,
      wave: 'wave-1',
      overheadMs: 1234.5,
      unknownAfterFailMs: null,
      podsNotReadyAfterUnknownMs: [5637.1, null],
    }));
    const record = { bench: 'side-by-side', canary: { node: 'c', at: [1, 2] }, failures, tags: ['a', 'b'] };
    const text = recordText(record);
    expect(JSON.parse(text)).toEqual(record);
    const lines = text.split('\n');
    expect(lines.filter((l) => l.includes('"node":"sim-zone-a-'))).toHaveLength(300);
    expect(lines).toContain(
      '  {"node":"sim-zone-a-0007","wave":"wave-1","overheadMs":1234.5,"unknownAfterFailMs":null,"podsNotReadyAfterUnknownMs":[5637.1,null]},',
    );
    // Objects outside arrays stay indented.
    expect(lines).toContain(' "canary": {');
    expect(Buffer.byteLength(text)).toBeLessThan(MAX_RESULTS_BYTES);
  });
});
