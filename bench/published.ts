/**
 * The published benchmark set: every bench run whose figures the docs publish, with its exact
 * command, the results file it writes into bench/results/<set>/, and how long it should take.
 * bench/fair-set.ts runs it; bench/figures.ts names these commands next to figures that are
 * still pending.
 *
 * Duration estimates: a model per bench, with its constants from the smoke runs of 2026-12-02
 * (20 nodes, one run of each controller, on a machine at load average 20-28: phases measured from
 * the harness's log) and, for what grows with the fleet, from the earlier 1,000-node runs in
 * docs/benchmarks-history.md (kube-controller-manager's 3 start-up writes per node drained at
 * about 12 writes/s with 20 QPS: 252 s at 1,000 nodes; a 1,000-node fleet registered in 17-30 s).
 * The set takes a quiet machine; a busy one stretches it.
 */
import path from 'node:path';
import { imageNodeFlags } from '../test/support/controller-process.js';
import type { ControllerName } from './compare/controllers.js';

export const PARTS = [
  'side-by-side',
  'watch-ingest',
  'ingest-decisions',
  'steady-cost',
  'handover',
  'replicas-cost',
  'mass-loss',
] as const;
export type Part = (typeof PARTS)[number];

export interface SetOptions {
  /** Folder under bench/results/ for this set's records. */
  set: string;
  parts: Part[];
  /** Fleet sizes of the side-by-side runs, the steady, handover and replicas benches. */
  sizes: number[];
  /** Runs of EACH controller per size (side by side). */
  runs: number;
  qps: number;
  burst: number;
  /** Nodes failed per wave, and waves per run (side by side). */
  fail: number;
  waves: number;
  grace: string;
  steady: string;
  /** Where raw per-run folders go (logs, audit-derived writes, per-node timestamps). */
  raw: string;
}

export const DEFAULT_SET: Omit<SetOptions, 'set' | 'raw'> = {
  parts: [...PARTS],
  sizes: [100, 1000],
  runs: 5,
  // kube-controller-manager's defaults, for both (ours' own defaults are 50/100).
  qps: 20,
  burst: 30,
  // 12 failed nodes x 2 waves = 24 per run: 120 per controller and size over 5 runs, behind each
  // pooled p99 (4 per zone per wave: a minority of every zone at 100 nodes, no partial disruption).
  fail: 12,
  waves: 2,
  grace: '20s',
  steady: '60s',
};

export interface Step {
  part: Part;
  /** Short name for progress lines, e.g. "n100-03-kcm". */
  name: string;
  nodes?: number;
  controller?: ControllerName;
  /** Program and arguments, run from the repository root. */
  argv: string[];
  /** Results file, relative to the repository root. */
  results: string;
  /** Expected seconds on a quiet machine. */
  estimateS: number;
}

/**
 * Run i (1-based) of 2 x runs, alternating in pairs ours,kcm then kcm,ours (ours, kcm, kcm, ours,
 * ours, kcm, ...): neither controller always goes first, and each pair's second run follows the
 * other controller's run.
 */
export function controllerOfRun(i: number): ControllerName {
  const pair = Math.floor((i - 1) / 2);
  const first: ControllerName = pair % 2 === 0 ? 'ours' : 'kcm';
  const second: ControllerName = first === 'ours' ? 'kcm' : 'ours';
  return (i - 1) % 2 === 0 ? first : second;
}

const seconds = (d: string): number => {
  const m = /^(\d+)(s|m)$/.exec(d);
  if (!m) throw new Error(`duration ${d}: use whole seconds or minutes, e.g. 60s or 2m`);
  return Number(m[1]) * (m[2] === 'm' ? 60 : 1);
};

// ------------------------------------------------------------------ estimates (seconds)

/** Control plane up, the fleet registered and Ready. */
const fleetUp = (nodes: number) => 12 + 0.03 * nodes;

/** One side-by-side controller run. */
export function estimateSideBySide(
  c: ControllerName,
  nodes: number,
  o: Pick<SetOptions, 'qps' | 'fail' | 'waves' | 'grace' | 'steady'>,
): number {
  const grace = seconds(o.grace);
  // Start-up writes: kcm 3 per node, drained at about 0.6 x QPS (its reads share the limiter);
  // ours 1 per node at the QPS. Never before the canary's first decision (grace + ~1 s).
  const writesS = c === 'kcm' ? (3 * nodes) / (0.6 * o.qps) : nodes / o.qps;
  const converge = Math.max(grace + 1.5, writesS) + 5 + 2;
  // A wave: the last failed node is Unknown ~grace after its failure, then the zone's NoExecute
  // taints at 0.1/s (k per zone: (k - 1) x 10 s), 3 s, recovery (kcm: its next 5 s pass), 3 s;
  // one renew interval between two waves.
  const perZone = Math.ceil(o.fail / 3);
  const wave = grace + (perZone - 1) * 10 + 3 + (c === 'kcm' ? 6 : 2) + 3;
  const waves = o.waves * wave + (o.waves - 1) * 10;
  const teardown = 4 + 0.01 * nodes;
  return fleetUp(nodes) + 20 + 1 + converge + seconds(o.steady) + waves + teardown + 3;
}

/**
 * The mass-loss cases: N of M nodes lost at once (spread over 5 zones, one wave), each controller
 * at its shipped client rate limit (ours 50/100, kube-controller-manager 20/30) and ours also at
 * kube-controller-manager's. Each wave waits until every lost node is marked (Unknown, the
 * NoSchedule taint, its pods not ready), not for the zone-rate-limited NoExecute taints.
 */
export const MASS_LOSS = {
  cases: [
    { nodes: 500, fail: 100 },
    { nodes: 1000, fail: 300 },
  ],
  runs: [
    { controller: 'ours', qps: 50, burst: 100 },
    { controller: 'ours', qps: 20, burst: 30 },
    { controller: 'kcm', qps: 20, burst: 30 },
  ] as Array<{ controller: ControllerName; qps: number; burst: number }>,
  zones: 5,
  grace: '20s',
  steady: '20s',
} as const;

/** One mass-loss run: start-up as side by side, then one wave marked at the client's rate. */
export function estimateMassLoss(c: ControllerName, nodes: number, fail: number, qps: number): number {
  const grace = seconds(MASS_LOSS.grace);
  const writesS = c === 'kcm' ? (3 * nodes) / (0.6 * qps) : nodes / qps;
  const converge = Math.max(grace + 1.5, writesS) + 5 + 2;
  // Marked: about 6 requests per lost node (re-read, status, taint, pod list, 2 pod writes) at
  // the QPS after the last deadline (grace + one renew interval); then recovery.
  const wave = grace + 10 + (6 * fail) / qps + 3 + 20;
  return fleetUp(nodes) + 20 + 1 + converge + seconds(MASS_LOSS.steady) + wave + 4 + 0.01 * nodes + 3;
}

// ------------------------------------------------------------------ the plan

const tsx = (script: string, ...args: string[]) => ['npx', 'tsx', script, ...args];
const nodeTs = (script: string, ...args: string[]) => [
  'node',
  ...imageNodeFlags(),
  '--expose-gc',
  '--experimental-transform-types',
  '--no-warnings',
  '--import',
  './bench/ts-hooks.mjs',
  script,
  ...args,
];

/** One run of bench/compare/run.ts (zones and --wave-until only when given: the harness's defaults otherwise). */
function compareRun(r: {
  controller: ControllerName;
  nodes: number;
  zones?: number;
  fail: number;
  waves: number;
  waveUntil?: 'marked';
  grace: string;
  steady: string;
  qps: number;
  burst: number;
  out: string;
  json: string;
}): string[] {
  return tsx(
    'bench/compare/run.ts',
    '--controller',
    r.controller,
    '--nodes',
    String(r.nodes),
    ...(r.zones !== undefined ? ['--zones', String(r.zones)] : []),
    '--fail',
    String(r.fail),
    '--waves',
    String(r.waves),
    ...(r.waveUntil !== undefined ? ['--wave-until', r.waveUntil] : []),
    '--grace',
    r.grace,
    '--steady',
    r.steady,
    '--qps',
    String(r.qps),
    '--burst',
    String(r.burst),
    '--out',
    r.out,
    '--json',
    r.json,
  );
}

export function plan(o: SetOptions): Step[] {
  const dir = path.join('bench', 'results', o.set);
  const file = (name: string) => path.join(dir, name);
  const flags = imageNodeFlags().join(',');
  const steps: Step[] = [];
  const has = (p: Part) => o.parts.includes(p);
  if (has('side-by-side')) {
    for (const nodes of o.sizes) {
      for (let i = 1; i <= 2 * o.runs; i++) {
        const c = controllerOfRun(i);
        const name = `n${nodes}-${String(i).padStart(2, '0')}-${c}`;
        const results = file(`${name}.json`);
        steps.push({
          part: 'side-by-side',
          name,
          nodes,
          controller: c,
          argv: compareRun({ ...o, controller: c, nodes, out: path.join(o.raw, name), json: results }),
          results,
          estimateS: estimateSideBySide(c, nodes, o),
        });
      }
    }
  }
  if (has('watch-ingest')) {
    const results = file('watch-ingest.json');
    // 10,000 and 100,000 leases, 5 runs each after a warm-up, then memory per stored object.
    steps.push({
      part: 'watch-ingest',
      name: 'watch-ingest',
      argv: nodeTs('bench/watch-ingest.ts', `--json=${results}`),
      results,
      estimateS: 150,
    });
  }
  if (has('ingest-decisions')) {
    const results = file('ingest-decisions.json');
    steps.push({
      part: 'ingest-decisions',
      name: 'ingest-decisions',
      argv: nodeTs(
        'bench/ingest-decisions.ts',
        '--sizes=10000,50000,100000',
        '--runs=3',
        `--json=${results}`,
      ),
      results,
      // A and B: about 2 minutes on one core; C: 40 s of real time per size.
      estimateS: 120 + 3 * 41,
    });
  }
  for (const nodes of has('steady-cost') ? o.sizes : []) {
    const results = file(`steady-cost-${nodes}.json`);
    const rounds = 3;
    steps.push({
      part: 'steady-cost',
      name: `steady-cost-${nodes}`,
      nodes,
      argv: tsx(
        'bench/steady-cost.ts',
        `--nodes=${nodes}`,
        `--rounds=${rounds}`,
        '--window=40s',
        '--warmup=15s',
        `--variant=image=dist/controller.mjs,${flags}`,
        `--variant=floor=bench/watch-floor.mjs,${flags}`,
        `--json=${results}`,
      ),
      results,
      // Per round and variant: start and sync (a few s), warm-up 15 s, window 40 s.
      estimateS: fleetUp(nodes) + rounds * 2 * (15 + 40 + 4 + 0.005 * nodes),
    });
  }
  for (const nodes of has('handover') ? o.sizes : []) {
    const results = file(`handover-${nodes}.json`);
    const rounds = nodes >= 1000 ? 5 : 10;
    steps.push({
      part: 'handover',
      name: `handover-${nodes}`,
      nodes,
      argv: tsx('bench/handover.ts', `--nodes=${nodes}`, `--rounds=${rounds}`, `--json=${results}`),
      results,
      // The first leader removes every new node's admission taint (50 QPS), then per round: 3-5 s
      // of settling, the handover, a new standby started and synced.
      estimateS: fleetUp(nodes) + 15 + nodes / 50 + rounds * (12 + 0.01 * nodes),
    });
  }
  for (const nodes of has('replicas-cost') ? o.sizes : []) {
    const results = file(`replicas-cost-${nodes}.json`);
    const rounds = nodes >= 1000 ? 3 : 5;
    steps.push({
      part: 'replicas-cost',
      name: `replicas-cost-${nodes}`,
      nodes,
      argv: tsx(
        'bench/replicas-cost.ts',
        `--nodes=${nodes}`,
        `--rounds=${rounds}`,
        '--window=60s',
        `--json=${results}`,
      ),
      results,
      estimateS: fleetUp(nodes) + 15 + nodes / 50 + 20 + rounds * 60,
    });
  }
  if (has('mass-loss')) {
    for (const { nodes, fail } of MASS_LOSS.cases) {
      for (const { controller: c, qps, burst } of MASS_LOSS.runs) {
        const name = `mass-${nodes}-${fail}-${c}-q${qps}`;
        // A folder of its own: the side-by-side set is every record at the set's top level.
        const results = file(path.join('mass-loss', `${name}.json`));
        steps.push({
          part: 'mass-loss',
          name,
          nodes,
          controller: c,
          argv: compareRun({
            controller: c,
            nodes,
            zones: MASS_LOSS.zones,
            fail,
            waves: 1,
            waveUntil: 'marked',
            grace: MASS_LOSS.grace,
            steady: MASS_LOSS.steady,
            qps,
            burst,
            out: path.join(o.raw, name),
            json: results,
          }),
          results,
          estimateS: estimateMassLoss(c, nodes, fail, qps),
        });
      }
    }
  }
  return steps;
}

/** "2 h 05 min" / "14 min". */
export function formatMinutes(totalS: number): string {
  const min = Math.round(totalS / 60);
  if (min < 60) return `${min} min`;
  return `${Math.floor(min / 60)} h ${String(min % 60).padStart(2, '0')} min`;
}

/** One line per part: its steps, their expected time, and for side by side the order of the runs. */
export function describePlan(steps: readonly Step[]): string[] {
  const byPart = new Map<Part, Step[]>();
  for (const s of steps) byPart.set(s.part, [...(byPart.get(s.part) ?? []), s]);
  return [...byPart].map(([part, ss]) => {
    const total = ss.reduce((a, s) => a + s.estimateS, 0);
    const sizes = [...new Set(ss.map((s) => s.nodes).filter((n) => n !== undefined))];
    const detail =
      part === 'side-by-side' || part === 'mass-loss'
        ? `: ${sizes
            .map(
              (n) =>
                `${n.toLocaleString('en-US')} nodes ${ss
                  .filter((s) => s.nodes === n)
                  .map((s) => s.controller)
                  .join(', ')}`,
            )
            .join('; ')}`
        : sizes.length
          ? ` (${sizes.map((n) => n.toLocaleString('en-US')).join(' and ')} nodes)`
          : '';
    return `${part}: ${ss.length} step${ss.length === 1 ? '' : 's'}, about ${formatMinutes(total)}${detail}`;
  });
}
