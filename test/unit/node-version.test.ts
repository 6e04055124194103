import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { nodeVersionWarning, SUPPORTED_NODE_MAJOR } from '../../src/cli/build-info.js';
import { REPO } from './manifests.support.js';

/**
 * The Node.js version the project declares (package.json `engines`) is the one it builds and tests
 * with: `./dev` (what CI runs) installs that major, and the image is built on it. Declaring an older
 * one would promise something nothing checks.
 */

const read = (p: string) => readFileSync(join(REPO, p), 'utf8');

function declaredMajor(range: unknown): number {
  const m = /^>=(\d+)$/.exec(String(range));
  if (!m) throw new Error(`engines.node should be ">=<major>", got ${JSON.stringify(range)}`);
  return Number(m[1]);
}

describe('Node.js version', () => {
  const pkg = JSON.parse(read('package.json')) as { engines?: { node?: string } };
  const declared = declaredMajor(pkg.engines?.node);

  it('the controller warns at start on an older Node.js, names the one it is tested on, and runs on', () => {
    expect(SUPPORTED_NODE_MAJOR).toBe(declared);
    expect(nodeVersionWarning('v20.19.0')).toBe(
      `warning: running on Node.js v20.19.0; node-lifecycle-controller is built and tested on Node.js ${declared} (package.json engines: >=${declared}), and older lines may be end-of-life`,
    );
    expect(nodeVersionWarning(`v${declared - 1}.9.0`)).toBeDefined();
    expect(nodeVersionWarning(`v${declared}.0.0`)).toBeUndefined();
    expect(nodeVersionWarning(`v${declared + 2}.1.0`)).toBeUndefined();
    expect(nodeVersionWarning(process.version)).toBeUndefined();
  });

  it('package.json engines names the major that ./dev installs and tests with', () => {
    const m = /^NODE_MAJOR=(\d+)$/m.exec(read('dev'));
    expect(m, 'NODE_MAJOR in ./dev').not.toBeNull();
    expect(declared).toBe(Number(m?.[1]));
  });

  it('every stage of the image is built on that major', () => {
    const froms = [...read('Dockerfile').matchAll(/^FROM\s+(?:--platform=\S+\s+)?node:(\d+)\S*/gm)].map((m) =>
      Number(m[1]),
    );
    expect(froms.length).toBeGreaterThan(0);
    for (const major of froms) expect(major).toBe(declared);
  });

  it('package-lock.json records the same engines as package.json', () => {
    const lock = JSON.parse(read('package-lock.json')) as {
      packages: Record<string, { engines?: { node?: string } }>;
    };
    expect(lock.packages['']?.engines?.node).toBe(pkg.engines?.node);
  });
});
