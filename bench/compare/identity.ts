/**
 * One identity for whichever controller runs: a ServiceAccount bound to cluster-admin, with a
 * TokenRequest token written into its own kubeconfig. Both controllers get the same rights, and the
 * audit log tells their writes apart from the simulator's and the observer's (those use the admin
 * token).
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { KubeApiError, type KubeClient, paths } from '../../src/kube/client.js';
import type { LocalControlPlane } from '../../src/localcluster/control-plane.js';

export const BENCH_NAMESPACE = 'nlc-bench';
export const BENCH_SA = 'controller';
export const CONTROLLER_USER = `system:serviceaccount:${BENCH_NAMESPACE}:${BENCH_SA}`;

async function createOrIgnore(client: KubeClient, p: string, body: unknown): Promise<void> {
  try {
    await client.request({ method: 'POST', path: p, body });
  } catch (err) {
    if (!(err instanceof KubeApiError && err.status === 409)) throw err;
  }
}

/** Creates the identity and returns the path of a kubeconfig that uses it. */
export async function controllerKubeconfig(cp: LocalControlPlane, admin: KubeClient): Promise<string> {
  await createOrIgnore(admin, paths.namespaces(), {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name: BENCH_NAMESPACE },
  });
  await createOrIgnore(admin, `/api/v1/namespaces/${BENCH_NAMESPACE}/serviceaccounts`, {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name: BENCH_SA, namespace: BENCH_NAMESPACE },
  });
  await createOrIgnore(admin, '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'nlc-bench-controller' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'cluster-admin' },
    subjects: [{ kind: 'ServiceAccount', name: BENCH_SA, namespace: BENCH_NAMESPACE }],
  });
  const tr = await admin.request<{ status?: { token?: string } }>({
    method: 'POST',
    path: `/api/v1/namespaces/${BENCH_NAMESPACE}/serviceaccounts/${BENCH_SA}/token`,
    body: {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { expirationSeconds: 24 * 3600 },
    },
  });
  const token = tr.status?.token;
  if (!token) throw new Error('TokenRequest returned no token');
  const kc = cp.kubeConfigForToken(token, BENCH_SA);
  const file = path.join(cp.dir, 'controller.kubeconfig');
  writeFileSync(file, kc.exportConfig(), { mode: 0o600 });
  return file;
}
