/**
 * The commands the README and docs/deploy.md give for an uninstall are the ones the kind suite runs
 * (test/kind/companion-mode.ts): the `cleanup` pod's overrides, word for word.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLEANUP_POD_OVERRIDES } from '../kind/support.js';
import { REPO } from './manifests.support.js';

describe('the uninstall steps', () => {
  it.each(['README.md', 'docs/deploy.md'])(
    '%s: the cleanup pod overrides are what the kind suite runs',
    (file) => {
      const text = readFileSync(join(REPO, file), 'utf8');
      const copies = [...text.matchAll(/^o='(\{.*\})'$/gm)].map((m) => JSON.parse(m[1]!) as unknown);
      expect(copies.length).toBeGreaterThan(0);
      for (const c of copies) expect(c).toEqual(CLEANUP_POD_OVERRIDES);
      expect(text).toContain('--override-type=strategic --overrides="$o" -- cleanup');
    },
  );
});
