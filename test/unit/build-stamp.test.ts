/**
 * scripts/build-stamp.mjs: the version and revision `npm run build` stamps into the bundle and
 * writes to dist/build-stamp.json for the tsc output (test/e2e/cli-start.test.ts runs
 * `node dist/main.js --version`; test/e2e/image-layout.test.ts the bundle's).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { buildStamp, writeBuildStamp } from '../../scripts/build-stamp.mjs';
import { parseBuildStamp } from '../../src/cli/build-info.js';
import { REPO } from './manifests.support.js';

const VERSION = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A folder with a package.json and no git checkout around it (the image's build context). */
function notACheckout(): string {
  const dir = mkdtempSync(join(os.tmpdir(), 'nlc-stamp-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ version: '9.8.7' }));
  return dir;
}

describe('build stamp', () => {
  it('in this git checkout: the commit of HEAD (with -dirty when tracked files changed)', () => {
    const head = execFileSync('git', ['rev-parse', 'HEAD'], { cwd: REPO, encoding: 'utf8' }).trim();
    const stamp = buildStamp(REPO, {});
    expect(stamp.version).toBe(VERSION);
    expect(stamp.revision).toMatch(new RegExp(`^${head}(-dirty)?$`));
  });

  it('without git (the image build): the REVISION build argument, else "unknown"', () => {
    const dir = notACheckout();
    expect(buildStamp(dir, {})).toEqual({ version: '9.8.7', revision: 'unknown' });
    expect(buildStamp(dir, { NLC_BUILD_REVISION: 'f00d', NLC_BUILD_VERSION: '9.8.7' })).toEqual({
      version: '9.8.7',
      revision: 'f00d',
    });
    expect(() => buildStamp(dir, { NLC_BUILD_VERSION: '1.0.0' })).toThrow(
      'NLC_BUILD_VERSION=1.0.0 but package.json says 9.8.7',
    );
  });

  it('dist/build-stamp.json is what the tsc output reads', () => {
    const dir = notACheckout();
    const file = writeBuildStamp({ version: '9.8.7', revision: 'abc123' }, dir);
    expect(file).toBe(join(dir, 'dist', 'build-stamp.json'));
    expect(parseBuildStamp(readFileSync(file, 'utf8'))).toEqual({ version: '9.8.7', revision: 'abc123' });
  });
});
