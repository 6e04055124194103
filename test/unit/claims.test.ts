import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REPO } from './manifests.support.js';

/**
 * docs/claims.md maps each claim of the README and docs/architecture.md to the tests and records
 * behind it. Every file it names must exist, and every quoted test title (`file` › "title part")
 * must be in that file: a renamed or deleted test shows up here, not as a silently stale table.
 */
const CLAIMS = readFileSync(join(REPO, 'docs', 'claims.md'), 'utf8');
const rows = CLAIMS.split('\n').filter(
  (l) => l.startsWith('| ') && !l.startsWith('| ---') && !l.startsWith('| claim'),
);
const FILE = /`([\w./-]+\.(?:ts|mjs|json|md|yaml|sh))`/g;
const TITLED = /`([\w./-]+\.ts)` › "([^"]+)"/g;

describe('docs/claims.md', () => {
  it('has a row for each claim, and every row names at least one test or record', () => {
    expect(rows.length).toBeGreaterThanOrEqual(30);
    for (const row of rows) {
      const backedBy = row.split(' | ').at(-1)!;
      expect([...backedBy.matchAll(FILE)].length, row).toBeGreaterThan(0);
    }
  });

  it('every file it names exists', () => {
    const missing = [...CLAIMS.matchAll(FILE)].map((m) => m[1]!).filter((f) => !existsSync(join(REPO, f)));
    expect(missing).toEqual([]);
  });

  it('every quoted test title is in the file named before it', () => {
    const pairs = [...CLAIMS.matchAll(TITLED)].map((m) => ({ file: m[1]!, title: m[2]! }));
    expect(pairs.length).toBeGreaterThanOrEqual(30);
    const absent = pairs.filter(({ file, title }) => {
      const text = existsSync(join(REPO, file)) ? readFileSync(join(REPO, file), 'utf8') : '';
      return !text.includes(title);
    });
    expect(absent).toEqual([]);
  });
});
