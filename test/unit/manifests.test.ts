import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { loadAllYaml } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { buildConfig, type Config } from '../../src/config/config.js';
import { parseArgs } from '../../src/config/flags.js';
import { TRANSITION_KINDS as controllerTransitionKinds } from '../../src/controller/metrics.js';
import { HELD_BACK_REASONS } from '../../src/disruption/metrics.js';
import { parsePoolConfig } from '../../src/disruption/pools/config.js';
import { ZONE_STATES, zoneDisplay, zoneKeyOf } from '../../src/disruption/zones.js';
import { shutdownBudget } from '../../src/manager/shutdown.js';
import { DEFAULT_SECOND_OPINION } from '../../src/second-opinion/verdict.js';
import { kustomizeOverlay } from '../support/kubectl.js';
import {
  arr,
  controllerMetricCatalog,
  deploymentOf,
  findDoc,
  get,
  isObj,
  kustomizationOf,
  kustomize,
  kustomizeWith,
  loadDocs,
  MANIFESTS,
  type MetricInfo,
  markdownAnchors,
  type Obj,
  PROMETHEUS_SERIES,
  promqlSelectors,
  REPO,
  type Selector,
  TARGET_LABELS,
  walkFiles,
  yamlFiles,
  zoneLabelReplaces,
} from './manifests.support.js';

const BASE = join(MANIFESTS, 'base');
const COMPONENTS = join(MANIFESTS, 'components');
const OVERLAYS = join(MANIFESTS, 'overlays');
const DASHBOARD = join(MANIFESTS, 'dashboards', 'node-lifecycle-controller.json');
const OPERATIONS_MD = join(REPO, 'docs', 'operations.md');
const COMPONENT_DIRS = [
  'servicemonitor',
  'prometheusrule',
  'networkpolicy',
  'coordinated-leader-election',
  'out-of-service',
  // After networkpolicy: it adds an egress rule to that component's NetworkPolicy.
  'second-opinion',
].map((c) => join(COMPONENTS, c));

const rel = (p: string) => relative(REPO, p);
/** The job label every scraped series carries (the ServiceMonitor's jobLabel). */
const JOB = 'node-lifecycle-controller';
const rule = () => findDoc(join(COMPONENTS, 'prometheusrule'), 'PrometheusRule');
const serviceMonitor = () => findDoc(join(COMPONENTS, 'servicemonitor'), 'ServiceMonitor');
const networkPolicy = () => findDoc(join(COMPONENTS, 'networkpolicy'), 'NetworkPolicy');
const dashboard = () => JSON.parse(readFileSync(DASHBOARD, 'utf8')) as Obj;

interface Alert {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}
const alerts = (): Alert[] =>
  arr(get(rule(), 'spec', 'groups')).flatMap((g) => arr(get(g, 'rules'))) as unknown as Alert[];

/** Every `expr` of the dashboard's panels (rows included) and its variables' queries. */
function dashboardExprs(d: Obj): { where: string; expr: string }[] {
  const out: { where: string; expr: string }[] = [];
  const visit = (panels: unknown[]) => {
    for (const p of panels) {
      for (const t of arr(get(p, 'targets'))) {
        out.push({ where: `panel "${get(p, 'title')}" ${get(t, 'refId')}`, expr: String(get(t, 'expr')) });
      }
      visit(arr(get(p, 'panels')));
    }
  };
  visit(arr(d.panels));
  return out;
}

/** Grafana's macros and variables, replaced the way Grafana would before sending the query. */
function grafanaInterpolate(expr: string): string {
  return expr.replace(/\$__rate_interval|\$__interval|\$__range/g, '5m').replace(/\$\{?(\w+)\}?/g, '.*');
}

// ---------------------------------------------------------------------------------------------

describe('manifest files', () => {
  it.each(yamlFiles().map((f) => [rel(f), f]))(
    '%s parses, every document has apiVersion and kind',
    (_, f) => {
      const docs = loadDocs(f);
      expect(docs.length).toBeGreaterThan(0);
      for (const d of docs) {
        expect(typeof d.apiVersion, `${rel(f)} apiVersion`).toBe('string');
        expect(typeof d.kind, `${rel(f)} kind`).toBe('string');
      }
    },
  );

  const kustomizations = walkFiles(MANIFESTS, (p) => p.endsWith('kustomization.yaml'));

  it('there is a kustomization for base, each component and each overlay', () => {
    const dirs = kustomizations.map((k) => rel(dirname(k))).sort();
    expect(dirs).toEqual(
      [
        'manifests/base',
        'manifests/components/companion-evictions',
        'manifests/components/coordinated-leader-election',
        'manifests/components/networkpolicy',
        'manifests/components/node-pools',
        'manifests/components/out-of-service',
        'manifests/components/prometheusrule',
        'manifests/components/second-opinion',
        'manifests/components/servicemonitor',
        'manifests/overlays/companion',
        'manifests/overlays/control-plane',
        'manifests/overlays/dry-run',
        'manifests/overlays/kind',
      ].sort(),
    );
  });

  it.each(kustomizations.map((k) => [rel(dirname(k)), dirname(k)]))(
    '%s: every resource and component exists, every YAML file beside it is used',
    (_, dir) => {
      const k = kustomizationOf(dir);
      const isComponent = dir.startsWith(COMPONENTS);
      expect(k.kind).toBe(isComponent ? 'Component' : 'Kustomization');
      expect(k.apiVersion).toBe(
        isComponent ? 'kustomize.config.k8s.io/v1alpha1' : 'kustomize.config.k8s.io/v1beta1',
      );
      for (const r of arr(k.resources)) {
        const p = resolve(dir, String(r));
        expect(existsSync(p), `${rel(dir)}: resource ${r}`).toBe(true);
        if (!p.endsWith('.yaml'))
          expect(existsSync(join(p, 'kustomization.yaml')), `${r} is a kustomization`).toBe(true);
      }
      for (const c of arr(k.components)) {
        const p = resolve(dir, String(c));
        expect(kustomizationOf(p).kind, `${rel(dir)}: component ${c}`).toBe('Component');
      }
      const used = new Set(arr(k.resources).map((r) => resolve(dir, String(r))));
      for (const f of walkFiles(dir, (p) => p.endsWith('.yaml') && dirname(p) === dir)) {
        if (f.endsWith('kustomization.yaml')) continue;
        expect(used.has(f), `${rel(f)} is listed in its kustomization`).toBe(true);
      }
    },
  );

  it('an overlay with `namespace:` moves the whole install: every object, subject and the lock', () => {
    const ns = 'platform-nlc';
    const docs = kustomizeWith([BASE], COMPONENT_DIRS, ns);
    const clusterScoped = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding']);
    for (const d of docs) {
      const what = `${d.kind} ${get(d, 'metadata', 'name')}`;
      if (clusterScoped.has(String(d.kind))) expect(get(d, 'metadata', 'namespace'), what).toBeUndefined();
      else expect(get(d, 'metadata', 'namespace'), what).toBe(ns);
      // Every ServiceAccount a binding names is the controller's, in the new namespace.
      for (const subject of arr(d.subjects))
        expect(subject, what).toMatchObject({ kind: 'ServiceAccount', namespace: ns });
    }
    expect(docs.filter((d) => d.kind === 'Namespace').map((d) => get(d, 'metadata', 'name'))).toEqual([ns]);
    // Nothing still names the default namespace (a Role, a subject, a selector, an annotation).
    expect(JSON.stringify(docs)).not.toContain('nlc-system');
    // The lock: the Deployment passes the pod's namespace (downward API), and the controller takes it.
    const dep = docs.find((d) => d.kind === 'Deployment')!;
    const env = arr(get(dep, 'spec', 'template', 'spec', 'containers', 0, 'env'));
    expect(env).toContainEqual({
      name: 'POD_NAMESPACE',
      valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } },
    });
    const args = arr(get(dep, 'spec', 'template', 'spec', 'containers', 0, 'args')).map(String);
    expect(
      buildConfig(parseArgs(args), { POD_NAME: 'nlc-0', POD_NAMESPACE: ns }, 'h').leaderElection.namespace,
    ).toBe(ns);
    expect(args.some((a) => a.startsWith('--leader-elect-resource-namespace'))).toBe(false);
    // Node heartbeats stay readable: what is bound cluster-wide, or by a RoleBinding in
    // kube-node-lease, grants reading Leases there (the e2e proves it on an API server).
    const rulesOf = (kind: string, name: unknown) =>
      arr(docs.find((d) => d.kind === kind && get(d, 'metadata', 'name') === name)?.rules);
    const bound = docs
      .filter(
        (d) =>
          d.kind === 'ClusterRoleBinding' ||
          (d.kind === 'RoleBinding' && get(d, 'metadata', 'namespace') === 'kube-node-lease'),
      )
      .flatMap((b) => rulesOf(String(get(b, 'roleRef', 'kind')), get(b, 'roleRef', 'name')));
    const leaseVerbs = bound
      .filter(
        (r) =>
          arr(get(r, 'apiGroups')).includes('coordination.k8s.io') &&
          arr(get(r, 'resources')).includes('leases'),
      )
      .flatMap((r) => arr(get(r, 'verbs')));
    expect([...new Set(leaseVerbs)].sort()).toEqual(['get', 'list', 'watch']);
    // The Role for the lock is in that namespace and bound to the ServiceAccount there; so is the
    // coordinated-leader-election component's Role for LeaseCandidates.
    const role = (name: string) => docs.find((d) => d.kind === 'Role' && get(d, 'metadata', 'name') === name);
    expect(get(role('node-lifecycle-controller:leases'), 'metadata', 'namespace')).toBe(ns);
    expect(
      arr(get(role('node-lifecycle-controller:leases'), 'rules')).flatMap((r) => arr(get(r, 'resources'))),
    ).toEqual(['leases']);
    expect(get(role('node-lifecycle-controller:leasecandidates'), 'metadata', 'namespace')).toBe(ns);
    expect(
      arr(get(role('node-lifecycle-controller:leasecandidates'), 'rules')).flatMap((r) =>
        arr(get(r, 'resources')),
      ),
    ).toEqual(['leasecandidates']);
  });

  it('every namespaced object of the base and the components names its namespace', () => {
    const clusterScoped = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding']);
    for (const dir of [BASE, ...COMPONENT_DIRS]) {
      for (const f of walkFiles(dir, (p) => p.endsWith('.yaml') && !p.endsWith('kustomization.yaml'))) {
        for (const d of loadDocs(f)) {
          const ns = get(d, 'metadata', 'namespace');
          if (clusterScoped.has(String(d.kind))) expect(ns, `${rel(f)} ${d.kind}`).toBeUndefined();
          else expect(typeof ns, `${rel(f)} ${d.kind} namespace`).toBe('string');
        }
      }
    }
  });
});

// ---------------------------------------------------------------------------------------------

describe('Deployment', () => {
  const dep = findDoc(BASE, 'Deployment', 'node-lifecycle-controller');
  const pod = get(dep, 'spec', 'template', 'spec') as Obj;
  const containers = arr(pod.containers) as Obj[];
  const c = containers[0]!;

  it('meets the restricted Pod Security Standard', () => {
    expect(containers).toHaveLength(1);
    expect(arr(pod.initContainers)).toHaveLength(0);
    for (const k of ['hostNetwork', 'hostPID', 'hostIPC']) expect(pod[k], k).not.toBe(true);
    expect(get(pod, 'securityContext', 'runAsNonRoot')).toBe(true);
    expect(get(pod, 'securityContext', 'seccompProfile', 'type')).toBe('RuntimeDefault');
    expect(get(c, 'securityContext')).toMatchObject({
      runAsNonRoot: true,
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(get(c, 'securityContext', 'privileged')).not.toBe(true);
    expect(get(c, 'securityContext', 'capabilities', 'add')).toBeUndefined();
    const uid = get(pod, 'securityContext', 'runAsUser') ?? get(c, 'securityContext', 'runAsUser');
    expect(uid).not.toBe(0);
    // Restricted allows only these volume types; the root filesystem is read-only, /tmp is an emptyDir.
    const allowed = ['emptyDir', 'configMap', 'secret', 'projected', 'downwardAPI', 'persistentVolumeClaim'];
    for (const v of arr(pod.volumes) as Obj[]) {
      const types = Object.keys(v).filter((k) => k !== 'name');
      expect(
        types.every((t) => allowed.includes(t)),
        `volume ${v.name}: ${types}`,
      ).toBe(true);
    }
    expect(arr(c.volumeMounts)).toContainEqual(expect.objectContaining({ mountPath: '/tmp' }));
    for (const p of arr(c.ports)) expect(get(p, 'hostPort'), 'hostPort').toBeUndefined();
  });

  it('the namespace enforces the restricted profile', () => {
    const ns = findDoc(BASE, 'Namespace');
    expect(get(ns, 'metadata', 'labels', 'pod-security.kubernetes.io/enforce')).toBe('restricted');
  });

  it('gets POD_NAME and POD_NAMESPACE from the downward API', () => {
    const env = arr(c.env) as Obj[];
    const field = (name: string) =>
      get(
        env.find((e) => e.name === name),
        'valueFrom',
        'fieldRef',
        'fieldPath',
      );
    expect(field('POD_NAME')).toBe('metadata.name');
    expect(field('POD_NAMESPACE')).toBe('metadata.namespace');
  });

  it('runs 2 replicas at system-cluster-critical priority, spread over nodes, one replaced at a time', () => {
    expect(get(dep, 'spec', 'replicas')).toBe(2);
    expect(pod.priorityClassName).toBe('system-cluster-critical');
    expect(get(dep, 'spec', 'strategy', 'rollingUpdate', 'maxSurge')).toBe(0);
    // Required: a replica sharing a node with its only standby cannot mark that node when it dies.
    expect(get(pod, 'affinity', 'podAntiAffinity', 'preferredDuringSchedulingIgnoredDuringExecution')).toBe(
      undefined,
    );
    const terms = arr(
      get(pod, 'affinity', 'podAntiAffinity', 'requiredDuringSchedulingIgnoredDuringExecution'),
    );
    expect(terms).toHaveLength(1);
    expect(get(terms[0], 'topologyKey')).toBe('kubernetes.io/hostname');
    expect(get(terms[0], 'labelSelector', 'matchLabels')).toEqual(
      get(dep, 'spec', 'selector', 'matchLabels'),
    );
    expect(pod.serviceAccountName).toBe(get(findDoc(BASE, 'ServiceAccount'), 'metadata', 'name'));
  });

  it('spreads the replicas across zones as well, as a preference (one zone still runs both)', () => {
    expect(pod.topologySpreadConstraints).toEqual([
      {
        maxSkew: 1,
        topologyKey: 'topology.kubernetes.io/zone',
        whenUnsatisfiable: 'ScheduleAnyway',
        labelSelector: { matchLabels: get(dep, 'spec', 'selector', 'matchLabels') },
      },
    ]);
  });

  it('starts on a fresh cluster and leaves a dead node quickly: tolerations chosen on purpose', () => {
    const tolerations = arr(pod.tolerations) as Obj[];
    const find = (key: string, effect: string) =>
      tolerations.filter((t) => t.key === key && t.effect === effect && t.operator === 'Exists');
    // A new Node registers with not-ready:NoSchedule and only a node-lifecycle controller removes it.
    for (const key of ['node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable']) {
      expect(find(key, 'NoSchedule'), `${key}:NoSchedule`).toHaveLength(1);
      expect(find(key, 'NoSchedule')[0]?.tolerationSeconds).toBeUndefined();
      // Replaced well before the default 300s, but not at the first blip.
      const noExecute = find(key, 'NoExecute');
      expect(noExecute, `${key}:NoExecute`).toHaveLength(1);
      expect(noExecute[0]?.tolerationSeconds).toBeGreaterThanOrEqual(10);
      expect(noExecute[0]?.tolerationSeconds).toBeLessThanOrEqual(60);
    }
    // Nothing tolerates every taint: a node tainted for another reason keeps the controller off.
    expect(tolerations.filter((t) => t.key === undefined)).toEqual([]);
  });

  it('has a PodDisruptionBudget keeping one replica, selecting the pods', () => {
    const pdb = findDoc(BASE, 'PodDisruptionBudget');
    expect(get(pdb, 'spec', 'minAvailable')).toBe(1);
    expect(get(pdb, 'spec', 'selector', 'matchLabels')).toEqual(get(dep, 'spec', 'selector', 'matchLabels'));
    expect(get(pdb, 'metadata', 'namespace')).toBe(get(dep, 'metadata', 'namespace'));
  });

  it('probes /healthz (startup, liveness) and /readyz (readiness) on the probe port, metrics on 8080', () => {
    expect(get(c, 'startupProbe', 'httpGet', 'path')).toBe('/healthz');
    expect(get(c, 'livenessProbe', 'httpGet', 'path')).toBe('/healthz');
    expect(get(c, 'readinessProbe', 'httpGet', 'path')).toBe('/readyz');
    const ports = arr(c.ports) as Obj[];
    const byName = (n: unknown) => ports.find((p) => p.name === n || p.containerPort === n)?.containerPort;
    for (const probe of ['startupProbe', 'livenessProbe', 'readinessProbe']) {
      expect(byName(get(c, probe, 'httpGet', 'port')), probe).toBe(8081);
    }
    expect(byName('metrics')).toBe(8080);
    expect(arr(c.args)).toEqual(
      expect.arrayContaining(['--metrics-bind-address=:8080', '--health-probe-bind-address=:8081']),
    );
  });

  it('has a memory limit and requests, and no CPU limit (throttling would delay lease renewals)', () => {
    expect(get(c, 'resources', 'limits', 'memory')).toBeDefined();
    expect(get(c, 'resources', 'requests', 'cpu')).toBeDefined();
    expect(get(c, 'resources', 'limits', 'cpu')).toBeUndefined();
  });
});

describe('Dockerfile', () => {
  const text = readFileSync(join(REPO, 'Dockerfile'), 'utf8');
  const lines = text.split('\n').filter((l) => !l.trimStart().startsWith('#'));

  it('runs node directly as PID 1 (exec form), as the non-root UID/GID the Deployment sets', () => {
    const user = lines.filter((l) => /^USER\s/.test(l)).at(-1);
    const pod = get(findDoc(BASE, 'Deployment'), 'spec', 'template', 'spec', 'securityContext') as Obj;
    expect(user?.split(/\s+/)[1]).toBe(`${pod.runAsUser}:${pod.runAsGroup}`);
    expect(pod.runAsUser).not.toBe(0);
    const entry = lines.filter((l) => /^ENTRYPOINT\s/.test(l)).at(-1) ?? '';
    // The distroless Node.js image keeps node at /nodejs/bin/node and has no shell to find it.
    const argv = JSON.parse(entry.replace(/^ENTRYPOINT\s+/, '')) as string[];
    expect(argv[0]).toBe('/nodejs/bin/node');
    // The bundle (scripts/bundle.mjs), after any Node.js/V8 flags.
    expect(argv.at(-1)).toBe('dist/controller.mjs');
    expect(argv.slice(1, -1).every((a) => a.startsWith('--'))).toBe(true);
  });

  it('runs on a distroless Node.js 24 base; needs nothing pulled to parse the Dockerfile', () => {
    const from = lines.filter((l) => /^FROM\s/.test(l));
    // The runtime base is a build argument (an arm64 build without a registry names a local
    // stand-in, a release may pin a digest) whose default is distroless Node.js 24.
    expect(from.at(-1)).toMatch(/^FROM \$\{RUNTIME_BASE\}\s*$/);
    const defaults = lines.filter((l) => /^ARG RUNTIME_BASE\b/.test(l));
    expect(defaults).toEqual(['ARG RUNTIME_BASE=gcr.io/distroless/nodejs24-debian12:nonroot']);
    expect(text.indexOf(defaults[0]!)).toBeLessThan(text.indexOf('\nFROM '));
    expect(from[0]).toMatch(/^FROM (--platform=\S+ )?node:24-/);
    // A `# syntax=` line makes BuildKit pull a frontend image: none, so offline builds work.
    expect(text).not.toMatch(/^#\s*syntax=/m);
  });

  it('builds for any platform without emulation: the build stage runs on the builder platform, the runtime stage runs nothing', () => {
    // The bundle is JavaScript: built once natively, it is the same for linux/amd64 and linux/arm64,
    // so `--platform linux/arm64` emulates nothing at build time (scripts/build-image.sh).
    const from = lines.filter((l) => /^FROM\s/.test(l));
    expect(from[0]).toMatch(/^FROM --platform=\$BUILDPLATFORM node:24-\S+ AS build$/);
    const runtime = lines.slice(lines.indexOf(from.at(-1)!));
    expect(runtime.filter((l) => /^RUN\b/.test(l))).toEqual([]);
  });

  it('exports the SBOM its build stage wrote (stage bundle-sbom, for scripts/build-image.sh); the runtime stage stays last', () => {
    expect(text).toMatch(
      /^FROM scratch AS bundle-sbom\nCOPY --from=build \/src\/dist\/sbom\.cdx\.json \/\n/m,
    );
    expect(text.indexOf('AS bundle-sbom')).toBeLessThan(text.lastIndexOf('\nFROM '));
    expect(readFileSync(join(REPO, 'scripts', 'build-image.sh'), 'utf8')).toMatch(/--target bundle-sbom\b/);
  });

  it('takes a CA for npm only as a build secret, never into a layer', () => {
    expect(text).toMatch(/RUN --mount=type=secret,id=npm-ca\b/);
    expect(lines.filter((l) => /^(ARG|ENV|COPY)\b.*\b(ca|cert)/i.test(l))).toEqual([]);
  });

  it('ships only package.json and the bundle: no node_modules, no per-module dist/, no demo', () => {
    // The build stage collects what ships in /out; the runtime stage copies that and nothing else.
    const collected = /cp -r ([^\n&\\]*) \/out\/dist\//.exec(text)?.[1]?.trim().split(/\s+/);
    expect(collected).toEqual(['dist/controller.mjs', 'dist/chunks']);
    const runtime = text.slice(text.lastIndexOf('\nFROM '));
    const copies = runtime.split('\n').filter((l) => /^COPY\b/.test(l));
    expect(copies).toEqual(['COPY --from=build /out/ ./']);
    // (with the build stamp's two variables only: test/unit/release.test.ts)
    expect(text).toMatch(/^RUN (NLC_BUILD_(VERSION|REVISION)="\$\w+" )*npm run build\b/m);
  });

  it('is multi-stage and keeps dev dependencies, tests and manifests out of the build context', () => {
    expect(lines.filter((l) => /^FROM\s/.test(l)).length).toBeGreaterThanOrEqual(2);
    const ignored = readFileSync(join(REPO, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim());
    expect(ignored).toEqual(expect.arrayContaining(['node_modules', 'test', 'manifests']));
  });
});

// ---------------------------------------------------------------------------------------------

describe('overlays', () => {
  /** The container args as the controller itself would parse them, with the pod's environment. */
  function configOf(dep: Obj): Config {
    const args = arr(get(dep, 'spec', 'template', 'spec', 'containers', 0, 'args')).map(String);
    return buildConfig(parseArgs(args), { POD_NAME: 'nlc-0', POD_NAMESPACE: 'nlc-system' }, 'host');
  }

  it.each([
    ['base', BASE],
    ['kind', join(OVERLAYS, 'kind')],
    ['dry-run', join(OVERLAYS, 'dry-run')],
    ['control-plane', join(OVERLAYS, 'control-plane')],
    ['companion', join(OVERLAYS, 'companion')],
  ])('%s: the controller accepts the container args', (name, dir) => {
    const dep = name === 'base' ? findDoc(BASE, 'Deployment') : deploymentOf(dir);
    const cfg = configOf(dep);
    expect(cfg.metricsAddress?.port).toBe(8080);
    expect(cfg.probeAddress?.port).toBe(8081);
    expect(cfg.leaderElection.enabled).toBe(true);
    expect(cfg.leaderElection.namespace).toBe('nlc-system');
  });

  it.each([
    ['base', BASE],
    ['kind', join(OVERLAYS, 'kind')],
    ['dry-run', join(OVERLAYS, 'dry-run')],
    ['control-plane', join(OVERLAYS, 'control-plane')],
    ['companion', join(OVERLAYS, 'companion')],
  ])(
    '%s: the whole shutdown budget, plus a second to exit, fits in terminationGracePeriodSeconds',
    (name, dir) => {
      const dep = name === 'base' ? findDoc(BASE, 'Deployment') : deploymentOf(dir);
      const grace = Number(get(dep, 'spec', 'template', 'spec', 'terminationGracePeriodSeconds')) * 1000;
      const budget = shutdownBudget(configOf(dep).shutdownGracePeriodMs);
      expect(budget.drainMs + budget.tailMs).toBe(budget.totalMs);
      expect(budget.totalMs + 1_000).toBeLessThan(grace);
    },
  );

  it('the args checker is real: an inconsistent pair of flags is refused', () => {
    const dep = structuredClone(deploymentOf(join(OVERLAYS, 'kind')));
    const args = get(dep, 'spec', 'template', 'spec', 'containers', 0, 'args') as string[];
    args.push('--watch-silence-threshold=30s');
    expect(() => configOf(dep)).toThrow(/watch-silence-threshold/);
  });

  it('kind: local image, short grace, a silence threshold above the renew interval, replicas on workers', () => {
    const dep = deploymentOf(join(OVERLAYS, 'kind'));
    const c = get(dep, 'spec', 'template', 'spec', 'containers', 0) as Obj;
    expect(c.image).toBe('node-lifecycle-controller:dev');
    expect(c.imagePullPolicy).toBe('IfNotPresent');
    const cfg = configOf(dep);
    expect(cfg.health.monitorGraceMs).toBe(20_000);
    // Kubelets renew every 10s: a threshold at or below that re-opens quiet watches continuously.
    expect(cfg.health.watchSilenceThresholdMs).toBeGreaterThan(10_000);
    expect(cfg.health.watchSilenceThresholdMs).toBeLessThan(cfg.health.monitorGraceMs);
    expect(cfg.dryRun).toBe(false);
    const pod = get(dep, 'spec', 'template', 'spec') as Obj;
    // The suite stops the leader's own node: never the control-plane node.
    const terms = arr(
      get(
        pod,
        'affinity',
        'nodeAffinity',
        'requiredDuringSchedulingIgnoredDuringExecution',
        'nodeSelectorTerms',
      ),
    );
    expect(terms).toEqual([
      { matchExpressions: [{ key: 'node-role.kubernetes.io/control-plane', operator: 'DoesNotExist' }] },
    ]);
    // Otherwise as shipped: the base's scheduling rules are all still there.
    const base = get(findDoc(BASE, 'Deployment'), 'spec', 'template', 'spec') as Obj;
    expect(pod.tolerations).toEqual(base.tolerations);
    expect(get(pod, 'affinity', 'podAntiAffinity')).toEqual(get(base, 'affinity', 'podAntiAffinity'));
  });

  it('control-plane: only on control-plane nodes, otherwise the base (tolerated, one per node, zones)', () => {
    const rendered = kustomizeOverlay({ resources: [join(OVERLAYS, 'control-plane')] }).find(
      (d) => d.kind === 'Deployment',
    )!;
    const pod = get(rendered, 'spec', 'template', 'spec') as Obj;
    expect(get(pod, 'affinity', 'nodeAffinity')).toEqual({
      requiredDuringSchedulingIgnoredDuringExecution: {
        nodeSelectorTerms: [
          { matchExpressions: [{ key: 'node-role.kubernetes.io/control-plane', operator: 'Exists' }] },
        ],
      },
    });
    const baseDep = kustomizeOverlay({ resources: [BASE] }).find((d) => d.kind === 'Deployment')!;
    const base = get(baseDep, 'spec', 'template', 'spec') as Obj;
    // The control-plane taint is tolerated by the base already.
    expect(arr(base.tolerations)).toContainEqual({
      key: 'node-role.kubernetes.io/control-plane',
      operator: 'Exists',
      effect: 'NoSchedule',
    });
    expect(pod.tolerations).toEqual(base.tolerations);
    expect(pod.topologySpreadConstraints).toEqual(base.topologySpreadConstraints);
    expect(get(pod, 'affinity', 'podAntiAffinity')).toEqual(get(base, 'affinity', 'podAntiAffinity'));
    // Nothing else differs.
    const withoutAffinity = (p: Obj) => ({ ...p, affinity: undefined });
    expect(withoutAffinity(pod)).toEqual(withoutAffinity(base));
  });

  it('node-pools component: a ConfigMap the controller accepts, mounted where --node-pool-config points, no name hash', () => {
    const docs = kustomizeOverlay({ resources: [BASE], components: [join(COMPONENTS, 'node-pools')] });
    const cm = docs.find((d) => d.kind === 'ConfigMap')!;
    // No hash suffix: an update reaches the pods through the volume and is reloaded in place.
    expect(cm.metadata.name).toBe('node-lifecycle-controller-node-pools');
    const parsed = parsePoolConfig((cm as unknown as { data: Record<string, string> }).data['pools.json']!);
    expect(parsed).toEqual({ ok: true, config: { pools: [] }, warnings: [] });
    const spec = get(
      docs.find((d) => d.kind === 'Deployment'),
      'spec',
      'template',
      'spec',
    ) as Obj;
    const c = get(spec, 'containers', 0) as Obj;
    const mount = arr(c.volumeMounts).find((m) => get(m, 'name') === 'node-pools');
    expect(get(mount, 'readOnly')).toBe(true);
    const args = arr(c.args).map(String);
    expect(args).toContain(`--node-pool-config=${get(mount, 'mountPath')}/pools.json`);
    expect(arr(spec.volumes)).toContainEqual({ name: 'node-pools', configMap: { name: cm.metadata.name } });
    // The controller accepts the args (the file itself is read at start).
    expect(configOf({ spec: { template: { spec } } }).nodePoolConfigPath).toBe(
      `${get(mount, 'mountPath')}/pools.json`,
    );
    // And it moves with `namespace:` like everything else.
    const moved = kustomizeOverlay({
      resources: [BASE],
      components: [join(COMPONENTS, 'node-pools')],
      namespace: 'ops',
    });
    expect(moved.find((d) => d.kind === 'ConfigMap')?.metadata.namespace).toBe('ops');
  });

  it('dry-run: --dry-run, and a ClusterRole that can only read', () => {
    const dir = join(OVERLAYS, 'dry-run');
    expect(configOf(deploymentOf(dir)).dryRun).toBe(true);
    const patch = arr(kustomizationOf(dir).patches).find((p) => get(p, 'target', 'kind') === 'ClusterRole');
    // A strategic-merge patch: ClusterRole rules have no merge key, so the patch's list replaces the base's.
    expect(patch).toBeDefined();
    const patched = loadDocsFromString(String(get(patch, 'patch')))[0]!;
    expect(patched.kind).toBe('ClusterRole');
    const verbs = arr(patched.rules).flatMap((r) => arr(get(r, 'verbs')));
    expect(verbs.length).toBeGreaterThan(0);
    // Reads only, but for the reviews of /metrics scrapers (a TokenReview or SubjectAccessReview is
    // not stored): the dry-run replicas serve secure metrics too.
    const writes = arr(patched.rules)
      .filter((r) => arr(get(r, 'verbs')).some((v) => !['get', 'list', 'watch'].includes(String(v))))
      .map(
        (r) =>
          `${arr(get(r, 'apiGroups')).join(',')}/${arr(get(r, 'resources')).join(',')}:${arr(get(r, 'verbs')).join(',')}`,
      );
    expect(writes.sort()).toEqual([
      'authentication.k8s.io/tokenreviews:create',
      'authorization.k8s.io/subjectaccessreviews:create',
    ]);
    expect(configOf(deploymentOf(dir)).metricsSecurity.secure).toBe(true);
  });

  it('the base ClusterRole can write what the controller writes (and the dry-run one cannot)', () => {
    const role = loadDocs(join(BASE, 'clusterrole.yaml'))[0]!;
    const can = (resource: string, verb: string) =>
      arr(role.rules).some(
        (r) => arr(get(r, 'resources')).includes(resource) && arr(get(r, 'verbs')).includes(verb),
      );
    expect(can('nodes/status', 'patch')).toBe(true);
    expect(can('nodes', 'patch')).toBe(true);
    expect(can('pods/status', 'patch')).toBe(true);
    expect(can('events', 'create')).toBe(true);
    // Upstream mode reads kube-controller-manager's RegisteredNode Events and its lock (kcm-registered.ts).
    expect(can('events', 'list')).toBe(true);
    expect(can('events', 'watch')).toBe(false);
    expect(can('leases', 'get')).toBe(true);
    expect(can('pods', 'delete')).toBe(false);
    expect(can('nodes', 'delete')).toBe(false);
    // Evictions are companion mode's, and only with manifests/components/companion-evictions.
    expect(can('pods/eviction', 'create')).toBe(false);
    // Secure /metrics: the reviews of scrapers.
    expect(can('tokenreviews', 'create')).toBe(true);
    expect(can('subjectaccessreviews', 'create')).toBe(true);
  });

  it("companion: --mode=companion at a grace below upstream's 50s, the base's RBAC; the evictions component adds create pods/eviction and nothing else", () => {
    const role = (docs: Obj[]) =>
      docs.find(
        (d) => d.kind === 'ClusterRole' && get(d, 'metadata', 'name') === 'node-lifecycle-controller',
      );
    const dep = (docs: Obj[]) => docs.find((d) => d.kind === 'Deployment')!;
    const base = kustomize(BASE);
    const companion = kustomize(join(OVERLAYS, 'companion'));
    const withEvictions = kustomizeWith(
      [join(OVERLAYS, 'companion')],
      [join(COMPONENTS, 'companion-evictions')],
    );
    const cfg = configOf(dep(companion));
    expect(cfg.mode).toBe('companion');
    expect(cfg.health.monitorGraceMs).toBeLessThan(50_000);
    expect(cfg.companion).toEqual({
      taintKey: 'node-lifecycle-controller.io/unreachable',
      evictAfterMs: 0,
      markPodsNotReady: true,
    });
    expect(configOf(dep(withEvictions)).companion.evictAfterMs).toBe(120_000);
    // Everything but the Deployment's args (and, with evictions, one rule) is the base as shipped.
    const others = (docs: Obj[]) => docs.filter((d) => d.kind !== 'Deployment' && d.kind !== 'ClusterRole');
    expect(others(companion)).toEqual(others(base));
    expect(others(withEvictions)).toEqual(others(base));
    expect(role(companion)).toEqual(role(base));
    expect(role(withEvictions)).toEqual({
      ...role(base),
      rules: [
        ...arr(role(base)?.rules),
        { apiGroups: [''], resources: ['pods/eviction'], verbs: ['create'] },
      ],
    });
    // The Deployment only gained args.
    const argsOf = (d: Obj) => arr(get(d, 'spec', 'template', 'spec', 'containers', 0, 'args')).map(String);
    const stripArgs = (d: Obj) => {
      const c = structuredClone(d);
      delete (get(c, 'spec', 'template', 'spec', 'containers', 0) as Obj).args;
      return c;
    };
    expect(stripArgs(dep(companion))).toEqual(stripArgs(dep(base)));
    expect(argsOf(dep(companion))).toEqual([
      ...argsOf(dep(base)),
      '--mode=companion',
      '--node-monitor-grace-period=20s',
    ]);
    // Without companion mode the component is refused at start, not silently ignored.
    expect(() => configOf(dep(kustomizeWith([BASE], [join(COMPONENTS, 'companion-evictions')])))).toThrow(
      /only used with --mode=companion/,
    );
  });

  it('out-of-service: the component turns on --out-of-service at its defaults and adds list volumeattachments, nothing else', () => {
    const role = (docs: Obj[]) =>
      docs.find(
        (d) => d.kind === 'ClusterRole' && get(d, 'metadata', 'name') === 'node-lifecycle-controller',
      );
    const dep = (docs: Obj[]) => docs.find((d) => d.kind === 'Deployment')!;
    const base = kustomize(BASE);
    const withOos = kustomizeWith([BASE], [join(COMPONENTS, 'out-of-service')]);
    expect(configOf(dep(base)).outOfService).toBeUndefined();
    expect(configOf(dep(withOos)).outOfService).toEqual({
      signals: ['cloud-shutdown-taint', 'kubelet-shutdown', 'fence-annotation'],
      afterMs: 60_000,
    });
    const others = (docs: Obj[]) => docs.filter((d) => d.kind !== 'Deployment' && d.kind !== 'ClusterRole');
    expect(others(withOos)).toEqual(others(base));
    expect(role(withOos)).toEqual({
      ...role(base),
      rules: [
        ...arr(role(base)?.rules),
        { apiGroups: ['storage.k8s.io'], resources: ['volumeattachments'], verbs: ['list'] },
      ],
    });
    const argsOf = (d: Obj) => arr(get(d, 'spec', 'template', 'spec', 'containers', 0, 'args')).map(String);
    expect(argsOf(dep(withOos))).toEqual([...argsOf(dep(base)), '--out-of-service']);
  });

  it('second-opinion: the component turns on --second-opinion=kubelet at its defaults, nothing else; listed after networkpolicy it adds egress to the kubelet port 10250 to its NetworkPolicy', () => {
    const dep = (docs: Obj[]) => docs.find((d) => d.kind === 'Deployment')!;
    const argsOf = (d: Obj) => arr(get(d, 'spec', 'template', 'spec', 'containers', 0, 'args')).map(String);
    const policy = (docs: Obj[]) => docs.find((d) => d.kind === 'NetworkPolicy');
    const egress = (docs: Obj[]) => arr(get(policy(docs), 'spec', 'egress'));
    const so = join(COMPONENTS, 'second-opinion');
    const np = join(COMPONENTS, 'networkpolicy');
    const base = kustomize(BASE);
    const withSo = kustomizeWith([BASE], [so]);
    expect(configOf(dep(base)).secondOpinion).toBeUndefined();
    expect(configOf(dep(withSo)).secondOpinion).toEqual({ ...DEFAULT_SECOND_OPINION });
    expect(argsOf(dep(withSo))).toEqual([...argsOf(dep(base)), '--second-opinion=kubelet']);
    // No RBAC, no NetworkPolicy of its own: without networkpolicy its second patch does nothing.
    const others = (docs: Obj[]) => docs.filter((d) => d.kind !== 'Deployment' && d.kind !== 'NetworkPolicy');
    expect(withSo.filter((d) => d.kind !== 'Deployment')).toEqual(others(base));
    // With networkpolicy listed before it: that policy's egress plus the kubelets' port, to any address.
    const locked = kustomizeWith([BASE], [np]);
    const both = kustomizeWith([BASE], [np, so]);
    expect(egress(both)).toEqual([...egress(locked), { ports: [{ protocol: 'TCP', port: 10250 }] }]);
    expect(others(both)).toEqual(others(locked));
    expect(argsOf(dep(both))).toEqual(argsOf(dep(withSo)));
    // Listed before networkpolicy it finds no NetworkPolicy yet: no rule (its comment says so).
    expect(egress(kustomizeWith([BASE], [so, np]))).toEqual(egress(locked));
    // On a 20s grace (overlays/companion, overlays/kind) the default --confirm-after is refused at
    // start, as its comment says: it must be added below the grace less 6s.
    expect(() => configOf(dep(kustomizeWith([join(OVERLAYS, 'companion')], [so])))).toThrow(
      /--confirm-after/,
    );
  });

  it('metrics-reader: get on the non-resource URL /metrics, nothing else', () => {
    const role = findDoc(BASE, 'ClusterRole', 'node-lifecycle-controller-metrics-reader');
    expect(role.rules).toEqual([{ nonResourceURLs: ['/metrics'], verbs: ['get'] }]);
  });
});

function loadDocsFromString(text: string): Obj[] {
  return (loadAllYaml(text) as unknown[]).filter(isObj);
}

// ---------------------------------------------------------------------------------------------

describe('rendered by kubectl kustomize', () => {
  it('base + every component, and each overlay, render; selectors line up', () => {
    const all = kustomizeWith([BASE], COMPONENT_DIRS);
    const one = (kind: string, name?: string) => {
      const f = all.filter(
        (d) => d.kind === kind && (name === undefined || get(d, 'metadata', 'name') === name),
      );
      expect(f, `${kind} ${name ?? ''}`).toHaveLength(1);
      return f[0]!;
    };
    const dep = one('Deployment');
    const podLabels = get(dep, 'spec', 'template', 'metadata', 'labels') as Record<string, string>;
    const svc = one('Service', 'node-lifecycle-controller-metrics');
    const svcLabels = get(svc, 'metadata', 'labels') as Record<string, string>;
    const sm = one('ServiceMonitor');
    // The ServiceMonitor selects the Service, on its `metrics` port, and names the job after a label it has.
    expect(svcLabels).toMatchObject(get(sm, 'spec', 'selector', 'matchLabels') as Record<string, string>);
    expect(arr(get(svc, 'spec', 'ports')).map((p) => get(p, 'name'))).toContain(
      get(sm, 'spec', 'endpoints', 0, 'port'),
    );
    expect(svcLabels[String(get(sm, 'spec', 'jobLabel'))]).toBe('node-lifecycle-controller');
    expect(get(sm, 'metadata', 'namespace')).toBe(get(svc, 'metadata', 'namespace'));
    // The Service and the NetworkPolicy select the pods.
    expect(podLabels).toMatchObject(get(svc, 'spec', 'selector') as Record<string, string>);
    expect(podLabels).toMatchObject(
      get(one('NetworkPolicy'), 'spec', 'podSelector', 'matchLabels') as Record<string, string>,
    );
    one('PrometheusRule');
    // No object outside the install's own namespace (kustomize's `namespace:` would move it):
    // node heartbeats are read through the ClusterRole, in every rendering.
    for (const docs of [all, kustomize(join(OVERLAYS, 'kind')), kustomize(join(OVERLAYS, 'dry-run'))]) {
      const namespaces = new Set(
        docs.map((d) => get(d, 'metadata', 'namespace')).filter((n) => n !== undefined),
      );
      expect([...namespaces]).toEqual(['nlc-system']);
      const clusterRole = docs.find(
        (d) => d.kind === 'ClusterRole' && get(d, 'metadata', 'name') === 'node-lifecycle-controller',
      );
      expect(arr(get(clusterRole, 'rules'))).toContainEqual({
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        verbs: ['get', 'list', 'watch'],
      });
    }
    const kindDep = kustomize(join(OVERLAYS, 'kind')).find((d) => d.kind === 'Deployment')!;
    expect(kindDep).toEqual(
      withLabels(deploymentOf(join(OVERLAYS, 'kind')), get(kindDep, 'metadata', 'labels')),
    );
    const dryRoles = kustomize(join(OVERLAYS, 'dry-run')).filter(
      (d) => d.kind === 'ClusterRole' && get(d, 'metadata', 'name') === 'node-lifecycle-controller',
    );
    expect(dryRoles).toHaveLength(1);
    expect(
      arr(dryRoles[0]?.rules)
        .flatMap((r) => arr(get(r, 'verbs')))
        .sort(),
    ).toEqual(['create', 'create', 'get', 'get', 'get', 'list', 'list', 'list', 'watch', 'watch']);
  });
});

/** The test's own rendering of a Deployment plus the labels kustomize's `labels:` adds to metadata. */
function withLabels(dep: Obj, labels: unknown): Obj {
  const copy = structuredClone(dep);
  (copy.metadata as Obj).labels = labels;
  return copy;
}

// ---------------------------------------------------------------------------------------------

describe('ServiceMonitor and NetworkPolicy', () => {
  it('ServiceMonitor: port metrics every 30s over HTTPS with a bearer token, selecting the metrics Service by its component label', () => {
    const sm = serviceMonitor();
    expect(sm.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(get(sm, 'spec', 'selector', 'matchLabels', 'app.kubernetes.io/component')).toBe('metrics');
    expect(get(sm, 'spec', 'endpoints', 0, 'port')).toBe('metrics');
    expect(get(sm, 'spec', 'endpoints', 0, 'interval')).toBe('30s');
    // The controller serves /metrics securely by default (the Deployment does not turn it off).
    expect(get(sm, 'spec', 'endpoints', 0, 'scheme')).toBe('https');
    // The token: `authorization` from a Secret (the operator's current way), never the deprecated
    // bearerTokenFile (Prometheus' own ServiceAccount token, sent to the target) or bearerTokenSecret.
    const endpoint = get(sm, 'spec', 'endpoints', 0) as Obj;
    expect(endpoint.bearerTokenFile).toBeUndefined();
    expect(endpoint.bearerTokenSecret).toBeUndefined();
    expect(get(endpoint, 'authorization', 'type')).toBe('Bearer');
    const dir = join(COMPONENTS, 'servicemonitor');
    const secret = findDoc(dir, 'Secret', String(get(endpoint, 'authorization', 'credentials', 'name')));
    expect(get(endpoint, 'authorization', 'credentials', 'key')).toBe('token');
    expect(secret.type).toBe('kubernetes.io/service-account-token');
    expect(get(secret, 'metadata', 'namespace')).toBe(get(sm, 'metadata', 'namespace'));
    // ... of a ServiceAccount of the component, bound to the metrics-reader ClusterRole only.
    const saName = get(secret, 'metadata', 'annotations', 'kubernetes.io/service-account.name');
    const sa = findDoc(dir, 'ServiceAccount', String(saName));
    expect(get(sa, 'metadata', 'namespace')).toBe(get(sm, 'metadata', 'namespace'));
    const binding = findDoc(dir, 'ClusterRoleBinding');
    expect(binding.subjects).toEqual([
      { kind: 'ServiceAccount', name: saName, namespace: get(sa, 'metadata', 'namespace') },
    ]);
    const reader = findDoc(BASE, 'ClusterRole', String(get(binding, 'roleRef', 'name')));
    expect(reader.rules).toEqual([{ nonResourceURLs: ['/metrics'], verbs: ['get'] }]);
    // Self-signed by default: nothing to verify it against.
    expect(get(sm, 'spec', 'endpoints', 0, 'tlsConfig', 'insecureSkipVerify')).toBe(true);
    const args = arr(
      get(findDoc(BASE, 'Deployment'), 'spec', 'template', 'spec', 'containers', 0, 'args'),
    ).map(String);
    expect(
      buildConfig(parseArgs(args), { POD_NAME: 'nlc-0', POD_NAMESPACE: 'nlc-system' }, 'h').metricsSecurity
        .secure,
    ).toBe(true);
    // Its scrape timeout leaves room for a TokenReview and a SubjectAccessReview (5 s each at most).
    expect(get(sm, 'spec', 'endpoints', 0, 'scrapeTimeout')).toBe('10s');
    expect(get(sm, 'metadata', 'namespace')).toBe('nlc-system');
    const svc = findDoc(BASE, 'Service', 'node-lifecycle-controller-metrics');
    const baseLabels = get(kustomizationOf(BASE), 'labels', 0, 'pairs') as Record<string, string>;
    expect({ ...baseLabels, ...(get(svc, 'metadata', 'labels') as Obj) }).toMatchObject(
      get(sm, 'spec', 'selector', 'matchLabels') as Obj,
    );
  });

  it('NetworkPolicy: ingress only to the metrics port from Prometheus (the probe port from the node only); egress only to 443, 6443 and 53', () => {
    const np = networkPolicy();
    expect(arr(get(np, 'spec', 'policyTypes')).sort()).toEqual(['Egress', 'Ingress']);
    const ports = (rules: unknown) =>
      arr(rules)
        .flatMap((r) => arr(get(r, 'ports')).map((p) => `${get(p, 'protocol')}/${get(p, 'port')}`))
        .sort();
    const dep = findDoc(BASE, 'Deployment');
    const containerPorts = arr(get(dep, 'spec', 'template', 'spec', 'containers', 0, 'ports')).map(
      (p) => `TCP/${get(p, 'containerPort')}`,
    );
    expect(containerPorts.sort()).toEqual(['TCP/8080', 'TCP/8081']);
    // No rule for the probe port: the kubelet probes from the pod's own node, which NetworkPolicy
    // always admits; nobody else needs it (a rule would admit every source).
    expect(ports(get(np, 'spec', 'ingress'))).toEqual(['TCP/8080']);
    expect(ports(get(np, 'spec', 'egress'))).toEqual(['TCP/443', 'TCP/53', 'TCP/6443', 'UDP/53']);
    // Every rule restricts ports: none opens everything.
    for (const r of [...arr(get(np, 'spec', 'ingress')), ...arr(get(np, 'spec', 'egress'))]) {
      expect(arr(get(r, 'ports')).length).toBeGreaterThan(0);
    }
    // Who may scrape: Prometheus pods in the monitoring namespace (one peer: both selectors must
    // match).
    const ingress = arr(get(np, 'spec', 'ingress'));
    expect(ingress).toHaveLength(1);
    const metricsRule = ingress.find((r) => arr(get(r, 'ports')).some((p) => get(p, 'port') === 8080));
    // (loadDocs goes through @kubernetes/client-node's typed models, which name `from` `_from`.)
    expect(get(metricsRule, '_from') ?? get(metricsRule, 'from')).toEqual([
      {
        namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
        podSelector: { matchLabels: { 'app.kubernetes.io/name': 'prometheus' } },
      },
    ]);
    expect(get(np, 'spec', 'podSelector', 'matchLabels')).toEqual(
      get(dep, 'spec', 'selector', 'matchLabels'),
    );
  });
});

// ---------------------------------------------------------------------------------------------

describe('PrometheusRule', () => {
  const required = [
    'NodeLifecycleControllerDown',
    'NodeLifecycleControllerNoLeader',
    'NodeLifecycleControllerMultipleLeaders',
    'NodeLifecycleControllerBlind',
    'NodeLifecycleControllerLeaseWatchDisconnected',
    'NodeLifecycleControllerLeaseWatchSilent',
    'NodeLifecycleControllerNodesMarkedUnknown',
    'NodeLifecycleControllerNoExecuteHeldByCap',
    'NodeLifecycleControllerMasterDisruption',
    'NodeLifecycleControllerZoneFullDisruption',
    'NodeLifecycleControllerZonePartialDisruption',
    'NodeLifecycleControllerWriteFailures',
    'NodeLifecycleControllerLeaderRenewErrors',
  ];

  it('has the alerts that matter, each once', () => {
    const names = alerts().map((a) => a.alert);
    expect(new Set(names).size).toBe(names.length);
    expect(names).toEqual(expect.arrayContaining(required));
  });

  it('every alert has a severity, a summary, a description and a duration in Prometheus syntax', () => {
    const duration = /^(0|(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?)$/;
    for (const a of alerts()) {
      expect(['critical', 'warning', 'info'], a.alert).toContain(a.labels?.severity);
      expect(a.annotations?.summary, a.alert).toBeTruthy();
      expect(a.annotations?.description, a.alert).toBeTruthy();
      expect(typeof a.expr, a.alert).toBe('string');
      if (a.for !== undefined) expect(a.for, a.alert).toMatch(duration);
    }
  });

  it("every runbook_url is an absolute http(s) URL, one documented base for all, whose anchor is the alert's heading in docs/operations.md", () => {
    const anchors = markdownAnchors(OPERATIONS_MD);
    const bases = new Set<string>();
    for (const a of alerts()) {
      const url = a.annotations?.runbook_url ?? '';
      const m = /^(https?:\/\/[^\s#]+)#([\w-]+)$/.exec(url);
      expect(m, `${a.alert}: ${url} is <absolute http(s) base>#<anchor>`).not.toBeNull();
      expect(new URL(url).hash, `${a.alert}: ${url}`).toBe(`#${a.alert.toLowerCase()}`);
      bases.add(m![1]!);
      expect(anchors.has(m![2]!), `docs/operations.md has a section "${a.alert}"`).toBe(true);
    }
    expect(bases.size, [...bases].join(' ')).toBe(1);
    // The default base is stated where the links are explained (docs/deploy.md, "Monitoring").
    const [base] = bases;
    expect(readFileSync(join(REPO, 'docs', 'deploy.md'), 'utf8')).toContain(`\`${base}\``);
  });

  it('every selector of every alert picks the job of the ServiceMonitor; per-install alerts group by namespace', () => {
    const missing = alerts().flatMap((a) =>
      promqlSelectors(a.expr)
        .filter((sel) => !sel.matchers.some((m) => m.name === 'job' && m.op === '=' && m.value === JOB))
        .map((sel) => `${a.alert}: ${sel.metric}`),
    );
    expect(missing).toEqual([]);
    const byName = new Map(alerts().map((a) => [a.alert, a]));
    expect(byName.get('NodeLifecycleControllerNoStandby')?.expr).toMatch(/^count by \(namespace\) \(/);
    expect(byName.get('NodeLifecycleControllerDown')?.expr).toMatch(/sum by \(namespace\)/);
    // No targets at all (no pods, or the ServiceMonitor selects nothing) fires too.
    expect(byName.get('NodeLifecycleControllerDown')?.expr).toContain(`absent(up{job="${JOB}"})`);
  });

  it("docs/deploy.md's overlay snippet rewrites every runbook_url to the hosted docs (kubectl kustomize)", () => {
    const text = readFileSync(join(REPO, 'docs', 'deploy.md'), 'utf8');
    const block = /```yaml\n(# runbook links[\s\S]*?)```/.exec(text)?.[1];
    expect(block, 'the "# runbook links" snippet in docs/deploy.md').toBeDefined();
    const dir = mkdtempSync(join(tmpdir(), 'nlc-runbooks-'));
    try {
      const overlay = loadAllYaml(block!)[0] as Obj;
      overlay.apiVersion = 'kustomize.config.k8s.io/v1beta1';
      overlay.kind = 'Kustomization';
      overlay.components = [relative(dir, join(COMPONENTS, 'prometheusrule'))];
      writeFileSync(join(dir, 'kustomization.yaml'), JSON.stringify(overlay));
      const out = kustomize(dir).find((d) => d.kind === 'PrometheusRule')!;
      const urls = arr(get(out, 'spec', 'groups')).flatMap((g) =>
        arr(get(g, 'rules')).map((r) => String(get(r, 'annotations', 'runbook_url'))),
      );
      expect(urls.length).toBe(alerts().length);
      const base = String(get(out, 'metadata', 'annotations', 'runbook-base'));
      expect(base).toMatch(/^https:\/\/.+\/docs\/operations\.md$/);
      for (const [i, a] of alerts().entries()) expect(urls[i]).toBe(`${base}#${a.alert.toLowerCase()}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('docs/operations.md has no runbook for an alert that does not exist', () => {
    const names = new Set(alerts().map((a) => a.alert));
    const headings = readFileSync(OPERATIONS_MD, 'utf8')
      .split('\n')
      .filter((l) => /^### NodeLifecycleController/.test(l))
      .map((l) => l.slice(4).trim());
    expect(headings.filter((h) => !names.has(h))).toEqual([]);
  });

  it('links between docs/deploy.md and docs/operations.md, and to repository files, resolve', () => {
    const docs = join(REPO, 'docs');
    for (const file of ['deploy.md', 'operations.md']) {
      const text = readFileSync(join(docs, file), 'utf8');
      for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const [target, anchor] = m[1]!.split('#');
        if (/^[a-z]+:/.test(m[1]!)) continue;
        const path = target ? resolve(docs, target) : join(docs, file);
        expect(existsSync(path), `${file}: link ${m[1]}`).toBe(true);
        if (anchor) expect(markdownAnchors(path).has(anchor), `${file}: anchor ${m[1]}`).toBe(true);
      }
    }
  });

  it('uses only fields the PrometheusRule CRD defines (monitoring.coreos.com/v1)', () => {
    const r = rule();
    expect(r.apiVersion).toBe('monitoring.coreos.com/v1');
    expect(Object.keys(r).sort()).toEqual(['apiVersion', 'kind', 'metadata', 'spec']);
    expect(Object.keys(r.spec as Obj)).toEqual(['groups']);
    const groupKeys = [
      'name',
      'interval',
      'rules',
      'limit',
      'partial_response_strategy',
      'query_offset',
      'labels',
    ];
    const ruleKeys = ['alert', 'record', 'expr', 'for', 'keep_firing_for', 'labels', 'annotations'];
    const groups = arr(get(r, 'spec', 'groups')) as Obj[];
    expect(new Set(groups.map((g) => g.name)).size).toBe(groups.length);
    for (const g of groups) {
      for (const k of Object.keys(g)) expect(groupKeys, `group ${g.name}: ${k}`).toContain(k);
      for (const rr of arr(g.rules) as Obj[]) {
        for (const k of Object.keys(rr)) expect(ruleKeys, `${rr.alert}: ${k}`).toContain(k);
        for (const v of Object.values({ ...(rr.labels as Obj), ...(rr.annotations as Obj) })) {
          expect(typeof v, `${rr.alert}: label/annotation values are strings`).toBe('string');
        }
      }
    }
  });
});

// ---------------------------------------------------------------------------------------------

describe('metric names in alerts and dashboard', () => {
  let catalog: Map<string, MetricInfo>;
  beforeAll(async () => {
    catalog = await controllerMetricCatalog();
  });

  /**
   * Label values the alerts and dashboard match on: exported lists where the code has them, the
   * values the real watch reflectors export, and for transition kinds the string literals of the
   * reconciler (checked against its source below).
   */
  const TRANSITION_KINDS = controllerTransitionKinds;
  const EXPORTED_VALUES: Record<string, Record<string, readonly string[]>> = {
    nlc_noexecute_held_back: { reason: HELD_BACK_REASONS },
    nlc_zone_state: { state: ZONE_STATES },
    nlc_transitions_total: { kind: TRANSITION_KINDS },
  };
  const knownValues = (info: MetricInfo, label: string): readonly string[] | undefined =>
    EXPORTED_VALUES[info.family]?.[label] ??
    (info.labelValues.get(label)?.size ? [...info.labelValues.get(label)!] : undefined);

  /** Problems with one selector: unknown metric, unknown label, unknown label value. */
  function check(sel: Selector, where: string): string[] {
    if (PROMETHEUS_SERIES.has(sel.metric)) {
      return sel.matchers
        .filter((m) => !TARGET_LABELS.has(m.name))
        .map((m) => `${where}: up{${m.name}} is not a target label`);
    }
    const info = catalog.get(sel.metric);
    if (!info) return [`${where}: ${sel.metric} is not a metric of the controller`];
    const problems: string[] = [];
    for (const m of sel.matchers) {
      if (TARGET_LABELS.has(m.name) && !info.labelNames.includes(m.name)) continue;
      if (!info.labelNames.includes(m.name)) {
        problems.push(
          `${where}: ${sel.metric} has no label ${m.name} (has ${info.labelNames.join(', ') || 'none'})`,
        );
        continue;
      }
      const values =
        m.op.endsWith('~') && /^[\w|-]+$/.test(m.value)
          ? m.value.split('|')
          : m.op === '=' || m.op === '!='
            ? [m.value]
            : [];
      const known = knownValues(info, m.name);
      for (const v of values) {
        // Values of labels without an exported or contract list must at least be named in the metric's help.
        const ok = known
          ? known.includes(v)
          : new RegExp(`\\b${v.replace(/[-_]/g, '[-_]')}\\b`).test(info.help);
        if (!ok)
          problems.push(`${where}: ${sel.metric}{${m.name}="${v}"} is not a value the controller sets`);
      }
    }
    return problems;
  }

  it('the transition kinds are the ones the reconciler counts, each exported from the start at 0', () => {
    // The reconciler (node-lifecycle.ts, its taint and pod steps) counts literal kinds; the policies
    // name the kind of each status write they return (`transition: '...'`), which the reconciler counts.
    const src = [
      ...walkFiles(join(REPO, 'src', 'controller'), (p) => p.endsWith('.ts') && !p.endsWith('.test.ts')),
      ...walkFiles(join(REPO, 'src', 'policy'), (p) => p.endsWith('.ts') && !p.endsWith('.test.ts')),
    ]
      .map((f) => readFileSync(f, 'utf8'))
      .join('\n');
    expect(src).toContain('transitions.inc({ kind: write.transition })');
    for (const k of TRANSITION_KINDS) expect(src, k).toContain(`'${k}'`);
    const counted = [
      ...src.matchAll(/transitions\.inc\(\{\s*kind:\s*'(\w+)'/g),
      ...src.matchAll(/\btransition:\s*'(\w+)'/g),
    ].map((m) => m[1]);
    for (const k of counted) expect(TRANSITION_KINDS, String(k)).toContain(k);
    expect([...(catalog.get('nlc_transitions_total')?.labelValues.get('kind') ?? [])].sort()).toEqual(
      [...TRANSITION_KINDS].sort(),
    );
  });

  it('the watch metrics carry the resource names of the real reflectors', () => {
    expect([...(catalog.get('nlc_watch_connected')?.labelValues.get('resource') ?? [])].sort()).toEqual([
      'leases',
      'lock',
      'nodes',
    ]);
  });

  it('the catalog holds the controller metrics and prom-client defaults, with labels', () => {
    for (const n of [
      'nlc_nodes',
      'nlc_detection_latency_seconds_bucket',
      'nlc_transitions_total',
      'nlc_blind',
      'nlc_writes_total',
      'nlc_api_requests_total',
      'nlc_watch_connected',
      'leader_election_master_status',
      'node_collector_zone_health',
      'nlc_zone_state',
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
    ]) {
      expect(catalog.has(n), n).toBe(true);
    }
    expect(catalog.get('nlc_writes_total')?.labelNames).toEqual(['resource', 'outcome']);
    expect(catalog.get('nlc_detection_latency_seconds_bucket')?.labelNames).toContain('le');
  });

  it('the PromQL scanner finds metric selectors and nothing else', () => {
    const sels = promqlSelectors(
      'histogram_quantile(0.99, sum by (le, verb) (rate(a_bucket{x="1", y=~"b|c"}[5m] offset 1h))) > 0 ' +
        'and on (pod) group_left (zone) label_replace(b, "dst", "$1", "src", "(.*)") unless count(c) by (pod) or vector(0)',
    );
    expect(sels.map((s) => s.metric)).toEqual(['a_bucket', 'b', 'c']);
    expect(sels[0]!.matchers).toEqual([
      { name: 'x', op: '=', value: '1' },
      { name: 'y', op: '=~', value: 'b|c' },
    ]);
  });

  it('the check catches a wrong metric, a wrong label and a wrong value', () => {
    const problems = [
      ...check({ metric: 'nlc_no_such_metric', matchers: [] }, 't'),
      ...check({ metric: 'nlc_writes_total', matchers: [{ name: 'verb', op: '=', value: 'x' }] }, 't'),
      ...check(
        { metric: 'nlc_writes_total', matchers: [{ name: 'outcome', op: '=', value: 'exploded' }] },
        't',
      ),
      ...check(
        {
          metric: 'nlc_zone_state',
          matchers: [{ name: 'state', op: '=~', value: 'Partial|FullDisruption' }],
        },
        't',
      ),
    ];
    expect(problems).toHaveLength(4);
    expect(
      check({ metric: 'nlc_writes_total', matchers: [{ name: 'outcome', op: '=', value: 'failed' }] }, 't'),
    ).toEqual([]);
  });

  it('every alert expression uses existing metrics, labels and label values', () => {
    const problems = alerts().flatMap((a) => promqlSelectors(a.expr).flatMap((s) => check(s, a.alert)));
    expect(problems).toEqual([]);
    expect(alerts().every((a) => promqlSelectors(a.expr).length > 0)).toBe(true);
  });

  it('every dashboard query uses existing metrics, labels and label values', () => {
    const exprs = dashboardExprs(dashboard());
    expect(exprs.length).toBeGreaterThan(20);
    const problems = exprs.flatMap(({ where, expr }) =>
      promqlSelectors(grafanaInterpolate(expr)).flatMap((s) => check(s, where)),
    );
    expect(problems).toEqual([]);
  });

  it("readable zone names (label_replace) match the controller's own zoneDisplay()", () => {
    const exprs = [...alerts().map((a) => a.expr), ...dashboardExprs(dashboard()).map((e) => e.expr)];
    const replaces = exprs.flatMap(zoneLabelReplaces);
    expect(replaces.length).toBeGreaterThan(0);
    const apply = (key: string) => {
      // Prometheus: regexes are fully anchored; a non-matching value leaves the label unset.
      let out: string | undefined;
      for (const r of replaces.slice(0, 2)) {
        const m = new RegExp(`^(?:${r.regex})$`).exec(key);
        if (m) out = r.replacement.replace(/\$(\d)/g, (_, d: string) => m[Number(d)] ?? '');
      }
      return out;
    };
    for (const r of replaces.slice(0, 2)) expect(replaces).toContainEqual(r);
    const nodes: Record<string, string>[] = [
      { 'topology.kubernetes.io/region': 'eu-west-1', 'topology.kubernetes.io/zone': 'eu-west-1a' },
      { 'topology.kubernetes.io/zone': 'z1' },
      { 'topology.kubernetes.io/region': 'r1' },
      {},
    ];
    for (const labels of nodes) {
      const key = zoneKeyOf(labels);
      expect(apply(key), JSON.stringify(labels)).toBe(zoneDisplay(key));
    }
  });
});

// ---------------------------------------------------------------------------------------------

// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax, not a JS template.
const DS_UID = '${DS_PROMETHEUS}';

describe('Grafana dashboard', () => {
  const d = dashboard();
  const panels = arr(d.panels) as Obj[];

  it('every query filters by the ServiceMonitor job and the $cluster variable; the variables do too', () => {
    const vars = arr(get(d, 'templating', 'list')) as Obj[];
    const cluster = vars.find((v) => v.name === 'cluster');
    expect(cluster).toMatchObject({ type: 'query', includeAll: true, allValue: '.*' });
    expect(get(cluster, 'query', 'query')).toBe(`label_values(up{job="${JOB}"}, cluster)`);
    // Variables are evaluated in order: cluster before namespace, and namespace within the cluster.
    expect(vars.findIndex((v) => v.name === 'cluster')).toBeLessThan(
      vars.findIndex((v) => v.name === 'namespace'),
    );
    expect(
      String(
        get(
          vars.find((v) => v.name === 'namespace'),
          'query',
          'query',
        ),
      ),
    ).toContain('cluster=~"$cluster"');
    const problems: string[] = [];
    for (const { where, expr } of dashboardExprs(d)) {
      for (const sel of promqlSelectors(grafanaInterpolate(expr))) {
        const has = (name: string, op: string, value: string) =>
          sel.matchers.some((m) => m.name === name && m.op === op && m.value === value);
        if (!has('job', '=', JOB)) problems.push(`${where}: ${sel.metric} without job="${JOB}"`);
        if (!has('cluster', '=~', '.*')) problems.push(`${where}: ${sel.metric} without cluster=~"$cluster"`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('is a schemaVersion 39 dashboard with a Prometheus data-source variable used by every panel', () => {
    expect(d.schemaVersion).toBe(39);
    expect(d.uid).toBe('node-lifecycle-controller');
    const vars = arr(get(d, 'templating', 'list')) as Obj[];
    expect(vars.find((v) => v.name === 'DS_PROMETHEUS')).toMatchObject({
      type: 'datasource',
      query: 'prometheus',
    });
    for (const p of panels.filter((p) => p.type !== 'row')) {
      expect(get(p, 'datasource', 'uid'), String(p.title)).toBe(DS_UID);
      expect(arr(p.targets).length, String(p.title)).toBeGreaterThan(0);
      for (const t of arr(p.targets)) expect(get(t, 'datasource', 'uid')).toBe(DS_UID);
    }
  });

  it('panel ids are unique and panels fit the 24-column grid without overlapping', () => {
    const ids = panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    const cells = new Set<string>();
    for (const p of panels) {
      const g = p.gridPos as { x: number; y: number; w: number; h: number };
      expect(g.x + g.w, String(p.title)).toBeLessThanOrEqual(24);
      for (let x = g.x; x < g.x + g.w; x++)
        for (let y = g.y; y < g.y + g.h; y++) {
          expect(cells.has(`${x},${y}`), `${p.title} overlaps at ${x},${y}`).toBe(false);
          cells.add(`${x},${y}`);
        }
    }
  });

  it('has the panels operators need', () => {
    const uses = (metric: string) =>
      dashboardExprs(d).some(({ expr }) =>
        promqlSelectors(grafanaInterpolate(expr)).some((s) => s.metric === metric),
      );
    for (const m of [
      'leader_election_master_status',
      'nlc_nodes',
      'nlc_detection_latency_seconds_bucket',
      'nlc_transitions_total',
      'node_collector_zone_health',
      'nlc_zone_state',
      'nlc_noexecute_held_back',
      'nlc_api_requests_total',
      'nlc_watch_connected',
      'nlc_watch_seconds_since_last_event',
      'nlc_watch_reconnects_total',
      'nlc_watch_relists_total',
      'nlc_writes_total',
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
    ]) {
      expect(uses(m), m).toBe(true);
    }
    const exprs = dashboardExprs(d).map((e) => e.expr);
    expect(
      exprs.some((e) => e.includes('histogram_quantile(0.5,') && e.includes('nlc_detection_latency')),
    ).toBe(true);
    expect(
      exprs.some((e) => e.includes('histogram_quantile(0.99,') && e.includes('nlc_detection_latency')),
    ).toBe(true);
  });
});
