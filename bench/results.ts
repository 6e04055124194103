/**
 * Results files of the benchmarks (bench/results/<set>/*.json): the small JSON records that the
 * published figures are generated from (bench/figures.ts). Every record says which bench made it,
 * with which command, when, on what (machine, Node.js and its flags, commit), and how loaded the
 * machine was (`uptime`'s load average at the start and at the end).
 *
 * Records are committed, so they hold no machine paths (home, temporary or checkout folders): paths
 * inside the repository are written relative to it, others as their last component, and
 * writeResults refuses a record that still names one. Raw per-node data stays in /tmp.
 *
 * This module is also loaded by the ingest benches under `node --experimental-transform-types`:
 * Node.js built-ins only.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const RESULTS_DIR = path.join(REPO_ROOT, 'bench', 'results');
/**
 * A results file is a summary, not raw data: no logs, no samples, no absolute times. Its largest
 * part is one line per failed node (about 280 bytes), so a mass-loss run of 300 failed nodes
 * (bench/compare --fail 300) is about 90 KB.
 */
export const MAX_RESULTS_BYTES = 128 * 1024;

export interface Environment {
  nproc: number;
  cpuModel: string;
  memGiB: number;
  node: string;
  /** Node.js flags of the process that measured (for the ingest benches: the flags under test). */
  nodeFlags: string[];
  /**
   * Short hash of HEAD, with " (uncommitted changes in tree)" when a tracked file of what is
   * measured differs from it (MEASURED_PATHS).
   */
  commit: string;
}

/** The fields every results record starts with. */
export interface RecordHeader {
  bench: string;
  schema: 1;
  command: string;
  startedAt: string;
  endedAt: string;
  /** `uptime`'s load average at the start and at the end of the measurement. */
  load: { start: string; end: string };
  environment: Environment;
}

/** A command's trimmed output, run in the repository; '' when it fails or is missing. */
export function sh(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, {
      encoding: 'utf8',
      cwd: REPO_ROOT,
      stdio: ['ignore', 'pipe', 'ignore'],
    }).trim();
  } catch {
    return '';
  }
}

/** "load average: 1.02, 0.87, 0.66" (from `uptime`; from os.loadavg() where uptime is missing). */
export function loadAverage(): string {
  const up = sh('uptime', []);
  const m = /load average[s]?:?\s*(.*)$/.exec(up);
  if (m) return `load average: ${m[1]}`;
  return `load average: ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(', ')}`;
}

/** A path as it may appear in a committed file: relative inside the repository, else its last part. */
export function publicPath(p: string): string {
  const abs = path.resolve(REPO_ROOT, p);
  const rel = path.relative(REPO_ROOT, abs);
  if (rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel)) return rel;
  return path.basename(abs);
}

/** Node.js flags without the module loaders a runner adds (tsx, our ts-hooks). */
function measuredNodeFlags(execArgv: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < execArgv.length; i++) {
    const a = execArgv[i]!;
    if (a === '--import' || a === '--require' || a === '--loader' || a === '--experimental-loader') {
      i++;
      continue;
    }
    if (/^--(import|require|loader|experimental-loader)=/.test(a)) continue;
    out.push(a);
  }
  return out;
}

/** What a measurement depends on: the code, the benches, their helpers, the build and the image's flags. */
export const MEASURED_PATHS = [
  'src',
  'bench',
  'test/support',
  'scripts',
  'Dockerfile',
  'package.json',
  'package-lock.json',
  'tsconfig.build.json',
];

export function environment(execArgv: readonly string[] = process.execArgv): Environment {
  const model = sh('lscpu', [])
    .split('\n')
    .find((l) => l.startsWith('Model name:'));
  const commit = sh('git', ['rev-parse', '--short', 'HEAD']);
  const dirty = sh('git', ['status', '--porcelain', '--untracked-files=no', '--', ...MEASURED_PATHS]) !== '';
  return {
    nproc: os.availableParallelism(),
    cpuModel: model?.replace(/^Model name:\s*/, '') ?? os.cpus()[0]?.model ?? '',
    memGiB: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    node: process.version,
    nodeFlags: measuredNodeFlags(execArgv),
    commit: (commit || 'unknown') + (dirty ? ' (uncommitted changes in tree)' : ''),
  };
}

/**
 * The command that ran this process, as a reader would type it from the repository root:
 * `npx tsx bench/x.ts ...` under tsx, else `node FLAGS bench/x.ts ...`; paths made public.
 */
export function publicCommand(
  argv: readonly string[] = process.argv,
  execArgv: readonly string[] = process.execArgv,
): string {
  const underTsx = execArgv.some((a) => a.includes('tsx'));
  const script = argv[1] === undefined ? '' : publicPath(argv[1]);
  const args = argv.slice(2).map((a) => {
    const eq = a.indexOf('=');
    const value = eq > 0 ? a.slice(eq + 1) : a;
    if (!path.isAbsolute(value)) return a;
    return eq > 0 ? `${a.slice(0, eq + 1)}${publicPath(value)}` : publicPath(value);
  });
  const node = underTsx
    ? ['npx', 'tsx']
    : ['node', ...execArgv.map((a) => (path.isAbsolute(a) ? publicPath(a) : a))];
  return [...node, script, ...args].join(' ');
}

/**
 * `--json=FILE` or `--json FILE` from the command line (undefined when absent); a relative FILE is
 * taken from the current directory.
 */
export function jsonOption(argv: readonly string[] = process.argv): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a.startsWith('--json=')) return path.resolve(a.slice('--json='.length));
    if (a === '--json') {
      const v = argv[i + 1];
      if (v === undefined || v.startsWith('--')) throw new Error('--json needs a file name');
      return path.resolve(v);
    }
  }
  return undefined;
}

/** Every machine path in `text`: this checkout, the home folder, the temporary folder. */
export function machinePaths(text: string): string[] {
  const roots = [REPO_ROOT, os.homedir(), os.tmpdir(), '/tmp/'].filter((r) => r.length > 1);
  return [...new Set(roots.filter((r) => text.includes(r)))];
}

/**
 * `text` with every machine path replaced as publicPath does (relative inside the repository, else
 * its last part): for messages and notes that quote a file.
 */
export function scrubPaths(text: string): string {
  const roots = [REPO_ROOT, os.homedir(), os.tmpdir(), '/tmp'].filter((r) => r.length > 1);
  let out = text;
  for (const root of roots) {
    const escaped = root.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    out = out.replace(new RegExp(`${escaped}(/[\\w.@+-]+)*`, 'g'), (p) => publicPath(p));
  }
  return out;
}

/**
 * Starts a record: call the returned function with the results when the measurement ends. The
 * environment (the commit and whether the tree was clean) is taken now, when the code that is
 * measured is loaded, not when the record is written.
 */
export function recorder(bench: string): <T extends object>(data: T) => RecordHeader & T {
  const startedAt = new Date().toISOString();
  const start = loadAverage();
  const command = publicCommand();
  const env = environment();
  return (data) => ({
    bench,
    schema: 1,
    command,
    startedAt,
    endedAt: new Date().toISOString(),
    load: { start, end: loadAverage() },
    environment: env,
    ...data,
  });
}

/**
 * A record as indented JSON, except that an object inside an array of objects (one failed node,
 * one sample) takes one line: a run with 300 failed nodes stays a summary a reader can scan.
 */
export function recordText(record: object): string {
  const flat = new Set<object>();
  const mark = (v: unknown): void => {
    if (Array.isArray(v)) {
      for (const x of v) {
        if (x !== null && typeof x === 'object' && !Array.isArray(x)) flat.add(x);
        else mark(x);
      }
    } else if (v !== null && typeof v === 'object') for (const x of Object.values(v)) mark(x);
  };
  mark(record);
  const keys: string[] = [];
  const text = JSON.stringify(
    record,
    (_k, v: unknown) => {
      if (v !== null && typeof v === 'object' && flat.has(v)) {
        keys.push(JSON.stringify(v));
        return `\u0000${keys.length - 1}`;
      }
      return v;
    },
    1,
  );
  return `${text.replace(/"\\u0000(\d+)"/g, (_m, i: string) => keys[Number(i)]!)}\n`;
}

/**
 * Writes a record (recordText). Refuses (throws, writing nothing) a record over
 * MAX_RESULTS_BYTES or one that names a machine path.
 */
export function writeResults(file: string, record: object): void {
  const text = recordText(record);
  const bytes = Buffer.byteLength(text);
  if (bytes > MAX_RESULTS_BYTES)
    throw new Error(
      `${publicPath(file)}: ${bytes} bytes, over ${MAX_RESULTS_BYTES}: a results file is a summary`,
    );
  const paths = machinePaths(text);
  if (paths.length > 0)
    throw new Error(`${publicPath(file)}: the record names machine paths (${paths.join(', ')}); not written`);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
}
