/**
 * Companion mode in kind (test/kind/kind.test.ts runs it after the upstream mode, on the suite's
 * one cluster): kube-controller-manager turned back to ITS DEFAULTS in place (its own
 * node-lifecycle-controller and taint-eviction-controller on, no hand-over; its static pod restarted
 * with them), first with the provider's controller alone, then with ours beside it
 * from manifests/overlays/companion (+ components/companion-evictions, a 15s delay here). Each time a
 * worker is stopped (`docker stop`) and the test's own watches time, from the node's last lease
 * renewal: our taint, the provider's Ready=Unknown, a test pod's endpoint leaving its Service, and
 * the pod's eviction, for a pod our evictions take (pod A) and one that opts out with a toleration
 * of our NoExecute key (pod B, evicted by the provider only).
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { dump } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { Companion } from '../../src/health/reasons.js';
import { KubeClient } from '../../src/kube/client.js';
import { resolveKubeconfig } from '../../src/kube/kubeconfig.js';
import { EndpointsWatch } from '../support/endpoints.js';
import { ClusterObserver } from '../support/observer.js';
import { rawWatch } from '../support/raw-watch.js';
import { type KindCluster, pass, sharedCluster, waitFor } from './cluster.js';
import {
  CLEANUP_POD_OVERRIDES,
  condition,
  DEPLOYMENT,
  IMAGE,
  NOT_READY,
  type NodeObj,
  NS,
  REPO,
  resolveKind,
  secs,
  UNREACHABLE,
} from './support.js';

const resolved = await resolveKind();
if ('skip' in resolved) throw new Error(`the kind suite cannot run here: ${resolved.skip}`);

/** Ours (manifests/overlays/companion) and the provider's (kube-controller-manager's default). */
const GRACE_S = 20;
const PROVIDER_GRACE_S = 50;
/**
 * kube-controller-manager's --node-monitor-period (5s). Its clock for a node starts at the monitor
 * pass that first SEES a newer heartbeat (lease renewal or status post, whichever is later), up to
 * one period after it, and it marks at the first pass strictly past that + grace, up to one more
 * (../shared/reference upstream-node-lifecycle.md, probeTimestamp): Unknown 50-60 s after the
 * kubelet's last heartbeat of either kind.
 */
const PROVIDER_MONITOR_S = 5;
const EVICT_AFTER_S = 15;
/** The test pods' toleration of upstream's NoExecute taints (300s by default; shorter to keep CI short). */
const TOLERATION_S = 10;
const KEY = Companion.DefaultTaintKey;
/** How far past a grace the marks may land, on the test's own watch, in kind on a shared 2-core machine. */
const KIND_OVERHEAD_MS = 1500;

describe('kind: companion mode beside kube-controller-manager at its defaults', () => {
  const s = resolved.settings;
  let cluster: KindCluster;
  let t: KindCluster['t'];
  const overlayDir = path.join(REPO, '.tmp', 'kind-companion-overlay');
  let client: KubeClient;
  let observer: ClusterObserver;
  const stops: (() => void)[] = [];
  let endpoints: EndpointsWatch;
  /** Pod name (default namespace) -> when the test's watch first saw it with a deletionTimestamp. */
  const deleting = new Map<string, number>();
  const figures: Record<string, string> = {};

  beforeAll(async () => {
    ({ cluster } = await sharedCluster(s));
    t = cluster.t;
    const restarted = await cluster.enableProviderNodeLifecycle();
    pass(
      `kube-controller-manager at its defaults (its node-lifecycle-controller on) and leading ${secs(restarted)}s after its manifest changed`,
    );
    const kube = resolveKubeconfig({ flag: s.kubeconfig, env: {}, homeDir: undefined });
    client = await KubeClient.fromCredentials(await kube.credentials(), { userAgent: 'nlc-kind-observer' });
    observer = await ClusterObserver.start(client);
    stops.push(
      await rawWatch<{ metadata: { name: string; deletionTimestamp?: string } }>(
        client,
        '/api/v1/namespaces/default/pods',
        (e) => {
          if (e.object.metadata.deletionTimestamp && !deleting.has(e.object.metadata.name))
            deleting.set(e.object.metadata.name, e.at);
        },
      ),
    );
    endpoints = await EndpointsWatch.start(client);
  }, 40 * 60_000);

  afterAll(async () => {
    console.log(`companion kind figures (s after the last renewal): ${JSON.stringify(figures)}`);
    for (const stop of stops) stop();
    endpoints?.close();
    observer?.stop();
    client?.close();
    for (const w of cluster?.workers ?? []) await t.docker(['start', w]).catch(() => undefined);
    rmSync(overlayDir, { recursive: true, force: true });
  }, 5 * 60_000);

  const node = (name: string) => t.getJson<NodeObj>(['node', name]);
  const collectOnFailure = (name: string) => onTestFailed(async () => void (await cluster.diagnostics(name)));

  /** Pod `name` on `worker`, Ready, behind Service `name`; `optOut` tolerates our NoExecute key. */
  async function workload(name: string, worker: string, optOut: boolean): Promise<void> {
    await t.kubectl(['-n', 'default', 'delete', 'pod', name, '--ignore-not-found', '--wait=true'], {
      timeoutMs: 120_000,
    });
    const tolerations = [
      { key: UNREACHABLE, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: TOLERATION_S },
      { key: NOT_READY, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: TOLERATION_S },
      ...(optOut ? [{ key: KEY, operator: 'Exists', effect: 'NoExecute' }] : []),
    ];
    await t.kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({
        apiVersion: 'v1',
        kind: 'List',
        items: [
          {
            apiVersion: 'v1',
            kind: 'Pod',
            metadata: { name, namespace: 'default', labels: { 'nlc-kind/app': name } },
            spec: {
              nodeName: worker,
              terminationGracePeriodSeconds: 1,
              tolerations,
              containers: [
                {
                  name: 'idle',
                  image: IMAGE,
                  imagePullPolicy: 'Never',
                  command: ['/nodejs/bin/node', '-e', 'setInterval(() => {}, 1 << 30)'],
                  ports: [{ containerPort: 8080 }],
                },
              ],
            },
          },
          {
            apiVersion: 'v1',
            kind: 'Service',
            metadata: { name, namespace: 'default' },
            spec: { selector: { 'nlc-kind/app': name }, ports: [{ port: 80, targetPort: 8080 }] },
          },
        ],
      }),
    });
    // The old pod (if any) is gone: only the new one's deletion counts from here.
    deleting.delete(name);
    await waitFor(`${name} Ready behind its Service`, 120_000, async () => endpoints.readyNow(name) === 1);
  }

  /** Stops `worker`; returns the test's time of its last lease renewal. */
  async function stopWorker(worker: string): Promise<number> {
    await new Promise((r) => setTimeout(r, 12_000)); // a few renewals seen by every controller
    await t.docker(['stop', worker], 120_000);
    return observer.lastRenewalAt(worker)!;
  }

  async function startWorker(worker: string, clean: (n: NodeObj) => boolean): Promise<void> {
    await t.docker(['start', worker]);
    await waitFor(`${worker} Ready and clean again`, 240_000, async () => {
      const n = await node(worker);
      return condition(n, 'Ready')?.status === 'True' && clean(n);
    });
  }

  /**
   * kube-controller-manager's continuity: its container's restarts and its lock's holder and
   * transitions. A restart or a new leader gives every node a fresh grace (upstream), so a mark
   * after one is judged from when it led again.
   */
  async function providerContinuity(): Promise<{
    restarts: number;
    holder: string;
    transitions: number;
    acquiredWall: number;
  }> {
    const pods = await t.getJson<{ items: { status: { containerStatuses?: { restartCount: number }[] } }[] }>(
      ['-n', 'kube-system', 'pods', '-l', 'component=kube-controller-manager'],
    );
    const lease = await t.getJson<{
      spec: { holderIdentity?: string; leaseTransitions?: number; acquireTime?: string };
    }>(['-n', 'kube-system', 'lease', 'kube-controller-manager']);
    return {
      restarts: pods.items.reduce((n, p) => n + (p.status.containerStatuses?.[0]?.restartCount ?? 0), 0),
      holder: lease.spec.holderIdentity ?? '',
      transitions: lease.spec.leaseTransitions ?? 0,
      acquiredWall: Date.parse(lease.spec.acquireTime ?? '') || 0,
    };
  }

  const sinceLast = (at: number | undefined, last: number) => (at === undefined ? 'never' : secs(at - last));
  const endpointGone = (svc: string, since: number) => endpoints.goneAt(svc, since);
  const evictedAt = async (pod: string, since: number) =>
    (
      await waitFor(`${pod} evicted`, (PROVIDER_GRACE_S + TOLERATION_S + 90) * 1000, async () => {
        const at = deleting.get(pod);
        return at !== undefined && at >= since ? at : undefined;
      })
    ).value;

  it('the provider alone: Unknown at its grace, the endpoint leaves then, the pod is evicted after its toleration', async () => {
    collectOnFailure('companion-provider-alone');
    const worker = cluster.workers[0]!;
    await workload('alone', worker, false);
    const before = await providerContinuity();
    const last = await stopWorker(worker);
    try {
      // The kubelet posts node status on its own 10 s clock: its last post may come after its last
      // lease renewal, and kube-controller-manager counts from the later of the two.
      let lastHeartbeat = Math.max(last, observer.lastStatusHeartbeatAt(worker) ?? last);
      const unknown = await waitFor(`${worker} Ready=Unknown`, (PROVIDER_GRACE_S + 30) * 1000, async () =>
        observer.readyAt(worker, 'Unknown', last),
      );
      const after = await providerContinuity();
      figures.providerContinuity = JSON.stringify({ before, after });
      if (
        after.restarts !== before.restarts ||
        after.transitions !== before.transitions ||
        after.holder !== before.holder
      ) {
        // It restarted or changed leader meanwhile: its grace began again when it led again (the
        // lock's acquireTime, the same host clock as the test's).
        const ledAgain = performance.now() - (Date.now() - after.acquiredWall);
        console.log(
          `kube-controller-manager restarted or changed leader while the worker was down: ${figures.providerContinuity}`,
        );
        lastHeartbeat = Math.max(lastHeartbeat, ledAgain);
      }
      await waitFor('its endpoint gone', 30_000, async () => endpointGone('alone', last));
      const evicted = await evictedAt('alone', last);
      figures.providerLastStatusAfterRenewal = secs(lastHeartbeat - last);
      figures.providerUnknown = sinceLast(unknown.value, last);
      figures.providerEndpointGone = sinceLast(endpointGone('alone', last), last);
      figures.providerEvicted = sinceLast(evicted, last);
      pass(
        `provider alone: Ready=Unknown ${figures.providerUnknown}s, endpoint gone ${figures.providerEndpointGone}s, pod evicted ${figures.providerEvicted}s after the last renewal (last status post ${figures.providerLastStatusAfterRenewal}s after it; grace ${PROVIDER_GRACE_S}s, toleration ${TOLERATION_S}s)`,
      );
      expect(unknown.value - lastHeartbeat).toBeGreaterThanOrEqual(PROVIDER_GRACE_S * 1000 - 100);
      expect(unknown.value - lastHeartbeat).toBeLessThanOrEqual(
        (PROVIDER_GRACE_S + 2 * PROVIDER_MONITOR_S) * 1000 + KIND_OVERHEAD_MS,
      );
    } finally {
      // Whatever happened above, the next case needs this worker back.
      await startWorker(worker, (n) => !(n.spec.taints ?? []).some((x) => x.key === UNREACHABLE));
    }
  });

  it('ours beside it: our taint at our grace, the endpoint leaves then, our eviction after the delay; an opted-out pod waits for the provider; uninstalled while the node is marked, the documented cleanup takes our taint and condition off', async () => {
    collectOnFailure('companion-beside');
    // manifests/overlays/companion with the evictions component, the kind image, workers only, a
    // shorter eviction delay (the last --companion-evict-after wins).
    mkdirSync(overlayDir, { recursive: true });
    const rel = (p: string) => path.relative(overlayDir, p);
    writeFileSync(
      path.join(overlayDir, 'kustomization.yaml'),
      dump({
        apiVersion: 'kustomize.config.k8s.io/v1beta1',
        kind: 'Kustomization',
        resources: [rel(path.join(REPO, 'manifests', 'overlays', 'companion'))],
        components: [rel(path.join(REPO, 'manifests', 'components', 'companion-evictions'))],
        images: [{ name: 'node-lifecycle-controller', newTag: 'dev' }],
        patches: [
          {
            target: { group: 'apps', version: 'v1', kind: 'Deployment', name: 'node-lifecycle-controller' },
            patch: dump([
              {
                op: 'replace',
                path: '/spec/template/spec/containers/0/imagePullPolicy',
                value: 'IfNotPresent',
              },
              {
                op: 'add',
                path: '/spec/template/spec/containers/0/args/-',
                value: `--companion-evict-after=${EVICT_AFTER_S}s`,
              },
              { op: 'add', path: '/spec/template/spec/containers/0/args/-', value: '--v=2' },
              {
                op: 'add',
                path: '/spec/template/spec/affinity/nodeAffinity',
                value: {
                  requiredDuringSchedulingIgnoredDuringExecution: {
                    nodeSelectorTerms: [
                      {
                        matchExpressions: [
                          { key: 'node-role.kubernetes.io/control-plane', operator: 'DoesNotExist' },
                        ],
                      },
                    ],
                  },
                },
              },
            ]),
          },
        ],
      }),
    );
    await t.kubectl(['apply', '-k', overlayDir], { timeoutMs: 120_000 });
    await cluster.rolloutStatus(240);
    const { standby } = await cluster.steady(180_000);
    const worker = standby.spec.nodeName!;
    await workload('evicted-by-us', worker, false);
    await workload('opted-out', worker, true);
    const last = await stopWorker(worker);
    const ours = await waitFor(`${worker} tainted ${KEY}`, (GRACE_S + 20) * 1000, async () =>
      observer.taintsAt(worker, [`${KEY}:NoSchedule`], last),
    );
    const n = await node(worker);
    expect(condition(n, Companion.ConditionType)).toMatchObject({
      status: 'True',
      reason: 'LeaseNotRenewed',
    });
    await waitFor(
      'the endpoints gone',
      30_000,
      async () => endpointGone('evicted-by-us', last) && endpointGone('opted-out', last),
    );
    const ourEviction = await evictedAt('evicted-by-us', last);
    // Uninstalled while the node is marked (docs/deploy.md, "Uninstalling"): the controller
    // stopped, `cleanup --yes` run from its image with its ServiceAccount, the install deleted. Our
    // taint and condition leave the node that is still down; the provider's marks come by themselves.
    const uninstalling = performance.now();
    await t.kubectl(['-n', NS, 'scale', `deploy/${DEPLOYMENT}`, '--replicas=0']);
    // The replica on the stopped worker cannot stop (nor write): its kubelet is gone.
    await waitFor('the replicas on running nodes stopped', 120_000, async () =>
      (await cluster.controllerPods()).every((p) => p.spec.nodeName === worker),
    );
    const cleanup = await t.kubectl(
      [
        '-n',
        NS,
        'run',
        'nlc-cleanup',
        '--rm',
        '-i',
        '--restart=Never',
        `--image=${IMAGE}`,
        '--image-pull-policy=Never',
        '--override-type=strategic',
        `--overrides=${JSON.stringify(CLEANUP_POD_OVERRIDES)}`,
        '--',
        'cleanup',
        '--yes',
      ],
      { timeoutMs: 180_000 },
    );
    await t.kubectl(['delete', '-k', overlayDir, '--wait=false']);
    const cleaned = await node(worker);
    const ofOurs = (x: NodeObj) => (x.spec.taints ?? []).filter((taint) => taint.key === KEY);
    expect(ofOurs(cleaned)).toEqual([]);
    expect(condition(cleaned, Companion.ConditionType)).toBeUndefined();
    for (const x of (await t.getJson<{ items: NodeObj[] }>(['nodes'])).items) expect(ofOurs(x)).toEqual([]);
    pass(
      `uninstalled while ${worker} was down and marked (docs/deploy.md "Uninstalling"): scaled to 0, cleanup --yes from the image, install deleted in ${secs(performance.now() - uninstalling)}s; ${KEY} and ${Companion.ConditionType} gone from every node; cleanup said: ${cleanup.trim().split('\n').slice(-3).join(' | ')}`,
    );
    const unknown = await waitFor(`${worker} Ready=Unknown`, (PROVIDER_GRACE_S + 30) * 1000, async () =>
      observer.readyAt(worker, 'Unknown', last),
    );
    const providerEviction = await evictedAt('opted-out', last);
    figures.oursTaint = sinceLast(ours.value, last);
    figures.oursEndpointGone = sinceLast(endpointGone('evicted-by-us', last), last);
    figures.oursEvicted = sinceLast(ourEviction, last);
    figures.besideProviderUnknown = sinceLast(unknown.value, last);
    figures.optedOutEvictedByProvider = sinceLast(providerEviction, last);
    pass(
      `beside the provider: our taint ${figures.oursTaint}s, endpoint gone ${figures.oursEndpointGone}s, our eviction ${figures.oursEvicted}s; provider Ready=Unknown ${figures.besideProviderUnknown}s, opted-out pod evicted ${figures.optedOutEvictedByProvider}s after the last renewal (our grace ${GRACE_S}s + ${EVICT_AFTER_S}s; provider ${PROVIDER_GRACE_S}s + ${TOLERATION_S}s)`,
    );
    expect(ours.value - last).toBeGreaterThanOrEqual(GRACE_S * 1000 - 100);
    expect(ours.value - last).toBeLessThanOrEqual(GRACE_S * 1000 + KIND_OVERHEAD_MS);
    // Pods Ready=False with our taint (--companion-mark-pods-not-ready, on by default): out of their
    // Services at our grace, not the provider's.
    for (const svc of ['evicted-by-us', 'opted-out']) {
      expect(endpointGone(svc, last)! - last, svc).toBeLessThanOrEqual(GRACE_S * 1000 + KIND_OVERHEAD_MS);
    }
    expect(ourEviction! - last).toBeGreaterThanOrEqual((GRACE_S + EVICT_AFTER_S) * 1000 - 100);
    expect(ourEviction! - last).toBeLessThanOrEqual((GRACE_S + EVICT_AFTER_S) * 1000 + KIND_OVERHEAD_MS);
    expect(providerEviction! - last).toBeGreaterThanOrEqual((PROVIDER_GRACE_S + TOLERATION_S) * 1000 - 1000);
    expect(unknown.value - last).toBeGreaterThanOrEqual(PROVIDER_GRACE_S * 1000 - 100);
    // Back, with no controller of ours: the provider lifts its own marks, nothing of ours returns.
    await startWorker(
      worker,
      (x) =>
        !(x.spec.taints ?? []).some((taint) => taint.key === UNREACHABLE || taint.key === KEY) &&
        condition(x, Companion.ConditionType) === undefined,
    );
  });
});
