#!/usr/bin/env node
// Renders the install as one YAML file, as metrics-server ships its components.yaml: manifests/base
// (and the components asked for) through `kubectl kustomize` with the project's own kubectl
// (scripts/build-control-plane.sh --with-kubectl, cached outside the repository by version), the
// image pinned to package.json's version. `kubectl apply --server-side -f <file>` installs it.
//
//   npm run render-install [-- --with=servicemonitor,prometheusrule,networkpolicy]
//                            [--image=<registry>/node-lifecycle-controller] [--output=<file>|-]
//
// --with       components of manifests/components to include (comma-separated; `all` for every one,
//              the opt-in ones too: coordinated-leader-election, node-pools; not out-of-service, which
//              force-deletes the pods of a node a fence signal says is down, nor second-opinion, which
//              probes every node's kubelet and marks a node sooner when it does not answer: each must
//              be named on its own (with a warning); and not companion-evictions, which belongs to
//              manifests/overlays/companion). Rendered in the order of manifests/components, whatever
//              the order asked (second-opinion adds its egress rule to networkpolicy's NetworkPolicy,
//              so it must come after it)
// --image      image repository (default: node-lifecycle-controller, no registry); the tag is always
//              the version, so the file installs exactly the release it belongs to. Or
//              <repository>@sha256:<digest>: the image pinned by digest instead of the tag, as
//              scripts/release.sh renders a release's install.yaml (the digest it pushed)
// --output     where to write (default dist/install/node-lifecycle-controller-<version>.yaml; - for
//              standard output)
// Checked by test/e2e/render-install.test.ts: every object server-side applied with dryRun=All
// against a real kube-apiserver.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const COMPONENTS = join(REPO, 'manifests', 'components');
const IMAGE_NAME = 'node-lifecycle-controller';

function fail(msg) {
  console.error(`render-install: ${msg}`);
  process.exit(2);
}

/** Components that only make sense on an overlay this script does not render. */
const OVERLAY_ONLY = ['companion-evictions'];
/** Components `all` leaves out: each is a choice of its own, named and warned about. */
const NAMED_ONLY = {
  'out-of-service':
    'out-of-service turns on --out-of-service: a node this controller marked lost that a fence signal says is down gets node.kubernetes.io/out-of-service=nodeshutdown:NoExecute, and kube-controller-manager then force-deletes its pods and detaches their volumes. Trust only the signals your platform really gives (--out-of-service-signals; docs/operations.md, "The out-of-service taint").',
  'second-opinion':
    'second-opinion turns on --second-opinion=kubelet: the controller probes the kubelet port (10250) of every silent node, marks one whose kubelet does not answer 20s in instead of at the grace, and holds the NoExecute taint of one that still answers. Its pods must reach the kubelet port of every node, or every silent node is marked sooner (docs/operations.md, "A second opinion").',
};

function parseArgs(argv) {
  const opts = { with: [], image: IMAGE_NAME, digest: undefined, output: undefined };
  // companion-evictions belongs to manifests/overlays/companion: on the base it adds a flag the
  // controller refuses without --mode=companion, so this file (the base) does not offer it.
  const available = readdirSync(COMPONENTS).filter(
    (c) => statSync(join(COMPONENTS, c)).isDirectory() && !OVERLAY_ONLY.includes(c),
  );
  for (const arg of argv) {
    const m = /^--(with|image|output)=(.*)$/.exec(arg);
    if (!m) fail(`unknown argument ${JSON.stringify(arg)} (accepted: --with=, --image=, --output=)`);
    const [, name, value] = m;
    if (name === 'with') {
      const asked = value
        .split(',')
        .filter(Boolean)
        .flatMap((c) => (c === 'all' ? available.filter((a) => !(a in NAMED_ONLY)) : [c]));
      for (const c of asked) {
        if (!available.includes(c))
          fail(`no component ${JSON.stringify(c)} (accepted: ${available.join(', ')}, all)`);
        if (c in NAMED_ONLY) console.error(`render-install: warning: ${NAMED_ONLY[c]}`);
      }
      // In the directory's order, whatever the order asked: a component that patches another's
      // object (second-opinion, networkpolicy's NetworkPolicy) must come after it.
      opts.with = available.filter((c) => opts.with.includes(c) || asked.includes(c));
    } else if (name === 'image') {
      const at = value.indexOf('@');
      const repository = at < 0 ? value : value.slice(0, at);
      const digest = at < 0 ? undefined : value.slice(at + 1);
      if (
        !/^[a-z0-9]([a-z0-9._\-/:]*[a-z0-9])?$/.test(repository) ||
        /:[^/]*$/.test(repository.replace(/^[^/]*\//, ''))
      )
        fail(
          `--image=${value}: a repository without a tag (the tag is the version), or <repository>@sha256:<digest>`,
        );
      if (digest !== undefined && !/^sha256:[0-9a-f]{64}$/.test(digest))
        fail(`--image=${value}: the digest must be sha256: and 64 lowercase hex digits`);
      opts.image = repository;
      opts.digest = digest;
    } else {
      opts.output = value;
    }
  }
  return opts;
}

/** The project's kubectl: built once into the cache by version, its folder on the script's last line. */
function projectKubectl() {
  const r = spawnSync('bash', [join(REPO, 'scripts', 'build-control-plane.sh'), '--with-kubectl'], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  if (r.status !== 0) fail('scripts/build-control-plane.sh --with-kubectl failed');
  return join(r.stdout.trim().split('\n').at(-1), 'kubectl');
}

const opts = parseArgs(process.argv.slice(2));
const { version } = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8'));
const kubectl = projectKubectl();
const dir = mkdtempSync(join(tmpdir(), 'nlc-render-install-'));
let rendered;
try {
  // kustomize takes only relative paths to other kustomizations.
  const rel = (p) => relative(dir, p);
  const kustomization = [
    'apiVersion: kustomize.config.k8s.io/v1beta1',
    'kind: Kustomization',
    'resources:',
    `  - ${rel(join(REPO, 'manifests', 'base'))}`,
    ...(opts.with.length ? ['components:', ...opts.with.map((c) => `  - ${rel(join(COMPONENTS, c))}`)] : []),
    'images:',
    `  - name: ${IMAGE_NAME}`,
    `    newName: ${opts.image}`,
    opts.digest ? `    digest: ${opts.digest}` : `    newTag: "${version}"`,
    '',
  ].join('\n');
  writeFileSync(join(dir, 'kustomization.yaml'), kustomization);
  rendered = execFileSync(kubectl, ['kustomize', dir], { encoding: 'utf8', maxBuffer: 64 << 20 });
} finally {
  rmSync(dir, { recursive: true, force: true });
}
const kubectlVersion = execFileSync(kubectl, ['version', '--client', '-o', 'json'], { encoding: 'utf8' });
const kustomizeVersion = JSON.parse(kubectlVersion).kustomizeVersion ?? 'unknown';
const header = [
  `# node-lifecycle-controller ${version}: manifests/base${opts.with.map((c) => ` + components/${c}`).join('')},`,
  `# image ${opts.digest ? `${opts.image}@${opts.digest} (by digest)` : `${opts.image}:${version}`}. Rendered by scripts/render-install.mjs (kustomize ${kustomizeVersion}).`,
  '# Install: kubectl apply --server-side -f <this file>. Read docs/deploy.md first: hand the job over',
  "# from kube-controller-manager's node-lifecycle-controller, or start in dry-run.",
  '',
].join('\n');
const out = header + rendered;
if (opts.output === '-') {
  process.stdout.write(out);
} else {
  const file = resolve(
    opts.output ?? join(REPO, 'dist', 'install', `node-lifecycle-controller-${version}.yaml`),
  );
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, out);
  const objects = rendered.split(/^---$/m).filter((d) => /\bkind:/.test(d)).length;
  console.error(
    `render-install: wrote ${relative(process.cwd(), file)} (${objects} objects, ${out.length} bytes)`,
  );
}
