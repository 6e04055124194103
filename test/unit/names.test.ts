import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import * as names from '../../src/names/index.js';
import { REPO, walkFiles } from './manifests.support.js';

/**
 * Each name the controller goes by is defined once, in src/names (issue 40): no file that ships
 * spells one of them out as a string of its own, so that a rename cannot miss a copy ('node-controller'
 * was defined twice, the component's name six times).
 */

const SHIPPED = walkFiles(join(REPO, 'src'), (p) => p.endsWith('.ts'))
  .map((p) => relative(REPO, p).split('\\').join('/'))
  .filter((f) => !f.endsWith('.test.ts') && !f.endsWith('/testing.ts') && !f.includes('/testing/'))
  .map((file) => ({ file, text: readFileSync(join(REPO, file), 'utf8') }));

/** The same string, but a name of something else. */
const OTHER_MEANING: Record<string, string[]> = {
  // The cache folder of the Go-built binaries, shared with ./dev and test/kind (not the component).
  'node-lifecycle-controller': ['src/localcluster/binaries.ts'],
};

/** The files that spell `value` as a whole string literal. */
function spelledIn(value: string): string[] {
  const quoted = [`'${value}'`, `"${value}"`, `\`${value}\``];
  return SHIPPED.filter(({ text }) => quoted.some((q) => text.includes(q))).map(({ file }) => file);
}

describe('names defined once (src/names)', () => {
  it('the scan is real: it finds each name where it is defined', () => {
    const values = Object.values(names);
    expect(values).toEqual(['node-lifecycle-controller', 'node-controller']);
    for (const v of values) expect(spelledIn(v)).toContain('src/names/index.ts');
  });

  it('no other file that ships spells one out', () => {
    const copies = Object.entries(names).flatMap(([key, value]) =>
      spelledIn(value)
        .filter((f) => f !== 'src/names/index.ts' && !(OTHER_MEANING[value] ?? []).includes(f))
        .map((f) => `${f} spells out ${key} (${JSON.stringify(value)}): import it from src/names`),
    );
    expect(copies).toEqual([]);
  });
});
