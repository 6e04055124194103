/**
 * The Helm chart installed for real (the project's Helm, scripts/build-helm.sh) into a real
 * kube-apiserver, in a namespace of the release's own (`--namespace --create-namespace`): install,
 * upgrade with a changed flag, uninstall. Pods do not run here (no kubelet or scheduler); what is
 * checked is that Helm can install, change and remove every object, in that namespace and cluster
 * wide. test/unit/chart.test.ts proves the objects are those of manifests/.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { List } from '../../src/kube/types.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { helm } from '../support/helm.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const CHART = path.join(ROOT, 'charts', 'node-lifecycle-controller');
const NS = 'platform-nlc';
const RELEASE = 'nlc';
const NAME = 'nlc-node-lifecycle-controller';

let cluster: TestCluster;
const h = (args: string[]) => helm([...args, '--kubeconfig', cluster.cp.kubeconfigPath]);

interface Deployment {
  metadata: { labels: Record<string, string> };
  spec: { template: { spec: { serviceAccountName: string; containers: { args: string[] }[] } } };
}

beforeAll(async () => {
  cluster = await startCluster();
});

afterAll(async () => {
  await cluster?.stop();
});

describe('helm install / upgrade / uninstall against a real API server', () => {
  it('installs every object in the release namespace (and the cluster-wide ones), upgrades a flag, uninstalls all', async () => {
    const { admin } = cluster;
    const status = (p: string) => admin.raw({ method: 'GET', path: p }).then((r) => r.status);
    const objects = [
      `/api/v1/namespaces/${NS}/serviceaccounts/${NAME}`,
      `/api/v1/namespaces/${NS}/services/${NAME}-metrics`,
      `/api/v1/namespaces/${NS}/configmaps/${NAME}-node-pools`,
      `/apis/apps/v1/namespaces/${NS}/deployments/${NAME}`,
      `/apis/policy/v1/namespaces/${NS}/poddisruptionbudgets/${NAME}`,
      `/apis/networking.k8s.io/v1/namespaces/${NS}/networkpolicies/${NAME}`,
      `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/roles/${NAME}:leases`,
      `/apis/rbac.authorization.k8s.io/v1/namespaces/${NS}/rolebindings/${NAME}:leases`,
      `/apis/rbac.authorization.k8s.io/v1/clusterroles/${NAME}`,
      `/apis/rbac.authorization.k8s.io/v1/clusterroles/${NAME}-metrics-reader`,
      `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${NAME}`,
    ];
    const out = h([
      'install',
      RELEASE,
      CHART,
      '--namespace',
      NS,
      '--create-namespace',
      '--set',
      'networkPolicy.enabled=true',
      '--set-json',
      'nodePools=[{"name":"edge","selector":{"matchLabels":{"pool":"edge"}},"nodeMonitorGracePeriod":"2m"}]',
    ]);
    expect(out).toMatch(/STATUS: deployed/);
    for (const p of objects) expect(await status(p), p).toBe(200);
    const dep = await admin.request<Deployment>({
      method: 'GET',
      path: `/apis/apps/v1/namespaces/${NS}/deployments/${NAME}`,
    });
    expect(dep.metadata.labels['app.kubernetes.io/managed-by']).toBe('Helm');
    expect(dep.spec.template.spec.serviceAccountName).toBe(NAME);
    const binding = await admin.request<{ subjects: { namespace: string; name: string }[] }>({
      method: 'GET',
      path: `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${NAME}`,
    });
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: NAME, namespace: NS }]);
    // Nothing in the base's namespace.
    expect(await status('/api/v1/namespaces/nlc-system')).toBe(404);

    // Upgrade: a flag changes in place.
    h([
      'upgrade',
      RELEASE,
      CHART,
      '--namespace',
      NS,
      '--reuse-values',
      '--set',
      'controller.nodeMonitorGracePeriod=40s',
    ]);
    const upgraded = await admin.request<Deployment>({
      method: 'GET',
      path: `/apis/apps/v1/namespaces/${NS}/deployments/${NAME}`,
    });
    expect(upgraded.spec.template.spec.containers[0]!.args).toContain('--node-monitor-grace-period=40s');
    expect(h(['list', '--namespace', NS, '--short'])).toBe(`${RELEASE}\n`);

    // Uninstall removes everything it made, cluster-wide objects included.
    h(['uninstall', RELEASE, '--namespace', NS, '--wait']);
    for (const p of objects) expect(await status(p), p).toBe(404);
    const left = await admin.request<List<{ metadata: { name: string } }>>({
      method: 'GET',
      path: '/apis/rbac.authorization.k8s.io/v1/clusterroles',
      query: { labelSelector: `app.kubernetes.io/instance=${RELEASE}` },
    });
    expect(left.items).toEqual([]);
  });
});
