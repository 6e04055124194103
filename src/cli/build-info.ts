import { readFileSync } from 'node:fs';

/** What this build is, as `--version`, the start-up log and nlc_build_info report it. */
export interface BuildInfo {
  /** Semantic version, from package.json (no leading "v"). */
  version: string;
  /** The git commit the build was made from ("-dirty" when the tree had changes), or "unknown". */
  revision: string;
  /** The Node.js running the process (process.version, e.g. "v24.11.0"). */
  nodejsVersion: string;
}

/** What scripts/bundle.mjs stamps into the bundle at build time (esbuild `define`). */
export interface BuildStamp {
  version: string;
  revision: string;
}

/**
 * Replaced by scripts/bundle.mjs with the version and revision of the build. The tsc output
 * (dist/main.js, the e2e tests, `npm run cli`) has none: it reads the stamp scripts/build-stamp.mjs
 * wrote beside it (dist/build-stamp.json, by `npm run build`), else package.json, and then says the
 * revision is unknown rather than guessing it at run time.
 */
declare const NLC_BUILD_STAMP: BuildStamp | undefined;

export const UNKNOWN_REVISION = 'unknown';

export function resolveBuildInfo(
  stamp: BuildStamp | undefined,
  packageVersion: () => string | undefined,
  nodejsVersion: string,
): BuildInfo {
  if (stamp) return { version: stamp.version, revision: stamp.revision, nodejsVersion };
  return { version: packageVersion() ?? 'unknown', revision: UNKNOWN_REVISION, nodejsVersion };
}

/** package.json's version, two folders up from dist/cli/ (or src/cli/); undefined when unreadable. */
function packageJsonVersion(): string | undefined {
  try {
    const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
      version?: unknown;
    };
    return typeof pkg.version === 'string' ? pkg.version : undefined;
  } catch {
    return undefined;
  }
}

/** A stamp as scripts/build-stamp.mjs writes it; undefined for anything else. */
export function parseBuildStamp(text: string): BuildStamp | undefined {
  try {
    const s = JSON.parse(text) as Partial<BuildStamp> | null;
    if (typeof s?.version !== 'string' || typeof s.revision !== 'string') return undefined;
    if (s.version === '' || s.revision === '') return undefined;
    return { version: s.version, revision: s.revision };
  } catch {
    return undefined;
  }
}

/** dist/build-stamp.json, one folder up from dist/cli/ (src/ has none); undefined when absent. */
function stampFile(): BuildStamp | undefined {
  try {
    return parseBuildStamp(readFileSync(new URL('../build-stamp.json', import.meta.url), 'utf8'));
  } catch {
    return undefined;
  }
}

/** This process's build. */
export function buildInfo(): BuildInfo {
  const stamp = typeof NLC_BUILD_STAMP === 'undefined' ? stampFile() : NLC_BUILD_STAMP;
  return resolveBuildInfo(stamp, packageJsonVersion, process.version);
}

/** The one line `--version` prints, in the manner of Kubernetes components' `--version`. */
export function versionLine(b: BuildInfo): string {
  return `node-lifecycle-controller ${b.version} (revision ${b.revision}, Node.js ${b.nodejsVersion})`;
}

/** The Node.js major the controller is built and tested on (package.json `engines`, the image). */
export const SUPPORTED_NODE_MAJOR = 24;

/**
 * A warning for a Node.js older than the one the controller is built and tested on (undefined:
 * none). It runs on, as `engines` does not stop it, but says so once at start.
 */
export function nodeVersionWarning(version: string): string | undefined {
  const major = Number(/^v?(\d+)\./.exec(version)?.[1]);
  if (!Number.isFinite(major) || major >= SUPPORTED_NODE_MAJOR) return undefined;
  return `warning: running on Node.js ${version}; node-lifecycle-controller is built and tested on Node.js ${SUPPORTED_NODE_MAJOR} (package.json engines: >=${SUPPORTED_NODE_MAJOR}), and older lines may be end-of-life`;
}
