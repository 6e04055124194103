/**
 * The Helm chart (charts/node-lifecycle-controller) with the project's own Helm
 * (scripts/build-helm.sh): `helm lint --strict`, and `helm template` against what kustomize renders
 * from manifests/ (the project's kubectl): with default values the objects of manifests/base, with
 * the monitoring and NetworkPolicy values the components too, and with ci/kind-values.yaml and the
 * dry-run value the overlays, up to the labels Helm adds. Then what only the chart does: node
 * pools, runbook links, names and namespaces.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildConfig, type Config } from '../../src/config/config.js';
import { FLAGS, parseArgs } from '../../src/config/flags.js';
import { parsePoolConfig } from '../../src/disruption/pools/config.js';
import { type LabelSelector, matchesSelector } from '../../src/disruption/pools/selector.js';
import { type Manifest, parseManifests } from '../support/apply.js';
import { helm, projectHelm } from '../support/helm.js';
import { kustomizeOverlay } from '../support/kubectl.js';
import { MANIFESTS, REPO } from './manifests.support.js';

const CHART = join(REPO, 'charts', 'node-lifecycle-controller');
const BASE = join(MANIFESTS, 'base');
const COMPONENTS = ['networkpolicy', 'prometheusrule', 'servicemonitor'].map((c) =>
  join(MANIFESTS, 'components', c),
);
/** Labels Helm's conventions add to every object's metadata (not to selectors or pod templates). */
const HELM_LABELS = [
  'helm.sh/chart',
  'app.kubernetes.io/managed-by',
  'app.kubernetes.io/instance',
  'app.kubernetes.io/version',
];

function template(
  args: string[],
  release = 'node-lifecycle-controller',
  namespace = 'nlc-system',
): Manifest[] {
  return parseManifests(helm(['template', release, CHART, '--namespace', namespace, ...args]));
}

const key = (o: Manifest) => `${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}`;
const byKey = (l: Manifest[]) => [...l].sort((a, b) => key(a).localeCompare(key(b)));

const INSTANCE = 'app.kubernetes.io/instance';

/**
 * Every label selector of an object of the chart: what it selects (`pods`, or the ServiceMonitor's
 * `services`) and the selector itself (the object's own, to read or change).
 */
function selectorsOf(o: Manifest): { what: string; selects: 'pods' | 'services'; selector: LabelSelector }[] {
  const spec = (o.spec ?? {}) as Record<string, unknown>;
  const what = `${o.kind} ${o.metadata.name}`;
  switch (o.kind) {
    case 'Deployment':
    case 'PodDisruptionBudget':
      return [{ what, selects: 'pods', selector: spec.selector as LabelSelector }];
    case 'Service':
      return [{ what, selects: 'pods', selector: { matchLabels: spec.selector as Record<string, string> } }];
    case 'NetworkPolicy':
      return [{ what, selects: 'pods', selector: spec.podSelector as LabelSelector }];
    case 'ServiceMonitor':
      return [{ what, selects: 'services', selector: spec.selector as LabelSelector }];
    default:
      return [];
  }
}

/** The labels of the pods a render's Deployment makes. */
const podLabelsOf = (objects: Manifest[]) =>
  (
    objects.find((o) => o.kind === 'Deployment')!.spec as {
      template: { metadata: { labels: Record<string, string> } };
    }
  ).template.metadata.labels;

/**
 * The chart's objects with what Helm's conventions add taken out (each must be there first):
 * Helm's labels on every object's metadata, and the release's instance label in every selector and
 * on the pods.
 */
function withoutHelmLabels(objects: Manifest[], release = 'node-lifecycle-controller'): Manifest[] {
  return objects.map((o) => {
    const copy = structuredClone(o);
    const labels = copy.metadata.labels ?? {};
    for (const l of HELM_LABELS) {
      expect(labels[l], `${key(o)}: label ${l}`).toBeDefined();
      delete labels[l];
    }
    const selected = selectorsOf(copy).map((s) => s.selector.matchLabels ?? {});
    for (const l of copy.kind === 'Deployment' ? [...selected, podLabelsOf([copy])] : selected) {
      expect(l[INSTANCE], `${key(o)}: ${INSTANCE} in a selector or the pods' labels`).toBe(release);
      delete l[INSTANCE];
    }
    return copy;
  });
}

const notNamespace = (l: Manifest[]) => l.filter((o) => o.kind !== 'Namespace');
/** Container args as the controller itself parses them, with the pod's environment. */
const configOf = (args: string[]): Config =>
  buildConfig(parseArgs(args), { POD_NAME: 'nlc-0', POD_NAMESPACE: 'nlc-system' }, 'host');
const pod = (objects: Manifest[]) =>
  (objects.find((o) => o.kind === 'Deployment')!.spec as { template: { spec: Record<string, unknown> } })
    .template.spec as {
    containers: { args: string[]; volumeMounts: { name: string; mountPath: string }[] }[];
    volumes: { name: string; configMap?: { name: string } }[];
  };

describe('Helm chart', () => {
  it('helm lint --strict passes without a warning, with the default values and with each ci/ values file', () => {
    /** stdout and stderr of a helm run that must succeed (helm warns on stderr, e.g. of symlinks). */
    const lint = (args: string[]) => {
      const r = spawnSync(projectHelm(), ['lint', '--strict', CHART, ...args], { encoding: 'utf8' });
      expect(r.status, `helm lint ${args.join(' ')}: ${r.stderr}${r.stdout}`).toBe(0);
      // Chart.yaml has no icon: helm reports it as INFO, not a warning.
      expect(r.stdout.split('\n').filter((l) => /WARNING|ERROR/.test(l))).toEqual([]);
      expect(r.stderr).toBe('');
      return r.stdout;
    };
    expect(lint([])).toMatch(/1 chart\(s\) linted, 0 chart\(s\) failed/);
    const ci = readdirSync(join(CHART, 'ci'));
    expect(ci.sort()).toEqual(['companion-values.yaml', 'control-plane-values.yaml', 'kind-values.yaml']);
    for (const f of ci) expect(lint(['-f', join(CHART, 'ci', f)]), f).toMatch(/0 chart\(s\) failed/);
  });

  it("files/prometheusrule.yaml is a file of the chart (no link out of it) identical to the kustomize component's", () => {
    const copy = join(CHART, 'files', 'prometheusrule.yaml');
    const source = join(MANIFESTS, 'components', 'prometheusrule', 'prometheusrule.yaml');
    expect(lstatSync(copy).isFile(), `${copy} is a regular file, not a link`).toBe(true);
    expect(
      readFileSync(copy, 'utf8') === readFileSync(source, 'utf8'),
      `the chart's alert rules differ from the component's, the one to edit; copy it: cp ${relative(REPO, source)} ${relative(REPO, copy)}`,
    ).toBe(true);
  });

  it('helm package: one archive holding the alert rules of the kustomize component', () => {
    const out = mkdtempSync(join(tmpdir(), 'nlc-chart-'));
    try {
      helm(['package', CHART, '--destination', out]);
      const [archive] = readdirSync(out);
      expect(archive).toMatch(/^node-lifecycle-controller-.+\.tgz$/);
      const rules = execFileSync(
        'tar',
        ['-xzOf', join(out, archive!), 'node-lifecycle-controller/files/prometheusrule.yaml'],
        {
          encoding: 'utf8',
        },
      );
      expect(rules).toBe(
        readFileSync(join(MANIFESTS, 'components', 'prometheusrule', 'prometheusrule.yaml'), 'utf8'),
      );
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it('default values: the objects of manifests/base (the Namespace only with namespace.create)', () => {
    const chart = withoutHelmLabels(template([]));
    const base = kustomizeOverlay({ resources: [BASE] });
    expect(byKey(chart)).toEqual(byKey(notNamespace(base)));
    const withNs = withoutHelmLabels(template(['--set', 'namespace.create=true']));
    expect(byKey(withNs)).toEqual(byKey(base));
  });

  it('serviceMonitor, prometheusRule and networkPolicy enabled: the components too', () => {
    const chart = withoutHelmLabels(
      template([
        '--set',
        'serviceMonitor.enabled=true,prometheusRule.enabled=true,networkPolicy.enabled=true',
      ]),
    );
    const kustomized = kustomizeOverlay({ resources: [BASE], components: COMPONENTS });
    expect(byKey(chart)).toEqual(byKey(notNamespace(kustomized)));
  });

  it('networkPolicy.probeCIDRs: the probe port admitted from those blocks only (none by default)', () => {
    const policy = (args: string[]) =>
      template(['--set', 'networkPolicy.enabled=true', ...args]).find((o) => o.kind === 'NetworkPolicy')!
        .spec as { ingress: { from?: unknown[]; ports: { port: number }[] }[] };
    expect(policy([]).ingress.flatMap((r) => r.ports.map((p) => p.port))).toEqual([8080]);
    const rules = policy(['--set', 'networkPolicy.probeCIDRs={10.0.0.0/16,fd00::/64}']).ingress;
    expect(rules.find((r) => r.ports.some((p) => p.port === 8081))?.from).toEqual([
      { ipBlock: { cidr: '10.0.0.0/16' } },
      { ipBlock: { cidr: 'fd00::/64' } },
    ]);
  });

  it('ci/kind-values.yaml and ci/control-plane-values.yaml render their overlays; controller.dryRun the dry-run overlay', () => {
    const kind = withoutHelmLabels(template(['-f', join(CHART, 'ci', 'kind-values.yaml')]));
    expect(byKey(kind)).toEqual(
      byKey(notNamespace(kustomizeOverlay({ resources: [join(MANIFESTS, 'overlays', 'kind')] }))),
    );
    const controlPlane = withoutHelmLabels(template(['-f', join(CHART, 'ci', 'control-plane-values.yaml')]));
    expect(byKey(controlPlane)).toEqual(
      byKey(notNamespace(kustomizeOverlay({ resources: [join(MANIFESTS, 'overlays', 'control-plane')] }))),
    );
    const dry = withoutHelmLabels(template(['--set', 'controller.dryRun=true,controller.verbosity=2']));
    expect(byKey(dry)).toEqual(
      byKey(notNamespace(kustomizeOverlay({ resources: [join(MANIFESTS, 'overlays', 'dry-run')] }))),
    );
  });

  it('ci/companion-values.yaml renders manifests/overlays/companion; with companionEvictAfter the companion-evictions component too', () => {
    const overlay = join(MANIFESTS, 'overlays', 'companion');
    const companion = withoutHelmLabels(template(['-f', join(CHART, 'ci', 'companion-values.yaml')]));
    expect(byKey(companion)).toEqual(byKey(notNamespace(kustomizeOverlay({ resources: [overlay] }))));
    const evicting = withoutHelmLabels(
      template([
        '-f',
        join(CHART, 'ci', 'companion-values.yaml'),
        '--set',
        'controller.companionEvictAfter=2m',
      ]),
    );
    expect(byKey(evicting)).toEqual(
      byKey(
        notNamespace(
          kustomizeOverlay({
            resources: [overlay],
            components: [join(MANIFESTS, 'components', 'companion-evictions')],
          }),
        ),
      ),
    );
    // No eviction right without evictions, or outside companion mode.
    const rules = (objects: Manifest[]) =>
      JSON.stringify(
        objects.find((o) => o.kind === 'ClusterRole' && !o.metadata.name.endsWith('-reader'))?.rules,
      );
    for (const args of [
      ['--set', 'controller.mode=companion,controller.companionEvictAfter=0s'],
      ['--set', 'controller.mode=companion,controller.companionEvictAfter=2m,controller.dryRun=true'],
    ]) {
      expect(rules(template(args)), args.join(' ')).not.toContain('pods/eviction');
    }
    // Outside companion mode the value is refused (values.schema.json), so nothing renders at all.
    expect(() => template(['--set', 'controller.companionEvictAfter=2m'])).toThrow(
      /\/controller\/companionEvictAfter/,
    );
  });

  it('controller values become the flags the controller declares, in one order', () => {
    const helpers = helm(['template', 'x', CHART, '--show-only', 'templates/deployment.yaml']);
    expect(helpers).toContain('--leader-elect=true');
    const values = parseManifests(helm(['show', 'values', CHART]))[0] as unknown as {
      controller: Record<string, unknown>;
    };
    const set = Object.keys(values.controller)
      .filter(
        (k) => !['dryRun', 'coordinatedLeaderElection', 'outOfService', 'verbosity', 'extraArgs'].includes(k),
      )
      .map(
        (k, i) =>
          `controller.${k}=${
            {
              markPodsNotReady: 'upstream',
              logFormat: 'text',
              mode: 'companion',
              companionMarkPodsNotReady: 'true',
              companionTaintKey: 'example.com/lost',
              outOfServiceSignals: 'fence-annotation',
              secondOpinion: 'kubelet',
              // Numbers in their flags' ranges (values.schema.json).
              nodeEvictionRate: '0.5',
              secondaryNodeEvictionRate: '0.25',
              largeClusterSizeThreshold: '10',
              unhealthyZoneThreshold: '0.5',
              maxNoExecuteTaints: '12',
              maxNoExecutePercent: '13',
              kubeApiQps: '17',
              kubeApiBurst: '18',
            }[k] ?? `${i + 1}s`
          }`,
      );
    // outOfService on (as dry-run): the out-of-service settings are refused without it.
    const args = pod(
      template([
        '--set',
        set.join(','),
        '--set',
        'controller.outOfService=dry-run',
        '--set',
        'controller.extraArgs[0]=--watch-read-interval=100ms',
      ]),
    ).containers[0]!.args;
    expect(args[3]).toBe('--out-of-service=dry-run');
    const flags = args.slice(4, -1).map((a) => /^--([a-z0-9-]+)=/.exec(a)?.[1]);
    expect(flags).toHaveLength(set.length);
    for (const f of flags)
      expect(
        FLAGS.map((d) => d.name),
        `--${f}`,
      ).toContain(f);
    expect(args.at(-1)).toBe('--watch-read-interval=100ms');
  });

  it('nodePools=[]: the objects of manifests/base with the node-pools component', () => {
    const chart = withoutHelmLabels(template(['--set-json', 'nodePools=[]']));
    const kustomized = kustomizeOverlay({
      resources: [BASE],
      components: [join(MANIFESTS, 'components', 'node-pools')],
    });
    expect(byKey(chart)).toEqual(byKey(notNamespace(kustomized)));
  });

  it('controller.coordinatedLeaderElection: the objects of manifests/base with the coordinated-leader-election component', () => {
    const chart = withoutHelmLabels(template(['--set', 'controller.coordinatedLeaderElection=true']));
    const kustomized = kustomizeOverlay({
      resources: [BASE],
      components: [join(MANIFESTS, 'components', 'coordinated-leader-election')],
    });
    expect(byKey(chart)).toEqual(byKey(notNamespace(kustomized)));
    const args = pod(chart).containers[0]!.args;
    expect(args).toContain('--feature-gates=CoordinatedLeaderElection=true');
    expect(chart.some((o) => o.kind === 'Role' && o.metadata.name.endsWith(':leasecandidates'))).toBe(true);
    // None of it by default.
    const plain = template([]);
    expect(plain.some((o) => o.metadata.name.endsWith(':leasecandidates'))).toBe(false);
    expect(pod(plain).containers[0]!.args.some((a) => a.startsWith('--feature-gates'))).toBe(false);
  });

  it('controller.outOfService: the objects of manifests/base with the out-of-service component; no volumeattachments rule without it or in dry-run', () => {
    const chart = withoutHelmLabels(template(['--set', 'controller.outOfService=true']));
    const kustomized = kustomizeOverlay({
      resources: [BASE],
      components: [join(MANIFESTS, 'components', 'out-of-service')],
    });
    expect(byKey(chart)).toEqual(byKey(notNamespace(kustomized)));
    const rules = (objects: Manifest[]) =>
      JSON.stringify(
        objects.find((o) => o.kind === 'ClusterRole' && !o.metadata.name.endsWith('-reader'))?.rules,
      );
    expect(rules(chart)).toContain('volumeattachments');
    for (const args of [[], ['--set', 'controller.outOfService=true,controller.dryRun=true']]) {
      expect(rules(template(args)), args.join(' ')).not.toContain('volumeattachments');
    }
    // "dry-run": the flag's dry-run value, and no volumeattachments rule (it taints nothing to report on).
    const trial = template([
      '--set',
      'controller.outOfService=dry-run,controller.outOfServiceSignals=fence-annotation',
    ]);
    expect(pod(trial).containers[0]!.args).toEqual(
      expect.arrayContaining(['--out-of-service=dry-run', '--out-of-service-signals=fence-annotation']),
    );
    expect(pod(trial).containers[0]!.args).not.toContain('--out-of-service');
    expect(rules(trial)).not.toContain('volumeattachments');
    const tuned = pod(
      template([
        '--set',
        'controller.outOfService=true,controller.outOfServiceSignals=fence-annotation,controller.outOfServiceAfter=2m',
      ]),
    ).containers[0]!.args;
    expect(tuned).toEqual(
      expect.arrayContaining([
        '--out-of-service',
        '--out-of-service-signals=fence-annotation',
        '--out-of-service-after=2m',
      ]),
    );
  });

  it('controller.secondOpinion=kubelet: the objects of manifests/base with the second-opinion component (with networkPolicy.enabled, after the networkpolicy component); the controller takes the three flags; none by default', () => {
    const kustomized = (components: string[]) =>
      notNamespace(
        kustomizeOverlay({
          resources: [BASE],
          components: components.map((c) => join(MANIFESTS, 'components', c)),
        }),
      );
    const chart = withoutHelmLabels(template(['--set', 'controller.secondOpinion=kubelet']));
    expect(byKey(chart)).toEqual(byKey(kustomized(['second-opinion'])));
    const locked = withoutHelmLabels(
      template(['--set', 'controller.secondOpinion=kubelet,networkPolicy.enabled=true']),
    );
    expect(byKey(locked)).toEqual(byKey(kustomized(['networkpolicy', 'second-opinion'])));
    expect(configOf(pod(chart).containers[0]!.args).secondOpinion).toMatchObject({
      confirmAfterMs: 20_000,
      holdMs: 600_000,
    });
    const tuned = pod(
      template([
        '--set',
        'controller.secondOpinion=kubelet,controller.confirmAfter=15s,controller.cutOffHold=0',
      ]),
    ).containers[0]!.args;
    expect(tuned.slice(-3)).toEqual(['--second-opinion=kubelet', '--confirm-after=15s', '--cut-off-hold=0']);
    expect(configOf(tuned).secondOpinion).toMatchObject({ confirmAfterMs: 15_000, holdMs: 0 });
    // None of the three by default; off is passed on as off (the controller's default, no probes).
    const flags = (args: string[]) =>
      pod(template(args)).containers[0]!.args.filter((a) =>
        /^--(second-opinion|confirm-after|cut-off-hold)\b/.test(a),
      );
    expect(flags([])).toEqual([]);
    expect(flags(['--set', 'controller.secondOpinion=off'])).toEqual(['--second-opinion=off']);
    expect(
      configOf(pod(template(['--set', 'controller.secondOpinion=off'])).containers[0]!.args).secondOpinion,
    ).toBeUndefined();
  });

  it('networkPolicy.kubeletCIDRs: egress to the kubelet port 10250 only with controller.secondOpinion=kubelet, to any address, or to those blocks when set', () => {
    const kubeletRules = (args: string[]) =>
      (
        template(['--set', 'networkPolicy.enabled=true', ...args]).find((o) => o.kind === 'NetworkPolicy')!
          .spec as { egress: { to?: unknown[]; ports: { protocol: string; port: number }[] }[] }
      ).egress.filter((r) => r.ports.some((p) => p.port === 10250));
    const cidrs = ['--set', 'networkPolicy.kubeletCIDRs={10.0.0.0/16,fd00::/64}'];
    expect(kubeletRules([])).toEqual([]);
    expect(kubeletRules(cidrs)).toEqual([]);
    expect(kubeletRules(['--set', 'controller.secondOpinion=off', ...cidrs])).toEqual([]);
    expect(kubeletRules(['--set', 'controller.secondOpinion=kubelet'])).toEqual([
      { ports: [{ protocol: 'TCP', port: 10250 }] },
    ]);
    expect(kubeletRules(['--set', 'controller.secondOpinion=kubelet', ...cidrs])).toEqual([
      {
        ports: [{ protocol: 'TCP', port: 10250 }],
        to: [{ ipBlock: { cidr: '10.0.0.0/16' } }, { ipBlock: { cidr: 'fd00::/64' } }],
      },
    ]);
    // Kubelets that listen elsewhere: networkPolicy.kubeletPorts.
    const ports = (args: string[]) =>
      (
        template([
          '--set',
          'networkPolicy.enabled=true',
          '--set',
          'controller.secondOpinion=kubelet',
          ...args,
        ]).find((o) => o.kind === 'NetworkPolicy')!.spec as {
          egress: { ports: { protocol: string; port: number }[] }[];
        }
      ).egress.at(-1)!.ports;
    expect(ports(['--set', 'networkPolicy.kubeletPorts={10250,10255}'])).toEqual([
      { protocol: 'TCP', port: 10250 },
      { protocol: 'TCP', port: 10255 },
    ]);
    // No NetworkPolicy at all unless enabled.
    expect(
      template(['--set', 'controller.secondOpinion=kubelet', ...cidrs]).some(
        (o) => o.kind === 'NetworkPolicy',
      ),
    ).toBe(false);
  });

  it('nodePools: a ConfigMap the controller accepts, mounted where --node-pool-config points', () => {
    const objects = template([
      '--set-json',
      'nodePools=[{"name":"gpu","selector":{"matchLabels":{"pool":"gpu"}},"nodeMonitorGracePeriod":"2m"}]',
    ]);
    const cm = objects.find((o) => o.kind === 'ConfigMap')!;
    const text = (cm as unknown as { data: Record<string, string> }).data['pools.json']!;
    const parsed = parsePoolConfig(text);
    expect(parsed.ok, JSON.stringify(parsed)).toBe(true);
    const spec = pod(objects);
    const flag = spec.containers[0]!.args.find((a) => a.startsWith('--node-pool-config='))!;
    const mount = spec.containers[0]!.volumeMounts.find((m) => m.name === 'node-pools')!;
    expect(flag).toBe(`--node-pool-config=${mount.mountPath}/pools.json`);
    expect(spec.volumes.find((v) => v.name === 'node-pools')?.configMap?.name).toBe(cm.metadata.name);
    // None by default (nodePools: null).
    expect(template([]).some((o) => o.kind === 'ConfigMap')).toBe(false);
  });

  it('values.schema.json: misspelt keys and bad shapes are refused; on pools it agrees with the controller', () => {
    const refused = (args: string[]) => {
      const r = spawnSync(projectHelm(), ['template', 'x', CHART, ...args], { encoding: 'utf8' });
      return r.status !== 0 ? r.stderr : undefined;
    };
    expect(refused(['--set', 'replica=3'])).toMatch(/additional properties 'replica' not allowed/);
    expect(refused(['--set', 'controller.nodeMonitorGracePeriod=fifty'])).toMatch(/nodeMonitorGracePeriod/);
    expect(refused(['--set', 'controller.markPodsNotReady=sometimes'])).toMatch(/markPodsNotReady/);
    expect(refused(['--set', 'controller.nodeMonitorGracePeriod=1m30s'])).toBeUndefined();
    expect(refused(['--set', 'controller.outOfServiceSignals=lease-silence'])).toMatch(/outOfServiceSignals/);
    expect(refused(['--set', 'controller.outOfServiceAfter=soon'])).toMatch(/outOfServiceAfter/);
    expect(
      refused(['--set', 'controller.outOfService=true,controller.outOfServiceSignals=fence-annotation']),
    ).toBeUndefined();
    expect(refused(['--set', 'controller.outOfService=maybe'])).toMatch(/outOfService/);
    expect(
      refused(['--set', 'controller.outOfService=dry-run,controller.outOfServiceAfter=2m']),
    ).toBeUndefined();
    // The out-of-service settings without the out-of-service step: refused, not ignored.
    expect(refused(['--set', 'controller.outOfServiceSignals=fence-annotation'])).toMatch(
      /outOfServiceSignals/,
    );
    expect(refused(['--set', 'controller.outOfServiceAfter=2m'])).toMatch(/outOfServiceAfter/);
    // Pool lists the controller's own parser accepts or refuses, and the schema likewise.
    const sel = { matchLabels: { pool: 'gpu' } };
    const cases: [string, unknown[], boolean][] = [
      [
        'both graces',
        [{ name: 'gpu', selector: sel, nodeMonitorGracePeriod: '2m', nodeStartupGracePeriod: '10m' }],
        true,
      ],
      [
        'startup grace only, {} selector',
        [{ name: 'all', selector: {}, nodeStartupGracePeriod: '1h2m3.5s' }],
        true,
      ],
      [
        'matchExpressions',
        [
          {
            name: 'ml.a_1',
            selector: { matchExpressions: [{ key: 'pool', operator: 'Exists' }] },
            nodeMonitorGracePeriod: '90s',
          },
        ],
        true,
      ],
      ['no grace', [{ name: 'gpu', selector: sel }], false],
      ['a bad duration', [{ name: 'gpu', selector: sel, nodeMonitorGracePeriod: 'soon' }], false],
      ['an unknown field', [{ name: 'gpu', selector: sel, grace: '2m' }], false],
      ['the reserved name', [{ name: 'default', selector: sel, nodeMonitorGracePeriod: '2m' }], false],
      ['a bad name', [{ name: '-gpu', selector: sel, nodeMonitorGracePeriod: '2m' }], false],
      ['no selector', [{ name: 'gpu', nodeMonitorGracePeriod: '2m' }], false],
      [
        'a bad operator',
        [
          {
            name: 'gpu',
            selector: { matchExpressions: [{ key: 'k', operator: 'Equals' }] },
            nodeMonitorGracePeriod: '2m',
          },
        ],
        false,
      ],
      [
        'a label value that is a number',
        [{ name: 'gpu', selector: { matchLabels: { k: 1 } }, nodeMonitorGracePeriod: '2m' }],
        false,
      ],
    ];
    for (const [what, pools, valid] of cases) {
      expect(parsePoolConfig(JSON.stringify({ pools })).ok, `controller: ${what}`).toBe(valid);
      expect(
        refused(['--set-json', `nodePools=${JSON.stringify(pools)}`]) === undefined,
        `schema: ${what}`,
      ).toBe(valid);
    }
  });

  it("values.schema.json: numbers in their flag range, companion fields only in companion mode, a taint key outside Kubernetes' domains; each refusal names the field", () => {
    const refused = (args: string[]) => {
      const r = spawnSync(projectHelm(), ['template', 'x', CHART, ...args], { encoding: 'utf8' });
      return r.status !== 0 ? r.stderr : undefined;
    };
    const bad: [string, RegExp][] = [
      ['controller.nodeEvictionRate=abc', /\/controller\/nodeEvictionRate/],
      ['controller.kubeApiQps=-5', /\/controller\/kubeApiQps/],
      ['controller.kubeApiQps=0', /\/controller\/kubeApiQps/],
      ['controller.kubeApiBurst=0', /\/controller\/kubeApiBurst/],
      ['controller.kubeApiBurst=2.5', /\/controller\/kubeApiBurst/],
      ['controller.unhealthyZoneThreshold=3', /\/controller\/unhealthyZoneThreshold/],
      ['controller.maxNoExecutePercent=101', /\/controller\/maxNoExecutePercent/],
      ['controller.secondaryNodeEvictionRate=-0.01', /\/controller\/secondaryNodeEvictionRate/],
      ['controller.companionTaintKey=example.com/lost', /\/controller\/companionTaintKey/],
      ['controller.companionEvictAfter=5m', /\/controller\/companionEvictAfter/],
      ['controller.companionMarkPodsNotReady=false', /\/controller\/companionMarkPodsNotReady/],
      [
        'controller.mode=companion,controller.companionTaintKey=kubernetes.io/lost',
        /\/controller\/companionTaintKey/,
      ],
      [
        'controller.mode=companion,controller.companionTaintKey=node.k8s.io/lost',
        /\/controller\/companionTaintKey/,
      ],
      ['controller.mode=companion,controller.companionTaintKey=lost', /\/controller\/companionTaintKey/],
    ];
    for (const [set, field] of bad) expect(refused(['--set', set]), set).toMatch(field);
    // The flag table's ranges: what the controller itself accepts at the edges, the schema too.
    const range = (flag: string) => FLAGS.find((f) => f.name === flag)!;
    expect([range('unhealthy-zone-threshold').min, range('unhealthy-zone-threshold').max]).toEqual([0, 1]);
    expect([range('kube-api-qps').greaterThan, range('kube-api-burst').min]).toEqual([0, 1]);
    expect([range('max-noexecute-percent').max, range('node-eviction-rate').max]).toEqual([100, 1000]);
    for (const good of [
      'controller.nodeEvictionRate=0.2',
      'controller.nodeEvictionRate=1000',
      'controller.unhealthyZoneThreshold=1',
      'controller.kubeApiQps=0.5,controller.kubeApiBurst=1',
      'controller.maxNoExecutePercent=100',
      'controller.mode=companion,controller.companionTaintKey=example.com/lost,controller.companionEvictAfter=5m',
    ])
      expect(refused(['--set', good]), good).toBeUndefined();
    expect(refused(['--set-string', 'controller.nodeEvictionRate=0.2'])).toBeUndefined();
  });

  it('a duration given as a number is refused with what is wanted: "a Go duration like 50s" (0 is one)', () => {
    const r = spawnSync(
      projectHelm(),
      ['template', 'x', CHART, '--set', 'controller.nodeMonitorGracePeriod=50'],
      {
        encoding: 'utf8',
      },
    );
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain(
      'controller.nodeMonitorGracePeriod: 50 is a number; want a Go duration like 50s',
    );
    const args = (set: string) =>
      template(['--set', set]).find((o) => o.kind === 'Deployment')!.spec as {
        template: { spec: { containers: { args: string[] }[] } };
      };
    expect(args('controller.watchSilenceThreshold=0').template.spec.containers[0]!.args).toContain(
      '--watch-silence-threshold=0',
    );
  });

  it('values.schema.json: secondOpinion is "", off or kubelet; confirmAfter and cutOffHold only with kubelet, as Go durations (a number refused with what is wanted); each refusal names the field', () => {
    const refused = (args: string[]) => {
      const r = spawnSync(projectHelm(), ['template', 'x', CHART, ...args], { encoding: 'utf8' });
      return r.status !== 0 ? r.stderr : undefined;
    };
    const bad: [string, RegExp][] = [
      ['controller.secondOpinion=on', /\/controller\/secondOpinion/],
      // What YAML reads a bare `off` in a values file as.
      ['controller.secondOpinion=false', /\/controller\/secondOpinion/],
      ['controller.confirmAfter=15s', /\/controller\/confirmAfter/],
      ['controller.cutOffHold=0', /\/controller\/cutOffHold/],
      ['controller.secondOpinion=off,controller.cutOffHold=5m', /\/controller\/cutOffHold/],
      ['controller.secondOpinion=kubelet,controller.confirmAfter=soon', /\/controller\/confirmAfter/],
      ['controller.secondOpinion=kubelet,controller.cutOffHold=10min', /\/controller\/cutOffHold/],
      ['controller.secondOpinion=kubelet,networkPolicy.kubeletCIDRs[0]=', /\/networkPolicy\/kubeletCIDRs/],
      ['networkPolicy.kubeletPorts[0]=0', /\/networkPolicy\/kubeletPorts/],
      ['networkPolicy.kubeletPorts[0]=https', /\/networkPolicy\/kubeletPorts/],
    ];
    for (const [set, field] of bad) expect(refused(['--set', set]), set).toMatch(field);
    // A number for a duration: let through by the schema, refused by the template with what is wanted.
    for (const [key, value] of [
      ['confirmAfter', '15'],
      ['cutOffHold', '600'],
    ] as const)
      expect(
        refused(['--set', `controller.secondOpinion=kubelet,controller.${key}=${value}`]),
        key,
      ).toContain(`controller.${key}: ${value} is a number; want a Go duration like 50s`);
    for (const good of [
      'controller.secondOpinion=off',
      'controller.secondOpinion=kubelet,controller.confirmAfter=15s,controller.cutOffHold=1h',
      'controller.secondOpinion=kubelet,controller.cutOffHold=0',
    ])
      expect(refused(['--set', good]), good).toBeUndefined();
  });

  it('one replica: no PodDisruptionBudget (minAvailable 1 would block every drain of its node); two: one', () => {
    expect(template(['--set', 'replicas=1']).filter((o) => o.kind === 'PodDisruptionBudget')).toEqual([]);
    expect(template(['--set', 'replicas=0']).filter((o) => o.kind === 'PodDisruptionBudget')).toEqual([]);
    const pdb = template([]).filter((o) => o.kind === 'PodDisruptionBudget');
    expect(pdb).toHaveLength(1);
    expect((pdb[0]!.spec as { minAvailable: number }).minAvailable).toBe(1);
  });

  it("prometheusRule.runbookBaseURL: the component's absolute links by default; every runbook link points at the value, anchors kept; a relative base is refused", () => {
    const links = (args: string[]) =>
      (
        template(['--set', 'prometheusRule.enabled=true', ...args]).find((o) => o.kind === 'PrometheusRule')!
          .spec as { groups: { rules: { alert: string; annotations: { runbook_url: string } }[] }[] }
      ).groups
        .flatMap((g) => g.rules)
        .map((r) => [r.alert, r.annotations.runbook_url] as const);
    const component = parseManifests(
      readFileSync(join(MANIFESTS, 'components', 'prometheusrule', 'prometheusrule.yaml'), 'utf8'),
    )[0]!.spec as { groups: { rules: { alert: string; annotations: { runbook_url: string } }[] }[] };
    const defaults = links([]);
    expect(defaults).toEqual(
      component.groups.flatMap((g) => g.rules).map((r) => [r.alert, r.annotations.runbook_url]),
    );
    for (const [alert, url] of defaults)
      expect(url, alert).toMatch(/^https?:\/\/[^#]+#nodelifecyclecontroller/);
    const base = 'https://docs.example.com/nlc/v0.2.0/operations.html';
    const moved = links(['--set', `prometheusRule.runbookBaseURL=${base}`]);
    expect(moved.length).toBeGreaterThan(10);
    for (const [alert, url] of moved) expect(url).toBe(`${base}#${alert.toLowerCase()}`);
    for (const bad of ['docs/operations.md', `${base}#top`, '']) {
      const r = spawnSync(
        projectHelm(),
        ['template', 'x', CHART, '--set', `prometheusRule.enabled=true,prometheusRule.runbookBaseURL=${bad}`],
        { encoding: 'utf8' },
      );
      expect(r.status, `runbookBaseURL=${bad}`).not.toBe(0);
      expect(r.stderr, `runbookBaseURL=${bad}`).toMatch(/runbookBaseURL/);
    }
  });

  it("two releases in one namespace: no selector of one matches the other's pods (or the ServiceMonitor its Service)", () => {
    const args = ['--set', 'serviceMonitor.enabled=true,networkPolicy.enabled=true'];
    const releases = ['nlc-a', 'nlc-b'].map((r) => template(args, r, 'platform'));
    const targets = (objects: Manifest[]) => ({
      pods: podLabelsOf(objects),
      services: objects.find((o) => o.kind === 'Service')!.metadata.labels ?? {},
    });
    for (const [mine, other] of [releases, [...releases].reverse()] as [Manifest[], Manifest[]][]) {
      const selectors = mine.flatMap(selectorsOf);
      expect(selectors.map((s) => s.what.split(' ')[0]).sort()).toEqual([
        'Deployment',
        'NetworkPolicy',
        'PodDisruptionBudget',
        'Service',
        'ServiceMonitor',
      ]);
      for (const { what, selects, selector } of selectors) {
        expect(matchesSelector(selector, targets(mine)[selects]), `${what} selects its own ${selects}`).toBe(
          true,
        );
        expect(
          matchesSelector(selector, targets(other)[selects]),
          `${what} selects the other release's ${selects} ${JSON.stringify(targets(other)[selects])}`,
        ).toBe(false);
      }
    }
  });

  it('another release name and namespace: every name and namespace follows, subjects included', () => {
    const objects = template(
      ['--set', 'serviceMonitor.enabled=true,networkPolicy.enabled=true'],
      'nlc',
      'platform',
    );
    for (const o of objects) {
      expect(o.metadata.name, key(o)).toMatch(/^nlc-node-lifecycle-controller/);
      if (!['ClusterRole', 'ClusterRoleBinding'].includes(o.kind))
        expect(o.metadata.namespace, key(o)).toBe('platform');
      for (const s of (o.subjects ?? []) as { kind: string; namespace: string; name: string }[]) {
        expect(s.kind, key(o)).toBe('ServiceAccount');
        expect(s.namespace, key(o)).toBe('platform');
        expect(s.name, key(o)).toMatch(/^nlc-node-lifecycle-controller(-metrics-scraper)?$/);
      }
    }
    expect(JSON.stringify(objects)).not.toContain('nlc-system');
  });
});
