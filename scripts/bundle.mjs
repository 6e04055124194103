#!/usr/bin/env node
// Bundles the compiled controller (dist/main.js, from `tsc -p tsconfig.build.json`) and its
// production dependencies into dist/controller.mjs, the file the container image runs.
//
// Why: one file instead of about 500 modules (rxjs alone is 400) loads in less memory (about 10 MiB
// less resident at start, docs/benchmarks.md) and lets the image carry no node_modules at all.
// What stays out:
//  - the demo (dist/cli/demo.js and the local control plane and simulated fleet behind it): main.js
//    imports it lazily and says so when it is absent, as in the image;
//  - @kubernetes/client-node, an optional dependency loaded only for kubeconfig auth providers.
// The `status` subcommand is split into its own chunk (dist/chunks/), loaded only when used.
// Not minified: stack traces keep function names, and the file stays readable.
//
// Build stamp (scripts/build-stamp.mjs): the version (package.json) and the git revision (`git
// rev-parse HEAD`, "-dirty" when tracked files differ from it; "unknown" outside a git checkout) are
// compiled into the bundle (NLC_BUILD_STAMP, src/cli/build-info.ts) and written to
// dist/build-stamp.json for the tsc output (`node dist/main.js`): `--version`, the start-up log and
// nlc_build_info report them. The image build has no .git: the Dockerfile passes its REVISION and
// VERSION build arguments as NLC_BUILD_REVISION and NLC_BUILD_VERSION; a VERSION other than
// package.json's fails the build.
// SBOM: dist/sbom.cdx.json, the npm packages in the bundle (scripts/sbom.mjs).
import { readFileSync, writeFileSync } from 'node:fs';
import { build } from 'esbuild';
import { buildStamp, writeBuildStamp } from './build-stamp.mjs';
import { cycloneDx } from './sbom.mjs';

const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
let stamp;
try {
  stamp = buildStamp();
} catch (err) {
  console.error(`bundle: ${err.message}`);
  process.exit(1);
}
writeBuildStamp(stamp);

// Node's own modules are loaded with require(), not import: an ES import of a built-in module
// builds its whole namespace, which runs every lazy getter on it (node:http's WebSocket loads
// undici, node:crypto's webcrypto, node:tls's rootCertificates parses the bundled CAs), about 4 MiB
// resident the controller never uses (docs/benchmarks.md, "Node's own modules by require").
const builtinsByRequire = {
  name: 'builtins-by-require',
  setup(b) {
    b.onResolve({ filter: /^node:/ }, (args) =>
      args.namespace === 'builtin'
        ? { path: args.path, external: true }
        : { path: args.path, namespace: 'builtin' },
    );
    b.onLoad({ filter: /.*/, namespace: 'builtin' }, (args) => ({
      contents: `module.exports = require(${JSON.stringify(args.path)});`,
      loader: 'js',
    }));
  },
};

const result = await build({
  entryPoints: { controller: 'dist/main.js' },
  outdir: 'dist',
  outExtension: { '.js': '.mjs' },
  chunkNames: 'chunks/[name]-[hash]',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node24',
  external: ['@kubernetes/client-node', './cli/demo.js'],
  // CommonJS dependencies (prom-client, its helpers) call require() for Node's own modules.
  banner: {
    js: "import { createRequire as __nlcCreateRequire } from 'node:module';\nconst require = __nlcCreateRequire(import.meta.url);",
  },
  define: { NLC_BUILD_STAMP: JSON.stringify(stamp) },
  plugins: [builtinsByRequire],
  legalComments: 'linked',
  metafile: true,
  logLevel: 'warning',
});
// The SBOM of what was just bundled (scripts/sbom.mjs).
const sbom = cycloneDx({
  name: pkg.name,
  version: stamp.version,
  revision: stamp.revision,
  license: pkg.license,
  inputs: Object.keys(result.metafile.inputs),
  lock: JSON.parse(readFileSync('package-lock.json', 'utf8')),
});
writeFileSync('dist/sbom.cdx.json', `${JSON.stringify(sbom, null, 2)}\n`);
const out = Object.entries(result.metafile.outputs)
  .filter(([file]) => !file.endsWith('.map') && !file.endsWith('.LEGAL.txt'))
  .map(([file, o]) => `${file} ${(o.bytes / 1024).toFixed(0)} KiB`);
console.log(`bundled ${stamp.version} (revision ${stamp.revision}): ${out.join(', ')}`);
console.log(
  `dist/sbom.cdx.json: ${sbom.components.length} npm packages (${sbom.components.map((c) => c.name).join(', ')})`,
);
