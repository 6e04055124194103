// Types of scripts/build-stamp.mjs for the tests that import it.
export interface BuildStamp {
  version: string;
  revision: string;
}
export function buildStamp(root?: string, env?: Record<string, string | undefined>): BuildStamp;
export function writeBuildStamp(stamp: BuildStamp, root?: string): string;
