/**
 * docs/metrics.md is generated from the metric factories by scripts/metrics-reference.ts. These
 * tests keep it in step with the code: a metric added, removed or renamed (or its type, labels or
 * help changed) without regenerating fails here with the command that fixes it; so does a metric
 * registered in src/ outside the factories the generator calls. The README and the docs index it
 * is reached from must link to files and headings that exist.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { Counter, type Registry } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import {
  AREAS,
  type Area,
  COMMAND,
  familiesByArea,
  generate,
  REFERENCE,
  render,
} from '../../scripts/metrics-reference.js';
import { controllerRegistry, markdownAnchors, REPO } from './manifests.support.js';

const FIX = `docs/metrics.md is out of step with the metrics the code registers: run \`${COMMAND}\` and commit docs/metrics.md`;

/** Family names listed in a generated reference (the first column of its tables). */
function listed(text: string): Set<string> {
  return new Set([...text.matchAll(/^\| `([a-zA-Z_:][a-zA-Z0-9_:]*)` \|/gm)].map((m) => m[1]!));
}

/** Source files of the controller (tests and test support aside). */
function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) {
      if (name !== 'testing') out.push(...sourceFiles(p));
    } else if (name.endsWith('.ts') && !name.endsWith('.test.ts') && name !== 'testing.ts') out.push(p);
  }
  return out;
}

/** Metric names given as a literal to a prom-client constructor in src/. */
function literalMetricNames(): Map<string, string> {
  const out = new Map<string, string>();
  const ctor =
    /new (?:Counter|Gauge|Histogram|Summary)(?:<[^>]*>)?\(\{\s*name:\s*(['"`])([a-zA-Z_:][a-zA-Z0-9_:]*)\1/g;
  for (const file of sourceFiles(join(REPO, 'src'))) {
    for (const m of readFileSync(file, 'utf8').matchAll(ctor)) out.set(m[2]!, relative(REPO, file));
  }
  return out;
}

describe('docs/metrics.md (npm run metrics-reference)', () => {
  const current = readFileSync(REFERENCE, 'utf8');

  it('is exactly what the metric factories give today', async () => {
    const generated = await generate();
    if (generated !== current) {
      const now = listed(generated);
      const then = listed(current);
      const added = [...now].filter((n) => !then.has(n));
      const gone = [...then].filter((n) => !now.has(n));
      expect({ added, gone, fix: FIX }, FIX).toEqual({ added: [], gone: [], fix: FIX });
    }
    expect(generated, FIX).toBe(current);
  });

  it('lists every family the manifest tests see in the controller registry (test/unit/manifests.support.ts)', async () => {
    const { registry, dispose } = controllerRegistry();
    const names = (await registry.getMetricsAsJSON()).map((m) => m.name);
    dispose();
    expect(names.length).toBeGreaterThan(50);
    const inReference = listed(current);
    expect(
      names.filter((n) => !inReference.has(n)),
      FIX,
    ).toEqual([]);
  });

  it('lists every metric src/ constructs with a literal name: none is registered outside the generator', () => {
    const found = literalMetricNames();
    // The scan is real: it finds the families of every area.
    expect(found.size).toBeGreaterThan(70);
    expect(found.get('nlc_writes_total')).toBe('src/apply/writer.ts');
    const names = listed(current);
    const missing = [...found].filter(([n]) => !names.has(n)).map(([n, f]) => `${n} (${f})`);
    expect(
      missing,
      `registered in src/ but not in docs/metrics.md: add its factory to AREAS in scripts/metrics-reference.ts, then run \`${COMMAND}\``,
    ).toEqual([]);
  });

  it('names each family once, in one area, and every area registers something', async () => {
    const byArea = await familiesByArea();
    const all = [...byArea.values()].flat().map((f) => f.name);
    expect(new Set(all).size).toBe(all.length);
    for (const [area, families] of byArea) expect(families.length, area.title).toBeGreaterThan(0);
    expect(listed(current)).toEqual(new Set(all));
  });

  describe('the check bites', () => {
    const registries: Registry[] = [];
    afterAll(() => {
      for (const r of registries) r.clear();
    });
    const area = (title: string, name: string, help: string): Area => ({
      title,
      about: 'test',
      register(registry) {
        registries.push(registry);
        new Counter({ name, help, labelNames: ['kind'], registers: [registry] });
      },
    });

    it('a metric added, renamed or with another help text changes the text', async () => {
      const base = render(await familiesByArea([area('A', 'nlc_example_total', 'Examples.')]));
      expect(base).toContain('| `nlc_example_total` | counter | `kind` | Examples. |');
      const renamed = render(await familiesByArea([area('A', 'nlc_examples_total', 'Examples.')]));
      const rehelped = render(await familiesByArea([area('A', 'nlc_example_total', 'Other | examples.')]));
      const added = render(
        await familiesByArea([
          area('A', 'nlc_example_total', 'Examples.'),
          area('B', 'nlc_more_total', 'More.'),
        ]),
      );
      for (const changed of [renamed, rehelped, added]) expect(changed).not.toBe(base);
      expect(rehelped).toContain('Other \\| examples.');
    });

    it('two areas registering one name fail, as the process registry would', async () => {
      await expect(
        familiesByArea([area('A', 'nlc_same_total', 'x'), area('B', 'nlc_same_total', 'y')]),
      ).rejects.toThrow(/nlc_same_total/);
    });

    it('every area of the generator is in the text', async () => {
      const text = await generate();
      for (const a of AREAS) expect(text).toContain(`## ${a.title}\n`);
    });
  });
});

describe('README.md, CONTRIBUTING.md and the docs index: relative links resolve', () => {
  const files = ['README.md', 'CONTRIBUTING.md', 'docs/README.md', 'docs/metrics.md'];

  it.each(files)('%s', (file) => {
    const path = join(REPO, file);
    const text = readFileSync(path, 'utf8');
    const links = [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
    expect(links.length, `${file} has links`).toBeGreaterThan(0);
    const broken: string[] = [];
    for (const link of links) {
      if (/^[a-z]+:/.test(link)) continue;
      const [target, anchor] = link.split('#');
      const to = target ? resolve(join(path, '..'), target) : path;
      if (!existsSync(to)) broken.push(`${link}: no such file`);
      else if (anchor && to.endsWith('.md') && !markdownAnchors(to).has(anchor))
        broken.push(`${link}: no such heading`);
    }
    expect(broken).toEqual([]);
  });
});
