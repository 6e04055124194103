/**
 * Runs the whole published benchmark set with ONE command and publishes its figures:
 *
 *   npm run bench:fair-set                  # builds dist/, then everything below (hours: it says how long)
 *   npm run bench:fair-set -- --dry-run     # only the plan and its expected duration
 *   npm run bench:fair-set -- --parts side-by-side --sizes 100
 *
 * The set (bench/published.ts has every command):
 *  - side by side with kube-controller-manager at 100 and 1,000 nodes: --runs (5) runs of EACH
 *    controller per size, alternating in pairs (ours, kcm, kcm, ours, ours, kcm, ...), each run on a
 *    fresh local control plane and fleet (the two cannot run at once: both would write the same
 *    nodes), both at the same --kube-api-qps/--kube-api-burst, kube-controller-manager with only its
 *    node-lifecycle-controller, --fail x --waves failed nodes per run (24: 120 per controller and
 *    size behind each pooled p99);
 *  - lease watch ingest and ingest through the decision code, with the image's Node.js flags;
 *  - steady-state cost (the image against the runtime's floor), graceful handover and leader
 *    election's cost, at the same sizes;
 *  - mass loss (bench/published.ts MASS_LOSS): 100 of 500 and 300 of 1,000 nodes lost at once,
 *    ours at its defaults and at 20/30, kube-controller-manager at its defaults (20/30), one run
 *    each (100-300 failed nodes behind each percentile); records in bench/results/<set>/mass-loss/.
 *
 * Each step takes the shared lock (`flock /tmp/nlc-e2e.lock`) for itself, so other work on the
 * machine waits between steps instead of running during one; run it on a quiet machine anyway
 * (every record keeps `uptime`'s load). Each step writes its results record into
 * bench/results/<set>/ (commit those) and its log and raw data into --raw (/tmp). At the end, if
 * every step succeeded and the side-by-side runs make a valid set (bench/figures.ts), the set is
 * written into bench/results/published.json and the figures in README.md and docs/benchmarks.md
 * are regenerated; review them with `git diff`.
 *
 * Options: --set NAME [<date>-<commit>]  --parts LIST [all: side-by-side,watch-ingest,
 * ingest-decisions,steady-cost,handover,replicas-cost,mass-loss]  --sizes 100,1000  --runs 5  --qps 20
 * --burst 30  --fail 12  --waves 2  --grace 20s  --steady 60s  --raw DIR [/tmp/nlc-compare/<set>]
 * --lock FILE [/tmp/nlc-e2e.lock; "none" to run without]  --publish replace|append|none [replace]
 * --resume (skip steps whose record exists)  --dry-run
 */
import { spawn, spawnSync } from 'node:child_process';
import { createWriteStream, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { binariesIn, ensureBinaries } from '../src/localcluster/binaries.js';
import {
  generate,
  PUBLISHED_FILE,
  type Published,
  readPublished,
  readSet,
  sideBySide,
  syncDocs,
} from './figures.js';
import { parseLongOptions } from './options.js';
import {
  DEFAULT_SET,
  describePlan,
  formatMinutes,
  PARTS,
  type Part,
  plan,
  type SetOptions,
  type Step,
} from './published.js';
import { environment, loadAverage, REPO_ROOT, RESULTS_DIR, scrubPaths, writeResults } from './results.js';

function parse(argv: string[]) {
  const known = [
    'set',
    'parts',
    'sizes',
    'runs',
    'qps',
    'burst',
    'fail',
    'waves',
    'grace',
    'steady',
    'raw',
    'lock',
    'publish',
    'resume',
    'dry-run',
  ];
  const m = parseLongOptions(argv, known);
  const whole = (k: string, dflt: number, min: number) => {
    const v = Number(m.get(k) ?? dflt);
    if (!(Number.isInteger(v) && v >= min)) throw new Error(`--${k} needs a whole number >= ${min}`);
    return v;
  };
  const parts = (m.get('parts')?.split(',') ?? [...DEFAULT_SET.parts]) as Part[];
  for (const p of parts)
    if (!PARTS.includes(p)) throw new Error(`--parts: unknown part ${p} (${PARTS.join(', ')})`);
  const commit = environment().commit.split(' ')[0];
  const set = m.get('set') ?? `${new Date().toISOString().slice(0, 10)}-${commit}`;
  if (!/^[A-Za-z0-9._-]+$/.test(set))
    throw new Error('--set: letters, digits, dot, dash and underscore only');
  const publish = m.get('publish') ?? 'replace';
  if (!['replace', 'append', 'none'].includes(publish))
    throw new Error('--publish is replace, append or none');
  const o: SetOptions = {
    set,
    parts,
    sizes: (m.get('sizes') ?? DEFAULT_SET.sizes.join(',')).split(',').map(Number),
    runs: whole('runs', DEFAULT_SET.runs, 1),
    qps: whole('qps', DEFAULT_SET.qps, 1),
    burst: whole('burst', DEFAULT_SET.burst, 1),
    fail: whole('fail', DEFAULT_SET.fail, 1),
    waves: whole('waves', DEFAULT_SET.waves, 1),
    grace: m.get('grace') ?? DEFAULT_SET.grace,
    steady: m.get('steady') ?? DEFAULT_SET.steady,
    raw: path.resolve(m.get('raw') ?? path.join('/tmp/nlc-compare', set)),
  };
  for (const n of o.sizes) if (!(Number.isInteger(n) && n > 0)) throw new Error('--sizes: whole numbers > 0');
  return {
    o,
    lock: m.get('lock') ?? '/tmp/nlc-e2e.lock',
    publish: publish as 'replace' | 'append' | 'none',
    resume: m.get('resume') === 'true',
    dryRun: m.get('dry-run') === 'true',
  };
}

const clock = () => new Date().toISOString().slice(11, 19);
const say = (s: string) => console.log(`[fair-set ${clock()}] ${s}`);

function lockPrefix(lock: string): string[] {
  if (lock === 'none') return [];
  if (spawnSync('flock', ['--version'], { stdio: 'ignore' }).status !== 0) {
    say(`flock not found: running without the shared lock ${lock}`);
    return [];
  }
  return ['flock', lock];
}

/** The program to spawn for a step's argv[0] ("npx tsx" runs the repo's own tsx, "node" this Node.js). */
function resolveArgv(argv: string[]): string[] {
  if (argv[0] === 'npx' && argv[1] === 'tsx')
    return [path.join(REPO_ROOT, 'node_modules', '.bin', 'tsx'), ...argv.slice(2)];
  if (argv[0] === 'node') return [process.execPath, ...argv.slice(1)];
  return argv;
}

async function runStep(step: Step, raw: string, prefix: string[]): Promise<number> {
  const logFile = path.join(raw, `${step.name}.log`);
  const out = createWriteStream(logFile);
  const [cmd, ...args] = [...prefix, ...resolveArgv(step.argv)];
  const child = spawn(cmd!, args, { cwd: REPO_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout.pipe(out);
  child.stderr.pipe(out);
  const code = await new Promise<number>((resolve) => {
    child.on('error', (err) => {
      out.write(`spawn error: ${err.message}\n`);
      resolve(127);
    });
    child.on('close', (c) => resolve(c ?? 1));
  });
  out.end();
  return code;
}

interface StepStatus {
  name: string;
  part: Part;
  command: string;
  results: string;
  estimateS: number;
  seconds?: number;
  exitCode?: number;
  skipped?: boolean;
  load?: { start: string; end: string };
}

async function main(): Promise<number> {
  const { o, lock, publish, resume, dryRun } = parse(process.argv.slice(2));
  const steps = plan(o);
  const total = steps.reduce((a, s) => a + s.estimateS, 0);
  const finish = new Date(Date.now() + total * 1000);
  console.log(
    `Set ${o.set}: ${steps.length} steps into bench/results/${o.set}/, raw logs in ${o.raw}\n${describePlan(
      steps,
    )
      .map((l) => `  ${l}`)
      .join('\n')}\n` +
      `Expected duration: about ${formatMinutes(total)} on a quiet machine (done around ${finish.toISOString().slice(0, 16).replace('T', ' ')} UTC); a busy machine takes longer.`,
  );
  if (o.parts.includes('side-by-side') && !existsSync(binariesIn(process.env).kubeControllerManager))
    console.log('kube-controller-manager is not built yet: it is built first (about 10 minutes more).');
  if (dryRun) {
    for (const s of steps) console.log(`  ${s.name}: ${s.argv.join(' ')}`);
    return 0;
  }
  const setDir = path.join(RESULTS_DIR, o.set);
  if (existsSync(setDir) && !resume)
    throw new Error(
      `bench/results/${o.set} exists: pass --resume to continue that set, or --set NAME for a new one`,
    );
  mkdirSync(setDir, { recursive: true });
  mkdirSync(o.raw, { recursive: true });
  await ensureBinaries(process.env, { withKcm: o.parts.includes('side-by-side') });
  const prefix = lockPrefix(lock);
  const startedAt = new Date().toISOString();
  const env = environment();
  const status: StepStatus[] = steps.map((s) => ({
    name: s.name,
    part: s.part,
    command: scrubPaths(s.argv.join(' ')),
    results: path.relative(RESULTS_DIR, path.join(REPO_ROOT, s.results)),
    estimateS: Math.round(s.estimateS),
  }));
  const writeSet = () =>
    writeResults(path.join(setDir, 'set.json'), {
      bench: 'set',
      schema: 1,
      command: `${['npm', 'run', 'bench:fair-set', '--', ...process.argv.slice(2)].join(' ')}`,
      startedAt,
      options: { ...o, raw: path.basename(o.raw) },
      environment: env,
      expectedSeconds: Math.round(total),
      steps: status,
    });
  writeSet();
  const t0 = Date.now();
  for (const [i, step] of steps.entries()) {
    const st = status[i]!;
    if (resume && existsSync(path.join(REPO_ROOT, step.results))) {
      st.skipped = true;
      say(`${step.name}: record exists, skipped`);
      continue;
    }
    const left = steps.slice(i).reduce((a, s) => a + s.estimateS, 0);
    say(
      `${step.name} (${i + 1}/${steps.length}; about ${formatMinutes(step.estimateS)}, ${formatMinutes(left)} left)`,
    );
    const s0 = Date.now();
    const loadStart = loadAverage();
    const code = await runStep(step, o.raw, prefix);
    st.seconds = Math.round((Date.now() - s0) / 1000);
    st.exitCode = code;
    st.load = { start: loadStart, end: loadAverage() };
    writeSet();
    say(
      `${step.name}: ${code === 0 ? 'done' : `FAILED (exit ${code}; log ${path.join(o.raw, `${step.name}.log`)})`} in ${formatMinutes(st.seconds)} (estimated ${formatMinutes(step.estimateS)}; ${formatMinutes((Date.now() - t0) / 1000)} so far)`,
    );
  }
  const failed = status.filter((s) => s.exitCode !== undefined && s.exitCode !== 0);
  const missing = steps.filter((s) => !existsSync(path.join(REPO_ROOT, s.results)));
  say(
    `finished in ${formatMinutes((Date.now() - t0) / 1000)} (estimated ${formatMinutes(total)}); ${failed.length} step(s) failed`,
  );
  if (o.parts.includes('side-by-side') && missing.every((s) => s.part !== 'side-by-side')) {
    for (const g of sideBySide(o.set, readSet(RESULTS_DIR, o.set)))
      if (g.problems.length) say(`side by side, ${g.nodes} nodes: not publishable: ${g.problems.join('; ')}`);
  }
  if (failed.length > 0 || missing.length > 0) {
    say(
      `not published: ${[...failed.map((s) => s.name), ...missing.map((s) => `${s.name} (no record)`)].join(', ')}`,
    );
    return 1;
  }
  if (publish === 'none') return 0;
  const published: Published = readPublished();
  for (const part of o.parts) {
    const entries =
      part === 'side-by-side'
        ? [o.set]
        : steps
            .filter((s) => s.part === part)
            .map((s) => path.relative(RESULTS_DIR, path.join(REPO_ROOT, s.results)));
    published[part] = publish === 'append' ? [...new Set([...(published[part] ?? []), ...entries])] : entries;
  }
  let blocks: Map<string, string>;
  try {
    blocks = generate(RESULTS_DIR, published);
  } catch (err) {
    say(`not published: ${(err as Error).message}`);
    return 1;
  }
  writeFileSync(path.join(RESULTS_DIR, PUBLISHED_FILE), `${JSON.stringify(published, null, 1)}\n`);
  const changed = syncDocs(blocks, true);
  say(
    `published in bench/results/${PUBLISHED_FILE}; figures regenerated in ${changed.join(', ') || 'no doc (unchanged)'} (git diff to review)`,
  );
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err instanceof Error ? err.message : String(err));
    process.exit(2);
  },
);
