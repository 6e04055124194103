/**
 * scripts/sbom.mjs: the CycloneDX SBOM that `npm run build` writes beside the bundle
 * (dist/sbom.cdx.json). test/e2e/image-layout.test.ts checks it against the packages really inside
 * the bundle; here, how each is described, with the real package-lock.json.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { cycloneDx, packageKeyOf } from '../../scripts/sbom.mjs';
import { REPO } from './manifests.support.js';

const lock = JSON.parse(readFileSync(join(REPO, 'package-lock.json'), 'utf8')) as {
  packages: Record<string, { version: string; integrity?: string; license?: string }>;
};
const inputs = [
  'dist/main.js',
  'node_modules/prom-client/lib/registry.js',
  'node_modules/prom-client/index.js',
  'node_modules/@opentelemetry/api/build/esm/index.js',
  'node_modules/tdigest/tdigest.js',
];
const make = () =>
  cycloneDx({
    name: 'node-lifecycle-controller',
    version: '1.2.3',
    revision: 'abc',
    license: 'Apache-2.0',
    inputs,
    lock,
  });

describe('SBOM (CycloneDX 1.5)', () => {
  it('one component per bundled package, as package-lock.json has it; our own files are not packages', () => {
    const bom = make();
    expect(bom.bomFormat).toBe('CycloneDX');
    expect(bom.specVersion).toBe('1.5');
    expect(bom.components.map((c) => c.name)).toEqual(['@opentelemetry/api', 'prom-client', 'tdigest']);
    const prom = bom.components.find((c) => c.name === 'prom-client')!;
    const entry = lock.packages['node_modules/prom-client']!;
    expect(prom.version).toBe(entry.version);
    expect(prom.purl).toBe(`pkg:npm/prom-client@${entry.version}`);
    expect(prom.licenses).toEqual([{ license: { id: entry.license } }]);
    // npm's sha512-<base64> integrity as hex.
    expect(prom.hashes).toEqual([
      {
        alg: 'SHA-512',
        content: Buffer.from(entry.integrity!.slice('sha512-'.length), 'base64').toString('hex'),
      },
    ]);
    expect(prom.hashes![0]!.content).toMatch(/^[0-9a-f]{128}$/);
    // A scope's @ is percent-encoded in a package URL.
    expect(bom.components[0]!.purl).toMatch(/^pkg:npm\/%40opentelemetry\/api@\d/);
    expect(bom.metadata.component).toMatchObject({
      name: 'node-lifecycle-controller',
      version: '1.2.3',
      purl: 'pkg:npm/node-lifecycle-controller@1.2.3',
      properties: [{ name: 'vcs:revision', value: 'abc' }],
    });
    expect(bom.dependencies).toEqual([
      { ref: 'pkg:npm/node-lifecycle-controller@1.2.3', dependsOn: bom.components.map((c) => c['bom-ref']) },
    ]);
  });

  it('is deterministic (no timestamp, no serial number): the same tree gives the same file', () => {
    expect(JSON.stringify(make())).toBe(JSON.stringify(make()));
    expect(JSON.stringify(make())).not.toMatch(/timestamp|serialNumber/);
  });

  it('nested node_modules and scopes map to their lockfile entries; an unknown package fails the build', () => {
    expect(packageKeyOf('node_modules/a/node_modules/@s/b/x.js')).toBe('node_modules/a/node_modules/@s/b');
    expect(packageKeyOf('node_modules/@s/b/lib/x.js')).toBe('node_modules/@s/b');
    expect(packageKeyOf('src/x.ts')).toBeUndefined();
    expect(() =>
      cycloneDx({
        name: 'x',
        version: '1.0.0',
        revision: 'r',
        inputs: ['node_modules/not-in-the-lock/i.js'],
        lock,
      }),
    ).toThrow(/not-in-the-lock is bundled but not in package-lock.json/);
  });
});
