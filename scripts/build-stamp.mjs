#!/usr/bin/env node
// The build stamp: what `--version`, the start-up log and nlc_build_info report (src/cli/build-info.ts).
//
//   version   package.json's (NLC_BUILD_VERSION, when set, must be the same: a release names it)
//   revision  NLC_BUILD_REVISION when set (the image build, which has no .git: the Dockerfile passes
//             its REVISION build argument), else `git rev-parse HEAD` of this checkout, "-dirty"
//             when tracked files differ from it, else "unknown" (no git, or not a checkout)
//
// scripts/bundle.mjs compiles it into the bundle (esbuild `define`). Run as a script (and by
// bundle.mjs) it also writes dist/build-stamp.json, which the tsc output (`node dist/main.js`)
// reads, so that a `npm run build` in a git checkout reports its commit there too. Run again after
// each tsc build (`npm run build`, `npm run cli`, `npm run demo` do), so the file never names an
// older commit than the code beside it.
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { runAsScript } from './run-as-script.mjs';

function gitRevision(cwd) {
  try {
    const git = (args) =>
      execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const sha = git(['rev-parse', 'HEAD']);
    if (!/^[0-9a-f]{40,64}$/.test(sha)) return undefined;
    const dirty = git(['status', '--porcelain', '--untracked-files=no']) !== '';
    return dirty ? `${sha}-dirty` : sha;
  } catch {
    return undefined;
  }
}

/** The stamp of a build made in `root` (the repository) with environment `env`. */
export function buildStamp(root = '.', env = process.env) {
  const version = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).version;
  const asked = env.NLC_BUILD_VERSION;
  if (asked && asked !== version) {
    throw new Error(
      `build stamp: NLC_BUILD_VERSION=${asked} but package.json says ${version}; bump package.json`,
    );
  }
  return { version, revision: env.NLC_BUILD_REVISION || gitRevision(root) || 'unknown' };
}

/** Writes `stamp` to <root>/dist/build-stamp.json, where the tsc output reads it. */
export function writeBuildStamp(stamp, root = '.') {
  const file = path.join(root, 'dist', 'build-stamp.json');
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(stamp)}\n`);
  return file;
}

runAsScript(import.meta.url, () => {
  const stamp = buildStamp();
  writeBuildStamp(stamp);
});
