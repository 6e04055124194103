import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { dump } from 'js-yaml';
import { binariesIn } from '../../src/localcluster/binaries.js';
import { type Manifest, parseManifests } from './apply.js';

/**
 * The project's own kubectl (`scripts/build-control-plane.sh --with-kubectl`, which `./dev test`
 * runs before the tests; test/kind/offline/provision.sh builds it too), never whatever kubectl the
 * machine has on PATH. Missing, it throws saying how to build it: the tests that need it fail, they
 * do not skip.
 */
export function projectKubectl(): string {
  const kubectl = binariesIn(process.env).kubectl;
  if (!existsSync(kubectl)) {
    throw new Error(
      `the project's kubectl is not built (${kubectl}); run: bash scripts/build-control-plane.sh --with-kubectl`,
    );
  }
  return kubectl;
}

export interface Overlay {
  /** Kustomizations to include (absolute paths). */
  resources: string[];
  components?: string[];
  /** kustomize's `namespace:`, as a user's overlay sets it. */
  namespace?: string;
  images?: { name: string; newName?: string; newTag?: string }[];
}

/** What the project's kubectl renders for a throwaway overlay of `o` (plain YAML: parseManifests). */
export function kustomizeOverlay(o: Overlay): Manifest[] {
  const dir = mkdtempSync(path.join(tmpdir(), 'nlc-overlay-'));
  try {
    // kustomize takes only relative paths to other kustomizations.
    const rel = (p: string) => path.relative(dir, p);
    writeFileSync(
      path.join(dir, 'kustomization.yaml'),
      dump({
        apiVersion: 'kustomize.config.k8s.io/v1beta1',
        kind: 'Kustomization',
        ...(o.namespace ? { namespace: o.namespace } : {}),
        resources: o.resources.map(rel),
        ...(o.components?.length ? { components: o.components.map(rel) } : {}),
        ...(o.images ? { images: o.images } : {}),
      }),
    );
    const r = spawnSync(projectKubectl(), ['kustomize', dir], { encoding: 'utf8', maxBuffer: 64 << 20 });
    if (r.status !== 0) throw new Error(`kubectl kustomize failed: ${r.stderr}`);
    return parseManifests(r.stdout);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
