/**
 * Re-renders the markdown of saved side-by-side runs.
 *
 *   npx tsx bench/compare/report.ts /tmp/nlc-compare/<run>/summary.json [...more]
 *   npx tsx bench/compare/report.ts --median <run1>/summary.json <run2>/summary.json ...
 *
 * --median: one table over repeated runs of the same configuration: per metric the median of the
 * runs' values for each controller ("median (min-max)"), and the median of the per-run ratios.
 */
import { readFileSync } from 'node:fs';
import { median, round } from './stats.js';
import { type ControllerResult, markdownTable, type Options, ROWS } from './table.js';

interface Summary {
  command: string;
  options: Options;
  machine: Record<string, string | number>;
  results: ControllerResult[];
}

const args = process.argv.slice(2);
const wantMedian = args.includes('--median');
const files = args.filter((a) => a !== '--median');
const summaries = files.map((f) => JSON.parse(readFileSync(f, 'utf8')) as Summary);

function machineLine(m: Record<string, string | number>): string {
  return `Machine: ${m.nproc} cores (${m.cpuModel}), ${m.memGiB} GiB; node ${m.node}; k8s ${m.k8s}, etcd ${m.etcd}; commit ${m.commit}; ours built ${m.oursBuiltAt}`;
}

function fmt(v: number): string {
  if (!Number.isFinite(v)) return '-';
  return String(Math.abs(v) >= 100 ? Math.round(v) : round(v, 2));
}

if (!wantMedian) {
  for (const s of summaries) {
    console.log(`- ${machineLine(s.machine)}`);
    console.log(markdownTable(s.results, { ...s.options, preclean: s.options.preclean === true }, s.command));
  }
} else {
  const pick = (s: Summary, c: string) => s.results.find((r) => r.controller === c);
  console.log(`Median of ${summaries.length} runs:`);
  for (const s of summaries)
    console.log(`- \`${s.command}\` (${s.machine.commit}, dist built ${s.machine.oursBuiltAt})`);
  console.log('');
  console.log('| metric | kcm median (min-max) | ours median (min-max) | ours / kcm, median of runs |');
  console.log('| --- | --- | --- | --- |');
  for (const [label, val, , opts] of ROWS) {
    const k = summaries.map((s) => pick(s, 'kcm')).map((r) => (r ? (val(r) ?? Number.NaN) : Number.NaN));
    const u = summaries.map((s) => pick(s, 'ours')).map((r) => (r ? (val(r) ?? Number.NaN) : Number.NaN));
    if (k.every((v) => !Number.isFinite(v)) && u.every((v) => !Number.isFinite(v))) continue;
    const cell = (xs: number[]) => {
      const ok = xs.filter((x) => Number.isFinite(x));
      if (ok.length === 0) return '-';
      return `${fmt(median(ok))} (${fmt(Math.min(...ok))}-${fmt(Math.max(...ok))})`;
    };
    const ratios = k.map((kv, i) => (kv !== 0 ? u[i]! / kv : Number.NaN)).filter((x) => Number.isFinite(x));
    const r = opts?.ratio === false ? Number.NaN : median(ratios);
    const rs = Number.isFinite(r) ? `${r >= 1 ? round(r, 2) : Number(r.toPrecision(2))}x` : '-';
    console.log(
      `| ${label.replace(/ p50 \/ max| \/ max| \/ waves/, (m) => (m.includes('p50') ? ' p50' : ''))} | ${cell(k)} | ${cell(u)} | ${rs} |`,
    );
  }
}
