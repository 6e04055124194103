import type { V1Lease, V1Node } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { NODE_LEASE_NAMESPACE } from '../../src/fleet/kubelet.js';
import { PatchType, paths } from '../../src/kube/client.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { rawWatch } from '../support/raw-watch.js';
import { sleep, waitUntil } from '../support/wait.js';

let cluster: TestCluster;
beforeAll(async () => {
  cluster = await startCluster();
});
afterAll(async () => {
  await cluster?.stop();
});

describe('simulated kubelet fleet on a real API server', () => {
  it('50 nodes renew their leases at the configured rate, each owned by its Node', async () => {
    const { admin } = cluster;
    const fleet = await SimulatedFleet.start(admin, {
      nodes: 50,
      namePrefix: 'rate-',
      timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 5000 },
    });
    try {
      const renewTimes = new Map<string, number[]>();
      const stopWatch = await rawWatch<V1Lease>(admin, paths.leases(NODE_LEASE_NAMESPACE), (e) => {
        if (e.type !== 'MODIFIED' && e.type !== 'ADDED') return;
        const name = e.object.metadata?.name ?? '';
        if (!name.startsWith('rate-')) return;
        const list = renewTimes.get(name) ?? [];
        list.push(Date.parse(String(e.object.spec?.renewTime)));
        renewTimes.set(name, list);
      });
      const windowMs = 30_000;
      await sleep(windowMs);
      stopWatch();

      expect(renewTimes.size).toBe(50);
      const counts: number[] = [];
      for (const [name, times] of renewTimes) {
        // Every observed renewTime moves forward.
        for (let i = 1; i < times.length; i++) expect(times[i]!, name).toBeGreaterThan(times[i - 1]!);
        counts.push(times.length);
        // Intervals between renewals: 1 s plus up to 4% jitter (plus request time).
        const gaps = times.slice(1).map((t, i) => t - times[i]!);
        const median = gaps.sort((a, b) => a - b)[Math.floor(gaps.length / 2)]!;
        expect(median, `${name} median renew interval`).toBeGreaterThanOrEqual(990);
        expect(median, `${name} median renew interval`).toBeLessThan(1200);
      }
      // 30 s at 1.0-1.04 s per renewal, with some request latency: about 28 renewals.
      expect(Math.min(...counts)).toBeGreaterThanOrEqual(24);
      expect(Math.max(...counts)).toBeLessThanOrEqual(31);

      const leases = await admin.request<{ items: V1Lease[] }>({
        method: 'GET',
        path: paths.leases(NODE_LEASE_NAMESPACE),
      });
      const nodes = await admin.request<{ items: V1Node[] }>({ method: 'GET', path: paths.nodes() });
      const uidByName = new Map(nodes.items.map((n) => [n.metadata?.name, n.metadata?.uid]));
      const ours = leases.items.filter((l) => l.metadata?.name?.startsWith('rate-'));
      expect(ours).toHaveLength(50);
      for (const l of ours) {
        const owner = l.metadata?.ownerReferences?.[0];
        expect(owner?.kind).toBe('Node');
        expect(owner?.name).toBe(l.metadata?.name);
        expect(owner?.uid).toBe(uidByName.get(l.metadata?.name));
        expect(l.spec?.holderIdentity).toBe(l.metadata?.name);
        expect(l.spec?.leaseDurationSeconds).toBe(40);
      }
    } finally {
      fleet.stop();
    }
  });

  it('nodes report realistic status and flip back to Ready when someone marks them Unknown', async () => {
    const { admin } = cluster;
    const fleet = await SimulatedFleet.start(admin, {
      nodes: 3,
      namePrefix: 'status-',
      podsPerNode: 1,
      timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 500 },
    });
    try {
      const name = fleet.names[0]!;
      const node = await admin.request<V1Node>({ method: 'GET', path: paths.node(name) });
      const types = (node.status?.conditions ?? []).map((c) => c.type).sort();
      expect(types).toEqual(['DiskPressure', 'MemoryPressure', 'NetworkUnavailable', 'PIDPressure', 'Ready']);
      expect(node.metadata?.labels?.['topology.kubernetes.io/zone']).toBe(fleet.node(name).zone);
      expect(node.metadata?.labels?.['topology.kubernetes.io/region']).toBe('region-1');
      expect(node.status?.capacity?.cpu).toBe('4');

      await waitUntil(
        async () => {
          const pod = await admin.request<{ status?: { conditions?: { type: string; status: string }[] } }>({
            method: 'GET',
            path: paths.pod('default', `${name}-pod-0`),
          });
          return pod.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
        },
        { timeoutMs: 10_000, what: 'pod Ready' },
      );

      // A controller marks the node Unknown; the kubelet's next sync posts Ready=True again.
      await admin.request({
        method: 'PATCH',
        path: paths.nodeStatus(name),
        contentType: PatchType.strategic,
        body: { status: { conditions: [{ type: 'Ready', status: 'Unknown', reason: 'NodeStatusUnknown' }] } },
      });
      await waitUntil(
        async () => {
          const n = await admin.request<V1Node>({ method: 'GET', path: paths.node(name) });
          return n.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
        },
        { timeoutMs: 5_000, what: 'kubelet to post Ready again' },
      );

      // Ready=False while still renewing.
      const k = fleet.node(fleet.names[1]!);
      k.reportNotReady();
      const before = k.stats.renewals;
      await waitUntil(
        async () => {
          const n = await admin.request<V1Node>({ method: 'GET', path: paths.node(k.name) });
          return n.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'False';
        },
        { timeoutMs: 5_000, what: 'Ready=False' },
      );
      await sleep(1500);
      expect(k.stats.renewals).toBeGreaterThan(before);
    } finally {
      fleet.stop();
    }
  });

  it('pauses, resumes and steps a node clock', async () => {
    const { admin } = cluster;
    const fleet = await SimulatedFleet.start(admin, {
      nodes: 2,
      namePrefix: 'ctl-',
      timing: { renewIntervalMs: 500, statusUpdateIntervalMs: 5000 },
    });
    try {
      const [a, b] = fleet.names.map((n) => fleet.node(n));
      const getRenew = async (name: string) =>
        Date.parse(
          String(
            (await admin.request<V1Lease>({ method: 'GET', path: paths.lease(NODE_LEASE_NAMESPACE, name) }))
              .spec?.renewTime,
          ),
        );
      a!.pauseHeartbeats();
      await sleep(200);
      const frozen = await getRenew(a!.name);
      await sleep(1500);
      expect(await getRenew(a!.name)).toBe(frozen);
      a!.resumeHeartbeats();
      await waitUntil(async () => (await getRenew(a!.name)) > frozen, {
        timeoutMs: 3000,
        what: 'renew after resume',
      });

      b!.stepClock(10 * 60_000);
      await waitUntil(async () => (await getRenew(b!.name)) > Date.now() + 9 * 60_000, {
        timeoutMs: 3000,
        what: 'renewTime from a clock 10 minutes ahead',
      });
      b!.stepClock(-20 * 60_000);
      await waitUntil(async () => (await getRenew(b!.name)) < Date.now() - 9 * 60_000, {
        timeoutMs: 3000,
        what: 'renewTime from a clock 10 minutes behind',
      });
      b!.kill();
      const dead = await getRenew(b!.name);
      await sleep(1500);
      expect(await getRenew(b!.name)).toBe(dead);
    } finally {
      fleet.stop();
    }
  });
});
