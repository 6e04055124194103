/**
 * What a release is made of stays consistent: one version (package.json) everywhere it is written
 * down, a licence file that is the licence package.json and the image declare, and the release
 * documents that RELEASE.md's steps rely on.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { kustomizationOf, loadDocs, MANIFESTS, REPO } from './manifests.support.js';

const read = (f: string) => readFileSync(join(REPO, f), 'utf8');
const pkg = JSON.parse(read('package.json')) as { version: string; license: string };
/** Semantic Versioning 2.0.0 (no build metadata: the image tag cannot hold a '+'). */
const SEMVER = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$/;

describe('version', () => {
  it('package.json holds a semantic version', () => {
    expect(pkg.version).toMatch(SEMVER);
  });

  it('package-lock.json, the Dockerfile default, the chart and the base image tag carry the same version', () => {
    const lock = JSON.parse(read('package-lock.json')) as {
      version: string;
      packages: Record<string, { version?: string }>;
    };
    expect(lock.version).toBe(pkg.version);
    expect(lock.packages['']?.version).toBe(pkg.version);
    const arg = /^ARG VERSION=(\S*)$/m.exec(read('Dockerfile'));
    expect(arg?.[1], 'Dockerfile: ARG VERSION=<default>').toBe(pkg.version);
    const chart = loadDocs(join(REPO, 'charts', 'node-lifecycle-controller', 'Chart.yaml'))[0]!;
    expect(chart.version, 'Chart.yaml version').toBe(pkg.version);
    expect(chart.appVersion, 'Chart.yaml appVersion').toBe(pkg.version);
    const images = kustomizationOf(join(MANIFESTS, 'base')).images as { name: string; newTag?: string }[];
    expect(images).toEqual([{ name: 'node-lifecycle-controller', newTag: pkg.version }]);
  });

  it('the Dockerfile labels the image with the version, revision and source build arguments', () => {
    const dockerfile = read('Dockerfile');
    const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
    for (const [label, arg] of [
      ['version', 'VERSION'],
      ['revision', 'REVISION'],
      ['source', 'SOURCE'],
    ]) {
      expect(runtime, `ARG ${arg} in the runtime stage`).toMatch(new RegExp(`^ARG ${arg}$`, 'm'));
      expect(runtime).toContain(`org.opencontainers.image.${label}="$${arg}"`);
    }
    // Every script bundle.mjs imports, and every script those import, is in the image's build stage.
    const imported: string[] = [];
    for (const todo = ['scripts/bundle.mjs']; todo.length > 0; ) {
      for (const m of read(todo.pop()!).matchAll(/from '\.\/([^']+)'/g)) {
        const f = `scripts/${m[1]}`;
        if (imported.includes(f)) continue;
        imported.push(f);
        todo.push(f);
      }
    }
    expect(imported).toContain('scripts/sbom.mjs');
    expect(imported).toContain('scripts/build-stamp.mjs');
    expect(imported).toContain('scripts/run-as-script.mjs');
    const copy = /^COPY (scripts\/\S+ )+\.\/scripts\/$/m.exec(dockerfile)?.[0] ?? '';
    for (const f of ['scripts/bundle.mjs', ...imported]) expect(copy, `Dockerfile copies ${f}`).toContain(f);
    // And the bundle is stamped with the same two.
    expect(dockerfile).toContain('NLC_BUILD_VERSION="$VERSION" NLC_BUILD_REVISION="$REVISION" npm run build');
  });
});

describe('licence and release documents', () => {
  it('LICENSE is the Apache License 2.0 that package.json and the image declare', () => {
    expect(pkg.license).toBe('Apache-2.0');
    expect(read('Dockerfile')).toContain('org.opencontainers.image.licenses="Apache-2.0"');
    const text = read('LICENSE');
    expect(text).toContain('Apache License');
    expect(text).toContain('Version 2.0, January 2004');
    expect(text).toContain('TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION');
    expect(text).toContain('END OF TERMS AND CONDITIONS');
  });

  it('CHANGELOG.md has an Unreleased section and one for every released version, newest first', () => {
    const headings = [...read('CHANGELOG.md').matchAll(/^## \[([^\]]+)\]/gm)].map((m) => m[1]!);
    expect(headings[0]).toBe('Unreleased');
    const released = headings.slice(1);
    expect(released.length).toBeGreaterThan(0);
    for (const v of released) expect(v).toMatch(SEMVER);
    // A -dev version is not released yet; a release commit's version heads the released sections.
    if (pkg.version.endsWith('-dev')) expect(released).not.toContain(pkg.version);
    else expect(released[0]).toBe(pkg.version);
  });

  it('RELEASE.md and SECURITY.md exist and RELEASE.md names every artifact step', () => {
    const release = read('RELEASE.md');
    for (const step of [
      'package.json',
      'CHANGELOG.md',
      'git tag',
      // both platforms, the arm64 image run under emulation, the multi-platform image pushed
      'scripts/build-image.sh --platform all',
      'test/image/emulated-run.ts',
      'skopeo copy --all',
      'npm run render-install',
      'helm package',
      'SBOM',
      // the image SBOM of each platform
      'linux-{amd64,arm64}.cdx.json',
    ]) {
      expect(release, `RELEASE.md mentions ${step}`).toContain(step);
    }
    expect(read('SECURITY.md')).toMatch(/report/i);
  });
});

describe('the image name', () => {
  it('is written once: the chart, the base, render-install, the release command and its workflow name the same image', () => {
    const values = loadDocs(join(REPO, 'charts', 'node-lifecycle-controller', 'values.yaml'))[0]! as {
      image: { repository: string };
    };
    const name = values.image.repository;
    expect(name).toBe('node-lifecycle-controller');
    const images = kustomizationOf(join(MANIFESTS, 'base')).images as { name: string }[];
    expect(images.map((i) => i.name)).toEqual([name]);
    expect(read('scripts/render-install.mjs')).toContain(`const IMAGE_NAME = '${name}';`);
    expect(read('scripts/release.sh')).toMatch(new RegExp(`^NAME=${name}$`, 'm'));
    expect(read('.github/workflows/release.yml')).toMatch(new RegExp(`^\\s+NAME: ${name}$`, 'm'));
  });
});

describe('scripts/release.sh refuses bad input before it builds anything', () => {
  const release = (...args: string[]) =>
    spawnSync('bash', [join(REPO, 'scripts', 'release.sh'), ...args], { encoding: 'utf8', timeout: 30_000 });
  it.each([
    [[], /--registry is required/],
    [
      ['--registry', 'HTTP://Example.com'],
      /--registry HTTP:\/\/Example\.com: accepted values are HOST\[:PORT\]\[\/PATH\]/,
    ],
    [
      ['--registry', 'r.example:5000/x', '--platform', 'linux/s390x'],
      /--platform linux\/s390x: accepted values are linux\/amd64 and all/,
    ],
    [
      ['--registry', 'r.example:5000/x', '--key', '/nonexistent/cosign.key'],
      /--key \/nonexistent\/cosign\.key: no such file/,
    ],
    [
      ['--registry', 'r.example', '--colour'],
      /unknown flag --colour \(accepted: --registry, --platform, --key, --out, --plain-http, --source\)/,
    ],
    [['--registry'], /--registry needs a value/],
  ])('%j: exit 2 naming the flag and what it accepts', (args, message) => {
    const r = release(...args);
    expect(r.status, r.stderr).toBe(2);
    expect(r.stderr).toMatch(message);
  });
});
