import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { paths } from '../../src/kube/client.js';
import type { Lease } from '../../src/kube/types.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import {
  type ControllerProcess,
  fastTestFlags,
  probe,
  sampleValue,
  startController,
} from '../support/controller-process.js';
import { requestServiceAccountToken, writeTokenKubeconfig } from '../support/rbac.js';
import { sleep, waitUntil } from '../support/wait.js';

/**
 * Probes and leadership follow sight and API access, on a real kube-apiserver, with each replica
 * running as its own ServiceAccount: revoking a replica's credentials (deleting its
 * ServiceAccount: its token gets 401) or its permission to watch node leases (it goes blind)
 * changes only that replica.
 */
const NS = 'nlc-e2e-sight';
const LOCK = 'node-lifecycle-controller';
const GRACE_MS = 5_000;
const STEP_DOWN_MS = 10_000;
const RBAC = '/apis/rbac.authorization.k8s.io/v1';

let cluster: TestCluster;
let dir: string;
const procs: ControllerProcess[] = [];

async function post(p: string, body: unknown): Promise<void> {
  await cluster.admin.request({ method: 'POST', path: p, body });
}

/** A ServiceAccount with what the controller needs: nodes, pods, events; node leases; the lock. */
async function serviceAccount(name: string): Promise<string> {
  await post(`/api/v1/namespaces/${NS}/serviceaccounts`, { metadata: { name } });
  const subjects = [{ kind: 'ServiceAccount', name, namespace: NS }];
  await post(`${RBAC}/clusterrolebindings`, {
    metadata: { name: `sight-${name}` },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'sight-cluster' },
    subjects,
  });
  await post(`${RBAC}/namespaces/kube-node-lease/rolebindings`, {
    metadata: { name: `sight-${name}` },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'sight-node-leases' },
    subjects,
  });
  await post(`${RBAC}/namespaces/${NS}/rolebindings`, {
    metadata: { name: `sight-${name}` },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'sight-lock' },
    subjects,
  });
  const kubeconfig = path.join(dir, `${name}.kubeconfig`);
  writeTokenKubeconfig(
    cluster.cp,
    await requestServiceAccountToken(cluster.admin, NS, name),
    kubeconfig,
    name,
  );
  return kubeconfig;
}

async function replica(name: string, kubeconfig: string, extra: string[] = []): Promise<ControllerProcess> {
  const cp = await startController([...fastTestFlags(kubeconfig, GRACE_MS), ...extra], {
    env: { POD_NAME: name, POD_NAMESPACE: NS },
    name,
  });
  procs.push(cp);
  onTestFailed(() => console.log(`--- ${name}:\n${cp.summary()}`));
  return cp;
}

const master = async (cp: ControllerProcess) =>
  sampleValue(await cp.metrics(), 'leader_election_master_status', { name: LOCK });
const holder = async () =>
  (await cluster.admin.request<Lease>({ method: 'GET', path: paths.lease(NS, LOCK) })).spec?.holderIdentity;

beforeAll(async () => {
  cluster = await startCluster();
  dir = mkdtempSync(path.join(tmpdir(), 'nlc-sight-'));
  await post(paths.namespaces(), { metadata: { name: NS } });
  await post(`${RBAC}/clusterroles`, {
    metadata: { name: 'sight-cluster' },
    rules: [
      { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch', 'patch'] },
      { apiGroups: [''], resources: ['nodes/status', 'pods/status'], verbs: ['patch'] },
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
    ],
  });
  await post(`${RBAC}/namespaces/kube-node-lease/roles`, {
    metadata: { name: 'sight-node-leases' },
    rules: [{ apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'list', 'watch'] }],
  });
  await post(`${RBAC}/namespaces/${NS}/roles`, {
    metadata: { name: 'sight-lock' },
    rules: [
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        verbs: ['get', 'list', 'watch', 'create', 'update', 'patch', 'delete'],
      },
    ],
  });
});

afterAll(async () => {
  await Promise.all(procs.map((p) => p.kill('SIGKILL')));
  await cluster?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('probes and leadership follow sight and API access (real kube-apiserver)', () => {
  it('a standby whose credentials start getting 401 goes unready (its lock polls and watches fail)', async () => {
    const keeper = await replica('keeper', await serviceAccount('keeper'));
    await waitUntil(async () => (await holder().catch(() => undefined)) === 'keeper', {
      timeoutMs: 20_000,
      what: 'keeper leading',
    });
    const kubeconfig = await serviceAccount('revoked');
    const cp = await replica('revoked-0', kubeconfig);
    await waitUntil(async () => (await probe(cp, '/readyz')).status === 200, {
      timeoutMs: 20_000,
      what: 'Ready',
    });
    await sleep(2_000);
    expect((await probe(cp, '/readyz')).status).toBe(200);
    // Deleting the ServiceAccount invalidates its tokens: every new request gets 401.
    const t0 = performance.now();
    await cluster.admin.request({
      method: 'DELETE',
      path: `/api/v1/namespaces/${NS}/serviceaccounts/revoked`,
    });
    const unready = await waitUntil(
      async () => {
        const r = await probe(cp, '/readyz?verbose');
        return r.status === 500 && r.body.includes('[-]lock-access failed') ? r : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 200, what: 'Not ready with lock-access failing' },
    );
    console.log(
      `unready ${((performance.now() - t0) / 1000).toFixed(1)} s after the revocation:\n${unready.body}`,
    );
    expect(unready.body).toMatch(
      /lock-access failed: no answer to a leader-election lock request for \d+(\.\d+)?s \(last: .*401/,
    );
    expect(unready.body).toMatch(/\[-\]leases-watch failed: lease watch disconnected/);
    // Still live: a few seconds without access is not a reason to restart.
    expect((await probe(cp, '/healthz')).status).toBe(200);
    expect(cp.child.exitCode).toBeNull();
    expect(await holder()).toBe('keeper');
    expect((await probe(keeper, '/readyz')).status).toBe(200);
    await cp.kill('SIGKILL');
    await keeper.kill('SIGKILL');
  });

  it('a leader that goes blind steps down after --blind-step-down-after; the standby that sees takes over, nobody exits', async () => {
    const stepDown = [`--blind-step-down-after=${STEP_DOWN_MS / 1000}s`];
    const a = await replica('sight-a', await serviceAccount('sight-a'), stepDown);
    await waitUntil(async () => (await holder().catch(() => undefined)) === 'sight-a', {
      timeoutMs: 20_000,
      what: 'sight-a leading',
    });
    const b = await replica('sight-b', await serviceAccount('sight-b'), stepDown);
    await waitUntil(async () => (await probe(b, '/readyz')).status === 200, {
      timeoutMs: 20_000,
      what: 'b Ready',
    });
    expect(await master(a)).toBe(1);
    expect(await master(b)).toBe(0);

    // sight-a may no longer watch node leases: its quiet lease watch is re-opened within 2 s
    // (2/3 of the 3 s silence threshold) and refused from then on. Its lock access is untouched.
    const t0 = performance.now();
    await cluster.admin.request({
      method: 'DELETE',
      path: `${RBAC}/namespaces/kube-node-lease/rolebindings/sight-sight-a`,
    });
    await waitUntil(async () => (await probe(a, '/readyz')).status === 500, {
      timeoutMs: 10_000,
      what: 'sight-a unready (blind)',
    });
    const blindAt = performance.now();
    expect(await master(a)).toBe(1); // blind, still leading: not yet
    const tookOver = await waitUntil(async () => ((await holder()) === 'sight-b' ? performance.now() : 0), {
      timeoutMs: STEP_DOWN_MS + 10_000,
      intervalMs: 50,
      what: 'sight-b holding the lock',
    });
    console.log(
      `blind ${((blindAt - t0) / 1000).toFixed(1)} s after losing the permission; the standby took over ` +
        `${((tookOver - blindAt) / 1000).toFixed(1)} s later (--blind-step-down-after=${STEP_DOWN_MS / 1000}s)`,
    );
    expect(tookOver - t0).toBeGreaterThanOrEqual(STEP_DOWN_MS);
    expect(tookOver - blindAt).toBeLessThanOrEqual(STEP_DOWN_MS + 3_000);
    await waitUntil(async () => (await master(b)) === 1, { timeoutMs: 5_000, what: 'sight-b master' });
    expect(a.logs.some((l) => l.msg === 'Stepping down')).toBe(true);
    expect((await a.waitForLog('Leader lease release after stepping down', 5_000)).result).toBe('released');
    // sight-a stays up, a standby that does not take the lock back while blind.
    for (let i = 0; i < 10; i++) {
      await sleep(500);
      expect(await holder()).toBe('sight-b');
      expect(await master(a)).toBe(0);
    }
    expect(a.child.exitCode).toBeNull();
    expect(await probe(a, '/readyz')).toMatchObject({ status: 500 });
    expect((await probe(a, '/healthz')).status).toBe(200);
    expect((await probe(b, '/readyz')).status).toBe(200);
  });
});
