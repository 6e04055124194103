/**
 * The rendered install (`npm run render-install`, scripts/render-install.mjs) against a real
 * kube-apiserver: every object of the one YAML file is server-side applied with `?dryRun=All`
 * (admission, defaulting and validation run, nothing is stored), the image is pinned to the
 * version, and the file is exactly what kustomize renders from manifests/ with that image.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { paths } from '../../src/kube/client.js';
import { ApiResolver, type Manifest, parseManifests, serverSideApply } from '../support/apply.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { kustomizeOverlay } from '../support/kubectl.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const { version } = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
const IMAGE = 'registry.example/platform/node-lifecycle-controller';
/** What --with=all takes: every component but out-of-service and second-opinion (named, warned). */
const COMPONENTS = [
  'coordinated-leader-election',
  'networkpolicy',
  'node-pools',
  'prometheusrule',
  'servicemonitor',
];
const FIELD_MANAGER = 'nlc-render-install-e2e';

let cluster: TestCluster;
let tmp: string;

function render(args: string[]): { file: string; text: string; objects: Manifest[]; stderr: string } {
  const file = path.join(tmp, `install-${args.join('_').replace(/[^a-z0-9]+/gi, '-')}.yaml`);
  const r = spawnSync(
    process.execPath,
    [path.join(ROOT, 'scripts', 'render-install.mjs'), ...args, `--output=${file}`],
    {
      encoding: 'utf8',
      cwd: ROOT,
    },
  );
  expect(r.status, r.stderr).toBe(0);
  const text = readFileSync(file, 'utf8');
  return { file, text, objects: parseManifests(text), stderr: r.stderr };
}

const key = (o: Manifest) => `${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}`;

/** kustomize's rendering of manifests/ (the project's kubectl) with the image the file should pin. */
const expected = (components: string[]): Manifest[] =>
  kustomizeOverlay({
    resources: [path.join(ROOT, 'manifests', 'base')],
    components: components.map((c) => path.join(ROOT, 'manifests', 'components', c)),
    images: [{ name: 'node-lifecycle-controller', newName: IMAGE, newTag: version }],
  });

/** Dry-run applies every object the API server serves; returns the kinds it does not serve. */
async function dryRunAll(objects: Manifest[]): Promise<string[]> {
  const { admin } = cluster;
  const resolver = new ApiResolver(admin);
  // A dry run stores nothing, so the namespaces the file creates must exist for its namespaced
  // objects: create those (and only those) for real first.
  for (const ns of objects.filter((o) => o.kind === 'Namespace')) {
    await serverSideApply(admin, resolver, ns, FIELD_MANAGER);
  }
  const unserved: string[] = [];
  for (const o of objects) {
    try {
      await resolver.resource(o.apiVersion, o.kind);
    } catch {
      unserved.push(`${o.apiVersion} ${o.kind}`);
      continue;
    }
    const stored = await serverSideApply(admin, resolver, o, FIELD_MANAGER, { dryRun: true });
    expect(key(stored), 'the dry run answers with the object').toBe(key(o));
    if (o.kind === 'Namespace') continue;
    // Nothing was stored.
    const got = await admin.raw({ method: 'GET', path: await resolver.objectPath(o) });
    expect(got.status, `${key(o)} was not created by the dry run`).toBe(404);
  }
  return unserved;
}

beforeAll(async () => {
  tmp = mkdtempSync(path.join(os.tmpdir(), 'nlc-render-install-'));
  cluster = await startCluster();
});

afterAll(async () => {
  await cluster?.stop();
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

describe('npm run render-install: one YAML file, checked by a server-side dry run', () => {
  it('the base: every object passes a dry-run apply, the image is pinned to the version', async () => {
    const { text, objects } = render([`--image=${IMAGE}`]);
    expect(text.split('\n')[0]).toBe(`# node-lifecycle-controller ${version}: manifests/base,`);
    expect(objects.map(key).sort()).toEqual(expected([]).map(key).sort());
    expect(objects).toEqual(expected([]));
    const images = objects.flatMap(
      (o) =>
        (o.spec as { template?: { spec?: { containers?: { image: string }[] } } } | undefined)?.template?.spec
          ?.containers ?? [],
    );
    expect(images.map((c) => c.image)).toEqual([`${IMAGE}:${version}`]);
    expect(await dryRunAll(objects)).toEqual([]);
    // The namespace is empty: the dry run left no object in it.
    const deployments = await cluster.admin.request<{ items: unknown[] }>({
      method: 'GET',
      path: '/apis/apps/v1/namespaces/nlc-system/deployments',
    });
    expect(deployments.items).toEqual([]);
  });

  it('--image=<repository>@sha256:<digest> (scripts/release.sh): the image pinned by digest, nothing else changes', () => {
    const digest = `sha256:${'0123456789abcdef'.repeat(4)}`;
    const { text, objects } = render([`--image=${IMAGE}@${digest}`]);
    expect(text.split('\n')[1]).toContain(`# image ${IMAGE}@${digest} (by digest).`);
    const byTag = JSON.stringify(expected([]));
    expect(byTag).toContain(`"${IMAGE}:${version}"`);
    expect(objects).toEqual(JSON.parse(byTag.replaceAll(`"${IMAGE}:${version}"`, `"${IMAGE}@${digest}"`)));
  });

  it('--with=all: the components too; the Prometheus Operator kinds (no CRDs here) validate against its schemas', async () => {
    const { text, objects } = render(['--with=all', `--image=${IMAGE}`]);
    expect(text.split('\n')[0]).toBe(
      `# node-lifecycle-controller ${version}: manifests/base${COMPONENTS.map((c) => ` + components/${c}`).join('')},`,
    );
    expect(objects).toEqual(expected(COMPONENTS));
    expect(objects.map((o) => o.kind)).toEqual(
      expect.arrayContaining(['NetworkPolicy', 'ServiceMonitor', 'PrometheusRule']),
    );
    // This API server has no monitoring.coreos.com CRDs: those two are checked against the
    // operator's published CRD schemas instead; everything else by the API server.
    const unserved = await dryRunAll(objects);
    expect(unserved.sort()).toEqual([
      'monitoring.coreos.com/v1 PrometheusRule',
      'monitoring.coreos.com/v1 ServiceMonitor',
    ]);
    new ServiceMonitor(objects.find((o) => o.kind === 'ServiceMonitor') as never).validate();
    new PrometheusRule(objects.find((o) => o.kind === 'PrometheusRule') as never).validate();
    expect((await cluster.admin.raw({ method: 'GET', path: paths.namespaces() })).status).toBe(200);
  });

  it('--with=all leaves out-of-service out; named, it comes with a warning that says what it force-deletes', async () => {
    const all = render(['--with=all', `--image=${IMAGE}`]);
    expect(all.text).not.toContain('--out-of-service');
    expect(all.stderr).not.toContain('warning');
    const oos = render(['--with=all,out-of-service', `--image=${IMAGE}`]);
    const sorted = (l: Manifest[]) => [...l].sort((a, b) => key(a).localeCompare(key(b)));
    expect(sorted(oos.objects)).toEqual(sorted(expected([...COMPONENTS, 'out-of-service'])));
    expect(oos.stderr).toContain(
      'render-install: warning: out-of-service turns on --out-of-service: a node this controller marked lost that a fence signal says is down gets node.kubernetes.io/out-of-service=nodeshutdown:NoExecute, and kube-controller-manager then force-deletes its pods',
    );
    expect((await dryRunAll(oos.objects)).sort()).toEqual([
      'monitoring.coreos.com/v1 PrometheusRule',
      'monitoring.coreos.com/v1 ServiceMonitor',
    ]);
  });

  it('bad arguments: exit 2 with what is accepted, nothing written', () => {
    for (const [args, msg] of [
      [
        ['--with=grafana'],
        /no component "grafana" \(accepted: coordinated-leader-election, networkpolicy, node-pools, out-of-service, prometheusrule, second-opinion, servicemonitor, all\)/,
      ],
      [['--image=registry.example/nlc:1.0'], /a repository without a tag/],
      [['--image=registry.example/nlc@sha256:abc'], /the digest must be sha256: and 64 lowercase hex digits/],
      [[`--image=registry.example/nlc:1.0@sha256:${'0'.repeat(64)}`], /a repository without a tag/],
      [['--namespace'], /unknown argument/],
    ] as const) {
      const r = spawnSync(
        process.execPath,
        [path.join(ROOT, 'scripts', 'render-install.mjs'), ...args, '--output=-'],
        {
          encoding: 'utf8',
          cwd: ROOT,
        },
      );
      expect(r.status, args.join(' ')).toBe(2);
      expect(r.stderr).toMatch(msg);
      expect(r.stdout).toBe('');
    }
  });
});
