import type { V1Lease } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { NODE_LEASE_NAMESPACE } from '../../src/fleet/kubelet.js';
import { KubeApiError, KubeClient, paths } from '../../src/kube/client.js';
import { LocalControlPlane } from '../../src/localcluster/control-plane.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { tcpPortsOfThisProcess } from '../support/sockets.js';
import { sleep, waitUntil } from '../support/wait.js';

let cluster: TestCluster;
beforeAll(async () => {
  cluster = await startCluster({ audit: true });
});
afterAll(async () => {
  await cluster?.stop();
});

describe('local control plane', () => {
  it('reports the version we built', async () => {
    const v = await cluster.admin.request<{ gitVersion: string }>({ method: 'GET', path: '/version' });
    expect(v.gitVersion).toBe(cluster.cp.version);
  });

  it('enforces RBAC for a ServiceAccount token obtained through TokenRequest', async () => {
    const { admin } = cluster;
    const ns = 'rbac-test';
    await admin.request({ method: 'POST', path: paths.namespaces(), body: { metadata: { name: ns } } });
    await admin.request({
      method: 'POST',
      path: `/api/v1/namespaces/${ns}/serviceaccounts`,
      body: { metadata: { name: 'reader' } },
    });
    await admin.request({
      method: 'POST',
      path: `/apis/rbac.authorization.k8s.io/v1/namespaces/${NODE_LEASE_NAMESPACE}/roles`,
      body: {
        metadata: { name: 'lease-reader' },
        rules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list'] }],
      },
    });
    await admin.request({
      method: 'POST',
      path: `/apis/rbac.authorization.k8s.io/v1/namespaces/${NODE_LEASE_NAMESPACE}/rolebindings`,
      body: {
        metadata: { name: 'lease-reader' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'lease-reader' },
        subjects: [{ kind: 'ServiceAccount', name: 'reader', namespace: ns }],
      },
    });
    const tr = await admin.request<{ status: { token: string } }>({
      method: 'POST',
      path: `/api/v1/namespaces/${ns}/serviceaccounts/reader/token`,
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 600 },
      },
    });
    expect(tr.status.token.split('.')).toHaveLength(3); // a signed JWT

    const sa = await KubeClient.fromKubeConfig(cluster.cp.kubeConfigForToken(tr.status.token));
    try {
      // Allowed: list leases in kube-node-lease (RBAC is checked again after a role change, so retry briefly).
      await waitUntil(
        async () =>
          (await sa.raw({ method: 'GET', path: paths.leases(NODE_LEASE_NAMESPACE) })).status === 200,
        { timeoutMs: 5000, what: 'allowed list' },
      );
      // Denied: listing nodes was never granted.
      const denied = await sa.raw({ method: 'GET', path: paths.nodes() });
      expect(denied.status).toBe(403);
      // Denied: writing a lease was never granted either.
      await expect(
        sa.request({
          method: 'POST',
          path: paths.leases(NODE_LEASE_NAMESPACE),
          body: { metadata: { name: 'x' } },
        }),
      ).rejects.toSatisfy((e: unknown) => e instanceof KubeApiError && e.status === 403);
    } finally {
      sa.close();
    }
  });

  it('keeps the fleet renewing across a kube-apiserver restart', async () => {
    const { admin, cp } = cluster;
    const fleet = await SimulatedFleet.start(admin, {
      nodes: 10,
      namePrefix: 'restart-',
      timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 5000 },
    });
    try {
      await sleep(1500);
      const t = performance.now();
      await cp.restartApiServer();
      console.log(`kube-apiserver restarted in ${((performance.now() - t) / 1000).toFixed(1)}s`);
      const after = Date.now();
      await waitUntil(
        async () => {
          const leases = await admin.request<{ items: V1Lease[] }>({
            method: 'GET',
            path: paths.leases(NODE_LEASE_NAMESPACE),
          });
          const ours = leases.items.filter((l) => l.metadata?.name?.startsWith('restart-'));
          return ours.length === 10 && ours.every((l) => Date.parse(String(l.spec?.renewTime)) > after);
        },
        { timeoutMs: 20_000, what: 'every lease renewed after the restart' },
      );
      // And they keep going.
      const counts = fleet.names.map((n) => fleet.node(n).stats.renewals);
      await sleep(2500);
      for (const [i, n] of fleet.names.entries())
        expect(fleet.node(n).stats.renewals).toBeGreaterThan(counts[i]!);
    } finally {
      fleet.stop();
    }
  });

  it('keeps its kube-apiserver port while kube-apiserver is down, and gets it back on restart', async () => {
    const { cp } = cluster;
    const port = Number(new URL(cp.server).port);
    await cp.stopApiServer('SIGKILL');
    try {
      // Nobody listens now: a socket of ours still holds the port, so the kernel gives it to no
      // other process's bind(0) or connect() (src/localcluster/ports.ts). Before, it was free here.
      expect(tcpPortsOfThisProcess().has(port)).toBe(true);
    } finally {
      cp.startApiServer();
      await cp.waitApiServerReady();
    }
    const v = await cluster.admin.request<{ gitVersion: string }>({ method: 'GET', path: '/version' });
    expect(v.gitVersion).toBe(cp.version);
  });

  it('a kube-apiserver that exits while starting fails start() at once, with its output', async () => {
    // kube-apiserver refuses --secure-port=0 (one reason the harness claims ports itself).
    const t = performance.now();
    const err = await LocalControlPlane.start({
      env: process.env,
      apiserverArgs: ['--secure-port=0'],
      readyTimeoutMs: 30_000,
    }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    const elapsed = performance.now() - t;
    expect(err?.message).toMatch(
      /^kube-apiserver exited \(code 1\) while waiting for kube-apiserver \/readyz/,
    );
    expect(err?.message).toContain('--secure-port 0 must be between 1 and 65535');
    expect(elapsed).toBeLessThan(20_000);
  });

  it('records writes with their user in the audit log', async () => {
    const { readFileSync } = await import('node:fs');
    await cluster.admin.request({
      method: 'POST',
      path: paths.leases('default'),
      body: { metadata: { name: 'audit-probe' }, spec: { holderIdentity: 'x' } },
    });
    await waitUntil(
      () =>
        readFileSync(cluster.cp.auditLogPath!, 'utf8')
          .split('\n')
          .filter(Boolean)
          .map(
            (l) =>
              JSON.parse(l) as { verb: string; user: { username: string }; objectRef?: { name?: string } },
          )
          .some(
            (e) => e.verb === 'create' && e.objectRef?.name === 'audit-probe' && e.user.username === 'admin',
          ),
      { timeoutMs: 5000, what: 'audit entry' },
    );
  });
});
