import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { paths } from '../../src/kube/client.js';
import type { Node } from '../../src/kube/types.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import {
  type ControllerProcess,
  exitWithin,
  fastTestFlags,
  imageNodeFlags,
  startController,
} from '../support/controller-process.js';
import { waitUntil } from '../support/wait.js';

/**
 * What the Dockerfile's runtime stage promises, checked without Docker (the kind suite runs the real
 * image where Docker exists): the same layout (package.json and the bundle, dist/controller.mjs with
 * dist/chunks/, from `npm run build`; no node_modules at all), the same user (65532:65532, non-root),
 * an application tree that user cannot write (as with readOnlyRootFilesystem), an environment holding
 * only the downward-API variables, and a kubeconfig mounted read-only. The controller must do its
 * job from there and leave every file untouched.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const IMAGE_USER = { uid: 65532, gid: 65532 };
const NS = 'nlc-e2e-image';
const GRACE_MS = 5_000;
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

let work: string;
let app: string;
let cluster: TestCluster;
let fleet: SimulatedFleet;
let controller: ControllerProcess | undefined;

/** Every path under dir with its size and mtime: a fingerprint that any write changes. */
function fingerprint(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      const st = statSync(p);
      out.set(path.relative(dir, p), `${st.size}:${st.mtimeMs}:${st.mode}`);
      if (e.isDirectory()) walk(p);
    }
  };
  walk(dir);
  return out;
}

function readOnlyForOthers(dir: string): void {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) readOnlyForOthers(p);
    else if (e.isFile()) chmodSync(p, statSync(p).mode & 0o111 ? 0o555 : 0o444);
  }
  chmodSync(dir, 0o555);
}

const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
};

describe('the image layout without Docker: the bundle only, user 65532, read-only files', () => {
  // Switching to the image user needs root. Not root, this FAILS (no skip): CI runs as root, and a
  // suite that passes without this check has not checked the image layout.
  it('runs as root (switching to the image user 65532 needs it)', () => {
    expect(isRoot, 'this test process must be root to switch to the image user 65532').toBe(true);
  });
  beforeAll(async () => {
    work = mkdtempSync(path.join(os.tmpdir(), 'nlc-image-'));
    chmodSync(work, 0o755);
    app = path.join(work, 'app');
    mkdirSync(app);
    // The Dockerfile's runtime stage: package.json and the bundle that `npm run build` made.
    copyFileSync(path.join(ROOT, 'package.json'), path.join(app, 'package.json'));
    mkdirSync(path.join(app, 'dist'));
    copyFileSync(path.join(ROOT, 'dist', 'controller.mjs'), path.join(app, 'dist', 'controller.mjs'));
    cpSync(path.join(ROOT, 'dist', 'chunks'), path.join(app, 'dist', 'chunks'), { recursive: true });
    // Our Node binary may live under a directory the image user cannot enter (/root): copy it.
    copyFileSync(process.execPath, path.join(work, 'node'));
    chmodSync(path.join(work, 'node'), 0o555);
    readOnlyForOthers(app);

    cluster = await startCluster();
    await cluster.admin.request({
      method: 'POST',
      path: paths.namespaces(),
      body: { metadata: { name: NS } },
    });
    // Mounted like a Secret volume: read-only, readable by the pod's user.
    writeFileSync(path.join(work, 'kubeconfig'), readFileSync(cluster.cp.kubeconfigPath), { mode: 0o444 });
    fleet = await SimulatedFleet.start(cluster.admin, {
      nodes: 3,
      podsPerNode: 1,
      timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 1000 },
    });
  });

  afterAll(async () => {
    await controller?.kill('SIGKILL');
    fleet?.stop();
    await cluster?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('the bundle holds every runtime dependency and no package the lockfile marks dev-only or optional; the SBOM lists them', () => {
    const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version?: string; dev?: boolean; optional?: boolean }>;
    };
    // esbuild names each bundled file in a comment: `// node_modules/<package>/<path>`.
    const bundled = new Set<string>();
    const ours = new Set<string>();
    const files = [
      path.join(app, 'dist', 'controller.mjs'),
      ...readdirSync(path.join(app, 'dist', 'chunks'))
        .filter((f) => f.endsWith('.mjs'))
        .map((f) => path.join(app, 'dist', 'chunks', f)),
    ];
    for (const f of files)
      for (const m of readFileSync(f, 'utf8').matchAll(/^\/\/ node_modules\/((?:@[^/]+\/)?[^/]+)\//gm))
        bundled.add(m[1]!);
    for (const f of files)
      for (const m of readFileSync(f, 'utf8').matchAll(/^\/\/ dist\/(\S+)$/gm)) ours.add(m[1]!);
    console.log(`bundled packages: ${[...bundled].sort().join(', ')}`);
    expect(existsSync(path.join(app, 'node_modules'))).toBe(false);
    expect(Object.keys(pkg.dependencies).filter((d) => !bundled.has(d))).toEqual([]);
    const excluded = [...bundled].filter((d) => {
      const meta = lock.packages[`node_modules/${d}`];
      return meta === undefined || meta.dev === true || meta.optional === true;
    });
    expect(excluded).toEqual([]);
    expect(bundled.has('@kubernetes/client-node')).toBe(false);
    // The SBOM written with the bundle (dist/sbom.cdx.json) lists exactly those packages, at the
    // lockfile's versions.
    const sbom = JSON.parse(readFileSync(path.join(ROOT, 'dist', 'sbom.cdx.json'), 'utf8')) as {
      components: { name: string; version: string }[];
    };
    expect(sbom.components.map((c) => c.name).sort()).toEqual([...bundled].sort());
    for (const c of sbom.components)
      expect(c.version, c.name).toBe(lock.packages[`node_modules/${c.name}`]?.version);
    // Our modules, without the demo and what only it uses (the local control plane, the fleet).
    expect(ours.has('cli/run.js')).toBe(true);
    expect([...ours].filter((m) => /^(cli\/demo\.js|localcluster\/|fleet\/)/.test(m))).toEqual([]);
  });

  it("the bundle carries its build stamp: --version names package.json's version and a commit of this repository", async () => {
    const r = spawnSync(path.join(work, 'node'), [path.join(app, 'dist', 'controller.mjs'), '--version'], {
      encoding: 'utf8',
      cwd: app,
      env: {},
    });
    expect(r.status, r.stderr).toBe(0);
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const m =
      /^node-lifecycle-controller (\S+) \(revision ([0-9a-f]{40})(-dirty)?, Node\.js (v[\d.]+)\)\n$/.exec(
        r.stdout,
      );
    expect(m, r.stdout).not.toBeNull();
    expect(m![1]).toBe(pkg.version);
    expect(m![4]).toBe(process.version);
    // scripts/bundle.mjs stamped the commit it was built from (a commit this checkout holds).
    const known = spawnSync('git', ['cat-file', '-e', `${m![2]}^{commit}`], { cwd: ROOT });
    expect(known.status, `revision ${m![2]} is a commit of this repository`).toBe(0);
  });

  it('as user 65532 with a bare environment it marks a silent node, writes no file, and exits 0 on SIGTERM', async () => {
    const before = fingerprint(app);
    const c = await startController(fastTestFlags(path.join(work, 'kubeconfig'), GRACE_MS), {
      name: 'image-user',
      install: { node: path.join(work, 'node'), main: path.join(app, 'dist', 'controller.mjs'), cwd: app },
      nodeFlags: imageNodeFlags(),
      user: IMAGE_USER,
      bareEnv: true,
      env: { POD_NAME: 'nlc-image-0', POD_NAMESPACE: NS, NODE_ENV: 'production' },
    });
    controller = c;
    onTestFailed(() => console.log(`--- controller log summary:\n${c.summary()}`));

    // It really runs as the image's user.
    const status = readFileSync(`/proc/${c.child.pid}/status`, 'utf8');
    expect(/^Uid:\s+(\d+)/m.exec(status)?.[1]).toBe(String(IMAGE_USER.uid));
    expect(/^Gid:\s+(\d+)/m.exec(status)?.[1]).toBe(String(IMAGE_USER.gid));

    await c.waitForLog('Acting: watches healthy and leading', 30_000);
    const name = fleet.names[0]!;
    fleet.node(name).pauseHeartbeats();
    try {
      const marked = await waitUntil(
        async () => {
          const n = await cluster.admin.request<Node>({ method: 'GET', path: paths.node(name) });
          const ready = n.status?.conditions?.find((x) => x.type === 'Ready');
          const tainted = (n.spec?.taints ?? []).some(
            (t) => t.key === 'node.kubernetes.io/unreachable' && t.effect === 'NoExecute',
          );
          return ready?.status === 'Unknown' && tainted ? n : undefined;
        },
        { timeoutMs: GRACE_MS + 10_000, what: `${name} Unknown with the unreachable NoExecute taint` },
      );
      expect(marked.status?.conditions?.find((x) => x.type === 'Ready')?.message).toBe(
        'Kubelet stopped posting node status.',
      );
    } finally {
      fleet.node(name).resumeHeartbeats();
    }

    c.child.kill('SIGTERM');
    const exit = await exitWithin(c, 10_000);
    expect(exit.code).toBe(0);
    // No warning about a file it could not write, and nothing in the tree changed.
    const denied = [...c.logs.map((l) => JSON.stringify(l)), ...c.text].filter((l) =>
      /EACCES|EROFS|EPERM/.test(l),
    );
    expect(denied).toEqual([]);
    expect([...fingerprint(app)]).toEqual([...before]);
  });
});
