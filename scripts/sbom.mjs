// A CycloneDX 1.5 SBOM of the npm packages inside the bundle (dist/controller.mjs and its chunks),
// written by scripts/bundle.mjs to dist/sbom.cdx.json at every build: exactly the packages esbuild
// put into the bundle (from its metafile), with the versions, licences and integrity hashes of
// package-lock.json. Deterministic (no timestamp, no serial number): the same tree gives the same
// file. The image's base (the distroless Node.js runtime and its Debian packages) is added to it per
// image by scripts/image-sbom.mjs (scripts/build-image.sh).

/** The lockfile key (`node_modules/<name>`, nested ones too) of a bundled input path, if any. */
export function packageKeyOf(inputPath) {
  const m = /^((?:.*\/)?node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(inputPath);
  return m?.[1];
}

function purlOf(name, version) {
  // The package-url spec: a scope's @ is percent-encoded.
  return `pkg:npm/${name.replace(/^@/, '%40')}@${version}`;
}

/** sha512-<base64> (npm's integrity) -> CycloneDX hash, or undefined for another algorithm. */
function hashOf(integrity) {
  const m = /^sha512-(.+)$/.exec(integrity ?? '');
  return m ? { alg: 'SHA-512', content: Buffer.from(m[1], 'base64').toString('hex') } : undefined;
}

function licensesOf(license) {
  if (!license) return undefined;
  // A single SPDX id, or an expression such as "(MIT OR Apache-2.0)".
  return /^[A-Za-z0-9.+-]+$/.test(license) ? [{ license: { id: license } }] : [{ expression: license }];
}

/**
 * @param {{ name: string, version: string, revision: string, license?: string,
 *   inputs: string[], lock: { packages: Record<string, { version?: string, integrity?: string, license?: string }> } }} o
 */
export function cycloneDx(o) {
  const keys = [...new Set(o.inputs.map(packageKeyOf).filter(Boolean))].sort();
  const components = keys.map((key) => {
    const entry = o.lock.packages[key];
    if (!entry?.version) throw new Error(`sbom: ${key} is bundled but not in package-lock.json`);
    const name = key.slice(key.lastIndexOf('node_modules/') + 'node_modules/'.length);
    const hash = hashOf(entry.integrity);
    const licenses = licensesOf(entry.license);
    return {
      type: 'library',
      'bom-ref': purlOf(name, entry.version),
      name,
      version: entry.version,
      purl: purlOf(name, entry.version),
      ...(licenses ? { licenses } : {}),
      ...(hash ? { hashes: [hash] } : {}),
    };
  });
  const app = purlOf(o.name, o.version);
  return cycloneDxDocument({
    tool: 'scripts/sbom.mjs',
    component: {
      type: 'application',
      'bom-ref': app,
      name: o.name,
      version: o.version,
      purl: app,
      ...(o.license ? { licenses: licensesOf(o.license) } : {}),
      properties: [{ name: 'vcs:revision', value: o.revision }],
    },
    components,
    dependencies: [{ ref: app, dependsOn: components.map((c) => c['bom-ref']) }],
  });
}

/** A CycloneDX 1.5 document made at build time by `tool` (no timestamp, no serial number). */
export function cycloneDxDocument({ tool, component, components, dependencies }) {
  return {
    bomFormat: 'CycloneDX',
    specVersion: '1.5',
    version: 1,
    metadata: {
      lifecycles: [{ phase: 'build' }],
      tools: { components: [{ type: 'application', name: tool }] },
      component,
    },
    components,
    dependencies,
  };
}
