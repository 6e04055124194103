import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Node, NodeCondition, Taint } from '../kube/types.js';
import { type CompanionPolicyOptions, companionPolicy } from '../policy/index.js';
import { advance, GRACE_MS, type Harness, harness, metric } from './testing/harness.js';

/** The controller in companion mode, wired as run.ts wires it, against the in-memory server. */
const T0 = Date.parse('2026-05-01T08:00:00.000Z');
const KEY = 'example.com/lost';
const TYPE = 'NodeLeaseExpired';
const UR = 'node.kubernetes.io/unreachable';

beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
});

function companion(
  nodes: number,
  o: Partial<CompanionPolicyOptions> = {},
  more: { qps?: number; burst?: number } = {},
): Harness {
  return harness({
    nodes,
    ...more,
    policy: companionPolicy({
      taintKey: KEY,
      identity: 'nlc-test',
      evictAfterMs: 0,
      markPodsNotReady: true,
      ...o,
    }),
  });
}
const node = (h: Harness, name: string): Node => h.sim.nodes.get(name)!;
const ours = (n: Node) => (n.spec?.taints ?? []).filter((t) => t.key === KEY);
const condition = (n: Node) => n.status?.conditions?.find((c) => c.type === TYPE);
/** When our taint first landed on `name` (monotonic), from the server's record of patches. */
const taintedAt = (h: Harness, name: string) =>
  h.sim.patches.find((p) => p.path === `/api/v1/nodes/${name}` && JSON.stringify(p.body).includes(KEY))?.at;

/**
 * Every node write of ours changed only our taint and our condition: a status patch names only our
 * condition; a taints patch (the whole list: taints have no merge key) carries every other taint
 * exactly as the node had it at the resourceVersion the patch was conditioned on.
 */
function onlyOurFields(h: Harness): string[] {
  const problems: string[] = [];
  const notOurs = (ts: Taint[] | undefined) => (ts ?? []).filter((t) => t.key !== KEY);
  for (const p of h.sim.patches) {
    if (!p.path.startsWith('/api/v1/nodes/')) continue;
    const body = p.body as {
      spec?: { taints?: Taint[] };
      status?: { conditions?: NodeCondition[] };
      metadata?: { resourceVersion?: string };
    };
    if (p.path.endsWith('/status')) {
      const types = (body.status?.conditions ?? []).map((c) => c.type);
      if (types.some((t) => t !== TYPE)) problems.push(`${p.path}: conditions ${types.join(',')}`);
      continue;
    }
    const keys = Object.keys(body.spec ?? {});
    if (keys.join() !== 'taints') problems.push(`${p.path}: spec.${keys.join(',')}`);
    const before = h.sim.nodeAt(p.path.split('/').at(-1)!, body.metadata?.resourceVersion);
    if (!before) problems.push(`${p.path}: no precondition (${body.metadata?.resourceVersion})`);
    else if (JSON.stringify(notOurs(body.spec?.taints)) !== JSON.stringify(notOurs(before.spec?.taints))) {
      problems.push(`${p.path}: changed taints that are not ours: ${JSON.stringify(body.spec?.taints)}`);
    }
  }
  return problems;
}

describe('NodeLifecycleController in companion mode (virtual time)', () => {
  it("a stopped kubelet gets our condition and taint at our grace, upstream's fields untouched; a renewal removes them", async () => {
    const h = companion(4);
    try {
      // The provider's taint is on the node already (its own business): ours must keep it as it is.
      const provider: Taint = { key: UR, effect: 'NoSchedule', timeAdded: 'x-provider' };
      h.sim.addPod('default', 'web-0', 'node-1');
      h.sim.addPod('default', 'web-1', 'node-2');
      await advance(20_000);
      const last = h.sim.stopKubelet('node-1');
      h.sim.setTaints('node-1', [provider]);
      await advance(GRACE_MS + 5_000);
      const at = taintedAt(h, 'node-1');
      expect(at, 'our taint was written').toBeDefined();
      expect(at! - last).toBeGreaterThanOrEqual(GRACE_MS);
      expect(at! - last).toBeLessThanOrEqual(GRACE_MS + 100);
      const marked = node(h, 'node-1');
      expect(condition(marked)).toMatchObject({ status: 'True', reason: 'LeaseNotRenewed' });
      expect(condition(marked)?.message).toContain('marked by nlc-test in companion mode');
      expect(marked.spec?.taints).toEqual([
        provider,
        expect.objectContaining({ key: KEY, effect: 'NoSchedule' }),
      ]);
      expect(h.sim.readyOf('node-1'), "Ready is the provider's").toBe('True');
      expect(h.sim.podReadyOf('default/web-0')).toBe('False');
      expect(h.sim.podReadyOf('default/web-1')).toBe('True');
      for (const other of ['node-0', 'node-2', 'node-3']) expect(ours(node(h, other))).toEqual([]);
      expect(await metric(h.registry, 'nlc_transitions_total', { kind: 'marked_lost' })).toBe(1);
      expect(await metric(h.registry, 'nlc_transitions_total', { kind: 'marked_unknown' })).toBe(0);

      // The kubelet is back: everything of ours comes off, the provider's taint stays.
      h.sim.renew('node-1');
      await advance(1_000);
      const back = node(h, 'node-1');
      expect(condition(back)).toBeUndefined();
      expect(back.spec?.taints).toEqual([provider]);
      expect(await metric(h.registry, 'nlc_transitions_total', { kind: 'lost_cleared' })).toBe(1);
      expect(onlyOurFields(h)).toEqual([]);
    } finally {
      await h.stop();
    }
  });

  it("the provider's taint written between our read and our write is kept: the conflict is retried and counted", async () => {
    const h = companion(2);
    try {
      await advance(20_000);
      const provider: Taint = { key: UR, effect: 'NoSchedule', timeAdded: '2026-05-01T08:01:00Z' };
      let raced = false;
      h.sim.onRequest = (req) => {
        if (req.method === 'PATCH' && req.path === '/api/v1/nodes/node-0' && !raced) {
          raced = true;
          h.sim.setTaints('node-0', [provider]);
        }
        return undefined;
      };
      h.sim.stopKubelet('node-0');
      await advance(GRACE_MS + 5_000);
      expect(raced).toBe(true);
      expect(node(h, 'node-0').spec?.taints).toEqual([provider, expect.objectContaining({ key: KEY })]);
      expect(await metric(h.registry, 'nlc_write_conflicts_total', { resource: 'nodes' })).toBe(1);
      expect(onlyOurFields(h)).toEqual([]);
    } finally {
      await h.stop();
    }
  });

  it('after a restart, a marked node keeps our marks while dead and loses them at its first renewal', async () => {
    const h = harness({
      nodes: 3,
      policy: companionPolicy({
        taintKey: KEY,
        identity: 'nlc-test',
        evictAfterMs: 0,
        markPodsNotReady: false,
      }),
      // Marked by a previous leader: our condition records the lease's renewTime, our taint is on.
      before: (sim) => {
        sim.stopKubelet('node-1');
        const renewed = sim.leases.get('node-1')?.spec?.renewTime ?? '';
        sim.updateNode('node-1', (n) => ({
          ...n,
          spec: { taints: [{ key: KEY, effect: 'NoSchedule' }] },
          status: {
            conditions: [
              ...(n.status?.conditions ?? []),
              { type: TYPE, status: 'True', lastHeartbeatTime: `${renewed.slice(0, 19)}Z` },
            ],
          },
        }));
      },
    });
    try {
      await advance(GRACE_MS - 5_000);
      // A fresh grace after the start: not due on our clock, but its marks stay (no renewal seen).
      expect(condition(node(h, 'node-1'))?.status).toBe('True');
      expect(ours(node(h, 'node-1')).length).toBe(1);
      const before = h.sim.patches.length;
      h.sim.renew('node-1');
      await advance(200);
      expect(condition(node(h, 'node-1'))).toBeUndefined();
      expect(ours(node(h, 'node-1'))).toEqual([]);
      expect(h.sim.patches.length).toBe(before + 2);
    } finally {
      await h.stop();
    }
  });

  it('a lease the watch has not shown renewed is not marked (the re-read), as in upstream mode', async () => {
    const h = companion(3);
    try {
      await advance(20_000);
      h.sim.holdLease('node-2', true);
      await advance(GRACE_MS + 30_000);
      expect(condition(node(h, 'node-2'))).toBeUndefined();
      expect(ours(node(h, 'node-2'))).toEqual([]);
      expect(await metric(h.registry, 'nlc_watch_lag_detected_total')).toBeGreaterThanOrEqual(1);
    } finally {
      await h.stop();
    }
  });

  it('dry-run: decides, logs and counts, writes nothing', async () => {
    const h = harness({
      nodes: 3,
      dryRun: true,
      policy: companionPolicy({
        taintKey: KEY,
        identity: 'nlc-test',
        evictAfterMs: 0,
        markPodsNotReady: true,
      }),
    });
    try {
      h.sim.addPod('default', 'web', 'node-1');
      await advance(20_000);
      h.sim.stopKubelet('node-1');
      await advance(GRACE_MS + 5_000);
      const said = h.logs.filter((l) => l.node === 'node-1').map((l) => l.msg);
      expect(said).toContain('Dry run: would mark node lost');
      expect(said).toContain('Dry run: would add taint');
      expect(said).toContain('Dry run: would mark pod not ready');
      expect(h.sim.patches).toEqual([]);
      expect(condition(node(h, 'node-1'))).toBeUndefined();
      expect(await metric(h.registry, 'nlc_transitions_total', { kind: 'marked_lost' })).toBe(1);
    } finally {
      await h.stop();
    }
  });

  it('marks nothing while blind', async () => {
    const h = companion(3);
    try {
      await advance(20_000);
      h.sim.setPath('refuse');
      h.sim.cut();
      h.sim.stopKubelet('node-0');
      await advance(GRACE_MS + 20_000);
      expect(h.controller.sight.blind).toBe('disconnected');
      expect(h.sim.patches).toEqual([]);
    } finally {
      await h.stop();
    }
  });

  it('evicts after the further delay through the Eviction API: DaemonSet pods skipped, PodDisruptionBudgets honoured', async () => {
    const h = companion(4, { evictAfterMs: 32_500, markPodsNotReady: false });
    try {
      const ds = { apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'kube-proxy', uid: 'd', controller: true };
      h.sim.addPod('default', 'web', 'node-1');
      h.sim.addPod('default', 'db', 'node-1');
      h.sim.addPod('kube-system', 'kube-proxy-a', 'node-1', {
        metadata: { name: 'x', ownerReferences: [ds] },
      });
      h.sim.pdbBlocked.add('default/db');
      await advance(20_000);
      const last = h.sim.stopKubelet('node-1');
      await advance(GRACE_MS + 20_000);
      expect(ours(node(h, 'node-1')).map((t) => t.value ?? '')).toEqual(['']);
      expect(h.sim.evictions).toEqual([]);
      expect(h.sim.podReadyOf('default/web')).toBe('True');
      await advance(15_000);
      expect(ours(node(h, 'node-1')).map((t) => t.value)).toEqual(['evicting']);
      expect(h.sim.evictions.map((e) => e.pod)).toEqual(['default/web']);
      const evictedAfter = h.sim.evictions[0]!.at - last;
      // Off the safety net's 5 s beat: the reconcile is queued for the moment the delay ends.
      expect(evictedAfter).toBeGreaterThanOrEqual(GRACE_MS + 32_500);
      expect(evictedAfter).toBeLessThanOrEqual(GRACE_MS + 32_500 + 100);
      expect(await metric(h.registry, 'node_collector_evictions_total')).toBe(1);
      // The budget allows it later: retried at the next look (30 s), the DaemonSet pod never.
      h.sim.pdbBlocked.delete('default/db');
      await advance(31_000);
      expect(h.sim.evictions.map((e) => e.pod)).toEqual(['default/web', 'default/db']);
      expect(await metric(h.registry, 'nlc_transitions_total', { kind: 'pods_evicted' })).toBe(2);
      expect(
        h.logs.some((l) => l.msg === 'Eviction refused for now, will retry' && l.pod === 'default/db'),
      ).toBe(true);
      expect(onlyOurFields(h)).toEqual([]);
    } finally {
      await h.stop();
    }
  });

  it('20 pods evicted at 1 QPS: the evictions stop as soon as the node renews', async () => {
    const h = companion(3, { evictAfterMs: 10_000, markPodsNotReady: false }, { qps: 1, burst: 1 });
    try {
      for (let i = 0; i < 20; i++) h.sim.addPod('default', `web-${i}`, 'node-1');
      await advance(20_000);
      h.sim.stopKubelet('node-1');
      await advance(GRACE_MS + 10_000 + 5_000); // evicting from 80 s, one pod a second
      const before = h.sim.evictions.length;
      expect(before).toBeGreaterThan(0);
      expect(before).toBeLessThan(20);
      const renewedAt = Date.now();
      h.sim.startKubelet('node-1');
      await advance(60_000);
      expect(h.sim.evictions.filter((e) => e.at >= renewedAt)).toEqual([]);
      expect(await metric(h.registry, 'nlc_pod_writes_withdrawn_total')).toBe(20 - before);
      // And the renewal took our marks off.
      expect(ours(node(h, 'node-1'))).toEqual([]);
    } finally {
      await h.stop();
    }
  });

  it('with its pods already marked not Ready at our grace, the evictions still come at grace + the delay, not at the next 30 s look', async () => {
    const h = companion(3, { evictAfterMs: 10_000 });
    try {
      h.sim.addPod('default', 'web', 'node-1');
      await advance(20_000);
      const last = h.sim.stopKubelet('node-1');
      await advance(GRACE_MS + 1000);
      expect(h.sim.podReadyOf('default/web')).toBe('False');
      expect(h.sim.evictions).toEqual([]);
      await advance(10_000);
      expect(ours(node(h, 'node-1')).map((t) => t.value)).toEqual(['evicting']);
      expect(h.sim.evictions.map((e) => e.pod)).toEqual(['default/web']);
      const evictedAfter = h.sim.evictions[0]!.at - last;
      expect(evictedAfter).toBeGreaterThanOrEqual(GRACE_MS + 10_000);
      expect(evictedAfter).toBeLessThanOrEqual(GRACE_MS + 10_000 + 100);
    } finally {
      await h.stop();
    }
  });

  it("a pod tolerating our NoExecute key for 20 s is evicted 20 s after the node's evictions began, not at the next 30 s look", async () => {
    const h = companion(3, { evictAfterMs: 10_000, markPodsNotReady: false });
    try {
      h.sim.addPod('default', 'patient', 'node-1', {
        spec: { tolerations: [{ key: KEY, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 20 }] },
      });
      await advance(20_000);
      h.sim.stopKubelet('node-1');
      await advance(GRACE_MS + 12_000);
      const began = h.sim.patches.find((p) => JSON.stringify(p.body).includes('"value":"evicting"'))?.at;
      expect(began, 'evictions began').toBeDefined();
      expect(h.sim.evictions).toEqual([]);
      await advance(20_000);
      expect(h.sim.evictions.map((e) => e.pod)).toEqual(['default/patient']);
      expect(h.sim.evictions[0]!.at - began!).toBeGreaterThanOrEqual(20_000);
      expect(h.sim.evictions[0]!.at - began!).toBeLessThanOrEqual(20_000 + 100);
    } finally {
      await h.stop();
    }
  });

  it('a zone outage (6 of 10 nodes) is tainted NoSchedule but evicts nothing: the rate of a partially disrupted small zone is 0', async () => {
    const h = companion(10, { evictAfterMs: 10_000, markPodsNotReady: false });
    try {
      for (let i = 0; i < 10; i++) h.sim.addPod('default', `p-${i}`, `node-${i}`);
      await advance(20_000);
      for (let i = 0; i < 6; i++) h.sim.stopKubelet(`node-${i}`);
      await advance(GRACE_MS + 5 * 60_000);
      for (let i = 0; i < 10; i++) expect(ours(node(h, `node-${i}`)).length, `node-${i}`).toBe(i < 6 ? 1 : 0);
      expect(h.sim.evictions).toEqual([]);
      expect(await metric(h.registry, 'node_collector_evictions_total')).toBe(0);
      expect(await metric(h.registry, 'node_collector_zone_health')).toBe(40);
    } finally {
      await h.stop();
    }
  });
});
