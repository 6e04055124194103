import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findDoc, get, MANIFESTS, REPO } from './manifests.support.js';

/**
 * docs/deploy.md sizes requests and limits per cluster size from the measured figures of the
 * benchmark docs (docs/benchmarks.md and its dated history, docs/benchmarks-history.md, where the
 * side-by-side runs the table was made from are kept); the base Deployment ships one of those rows.
 * These tests keep the three in step: the shipped resources are the row marked "(the base)", every
 * row's memory request is above what was measured for its size, and each measured peak is one the
 * benchmark docs report.
 */

const deployDoc = readFileSync(join(REPO, 'docs', 'deploy.md'), 'utf8');
const benchmarks = ['benchmarks.md', 'benchmarks-history.md']
  .map((f) => readFileSync(join(REPO, 'docs', f), 'utf8'))
  .join('\n');

interface Row {
  size: string;
  peakMiB: number;
  cpuMaxMilli: number;
  requestsCpu: string;
  requestsMemory: string;
  limitsMemory: string;
}

/** Rows of the table whose header names `requests.memory`. */
function sizingRows(md: string): Row[] {
  const lines = md.split('\n');
  const header = lines.findIndex((l) => l.startsWith('|') && l.includes('`requests.memory`'));
  if (header < 0) return [];
  const rows: Row[] = [];
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith('|')) break;
    const cells = line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
    const peak = /-(\d+(?:\.\d+)?) MiB$/.exec(cells[1] ?? '');
    const cpu = /-(\d+)m$/.exec(cells[2] ?? '');
    rows.push({
      size: cells[0] ?? '',
      peakMiB: peak ? Number(peak[1]) : Number.NaN,
      cpuMaxMilli: cpu ? Number(cpu[1]) : Number.NaN,
      requestsCpu: cells[3] ?? '',
      requestsMemory: cells[4] ?? '',
      limitsMemory: cells[5] ?? '',
    });
  }
  return rows;
}

/** A Kubernetes memory quantity in MiB (Mi and Gi suffixes, as the docs and manifests use). */
function mib(q: unknown): number {
  const m = /^(\d+(?:\.\d+)?)(Mi|Gi)$/.exec(String(q));
  if (!m) return Number.NaN;
  return Number(m[1]) * (m[2] === 'Gi' ? 1024 : 1);
}

/** A CPU quantity in millicores ("50m", "1", "0.5"). */
function milli(q: unknown): number {
  const s = String(q);
  if (s.endsWith('m')) return Number(s.slice(0, -1));
  return Number(s) * 1000;
}

describe('resources: docs/deploy.md table, the benchmark docs and the base Deployment agree', () => {
  const rows = sizingRows(deployDoc);
  const deployment = findDoc(join(MANIFESTS, 'base'), 'Deployment', 'node-lifecycle-controller');
  const container = get(deployment, 'spec', 'template', 'spec', 'containers', 0);
  const resources = get(container, 'resources');

  it('the table parses: three sizes, every cell a quantity', () => {
    expect(rows.map((r) => r.size)).toEqual(['up to 100', 'up to 1,000 (the base)', 'up to 3,000']);
    for (const r of rows) {
      expect(r.peakMiB, r.size).toBeGreaterThan(0);
      expect(r.cpuMaxMilli, r.size).toBeGreaterThan(0);
      expect(mib(r.requestsMemory), r.size).toBeGreaterThan(0);
      expect(mib(r.limitsMemory), r.size).toBeGreaterThan(0);
      expect(milli(r.requestsCpu), r.size).toBeGreaterThan(0);
    }
  });

  it('the base Deployment ships exactly the row marked "(the base)", and no CPU limit', () => {
    const base = rows.filter((r) => r.size.includes('(the base)'));
    expect(base).toHaveLength(1);
    expect(resources).toEqual({
      requests: { cpu: base[0]?.requestsCpu, memory: base[0]?.requestsMemory },
      limits: { memory: base[0]?.limitsMemory },
    });
  });

  it('each row requests at least 25% more memory than measured, twice that as the limit, and the CPU measured', () => {
    for (const r of rows) {
      expect(mib(r.requestsMemory), `${r.size}: request vs peak ${r.peakMiB} MiB`).toBeGreaterThanOrEqual(
        1.25 * r.peakMiB,
      );
      expect(mib(r.limitsMemory), r.size).toBe(2 * mib(r.requestsMemory));
      expect(milli(r.requestsCpu), r.size).toBeGreaterThanOrEqual(r.cpuMaxMilli);
    }
    // Larger clusters need at least as much.
    for (let i = 1; i < rows.length; i++) {
      expect(mib(rows[i]?.requestsMemory)).toBeGreaterThan(mib(rows[i - 1]?.requestsMemory));
    }
  });

  it("each row's highest measured peak is a figure the benchmark docs report", () => {
    for (const r of rows) {
      expect(benchmarks, `${r.size}: ${r.peakMiB} MiB`).toMatch(
        new RegExp(`(^|[^\\d.])${String(r.peakMiB).replace('.', '\\.')}(?![\\d])`),
      );
    }
  });
});
