import { execFileSync } from 'node:child_process';
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
  startController,
} from '../support/controller-process.js';
import { waitUntil } from '../support/wait.js';

/**
 * What the Dockerfile's runtime stage promises, checked without Docker (the kind suite runs the real
 * image where Docker exists): the same layout (package.json, production node_modules from
 * `npm ci --omit=dev --omit=optional`, so no @kubernetes/client-node, and dist/), the same
 * user (65532:65532, non-root), an application tree that user cannot write (as with
 * readOnlyRootFilesystem), an environment holding only the downward-API variables, and a kubeconfig
 * mounted read-only. The controller must do its job from there and leave every file untouched.
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
  devDependencies: Record<string, string>;
};

const SKIP_REASON =
  'SKIPPED: switching to the image user 65532 needs root, and this test process is not root';
if (!isRoot) console.log(`image-layout: ${SKIP_REASON}`);

describe.skipIf(!isRoot)(
  `the image layout without Docker: production dependencies only, user 65532, read-only files${isRoot ? '' : ` (${SKIP_REASON})`}`,
  () => {
    beforeAll(async () => {
      work = mkdtempSync(path.join(os.tmpdir(), 'nlc-image-'));
      chmodSync(work, 0o755);
      app = path.join(work, 'app');
      mkdirSync(app);
      // The Dockerfile's build stage: the lockfile's production tree, then our compiled dist/.
      copyFileSync(path.join(ROOT, 'package.json'), path.join(app, 'package.json'));
      copyFileSync(path.join(ROOT, 'package-lock.json'), path.join(app, 'package-lock.json'));
      const t = performance.now();
      execFileSync(
        'npm',
        [
          'ci',
          '--omit=dev',
          '--omit=optional',
          '--ignore-scripts',
          '--no-audit',
          '--no-fund',
          '--prefer-offline',
        ],
        {
          cwd: app,
          stdio: 'pipe',
          timeout: 180_000,
        },
      );
      console.log(`npm ci --omit=dev --omit=optional: ${((performance.now() - t) / 1000).toFixed(1)} s`);
      rmSync(path.join(app, 'package-lock.json'));
      // Like the image: the optional auth-provider package is not there.
      expect(existsSync(path.join(app, 'node_modules', '@kubernetes', 'client-node'))).toBe(false);
      cpSync(path.join(ROOT, 'dist'), path.join(app, 'dist'), { recursive: true });
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

    it('node_modules holds every runtime dependency and no package the lockfile marks dev-only', () => {
      const lock = JSON.parse(readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as {
        packages: Record<string, { dev?: boolean }>;
      };
      const has = (rel: string) => existsSync(path.join(app, rel, 'package.json'));
      const runtime = Object.keys(pkg.dependencies).map((d) => `node_modules/${d}`);
      const devOnly = Object.entries(lock.packages)
        .filter(([key, meta]) => key.startsWith('node_modules/') && meta.dev === true)
        .map(([key]) => key);
      console.log(
        `lockfile: ${devOnly.length} dev-only packages; direct devDependencies: ${Object.keys(pkg.devDependencies).join(', ')}`,
      );
      expect(runtime.filter((d) => !has(d))).toEqual([]);
      // Every direct devDependency is dev-only in the lockfile unless a runtime package needs it too
      // (@types/node is a dependency of @kubernetes/client-node), and none of the dev-only ones shipped.
      expect(devOnly).toContain('node_modules/vitest');
      expect(devOnly).toContain('node_modules/typescript');
      expect(devOnly.filter(has)).toEqual([]);
    });

    it('as user 65532 with a bare environment it marks a silent node, writes no file, and exits 0 on SIGTERM', async () => {
      const before = fingerprint(app);
      const c = await startController(fastTestFlags(path.join(work, 'kubeconfig'), GRACE_MS), {
        name: 'image-user',
        install: { node: path.join(work, 'node'), main: path.join(app, 'dist', 'main.js'), cwd: app },
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
  },
);
