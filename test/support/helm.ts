import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheRoot } from '../../src/localcluster/binaries.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The Helm version scripts/build-helm.sh builds (its HELM_VERSION default). */
export function helmVersion(): string {
  const m = /HELM_VERSION="\$\{HELM_VERSION:-(v[\d.]+)\}"/.exec(
    readFileSync(path.join(ROOT, 'scripts', 'build-helm.sh'), 'utf8'),
  );
  if (!m) throw new Error('scripts/build-helm.sh names no HELM_VERSION default');
  return m[1]!;
}

/**
 * The project's own Helm (`scripts/build-helm.sh`, which `./dev test` runs before the unit tests),
 * never a helm on PATH. Missing, it throws saying how to build it: the tests fail, they do not skip.
 */
export function projectHelm(): string {
  const helm = path.join(cacheRoot(process.env), 'bin', `helm-${helmVersion()}`, 'helm');
  if (!existsSync(helm)) {
    throw new Error(`the project's helm is not built (${helm}); run: bash scripts/build-helm.sh`);
  }
  return helm;
}

/** Runs the project's helm; throws with its output on a non-zero exit. */
export function helm(args: string[]): string {
  const r = spawnSync(projectHelm(), args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`helm ${args.join(' ')} failed (${r.status}): ${r.stderr}${r.stdout}`);
  return r.stdout;
}
