import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { KubeApiError, type KubeRequest } from '../kube/client.js';
import type { Node } from '../kube/types.js';
import { companionPolicy } from '../policy/index.js';
import {
  APPLIED_ANNOTATION,
  CLOUD_SHUTDOWN_TAINT_KEY,
  FENCE_SIGNALS,
  FENCED_ANNOTATION,
  OUT_OF_SERVICE_TAINT,
} from '../remediation/index.js';
import { advance, GRACE_MS, type Harness, harness, metric } from './testing/harness.js';

/** --out-of-service in the controller as run.ts wires it, against the in-memory server, in virtual time. */
const T0 = Date.parse('2026-05-01T08:00:00.000Z');
const AFTER = 60_000;
const OOS = OUT_OF_SERVICE_TAINT.key;

beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
});

function start(
  o: {
    dryRun?: boolean;
    /** --out-of-service=dry-run: this step alone, on a live install. */
    stepDryRun?: boolean;
    nodes?: number;
    cap?: { maxNodes: number };
    companion?: boolean;
  } = {},
): Harness {
  return harness({
    nodes: o.nodes ?? 10,
    ...(o.companion
      ? {
          policy: companionPolicy({
            taintKey: 'example.com/lost',
            identity: 'nlc-test',
            evictAfterMs: 0,
            markPodsNotReady: false,
          }),
        }
      : {}),
    outOfService: { signals: FENCE_SIGNALS, afterMs: AFTER, ...(o.stepDryRun ? { dryRun: true } : {}) },
    ...(o.dryRun ? { dryRun: true } : {}),
    ...(o.cap ? { cap: { ...o.cap, windowMs: 10 * 60_000 } } : {}),
  });
}

const node = (h: Harness, name: string): Node => h.sim.nodes.get(name)!;
const hasOos = (h: Harness, name: string) => (node(h, name).spec?.taints ?? []).some((t) => t.key === OOS);
/** When the out-of-service taint was written to `name` (monotonic), from the server's record of patches. */
const oosAt = (h: Harness, name: string) =>
  h.sim.patches.find((p) => p.path === `/api/v1/nodes/${name}` && JSON.stringify(p.body).includes(OOS))?.at;
const fence = (h: Harness, name: string) =>
  h.sim.updateNode(name, (n) => ({
    ...n,
    metadata: { ...n.metadata, annotations: { ...n.metadata.annotations, [FENCED_ANNOTATION]: 'true' } },
  }));
const logged = (h: Harness, msg: string, name: string) =>
  h.logs.filter((l) => l.msg === msg && l.node === name);
const QUEUED = (name: string) => `out-of-service:${name}`;
const leaseGet = (req: KubeRequest, name: string) =>
  req.method === 'GET' && req.path.endsWith(`/namespaces/kube-node-lease/leases/${name}`);
const oosPatchBody = (path: string, body: unknown, name: string) =>
  path === `/api/v1/nodes/${name}` && JSON.stringify(body).includes(OOS);
const oosPatch = (req: KubeRequest, name: string) =>
  req.method === 'PATCH' && oosPatchBody(req.path, req.body, name);
const apiError = (status: number, reason: string) =>
  new KubeApiError(status, { kind: 'Status', reason, code: status }, {}, 'test');

describe('--out-of-service: the taint for a node known to be down', () => {
  it('a fenced node gets the taint the delay after it was marked, and loses it once it renews and is Ready', async () => {
    const h = start();
    await advance(1_000);
    h.sim.stopKubelet('node-1');
    fence(h, 'node-1');
    await advance(GRACE_MS + 5_000);
    const marked = h.sim.markedUnknownAt('node-1');
    expect(marked).toBeDefined();
    await advance(AFTER - 7_000);
    expect(hasOos(h, 'node-1')).toBe(false);
    await advance(10_000);
    expect(hasOos(h, 'node-1')).toBe(true);
    expect(oosAt(h, 'node-1')! - marked!).toBeGreaterThanOrEqual(AFTER);
    // Dated by our wall clock when written (to the second), as our NoExecute taints are.
    const oos = node(h, 'node-1').spec?.taints?.find((t) => t.key === OOS);
    expect(oos?.timeAdded).toBe(`${new Date(oosAt(h, 'node-1')!).toISOString().slice(0, 19)}Z`);
    expect(node(h, 'node-1').metadata.annotations?.[APPLIED_ANNOTATION]).toBe('fence-annotation');
    expect(logged(h, 'Applied the out-of-service taint', 'node-1')).toEqual([
      expect.objectContaining({ signal: 'fence-annotation', taint: `${OOS}=nodeshutdown:NoExecute` }),
    ]);
    expect(await metric(h.registry, 'nlc_out_of_service_decisions_total', { decision: 'applied' })).toBe(1);
    // Back: it renews, but the taint stays until the kubelet says Ready.
    h.sim.startKubelet('node-1');
    await advance(5_000);
    expect(hasOos(h, 'node-1')).toBe(true);
    h.sim.setReady('node-1', 'True');
    await advance(2_000);
    expect(hasOos(h, 'node-1')).toBe(false);
    expect(node(h, 'node-1').metadata.annotations ?? {}).toEqual({});
    expect(logged(h, 'Removed the out-of-service taint', 'node-1')).toHaveLength(1);
    await h.stop();
  });

  it('a partitioned node with no fence signal never gets it (lease silence alone is not a shutdown)', async () => {
    const h = start();
    await advance(1_000);
    h.sim.stopKubelet('node-2');
    await advance(15 * 60_000);
    expect(h.sim.markedUnknownAt('node-2')).toBeDefined();
    expect(h.sim.patches.some((p) => JSON.stringify(p.body).includes(OOS))).toBe(false);
    await h.stop();
  });

  it("the cloud provider's shutdown taint is a signal too", async () => {
    const h = start();
    await advance(1_000);
    h.sim.stopKubelet('node-3');
    h.sim.setTaints('node-3', [{ key: CLOUD_SHUTDOWN_TAINT_KEY, effect: 'NoSchedule' }]);
    await advance(GRACE_MS + AFTER + 20_000);
    expect(hasOos(h, 'node-3')).toBe(true);
    expect(node(h, 'node-3').metadata.annotations?.[APPLIED_ANNOTATION]).toBe('cloud-shutdown-taint');
    await h.stop();
  });

  it("the kubelet's shutdown announcement, overwritten by our mark, still counts (remembered from the watch)", async () => {
    const h = start();
    await advance(1_000);
    h.sim.setReady('node-9', 'False');
    h.sim.updateNode('node-9', (n) => ({
      ...n,
      status: {
        ...n.status,
        conditions: (n.status?.conditions ?? []).map((c) =>
          c.type === 'Ready' ? { ...c, message: 'node is shutting down' } : c,
        ),
      },
    }));
    await advance(1_000);
    h.sim.stopKubelet('node-9');
    await advance(GRACE_MS + 5_000);
    expect(h.sim.readyOf('node-9')).toBe('Unknown');
    await advance(AFTER + 20_000);
    expect(hasOos(h, 'node-9')).toBe(true);
    expect(node(h, 'node-9').metadata.annotations?.[APPLIED_ANNOTATION]).toBe('kubelet-shutdown');
    await h.stop();
  });

  it('rate-limited per zone: two fenced nodes of one zone are tainted 1/--node-eviction-rate apart', async () => {
    const h = start();
    await advance(1_000);
    for (const n of ['node-4', 'node-5']) {
      h.sim.stopKubelet(n);
      fence(h, n);
    }
    await advance(GRACE_MS + AFTER + 60_000);
    const [a, b] = [oosAt(h, 'node-4'), oosAt(h, 'node-5')];
    expect(a).toBeDefined();
    expect(b).toBeDefined();
    // The zone's bucket: 0.1 per second, burst 1 (the NoExecute taints share it).
    expect(Math.abs(a! - b!)).toBeGreaterThanOrEqual(10_000 - 1);
    await h.stop();
  });

  it('not while not leading: a fenced node waits, and is tainted only after we lead again', async () => {
    const h = start();
    await advance(1_000);
    h.sim.stopKubelet('node-6');
    fence(h, 'node-6');
    await advance(GRACE_MS + 10_000);
    h.controller.setLeading(false);
    await advance(5 * AFTER);
    expect(hasOos(h, 'node-6')).toBe(false);
    h.controller.setLeading(true);
    // A new term: a fresh grace, then the delay from the first time it is seen fenced again.
    await advance(GRACE_MS + AFTER + 20_000);
    expect(hasOos(h, 'node-6')).toBe(true);
    await h.stop();
  });

  it('--out-of-service=dry-run on a live install: the decision logged and counted once, no taint, no zone token taken', async () => {
    const h = start({ stepDryRun: true });
    await advance(1_000);
    h.sim.stopKubelet('node-7');
    fence(h, 'node-7');
    let queued = false;
    for (let t = 0; t < GRACE_MS + AFTER + 60_000; t += 1_000) {
      await advance(1_000);
      queued ||= h.disruption.queued().some((q) => q.name === QUEUED('node-7'));
      queued ||= h.disruption.inFlightNames().includes(QUEUED('node-7'));
    }
    // The live part still works: marked, NoSchedule and NoExecute written.
    expect(h.sim.readyOf('node-7')).toBe('Unknown');
    expect(node(h, 'node-7').spec?.taints?.map((t) => `${t.key}:${t.effect}`)).toContain(
      'node.kubernetes.io/unreachable:NoExecute',
    );
    expect(h.sim.patches.filter((p) => JSON.stringify(p.body).includes(OOS))).toEqual([]);
    expect(queued).toBe(false);
    expect(
      logged(h, 'Dry run (--out-of-service=dry-run): would apply the out-of-service taint', 'node-7'),
    ).toEqual([expect.objectContaining({ signal: 'fence-annotation' })]);
    expect(await metric(h.registry, 'nlc_out_of_service_decisions_total', { decision: 'dry_run' })).toBe(1);
    expect(await metric(h.registry, 'nlc_out_of_service_decisions_total', { decision: 'requested' })).toBe(0);
    await h.stop();
  });

  it('dry run: the decision is logged and counted, nothing is written', async () => {
    const h = start({ dryRun: true });
    await advance(1_000);
    h.sim.stopKubelet('node-7');
    fence(h, 'node-7');
    await advance(GRACE_MS + AFTER + 60_000);
    expect(h.sim.patches.filter((p) => JSON.stringify(p.body).includes(OOS))).toEqual([]);
    expect(hasOos(h, 'node-7')).toBe(false);
    expect(logged(h, 'Dry run: would apply the out-of-service taint', 'node-7')).toHaveLength(1);
    expect(await metric(h.registry, 'nlc_out_of_service_decisions_total', { decision: 'dry_run' })).toBe(1);
    await h.stop();
  });

  it('says once when the tainted node has no VolumeAttachment left', async () => {
    const h = start();
    h.sim.volumeAttachments.push({ metadata: { name: 'csi-1' }, spec: { nodeName: 'node-8' } });
    await advance(1_000);
    h.sim.stopKubelet('node-8');
    fence(h, 'node-8');
    await advance(GRACE_MS + AFTER + 30_000);
    expect(hasOos(h, 'node-8')).toBe(true);
    const gone = 'Out-of-service node has no VolumeAttachment left';
    expect(logged(h, gone, 'node-8')).toEqual([]);
    h.sim.volumeAttachments.splice(0);
    await advance(30_000);
    expect(logged(h, gone, 'node-8')).toHaveLength(1);
    await h.stop();
  });

  it('an install that may not list VolumeAttachments: the taint still goes on, the refusal is a warning said once', async () => {
    const h = start();
    h.sim.volumeAttachmentsForbidden = true;
    await advance(1_000);
    for (const n of ['node-3', 'node-8']) {
      h.sim.stopKubelet(n);
      fence(h, n);
    }
    await advance(GRACE_MS + AFTER + 60_000);
    expect(hasOos(h, 'node-3')).toBe(true);
    expect(hasOos(h, 'node-8')).toBe(true);
    const refused = h.logs.filter((l) => String(l.msg).startsWith('Cannot list VolumeAttachments'));
    expect(refused).toEqual([expect.objectContaining({ level: 'warn', status: 403 })]);
    expect(String(refused[0]!.msg)).toContain('volumeattachments.storage.k8s.io');
    expect(h.logs.filter((l) => l.msg === 'Out-of-service node has no VolumeAttachment left')).toEqual([]);
    // Granted later (the rule added): the report comes.
    h.sim.volumeAttachmentsForbidden = false;
    await advance(20_000);
    expect(h.logs.filter((l) => l.msg === 'Out-of-service node has no VolumeAttachment left')).toHaveLength(
      2,
    );
    await h.stop();
  });

  it('a lease re-read that fails before the taint gives its admission back: the zone queue takes the next request, no 2-minute in-flight wait', async () => {
    const h = start();
    await advance(1_000);
    h.sim.stopKubelet('node-1');
    fence(h, 'node-1');
    await advance(GRACE_MS + 5_000);
    expect(h.sim.markedUnknownAt('node-1')).toBeDefined();
    // The re-read right before the out-of-service taint is answered 429 once.
    let refusedAt: number | undefined;
    h.sim.onRequest = (req) => {
      if (refusedAt === undefined && leaseGet(req, 'node-1')) {
        refusedAt = Date.now();
        throw apiError(429, 'TooManyRequests');
      }
      return undefined;
    };
    for (let i = 0; i < 2 * AFTER && refusedAt === undefined; i += 1_000) await advance(1_000);
    expect(refusedAt).toBeDefined();
    expect(hasOos(h, 'node-1')).toBe(false);
    // Not left in flight (the zone queue would answer 'in-flight' to every request for 2 minutes).
    expect(h.disruption.inFlightNames()).not.toContain(QUEUED('node-1'));
    await advance(40_000);
    expect(hasOos(h, 'node-1')).toBe(true);
    expect(oosAt(h, 'node-1')! - refusedAt!).toBeLessThan(40_000);
    await h.stop();
  });

  it('a node back as the taint is sent (409, watches 5 s behind): the fresh copy is judged again as a whole, and a Ready node gets no taint', async () => {
    const h = start();
    await advance(1_000);
    h.sim.stopKubelet('node-1');
    fence(h, 'node-1');
    await advance(GRACE_MS + 5_000);
    expect(h.sim.markedUnknownAt('node-1')).toBeDefined();
    // As our taint is sent, the kubelet is back: Ready=True, renewing; our watches show it 5 s late.
    let backAt: number | undefined;
    h.sim.onRequest = (req) => {
      if (backAt === undefined && oosPatch(req, 'node-1')) {
        backAt = Date.now();
        h.sim.delayWatch('nodes', 5_000);
        h.sim.delayWatch('leases', 5_000);
        h.sim.startKubelet('node-1');
        h.sim.setReady('node-1', 'True');
      }
      return undefined;
    };
    await advance(AFTER + 30_000);
    expect(backAt).toBeDefined();
    expect(h.sim.readyOf('node-1')).toBe('True');
    expect(
      h.sim.patches.filter((p) => p.path === '/api/v1/nodes/node-1' && JSON.stringify(p.body).includes(OOS)),
    ).toEqual([]);
    expect(hasOos(h, 'node-1')).toBe(false);
    expect(await metric(h.registry, 'nlc_out_of_service_decisions_total', { decision: 'withdrawn' })).toBe(1);
    // Its admission was given back.
    expect(h.disruption.inFlightNames()).toEqual([]);
    await h.stop();
  });

  it("companion mode, a node back as the taint is sent: our mark is still on the fresh copy, but its kubelet's new heartbeat there counts (no taint)", async () => {
    const h = start({ companion: true });
    await advance(1_000);
    h.sim.stopKubelet('node-1');
    fence(h, 'node-1');
    await advance(GRACE_MS + 5_000);
    const lost = (n: Node) =>
      n.status?.conditions?.some((c) => c.type === 'NodeLeaseExpired' && c.status === 'True');
    expect(lost(node(h, 'node-1'))).toBe(true);
    let backAt: number | undefined;
    h.sim.onRequest = (req) => {
      if (backAt === undefined && oosPatch(req, 'node-1')) {
        backAt = Date.now();
        h.sim.delayWatch('nodes', 5_000);
        h.sim.delayWatch('leases', 5_000);
        h.sim.startKubelet('node-1');
        h.sim.setReady('node-1', 'True');
      }
      return undefined;
    };
    await advance(AFTER + 30_000);
    expect(backAt).toBeDefined();
    expect(h.sim.patches.filter((p) => oosPatchBody(p.path, p.body, 'node-1'))).toEqual([]);
    expect(hasOos(h, 'node-1')).toBe(false);
    expect(h.disruption.inFlightNames()).toEqual([]);
    await h.stop();
  });

  it('a node back while its request waits in the zone queue (re-queued after a failed write): the request and its admission go, and its next outage asks the zone again', async () => {
    const h = start();
    await advance(1_000);
    h.sim.stopKubelet('node-1');
    fence(h, 'node-1');
    await advance(GRACE_MS + 5_000);
    expect(h.sim.markedUnknownAt('node-1')).toBeDefined();
    // The taint's write is refused once (403: failed, the request back in the zone queue); the
    // node comes back at that moment, Ready, its fence annotation left on.
    let refusedAt: number | undefined;
    h.sim.onRequest = (req) => {
      if (refusedAt === undefined && oosPatch(req, 'node-1')) {
        refusedAt = Date.now();
        h.sim.startKubelet('node-1');
        h.sim.setReady('node-1', 'True');
        throw apiError(403, 'Forbidden');
      }
      return undefined;
    };
    for (let i = 0; i < 2 * AFTER && refusedAt === undefined; i += 1_000) await advance(1_000);
    expect(refusedAt).toBeDefined();
    await advance(2_000);
    expect(h.sim.readyOf('node-1')).toBe('True');
    expect(h.disruption.queued().map((q) => q.name)).not.toContain(QUEUED('node-1'));
    await advance(60_000);
    expect(h.disruption.queued().map((q) => q.name)).not.toContain(QUEUED('node-1'));
    expect(h.disruption.inFlightNames()).not.toContain(QUEUED('node-1'));
    expect(hasOos(h, 'node-1')).toBe(false);
    expect(logged(h, 'Out-of-service taint not applied: what decided it no longer holds', 'node-1')).toEqual([
      expect.objectContaining({ reason: 'node back', signal: 'fence-annotation' }),
    ]);
    // Its next outage: the taint waits for a new request and its admission.
    const requested = await metric(h.registry, 'nlc_out_of_service_decisions_total', {
      decision: 'requested',
    });
    h.sim.stopKubelet('node-1');
    await advance(GRACE_MS + AFTER + 30_000);
    expect(hasOos(h, 'node-1')).toBe(true);
    expect(
      await metric(h.registry, 'nlc_out_of_service_decisions_total', { decision: 'requested' }),
    ).toBeGreaterThan(requested!);
    await h.stop();
  });

  it('a node back that stays NotReady (a DaemonSet pod it needs does not tolerate the taint): our taint comes off once we see it renew and no signal says it is down', async () => {
    const h = start();
    await advance(1_000);
    h.sim.stopKubelet('node-3');
    h.sim.setTaints('node-3', [{ key: CLOUD_SHUTDOWN_TAINT_KEY, effect: 'NoSchedule' }]);
    await advance(GRACE_MS + AFTER + 20_000);
    expect(hasOos(h, 'node-3')).toBe(true);
    // The instance runs again: the provider drops its shutdown taint, the kubelet renews and posts
    // Ready=False (its CNI agent is kept off by our NoExecute taint, so it never says Ready).
    h.sim.startKubelet('node-3');
    h.sim.updateNode('node-3', (n) => ({
      ...n,
      spec: { ...n.spec, taints: (n.spec?.taints ?? []).filter((t) => t.key !== CLOUD_SHUTDOWN_TAINT_KEY) },
    }));
    h.sim.setReady('node-3', 'False');
    h.sim.updateNode('node-3', (n) => ({
      ...n,
      status: {
        ...n.status,
        conditions: (n.status?.conditions ?? []).map((c) =>
          c.type === 'Ready'
            ? {
                ...c,
                message:
                  'container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady',
              }
            : c,
        ),
      },
    }));
    await advance(15_000);
    expect(h.sim.readyOf('node-3')).toBe('False');
    expect(hasOos(h, 'node-3')).toBe(false);
    expect(node(h, 'node-3').metadata.annotations?.[APPLIED_ANNOTATION]).toBeUndefined();
    expect(logged(h, 'Removed the out-of-service taint', 'node-3')).toHaveLength(1);
    await h.stop();
  });

  it('...but not while a signal still says it is down (a fence annotation left on), nor for a dead node after a restart (the list is no renewal)', async () => {
    const tainted = (n: Node): Node => ({
      ...n,
      metadata: {
        ...n.metadata,
        annotations: { [APPLIED_ANNOTATION]: 'kubelet-shutdown' },
      },
      spec: {
        taints: [OUT_OF_SERVICE_TAINT, { key: 'node.kubernetes.io/unreachable', effect: 'NoExecute' }],
      },
      status: {
        conditions: (n.status?.conditions ?? []).map((c) =>
          c.type === 'Ready' ? { ...c, status: 'Unknown' } : c,
        ),
      },
    });
    const h = harness({
      nodes: 10,
      outOfService: { signals: FENCE_SIGNALS, afterMs: AFTER },
      before: (sim) => {
        // Tainted by the replica before us: node-5 is still dead, node-6 is back NotReady and fenced.
        for (const n of ['node-5', 'node-6']) {
          sim.stopKubelet(n);
          sim.updateNode(n, tainted);
        }
        sim.updateNode('node-6', (n) => ({
          ...n,
          metadata: {
            ...n.metadata,
            annotations: { ...n.metadata.annotations, [FENCED_ANNOTATION]: 'true' },
          },
        }));
      },
    });
    await advance(1_000);
    h.sim.startKubelet('node-6');
    h.sim.setReady('node-6', 'False');
    await advance(GRACE_MS + 30_000);
    expect(hasOos(h, 'node-5')).toBe(true);
    expect(hasOos(h, 'node-6')).toBe(true);
    // The fence is lifted: node-6's taint comes off.
    h.sim.updateNode('node-6', (n) => ({
      ...n,
      metadata: { ...n.metadata, annotations: { [APPLIED_ANNOTATION]: 'kubelet-shutdown' } },
    }));
    await advance(15_000);
    expect(hasOos(h, 'node-6')).toBe(false);
    expect(hasOos(h, 'node-5')).toBe(true);
    await h.stop();
  });

  it('a removal answered 409 asks again on the fresh copy whether the node is back: a kubelet announcing a shutdown again keeps our taint', async () => {
    const h = start();
    await advance(1_000);
    const shuttingDown = (n: Node): Node => ({
      ...n,
      status: {
        ...n.status,
        conditions: (n.status?.conditions ?? []).map((c) =>
          c.type === 'Ready' ? { ...c, status: 'False', message: 'node is shutting down' } : c,
        ),
      },
    });
    h.sim.setReady('node-9', 'False');
    h.sim.updateNode('node-9', shuttingDown);
    await advance(1_000);
    h.sim.stopKubelet('node-9');
    await advance(GRACE_MS + AFTER + 20_000);
    expect(hasOos(h, 'node-9')).toBe(true);
    // Back and Ready: the removal is decided; as it is sent, the kubelet announces a shutdown again.
    let againAt: number | undefined;
    h.sim.onRequest = (req) => {
      const removal =
        req.method === 'PATCH' &&
        req.path === '/api/v1/nodes/node-9' &&
        JSON.stringify(req.body).includes(`"${APPLIED_ANNOTATION}":null`);
      if (againAt === undefined && removal) {
        againAt = Date.now();
        h.sim.setReady('node-9', 'False');
        h.sim.updateNode('node-9', shuttingDown);
      }
      return undefined;
    };
    h.sim.startKubelet('node-9');
    h.sim.setReady('node-9', 'True');
    await advance(5_000);
    expect(againAt).toBeDefined();
    expect(hasOos(h, 'node-9')).toBe(true);
    expect(logged(h, 'Removed the out-of-service taint', 'node-9')).toEqual([]);
    // It goes down: the taint it still has is the right one.
    h.sim.stopKubelet('node-9');
    await advance(GRACE_MS + 20_000);
    expect(hasOos(h, 'node-9')).toBe(true);
    expect(node(h, 'node-9').metadata.annotations?.[APPLIED_ANNOTATION]).toBe('kubelet-shutdown');
    await h.stop();
  });

  it('VolumeAttachments are looked at only while our taint is on: a removal answered "unchanged" (an operator took it off first) ends the looking', async () => {
    const h = start();
    h.sim.volumeAttachments.push({ metadata: { name: 'csi-1' }, spec: { nodeName: 'node-8' } });
    await advance(1_000);
    h.sim.stopKubelet('node-8');
    fence(h, 'node-8');
    await advance(GRACE_MS + AFTER + 30_000);
    expect(hasOos(h, 'node-8')).toBe(true);
    // Back and Ready; as our removal is sent, an operator has taken the taint and our annotation off.
    let lists = 0;
    let raced = false;
    h.sim.onRequest = (req) => {
      if (req.path === '/apis/storage.k8s.io/v1/volumeattachments') lists++;
      const removal =
        req.method === 'PATCH' &&
        req.path === '/api/v1/nodes/node-8' &&
        JSON.stringify(req.body).includes(`"${APPLIED_ANNOTATION}":null`);
      if (!raced && removal) {
        raced = true;
        h.sim.updateNode('node-8', (n) => ({
          ...n,
          metadata: { ...n.metadata, annotations: {} },
          spec: { ...n.spec, taints: (n.spec?.taints ?? []).filter((t) => t.key !== OOS) },
        }));
      }
      return undefined;
    };
    h.sim.startKubelet('node-8');
    h.sim.setReady('node-8', 'True');
    await advance(10_000);
    expect(raced).toBe(true);
    expect(hasOos(h, 'node-8')).toBe(false);
    // The node is back and uses its volume again: nothing more to report, so no more lists.
    const before = lists;
    await advance(5 * 60_000);
    expect(lists - before).toBe(0);
    await h.stop();
  });

  it('...and the taint taken off by an operator while the node is still down (the runbook) ends the looking too', async () => {
    const h = start();
    h.sim.volumeAttachments.push({ metadata: { name: 'csi-1' }, spec: { nodeName: 'node-8' } });
    await advance(1_000);
    h.sim.stopKubelet('node-8');
    fence(h, 'node-8');
    await advance(GRACE_MS + AFTER + 30_000);
    expect(hasOos(h, 'node-8')).toBe(true);
    let lists = 0;
    h.sim.onRequest = (req) => {
      if (req.path === '/apis/storage.k8s.io/v1/volumeattachments') lists++;
      return undefined;
    };
    h.sim.updateNode('node-8', (n) => ({
      ...n,
      metadata: { ...n.metadata, annotations: {} },
      spec: { ...n.spec, taints: (n.spec?.taints ?? []).filter((t) => t.key !== OOS) },
    }));
    await advance(20_000);
    const before = lists;
    await advance(5 * 60_000);
    expect(lists - before).toBe(0);
    expect(hasOos(h, 'node-8')).toBe(false);
    await h.stop();
  });

  it('the node as our taint write returned it stands in for a watch 15 s behind: the VolumeAttachment report still comes', async () => {
    const h = start();
    h.sim.volumeAttachments.push({ metadata: { name: 'csi-1' }, spec: { nodeName: 'node-8' } });
    await advance(1_000);
    h.sim.stopKubelet('node-8');
    fence(h, 'node-8');
    await advance(GRACE_MS + 5_000);
    h.sim.delayWatch('nodes', 15_000);
    const requested = () =>
      metric(h.registry, 'nlc_out_of_service_decisions_total', { decision: 'requested' });
    for (let i = 0; i < 2 * AFTER && !hasOos(h, 'node-8'); i += 1_000) await advance(1_000);
    expect(hasOos(h, 'node-8')).toBe(true);
    const asked = await requested();
    await advance(30_000);
    // Not asked again for the taint it has (our write's answer shows it).
    expect(await requested()).toBe(asked);
    h.sim.volumeAttachments.splice(0);
    await advance(30_000);
    expect(logged(h, 'Out-of-service node has no VolumeAttachment left', 'node-8')).toHaveLength(1);
    await h.stop();
  });

  it("the blast-radius cap counts nodes: a node's out-of-service taint after its own NoExecute taint takes no second slot", async () => {
    const h = start({ cap: { maxNodes: 1 } });
    await advance(1_000);
    h.sim.stopKubelet('node-1');
    fence(h, 'node-1');
    await advance(GRACE_MS + 5_000);
    const marked = h.sim.markedUnknownAt('node-1')!;
    expect(marked).toBeDefined();
    expect((node(h, 'node-1').spec?.taints ?? []).map((t) => t.key)).toContain(
      'node.kubernetes.io/unreachable',
    );
    await advance(AFTER + 30_000);
    expect(h.disruption.queued()).toEqual([]);
    expect(await metric(h.registry, 'nlc_noexecute_cap_holds_total')).toBe(0);
    expect(hasOos(h, 'node-1')).toBe(true);
    expect(oosAt(h, 'node-1')! - marked).toBeLessThan(AFTER + 30_000);
    expect(h.disruption.capUsed(Date.now())).toBe(1);
    // A second node lost: its own NoExecute taint is what the cap holds (1 node per window).
    h.sim.stopKubelet('node-2');
    await advance(GRACE_MS + 20_000);
    expect(h.disruption.queued()).toEqual([expect.objectContaining({ name: 'node-2', reason: 'cap' })]);
    await h.stop();
  });
});
