import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ORDINARY_WORKERS, RECONCILE_WORKERS } from '../cli/assemble/node-lifecycle.js';
import { parseDuration } from '../clock/duration.js';
import { KubeApiError, type KubeRequest, KubeTransportError } from '../kube/client.js';
import { AGING_MS } from '../kube/rate-limit.js';
import { EventLoopSampler } from '../metrics/event-loop.js';
import { upstreamPolicy } from '../policy/index.js';
import { KUBELET_RECONNECT_MS } from './lease-recheck.js';
import { WorkQueue } from './queue.js';
import { advance, GRACE_MS, type Harness, harness, metric, SILENCE_MS } from './testing/harness.js';

const T0 = Date.parse('2026-05-01T08:00:00.000Z');
const MINUTE = 60_000;

const now = () => Date.now();

beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
});

/** Total length of `intervals` within [from, to]. */
function overlap(intervals: Array<[number, number]>, from: number, to: number): number {
  let sum = 0;
  for (const [a, b] of intervals) sum += Math.max(0, Math.min(b, to) - Math.max(a, from));
  return sum;
}

/** Cuts both watches (connections refused) for `ms`; the step-down requests, with how long after the cut each came. */
async function cutFor(h: Harness, ms: number): Promise<Array<{ call: string; after: number }>> {
  h.sim.setPath('refuse');
  h.sim.cut();
  const began = now();
  await advance(ms);
  return h.election
    .filter((e) => e.call.startsWith('stepDown'))
    .map((e) => ({ call: e.call, after: e.at - began }));
}

const LAG_LOG = 'Lease was renewed but the watch had not shown it; not marking';
const REWOUND_LOG = 'The API server answered with an older renewal than the watch showed; not marking';
const unknownPatches = (h: Harness) =>
  h.sim.patches.filter((p) => JSON.stringify(p.body).includes('"type":"Ready","status":"Unknown"'));

describe('NodeLifecycleController: blind spells (virtual time)', () => {
  it('a watch cut every 40 s (backoff never resets) delays marking a dead node by the blind time only', async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(5_000);
      expect(h.controller.sight.blind).toBeUndefined();
      // A proxy cuts the controller's connections every 40 s for 10 minutes. The watch's backoff
      // resets only after 120 s without a failure, so from the 4th cut on each spell lasts 6.4 s,
      // 12.8 s, 25.6 s, then 30 s.
      const cuts = setInterval(() => h.sim.cut(), 40_000);
      await advance(170_000);
      const dead = 'node-3';
      const lastRenewal = h.sim.stopKubelet(dead);
      let markedAt: number | undefined;
      for (let t = 0; t < 10 * MINUTE && markedAt === undefined; t += 1_000) {
        await advance(1_000);
        markedAt = h.sim.markedUnknownAt(dead);
      }
      clearInterval(cuts);
      const spells = h.blindIntervals.filter(([a]) => a > lastRenewal);
      // Each of them would have given every node a fresh grace period (>= 5 s).
      expect(spells.length, 'blind spells after the node died').toBeGreaterThanOrEqual(1);
      expect(Math.min(...spells.map(([a, b]) => b - a))).toBeGreaterThanOrEqual(5_000);
      // Marked, and exactly when grace + the blind time since its last renewal had passed.
      expect(markedAt, 'the dead node was marked Unknown').toBeDefined();
      const blind = overlap(h.blindIntervals, lastRenewal, markedAt!);
      const took = markedAt! - lastRenewal;
      expect(took).toBeGreaterThanOrEqual(GRACE_MS + blind);
      expect(took).toBeLessThanOrEqual(GRACE_MS + blind + 100);
      expect(h.sim.readyOf(dead)).toBe('Unknown');
      // Nobody else was marked.
      for (let i = 0; i < 10; i++) if (`node-${i}` !== dead) expect(h.sim.readyOf(`node-${i}`)).toBe('True');
      expect(await metric(h.registry, 'nlc_blind_seconds_total')).toBeGreaterThanOrEqual(blind / 1000);
    } finally {
      await h.stop();
    }
  });

  it('a spell in which only the node watch is down moves no deadline: a node past its grace is marked as soon as both see', async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(5_000);
      const dead = 'node-3';
      const lastRenewal = h.sim.stopKubelet(dead);
      await advance(lastRenewal + 30_000 - now());
      // The node watch cannot reconnect for 30 s; the lease watch is back within a second and sees
      // every renewal (and the lack of one) meanwhile. The deadline passes inside the spell.
      h.sim.stallWatch('nodes', true);
      h.sim.cut();
      await advance(30_000);
      h.sim.stallWatch('nodes', false);
      const nodesBack = now();
      let markedAt: number | undefined;
      for (let t = 0; t < 2 * MINUTE && markedAt === undefined; t += 100) {
        await advance(100);
        markedAt = h.sim.markedUnknownAt(dead);
      }
      expect(markedAt, 'the dead node was marked').toBeDefined();
      const blind = overlap(h.blindIntervals, lastRenewal, markedAt!);
      expect(blind, 'the spell was real').toBeGreaterThanOrEqual(29_000);
      // Marked right after sight came back, not grace + the whole spell after its last renewal.
      expect(markedAt! - nodesBack).toBeLessThanOrEqual(1_000);
      expect(markedAt! - lastRenewal).toBeLessThanOrEqual(GRACE_MS + blind - 15_000);
      for (let i = 0; i < 10; i++) if (`node-${i}` !== dead) expect(h.sim.readyOf(`node-${i}`)).toBe('True');
      const acting = h.logs.filter((l) => l.msg === 'Acting: watches healthy and leading').at(-1);
      expect(acting).toMatchObject({ after: 'disconnected' });
      // Moved by the lease watch's own reconnect (its first backoff, 0.8 s), not by the spell.
      expect(parseDuration(String(acting?.deadlinesMovedBy))).toBeLessThanOrEqual(2_000);
    } finally {
      await h.stop();
    }
  });

  it('after a shared outage (the server down for everyone for 3 minutes) no live node is marked', async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(20_000);
      h.sim.setServerDown(true);
      await advance(3 * MINUTE);
      h.sim.setServerDown(false);
      // Kubelets renew on their next tick (within 10 s); the controller reconnects after backoff.
      await advance(3 * MINUTE);
      expect(h.controller.sight.blind).toBeUndefined();
      for (let i = 0; i < 10; i++) expect(h.sim.readyOf(`node-${i}`)).toBe('True');
      expect(h.sim.patches).toEqual([]);
    } finally {
      await h.stop();
    }
  });

  it('after a hung server (silent watch, no renewals) the silence before the spell counts as blind too', async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(20_000);
      // The server stops answering everyone: kubelets cannot renew, the controller's open watches
      // go quiet. The controller notices only after --watch-silence-threshold (45 s).
      h.sim.setServerHung(true);
      const hungAt = now();
      await advance(10_000);
      expect(h.controller.sight.blind).toBeUndefined();
      await advance(SILENCE_MS);
      expect(h.controller.sight.blind).toBeDefined();
      await advance(2 * MINUTE - 10_000 - SILENCE_MS);
      h.sim.setServerHung(false);
      await advance(3 * MINUTE);
      expect(now() - hungAt).toBeGreaterThan(5 * MINUTE - 1);
      expect(h.controller.sight.blind).toBeUndefined();
      for (let i = 0; i < 10; i++) expect(h.sim.readyOf(`node-${i}`)).toBe('True');
      expect(h.sim.patches).toEqual([]);
    } finally {
      await h.stop();
    }
  });
});

describe('NodeLifecycleController: leadership follows sight (virtual time)', () => {
  it('says why it is not eligible: a lease watch silent past the threshold', async () => {
    const h = harness({ nodes: 3 });
    try {
      await advance(5_000);
      h.sim.stallWatch('leases', true);
      await advance(SILENCE_MS + 15_000);
      expect(h.election.map((e) => e.call)).toContain(
        'eligible=false (the lease watch is silent (nothing for longer than --watch-silence-threshold=45s))',
      );
    } finally {
      await h.stop();
    }
  });

  it('eligible to lead only while both watches are healthy', async () => {
    const h = harness({ nodes: 3 });
    try {
      await advance(5_000);
      expect(h.election.map((e) => e.call)).toEqual([
        'eligible=false (the node watch is not synced yet)',
        'eligible=true',
      ]);
      h.sim.setPath('refuse');
      h.sim.cut();
      await advance(1);
      h.sim.setPath('up');
      await advance(10_000);
      expect(h.election.map((e) => e.call)).toEqual([
        'eligible=false (the node watch is not synced yet)',
        'eligible=true',
        'eligible=false (the node watch is disconnected)',
        'eligible=true',
      ]);
      expect(h.controller.sight.watch).toBeUndefined();
    } finally {
      await h.stop();
    }
  });

  it('a leader blind for --blind-step-down-after steps down once; shorter spells do not', async () => {
    const LIMIT = 150_000;
    const h = harness({ nodes: 3, blindStepDownMs: LIMIT });
    try {
      await advance(5_000);
      // A 100 s outage: the watches back off and come back; no step-down.
      h.sim.setPath('refuse');
      h.sim.cut();
      await advance(100_000);
      h.sim.setPath('up');
      await advance(40_000);
      expect(h.controller.sight.watch).toBeUndefined();
      expect(h.election.filter((e) => e.call.startsWith('stepDown'))).toEqual([]);
      expect(h.controller.sight.leading).toBe(true);
      // A long one: the leader steps down LIMIT after it began (within the 1 s sight tick).
      const downs = await cutFor(h, LIMIT + 60_000);
      expect(downs).toHaveLength(1);
      expect(downs[0]!.call).toMatch(/^stepDown: blind \(disconnected\) for 2m30s while leading$/);
      expect(downs[0]!.after).toBeGreaterThanOrEqual(LIMIT);
      expect(downs[0]!.after).toBeLessThanOrEqual(LIMIT + 1_000);
      expect(h.controller.sight.leading).toBe(false);
      expect(h.election.at(-1)?.call).toBe('stepDown: blind (disconnected) for 2m30s while leading');
      expect(await metric(h.registry, 'nlc_blind_step_downs_total')).toBe(1);
    } finally {
      await h.stop();
    }
  });

  it('on the process ticker the sight check and safety net take no timers of their own; a blind leader still steps down within a second', async () => {
    const passes = async (r: Registry) =>
      (
        (await r.getSingleMetric('node_collector_update_all_nodes_health_duration_seconds')?.get())?.values as
          | Array<{ metricName?: string; value: number }>
          | undefined
      )?.find((v) => v.metricName?.endsWith('_count'))?.value ?? 0;
    // Without a ticker (the control): the 1 s and 5 s periods are timers on the clock.
    const plain = harness({ nodes: 3 });
    try {
      await advance(20_000);
      expect(plain.scheduled).toContain(1000);
      expect(plain.scheduled).toContain(5000);
    } finally {
      await plain.stop();
    }
    const LIMIT = 150_000;
    const sampler = new EventLoopSampler(new Registry(), 250);
    sampler.start();
    const h = harness({ nodes: 3, blindStepDownMs: LIMIT, ticker: sampler });
    try {
      await advance(5_000);
      const before = await passes(h.registry);
      const from = h.scheduled.length;
      await advance(50_000);
      // Nor does the zone pass after each: it runs in the safety net's turn, not after a 0 ms timer.
      expect(h.scheduled.slice(from).filter((d) => d === 0)).toEqual([]);
      // The safety net ran every 5 s on the ticks (one pass may be in flight).
      expect((await passes(h.registry)) - before).toBeGreaterThanOrEqual(9);
      expect((await passes(h.registry)) - before).toBeLessThanOrEqual(10);
      expect(h.scheduled).not.toContain(1000);
      expect(h.scheduled).not.toContain(5000);
      const downs = await cutFor(h, LIMIT + 60_000);
      expect(downs).toHaveLength(1);
      expect(downs[0]!.after).toBeGreaterThanOrEqual(LIMIT);
      expect(downs[0]!.after).toBeLessThanOrEqual(LIMIT + 1_000);
      expect(h.controller.sight.leading).toBe(false);
    } finally {
      sampler.stop();
      await h.stop();
    }
  });

  it('a silent watch counts as blind from its last contact for the step-down too', async () => {
    const LIMIT = 120_000;
    const h = harness({ nodes: 3, blindStepDownMs: LIMIT });
    try {
      await advance(5_000);
      h.sim.setServerHung(true);
      const hungAt = now();
      await advance(LIMIT + 5_000);
      const down = h.election.find((e) => e.call.startsWith('stepDown'));
      expect(down?.call).toMatch(/^stepDown: blind \((silent|disconnected)\)/);
      // The last contact was at most one renewal interval (10 s) before the hang.
      expect(down!.at - hungAt).toBeLessThanOrEqual(LIMIT);
      expect(down!.at - hungAt).toBeGreaterThanOrEqual(LIMIT - 10_000);
      h.sim.setServerHung(false);
    } finally {
      await h.stop();
    }
  });
});

describe('NodeLifecycleController: a watch cache behind its own writes (virtual time)', () => {
  it('node events 500 ms late: the lost node gets its NoExecute taint right after Unknown, the admission not dropped on the stale copy', async () => {
    const h = harness({ nodes: 10 });
    try {
      h.sim.delayWatch('nodes', 500);
      await advance(20_000);
      h.sim.stopKubelet('node-3');
      await advance(GRACE_MS + 20_000);
      const unknownAt = h.sim.markedUnknownAt('node-3');
      expect(unknownAt).toBeDefined();
      const noExecute = h.sim.patches.filter(
        (p) => p.path === '/api/v1/nodes/node-3' && JSON.stringify(p.body).includes('"effect":"NoExecute"'),
      );
      expect(noExecute).toHaveLength(1);
      // Admitted at once (the zone's first token); judged again on the cache's older copy (still
      // Ready), the admission would be dropped and the next token come 10 s later.
      expect(noExecute[0]!.at - unknownAt!).toBeLessThan(1000);
      for (let i = 0; i < 10; i++) if (i !== 3) expect(h.sim.readyOf(`node-${i}`)).toBe('True');
    } finally {
      await h.stop();
    }
  });
});

describe('NodeLifecycleController: the lease is re-read before marking (virtual time)', () => {
  it('a lease the watch has not shown renewed is not marked: the lag is counted and logged; a dead node under the same hold is marked', async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(20_000);
      // The controller's lease watch stops showing node-3's lease; its kubelet keeps renewing.
      h.sim.holdLease('node-3', true);
      await advance(GRACE_MS + 30_000);
      expect(h.controller.sight.blind).toBeUndefined();
      expect(unknownPatches(h)).toEqual([]);
      expect(h.sim.readyOf('node-3')).toBe('True');
      const lag = await metric(h.registry, 'nlc_watch_lag_detected_total');
      expect(lag).toBeGreaterThanOrEqual(1);
      const lines = h.logs.filter((l) => l.msg === LAG_LOG);
      expect(lines.length).toBe(lag);
      expect(lines.every((l) => l.node === 'node-3' && l.level === 'warn')).toBe(true);
      // The same hold with the kubelet gone: the node is marked once a re-read shows no renewal,
      // one grace period after the last re-read that showed one (that is when we saw it).
      h.sim.stopKubelet('node-3');
      await advance(3 * GRACE_MS);
      const markedAt = h.sim.markedUnknownAt('node-3');
      expect(markedAt).toBeDefined();
      const lastSeen = Date.parse(String(h.logs.filter((l) => l.msg === LAG_LOG).at(-1)?.ts));
      expect(markedAt! - lastSeen).toBeGreaterThanOrEqual(GRACE_MS);
      expect(markedAt! - lastSeen).toBeLessThanOrEqual(GRACE_MS + 100);
      for (let i = 0; i < 10; i++) if (i !== 3) expect(h.sim.readyOf(`node-${i}`)).toBe('True');
    } finally {
      await h.stop();
    }
  });
});

describe('NodeLifecycleController: nothing is marked while blind (virtual time)', () => {
  it('a stalled lease watch: no write while blind, not even for a dead node or a kubelet-reported NotReady; sight back, the dead node is marked grace + blind time after its last renewal', async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(20_000);
      // The lease watch stalls (requests and the node watch still work, kubelets still renew), and
      // node-3 dies at the same moment.
      h.sim.stallWatch('leases', true);
      const lastRenewal = h.sim.stopKubelet('node-3');
      await advance(SILENCE_MS + 2_000);
      expect(h.controller.sight.blind).toBe('silent');
      // A kubelet reports NotReady while the controller is blind: no taint now.
      h.sim.setReady('node-5', 'False');
      await advance(1_000);
      const reconciles = await metric(h.registry, 'nlc_reconcile_total', {});
      await advance(2 * MINUTE);
      // (Silent, then disconnected: the watch re-opened after its idle timeout gets no answer.)
      expect(h.controller.sight.blind).toBeDefined();
      expect(h.sim.patches).toEqual([]);
      // Blind, no deadline timer is armed and the safety net queues nothing.
      expect(await metric(h.registry, 'nlc_blind_skipped_total')).toBe(0);
      expect(await metric(h.registry, 'nlc_reconcile_total', {})).toBe(reconciles);
      h.sim.stallWatch('leases', false);
      await advance(5_000);
      expect(h.controller.sight.blind).toBeUndefined();
      const blind = (await metric(h.registry, 'nlc_blind_seconds_total'))! * 1000;
      expect(blind).toBeGreaterThan(2 * MINUTE + SILENCE_MS);
      // The kubelet-reported NotReady gets its taint once the controller sees again.
      const notReadyTaint = h.sim.patches.find(
        (p) => p.path === '/api/v1/nodes/node-5' && JSON.stringify(p.body).includes('not-ready'),
      );
      expect(notReadyTaint).toBeDefined();
      await advance(GRACE_MS);
      const markedAt = h.sim.markedUnknownAt('node-3');
      expect(markedAt).toBeDefined();
      expect(markedAt! - lastRenewal).toBeGreaterThanOrEqual(GRACE_MS + blind);
      expect(markedAt! - lastRenewal).toBeLessThanOrEqual(GRACE_MS + blind + 100);
      expect(unknownPatches(h).map((p) => p.path)).toEqual(['/api/v1/nodes/node-3/status']);
    } finally {
      await h.stop();
    }
  });

  it('a deadline that comes due as the lease watch goes silent is skipped and counted once; no deadline wakes the controller while it stays blind', async () => {
    // Grace just above the silence threshold: the deadlines come due between the moment the watch
    // has been silent for the threshold and the next 1 s sight check.
    const h = harness({ nodes: 3, graceMs: SILENCE_MS + 500 });
    try {
      await advance(20_000);
      h.sim.stallWatch('leases', true);
      await advance(SILENCE_MS + 5_000);
      expect(h.controller.sight.blind).toBe('silent');
      expect(await metric(h.registry, 'nlc_blind_skipped_total')).toBe(1);
      // A node event while blind arms no deadline timer.
      h.sim.setReady('node-1', 'False');
      await advance(30_000);
      expect(await metric(h.registry, 'nlc_blind_skipped_total')).toBe(1);
      expect(h.sim.patches).toEqual([]);
    } finally {
      await h.stop();
    }
  });

  it('leadership lost while the lease is being re-read: nothing is written', async () => {
    const h = harness({ nodes: 3 });
    try {
      await advance(20_000);
      let reads = 0;
      h.sim.onRequest = (req) => {
        if (req.method !== 'GET' || !req.path.endsWith('/leases/node-1')) return undefined;
        reads++;
        h.controller.setLeading(false); // the elector reports it while the GET is on the wire
        return undefined;
      };
      h.sim.stopKubelet('node-1');
      await advance(GRACE_MS + 20_000);
      expect(reads).toBe(1);
      expect(h.sim.patches).toEqual([]);
    } finally {
      await h.stop();
    }
  });

  it('a pending NoExecute request is not admitted while not leading; once leading again, when the node is lost again on our clock', async () => {
    const h = harness({ nodes: 10 });
    const noExecute = (node: string) =>
      h.sim.patches.filter(
        (p) => p.path === `/api/v1/nodes/${node}` && JSON.stringify(p.body).includes('"effect":"NoExecute"'),
      );
    try {
      await advance(20_000);
      h.sim.stopKubelet('node-1');
      h.sim.stopKubelet('node-2');
      // Both marked at the same moment; one zone, 0.1 taints/s: the first tainted now, the second
      // 10 s later.
      for (let i = 0; i < 120 && noExecute('node-1').length + noExecute('node-2').length === 0; i++) {
        await advance(500);
      }
      const first = noExecute('node-1').length > 0 ? 'node-1' : 'node-2';
      const second = first === 'node-1' ? 'node-2' : 'node-1';
      expect(h.sim.readyOf(second)).toBe('Unknown');
      h.controller.setLeading(false);
      await advance(60_000);
      expect(noExecute(second)).toEqual([]);
      expect(await metric(h.registry, 'nlc_noexecute_held_back', { reason: 'rate-limit' })).toBe(1);
      // Leading again is a fresh grace: the node, still silent, is lost again on our clock a grace
      // later, and only then tainted (a node whose lease renewed meanwhile would not be).
      h.controller.setLeading(true);
      await advance(GRACE_MS - 1_000);
      expect(noExecute(second)).toEqual([]);
      await advance(2_000);
      expect(noExecute(second)).toHaveLength(1);
      expect(await metric(h.registry, 'nlc_noexecute_held_back', { reason: 'rate-limit' })).toBe(0);
    } finally {
      await h.stop();
    }
  });
});

describe('NodeLifecycleController: a lease re-read that is not the Lease (virtual time)', () => {
  it("a 2xx answer that is not the node's Lease (an HTML page, another lease) marks nothing; counted every time, logged once per node", async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(20_000);
      // Their kubelets keep renewing, the watch does not show it, and the re-read is answered by
      // something else: a misbehaving proxy's HTML page, or another node's Lease.
      h.sim.holdLease('node-3', true);
      h.sim.holdLease('node-4', true);
      const other = { kind: 'Lease', apiVersion: 'coordination.k8s.io/v1', ...h.sim.leases.get('node-5') };
      h.sim.onRequest = (req) => {
        if (req.method !== 'GET') return undefined;
        if (req.path.endsWith('/leases/node-3')) return '<html><body>502 Bad Gateway</body></html>';
        if (req.path.endsWith('/leases/node-4')) return other;
        return undefined;
      };
      await advance(GRACE_MS + 30_000);
      expect(unknownPatches(h)).toEqual([]);
      const invalid = h.logs.filter((l) => l.kind === 'lease_read_invalid');
      expect(invalid.map((l) => [l.level, l.name]).sort()).toEqual([
        ['warn', 'kube-node-lease/node-3'],
        ['warn', 'kube-node-lease/node-4'],
      ]);
      // Retried on each safety-net pass (5 s), counted each time.
      expect(
        await metric(h.registry, 'nlc_bad_objects_total', { kind: 'lease_read_invalid' }),
      ).toBeGreaterThan(4);
      expect(await metric(h.registry, 'nlc_watch_lag_detected_total')).toBe(0);
      // The real answer again: the renewals show, nothing is marked.
      h.sim.onRequest = undefined;
      await advance(6_000);
      expect(
        h.logs
          .filter((l) => l.msg === LAG_LOG)
          .map((l) => l.node)
          .sort(),
      ).toEqual(['node-3', 'node-4']);
      expect(unknownPatches(h)).toEqual([]);
    } finally {
      await h.stop();
    }
  });
});

describe('NodeLifecycleController: a re-read older than the watch (virtual time)', () => {
  it('a re-read that answers with a renewal older than one the watch showed (etcd restored under the API server) marks nothing', async () => {
    const h = harness({ nodes: 4 });
    try {
      await advance(20_000);
      // What etcd held at its backup; the watch goes on to show later renewals.
      const old = structuredClone({
        kind: 'Lease',
        apiVersion: 'coordination.k8s.io/v1',
        ...h.sim.leases.get('node-3'),
      });
      await advance(10_000);
      // The restore: the watch shows nothing new, a quorum read answers with the backup's Lease.
      h.sim.holdLease('node-3', true);
      h.sim.onRequest = (req) =>
        req.method === 'GET' && req.path.endsWith('/leases/node-3') ? structuredClone(old) : undefined;
      await advance(GRACE_MS + 30_000);
      expect(unknownPatches(h)).toEqual([]);
      expect(h.logs.filter((l) => l.msg === REWOUND_LOG).map((l) => l.node)).toContain('node-3');
      // The API server caught up: the renewals show, still nothing marked.
      h.sim.onRequest = undefined;
      await advance(6_000);
      expect(unknownPatches(h)).toEqual([]);
    } finally {
      await h.stop();
    }
  });
});

describe('NodeLifecycleController: the API server cannot reach its storage (virtual time)', () => {
  const OUTAGE_LOG = 'The API server could not reach its storage: every deadline moved by the outage';

  /** The controller's connections cut for 10 s, then a grace period: when `node` was marked, and the blind time since its last renewal. */
  async function cutThenMarked(h: Harness, node: string, lastRenewal: number) {
    await cutFor(h, 10_000);
    h.sim.setPath('up');
    await advance(GRACE_MS);
    const markedAt = h.sim.markedUnknownAt(node);
    expect(markedAt).toBeDefined();
    return { markedAt: markedAt!, blind: overlap(h.blindIntervals, lastRenewal, markedAt!) };
  }

  it.each([
    ['wait', 'the re-reads time out'],
    ['error', 'the re-reads are answered 500 at once'],
  ] as const)(
    'etcd down for 60 s under a running API server (watches open, nothing renews; %s: %s): no live node marked; a dead one marked at grace + the outage',
    async (answer, _how) => {
      const h = harness({ nodes: 10 });
      try {
        await advance(20_000); // every kubelet renewed at 10 s and 20 s
        const lastRenewal = h.sim.stopKubelet('node-9');
        await advance(1_000);
        h.sim.setStorageDown(true, answer);
        await advance(60_000); // every deadline (70 s) passes; no re-read is answered
        expect(h.controller.sight.blind).toBeUndefined(); // the watches looked healthy throughout
        expect(unknownPatches(h)).toEqual([]);
        h.sim.setStorageDown(false);
        const upAt = now();
        await advance(GRACE_MS + 30_000);
        for (let i = 0; i < 9; i++) expect(h.sim.readyOf(`node-${i}`), `node-${i}`).toBe('True');
        expect(unknownPatches(h).map((p) => p.path)).toEqual(['/api/v1/nodes/node-9/status']);
        // The outage ran from the last renewal seen (20 s) until the storage answered (81 s): with the
        // kubelets' reconnect allowance, more than what storage outages may forgive a node (its
        // grace, past its last renewal seen): the dead node is marked at its last renewal + 2 x
        // grace (120 s), the live kubelets having renewed at 90 s.
        const markedAt = h.sim.markedUnknownAt('node-9')!;
        expect(markedAt - upAt).toBeGreaterThan(KUBELET_RECONNECT_MS + 10_000);
        expect(markedAt - lastRenewal).toBeGreaterThanOrEqual(2 * GRACE_MS);
        expect(markedAt - lastRenewal).toBeLessThanOrEqual(2 * GRACE_MS + 1_000);
        expect(h.logs.filter((l) => l.msg === OUTAGE_LOG)).toHaveLength(1);
        // From the last renewal seen (20 s) to the first proof after the storage came back (81-91 s).
        const outageS = await metric(h.registry, 'nlc_storage_outage_seconds_total');
        expect(outageS).toBeGreaterThanOrEqual(61);
        expect(outageS).toBeLessThanOrEqual(72);
      } finally {
        await h.stop();
      }
    },
  );

  /** node-3's lease re-reads answered `status` from now until `untilMs` from now. */
  function refuseReads(h: Harness, status: number, untilMs: number): void {
    const until = now() + untilMs;
    h.sim.onRequest = (req) => {
      if (now() >= until || req.method !== 'GET' || !req.path.endsWith('/leases/node-3')) return undefined;
      throw new KubeApiError(status, { kind: 'Status', code: status }, {}, `GET ${req.path}`);
    };
  }

  it('a re-read answered 404 (the Lease deleted since the watch showed it): the node is judged on its status alone and marked', async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(20_000);
      const lastRenewal = h.sim.stopKubelet('node-3');
      refuseReads(h, 404, 10 * GRACE_MS);
      await advance(GRACE_MS + 10_000);
      const markedAt = h.sim.markedUnknownAt('node-3');
      expect(markedAt).toBeDefined();
      expect(markedAt! - lastRenewal).toBeLessThanOrEqual(GRACE_MS + 1_000);
      expect(unknownPatches(h)).toHaveLength(1);
    } finally {
      await h.stop();
    }
  });

  it('a re-read whose Lease shows another anomaly (a holder that is not the node) still marks a dead node: only a replayed renewal stops it', async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(20_000);
      const lastRenewal = h.sim.stopKubelet('node-3');
      h.sim.onRequest = (req) => {
        if (req.method !== 'GET' || !req.path.endsWith('/leases/node-3')) return undefined;
        const lease = structuredClone(h.sim.leases.get('node-3')!);
        return {
          kind: 'Lease',
          apiVersion: 'coordination.k8s.io/v1',
          ...lease,
          spec: { ...lease.spec, holderIdentity: 'someone-else' },
        };
      };
      await advance(GRACE_MS + 10_000);
      expect(h.sim.markedUnknownAt('node-3')! - lastRenewal).toBeLessThanOrEqual(GRACE_MS + 1_000);
      expect(unknownPatches(h)).toHaveLength(1);
    } finally {
      await h.stop();
    }
  });

  it('a re-read refused 403 shows nothing about the storage: no outage counted, the dead node marked once the refusal ends', async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(20_000);
      const lastRenewal = h.sim.stopKubelet('node-3'); // deadline at 70 s
      refuseReads(h, 403, GRACE_MS + 20_000); // refused until 90 s
      await advance(GRACE_MS + 19_000);
      expect(h.sim.markedUnknownAt('node-3')).toBeUndefined();
      await advance(11_000);
      const markedAt = h.sim.markedUnknownAt('node-3');
      expect(markedAt).toBeDefined();
      expect(markedAt! - lastRenewal).toBeLessThanOrEqual(GRACE_MS + 20_000 + 6_000);
      expect(h.logs.filter((l) => l.msg === OUTAGE_LOG)).toEqual([]);
      expect(await metric(h.registry, 'nlc_storage_outage_seconds_total')).toBe(0);
    } finally {
      await h.stop();
    }
  });

  it('an outage in progress when the watch is cut ends there: the spell and the outage never move a deadline twice', async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(20_000);
      const lastRenewal = h.sim.stopKubelet('node-3'); // deadline at 70 s
      // node-3's re-reads fail after 2 s (the server cannot reach etcd): an outage from the
      // renewals at 70 s; then the controller's connections are cut for 10 s.
      h.sim.onRequest = async (req) => {
        if (req.method !== 'GET' || !req.path.endsWith('/leases/node-3')) return undefined;
        await new Promise((r) => setTimeout(r, 2_000));
        throw new KubeTransportError('connection reset', 'ECONNRESET');
      };
      await advance(53_000);
      expect(h.logs.some((l) => String(l.msg).startsWith('The API server cannot serve a quorum read'))).toBe(
        true,
      );
      h.sim.onRequest = undefined;
      const { markedAt, blind } = await cutThenMarked(h, 'node-3', lastRenewal);
      // Grace + the outage before the cut (3 s) and the kubelets' reconnect allowance + the spell, each once.
      expect(markedAt - lastRenewal).toBeLessThanOrEqual(
        GRACE_MS + 3_000 + KUBELET_RECONNECT_MS + blind + 1_000,
      );
      expect(h.logs.filter((l) => l.msg === OUTAGE_LOG).map((l) => l.endedBy)).toEqual([
        'blind (disconnected)',
      ]);
    } finally {
      await h.stop();
    }
  });

  it('a slow answer that arrives while the watch is blind counts no outage (the spell covers that time)', async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(20_000);
      const lastRenewal = h.sim.stopKubelet('node-3'); // deadline at 70 s
      h.sim.onRequest = async (req) => {
        if (req.method === 'GET' && req.path.endsWith('/leases/node-3'))
          await new Promise((r) => setTimeout(r, 4_500));
        return undefined;
      };
      await advance(51_000); // the re-read sent at 70 s is answered at 74.5 s
      h.sim.onRequest = undefined;
      const { markedAt, blind } = await cutThenMarked(h, 'node-3', lastRenewal);
      expect(markedAt - lastRenewal).toBeLessThanOrEqual(GRACE_MS + blind + 1_000);
      expect(await metric(h.registry, 'nlc_storage_outage_seconds_total')).toBe(0);
    } finally {
      await h.stop();
    }
  });

  it('etcd away 44 s with a 50 s grace (no deadline, no re-read inside the outage): the fleet-wide silence counts as an outage; a kubelet back 6.5 s after etcd is not marked, a dead node is, after grace + outage + the reconnect allowance', async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(20_000); // every kubelet renewed at 10 s and 20 s
      h.sim.stopKubelet('node-0'); // backs off through the outage, comes back late
      h.sim.stopKubelet('node-9'); // dies during the outage
      await advance(11_000);
      h.sim.renew('node-0'); // at 31 s (the others renewed at 30 s)
      h.sim.renew('node-9');
      const lastRenewal = now();
      await advance(1_000);
      h.sim.setStorageDown(true); // at 32 s: the renewals at 40-70 s fail
      await advance(44_000);
      h.sim.setStorageDown(false); // at 76 s: the other kubelets renew at 80 s
      const upAt = now();
      await advance(6_500);
      // node-0 at 82.5 s, 51.5 s after its last renewal: past its grace (81 s) if the silence
      // were the nodes' own.
      h.sim.renew('node-0');
      for (let i = 0; i < 15; i++) {
        await advance(10_000);
        h.sim.renew('node-0');
      }
      expect(h.sim.readyOf('node-0')).toBe('True');
      expect(unknownPatches(h).map((p) => p.path)).toEqual(['/api/v1/nodes/node-9/status']);
      // From the last write seen (31 s) to the first one after the silence (80 s).
      const outageS = (await metric(h.registry, 'nlc_storage_outage_seconds_total'))!;
      expect(outageS).toBeGreaterThanOrEqual(49);
      expect(outageS).toBeLessThanOrEqual(49.1);
      expect(h.logs.filter((l) => l.msg === OUTAGE_LOG).map((l) => l.reconnectAllowance)).toEqual(['8s']);
      // The dead node's grace runs from the renewals' return (the outage and the reconnect
      // allowance forgiven, at most a fresh grace from then).
      const markedAt = h.sim.markedUnknownAt('node-9')!;
      expect(markedAt - lastRenewal).toBeGreaterThanOrEqual(GRACE_MS + outageS * 1000);
      expect(markedAt - upAt).toBeLessThanOrEqual(4_000 + GRACE_MS + 1_000);
    } finally {
      await h.stop();
    }
  });

  it('a fleet-wide silence still going when a deadline comes (etcd back, every kubelet in its back-off): judgement is held for the reconnect back-off; nobody live is marked, a dead node is, 8 s later', async () => {
    const h = harness({ nodes: 10, graceMs: 20_000 });
    try {
      await advance(40_000); // every kubelet renewed at 10-40 s
      for (let i = 0; i < 10; i++) h.sim.stopKubelet(`node-${i}`);
      await advance(1);
      h.sim.setStorageDown(true); // the renewals at 50 s fail
      await advance(15_000);
      h.sim.setStorageDown(false); // at 55 s; the kubelets are backing off until 62 s
      await advance(5_000);
      // 60 s: every deadline (40 s + 20 s) comes due before any renewal is back.
      expect(unknownPatches(h)).toEqual([]);
      await advance(2_000);
      for (let i = 0; i < 9; i++) h.sim.startKubelet(`node-${i}`); // node-9 is dead
      await advance(40_000);
      expect(unknownPatches(h).map((p) => p.path)).toEqual(['/api/v1/nodes/node-9/status']);
      expect(await metric(h.registry, 'nlc_fleet_silences_total')).toBe(1);
      const held = h.logs.filter((l) => String(l.msg).startsWith('No lease written by any node'));
      expect(held.map((l) => [l.silentFor, l.heldFor])).toEqual([['20.001s', '8s']]); // from the last write, at 40 s
      // Judged again 8 s after the prompt re-read at 60 s, not a grace later.
      const markedAt = h.sim.markedUnknownAt('node-9')! - T0;
      expect(markedAt).toBeGreaterThanOrEqual(68_000);
      expect(markedAt).toBeLessThanOrEqual(69_000);
    } finally {
      await h.stop();
    }
  });

  it('a fleet of one node: its silence is its own (no outage counted when it comes back)', async () => {
    const h = harness({ nodes: 1 });
    try {
      await advance(20_000);
      h.sim.stopKubelet('node-0');
      await advance(30_000); // 30 s of silence: more than 1.5 renew intervals, less than the grace
      h.sim.renew('node-0');
      await advance(1_000);
      expect(await metric(h.registry, 'nlc_storage_outage_seconds_total')).toBe(0);
    } finally {
      await h.stop();
    }
  });

  it('renewals 10 s apart from a fleet whose other nodes died count no outage; a dead node is marked at its grace', async () => {
    const h = harness({ nodes: 3 });
    try {
      await advance(20_000);
      const lastRenewal = h.sim.stopKubelet('node-1');
      h.sim.stopKubelet('node-2');
      await advance(GRACE_MS + 5_000);
      expect(await metric(h.registry, 'nlc_storage_outage_seconds_total')).toBe(0);
      expect(h.sim.markedUnknownAt('node-1')! - lastRenewal).toBeLessThanOrEqual(GRACE_MS + 1_000);
    } finally {
      await h.stop();
    }
  });

  it('a re-read answered 3.5 s late (etcd restarting as the deadline passed) moves every deadline by its own wait before the node is judged, not back to the last write', async () => {
    const h = harness({ nodes: 10 });
    try {
      await advance(20_000);
      h.sim.stopKubelet('node-0'); // last renewal at 20 s: deadline at 70 s
      await advance(49_900);
      h.sim.setStorageDown(true); // the other kubelets' renewals at 70 s fail
      await advance(3_600);
      h.sim.setStorageDown(false); // the re-read sent at 70 s is answered now, at 73.5 s
      expect(unknownPatches(h)).toEqual([]);
      await advance(1);
      // Its wait moved every deadline by 3.5 s first (node-0's to 73.5 s, the answer: past, so it
      // is marked then). Counted back to the last write seen (the renewals at 60 s) with the
      // reconnect allowance, it had held node-0 until 91.5 s, and every node of a fleet that all
      // died behind a server answering in 1.5 s for ever (issue 47, defect 2).
      expect(h.logs.filter((l) => l.msg === OUTAGE_LOG).map((l) => [l.outage, l.reconnectAllowance])).toEqual(
        [['3.499s', '0s']],
      );
      expect(unknownPatches(h).map((p) => p.path)).toEqual(['/api/v1/nodes/node-0/status']);
      expect(h.sim.markedUnknownAt('node-0')! - T0).toBeGreaterThanOrEqual(73_500);
      // The live kubelets renew again at 80 s: none of them is marked.
      await advance(GRACE_MS + 30_000);
      expect(unknownPatches(h)).toHaveLength(1);
    } finally {
      await h.stop();
    }
  });
});

describe('NodeLifecycleController: grace periods beyond what a timer can take (virtual time)', () => {
  it('a 720h grace arms one deadline timer, not one every millisecond', async () => {
    // 720h overflows a Node.js timer (2^31 - 1 ms at most): the delay becomes 1 ms, and a timer
    // that finds nothing due re-arms for the same deadline.
    const h = harness({ nodes: 3, graceMs: 720 * 3_600_000 });
    try {
      await advance(5_000);
      const from = h.scheduled.length;
      await advance(10_000);
      const armed = h.scheduled.slice(from);
      // The 1 s sight check, the 5 s safety net and the watches' own timers: a few dozen at most.
      expect(armed.length).toBeLessThan(50);
      expect(Math.max(...h.scheduled)).toBeLessThanOrEqual(2 ** 31 - 1);
      expect(h.sim.patches).toEqual([]);
    } finally {
      await h.stop();
    }
  });

  it('a NoExecute admission due in years (--node-eviction-rate=1e-7) arms one timer, not one every millisecond', async () => {
    const h = harness({ nodes: 10, nodeEvictionRate: 1e-7 });
    try {
      await advance(20_000);
      h.sim.stopKubelet('node-1');
      h.sim.stopKubelet('node-2');
      await advance(GRACE_MS + 10_000);
      // One of them got the zone's token, the other waits 1e7 s for the next.
      expect(await metric(h.registry, 'nlc_noexecute_held_back', { reason: 'rate-limit' })).toBe(1);
      const from = h.scheduled.length;
      await advance(10_000);
      expect(h.scheduled.length - from).toBeLessThan(50);
      expect(Math.max(...h.scheduled)).toBeLessThanOrEqual(2 ** 31 - 1);
    } finally {
      await h.stop();
    }
  });
});

describe('NodeLifecycleController: leases listed before their nodes (virtual time)', () => {
  it('no lease_without_node for leases whose Node is still being listed; a lease whose Node is really missing is reported once both lists synced', async () => {
    const h = harness({
      nodes: 10,
      before: (sim) => {
        // The node list takes 5 s; the lease list comes at once. One lease has no Node at all.
        sim.delayList('nodes', 5_000);
        sim.addLeaseOnly('ghost');
      },
    });
    try {
      await advance(20_000);
      expect(h.nodes.health().synced && h.leases.health().synced).toBe(true);
      const orphans = h.logs.filter((l) => l.kind === 'lease_without_node');
      expect(orphans.map((l) => [l.level, l.msg, l.name])).toEqual([
        ['warn', 'Unexpected data, still used', 'kube-node-lease/ghost'],
      ]);
      expect(await metric(h.registry, 'nlc_bad_objects_total', { kind: 'lease_without_node' })).toBe(1);
      // No warning about any of the nodes' leases.
      expect(h.logs.filter((l) => l.level === 'warn' && /node-\d/.test(JSON.stringify(l)))).toEqual([]);
      // Its next update is counted again, not logged again.
      h.sim.addLeaseOnly('ghost');
      await advance(1_000);
      expect(await metric(h.registry, 'nlc_bad_objects_total', { kind: 'lease_without_node' })).toBe(2);
      expect(h.logs.filter((l) => l.kind === 'lease_without_node')).toHaveLength(1);
    } finally {
      await h.stop();
    }
  });
});

describe('NodeLifecycleController: stop() ends the reads in flight (virtual time)', () => {
  it('a pod list and a lease re-read hanging on a slow API server end at once; nothing is logged as failed', async () => {
    const h = harness({ nodes: 10 });
    const hung: string[] = [];
    try {
      await advance(20_000);
      // The API server answers reads only after their timeouts (pod list 30 s, lease re-read 5 s).
      h.sim.onRequest = (req) => {
        if (req.method !== 'GET') return undefined;
        if (!req.path.startsWith('/api/v1/pods') && !/\/leases\/node-2$/.test(req.path)) return undefined;
        hung.push(req.path);
        return new Promise((_, reject) => {
          const timer = setTimeout(() => reject(new Error(`${req.path}: timed out`)), req.timeoutMs);
          req.signal?.addEventListener('abort', () => {
            clearTimeout(timer);
            reject(new Error(`${req.path}: aborted`));
          });
        });
      };
      // node-1's pods are being listed (it was marked), node-2's lease is being re-read.
      h.sim.stopKubelet('node-1');
      await advance(5_000);
      h.sim.stopKubelet('node-2');
      for (let i = 0; i < 100 && hung.length < 2; i++) await advance(500);
      expect(hung.sort()).toEqual([
        '/api/v1/pods',
        '/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-2',
      ]);
      const before = h.logs.length;
      let stopped = false;
      void h.controller.stop().then(() => {
        stopped = true;
      });
      await advance(10);
      expect(stopped).toBe(true);
      expect(h.logs.filter((l) => l.level === 'error')).toEqual([]);
      expect(h.logs.slice(before).filter((l) => l.level === 'warn')).toEqual([]);
    } finally {
      h.sim.onRequest = undefined;
      await advance(60_000); // the reads time out if they were not aborted
      await h.stop();
    }
  });
});

describe('NodeLifecycleController: marks go ahead of ordinary work (virtual time)', () => {
  it('a node lost at start-up is marked at its grace, not after the not-ready taints of 99 others are lifted at 1 QPS', async () => {
    const N = 100;
    const notReady = { key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' } as const;
    const h = harness({
      nodes: N,
      // A fresh fleet: every node still carries the not-ready taint the controller lifts once Ready,
      // one write a second through 2 workers: 100 s of start-up writes, longer than the grace.
      qps: 1,
      burst: 1,
      workers: 2,
      before: (sim) => {
        for (let i = 0; i < N; i++) sim.setTaints(`node-${i}`, [notReady]);
      },
    });
    try {
      // The last node in the queue's order dies at once.
      const dead = `node-${N - 1}`;
      const lastRenewal = h.sim.stopKubelet(dead);
      let markedAt: number | undefined;
      for (let t = 0; t < 3 * MINUTE && markedAt === undefined; t += 500) {
        await advance(500);
        markedAt = h.sim.markedUnknownAt(dead);
      }
      expect(markedAt, 'the lost node was marked').toBeDefined();
      // The backlog was real: start-up writes were still waiting when the mark landed.
      const stillTainted = [...h.sim.nodes.values()].filter((n) =>
        (n.spec?.taints ?? []).some((x) => x.key === notReady.key),
      ).length;
      expect(stillTainted).toBeGreaterThan(N / 4);
      // Its grace after the controller's start (a fresh grace for every node), plus the tokens the
      // 2 workers already waited for and its own (1 s each); in the queue's order it would have
      // waited ~100 s.
      expect(markedAt! - lastRenewal).toBeLessThanOrEqual(GRACE_MS + 3_500);
    } finally {
      await h.stop();
    }
  });

  // The deadline path is held above; this holds the rest of the wiring: a node that renews after
  // being marked is queued urgently too, and ordinary node changes are not.
  it('a lost node is queued urgently when its deadline fires, and again when it renews', async () => {
    const urgent = vi.spyOn(WorkQueue.prototype, 'addUrgent');
    const h = harness({ nodes: 3 });
    try {
      await advance(5_000);
      h.sim.updateNode('node-2', (n) => ({ ...n, metadata: { ...n.metadata, labels: { changed: 'yes' } } }));
      await advance(1_000);
      expect(urgent).not.toHaveBeenCalled();
      const dead = 'node-1';
      h.sim.stopKubelet(dead);
      for (let t = 0; t < 2 * MINUTE && h.sim.markedUnknownAt(dead) === undefined; t += 1_000)
        await advance(1_000);
      expect(h.sim.readyOf(dead)).toBe('Unknown');
      expect(urgent.mock.calls.map(([k]) => k)).toContain(dead);
      expect(urgent.mock.calls.every(([k]) => k === dead)).toBe(true);
      urgent.mockClear();
      h.sim.renew(dead);
      await advance(1_000);
      expect(urgent.mock.calls.map(([k]) => k)).toEqual([dead]);
    } finally {
      urgent.mockRestore();
      await h.stop();
    }
  });
});

describe('NodeLifecycleController: writes decided before a wait (virtual time)', () => {
  const podPatches = (h: Harness) =>
    h.sim.patches.filter((p) => p.path.endsWith('/status') && p.path.includes('/pods/'));
  /** node-1 with 20 pods dies at 20 s and is marked at 70 s; its pods are being marked, one a second. */
  const podsBeingMarked = async (h: Harness): Promise<number> => {
    for (let i = 0; i < 20; i++) h.sim.addPod('default', `web-${i}`, 'node-1');
    await advance(20_000);
    h.sim.stopKubelet('node-1');
    await advance(GRACE_MS + 5_000);
    const before = podPatches(h).length;
    expect(before).toBeGreaterThan(0);
    expect(before).toBeLessThan(20);
    return before;
  };

  it('a partition heals while marks wait for tokens: no node is marked after its renewal was seen', async () => {
    // 15 of 20 nodes cut off at 20 s; their marks at 70 s go out at 1 QPS (with their taints).
    const h = harness({ nodes: 20, qps: 1, burst: 1 });
    try {
      await advance(20_000);
      for (let i = 0; i < 15; i++) h.sim.stopKubelet(`node-${i}`);
      await advance(GRACE_MS + 3_000);
      const marksBefore = unknownPatches(h).length;
      expect(marksBefore).toBeGreaterThan(0);
      expect(marksBefore).toBeLessThan(15);
      const healedAt = now();
      for (let i = 0; i < 15; i++) h.sim.startKubelet(`node-${i}`);
      await advance(30_000);
      // Every mark left the process before the renewals arrived; none after.
      expect(unknownPatches(h).filter((p) => p.at >= healedAt)).toEqual([]);
      expect(unknownPatches(h)).toHaveLength(marksBefore);
      expect(
        await metric(h.registry, 'nlc_writes_total', { resource: 'nodes/status', outcome: 'withdrawn' }),
      ).toBeGreaterThan(0);
    } finally {
      await h.stop();
    }
  });

  it('pods marked Ready=False at 1 QPS: the writes stop as soon as the node renews', async () => {
    const h = harness({ nodes: 3, qps: 1, burst: 1 });
    try {
      const before = await podsBeingMarked(h);
      const renewedAt = now();
      h.sim.startKubelet('node-1');
      await advance(5_000);
      h.sim.setReady('node-1', 'True'); // the kubelet's status update follows its renewal
      await advance(60_000);
      expect(podPatches(h).filter((p) => p.at >= renewedAt)).toEqual([]);
      expect(await metric(h.registry, 'nlc_pod_writes_withdrawn_total')).toBe(20 - before);
      expect(h.logs.some((l) => l.msg === 'Pod writes stopped: what decided them no longer holds')).toBe(
        true,
      );
    } finally {
      await h.stop();
    }
  });

  it("a node whose kubelet is back as its taint is sent (409, watches 5 s behind): the fresh copy's heartbeat counts, its pods are not marked (found by the fault simulator: family threshold, seed 9)", async () => {
    const h = harness({ nodes: 3, qps: 1, burst: 1 });
    try {
      for (let i = 0; i < 2; i++) h.sim.addPod('default', `web-${i}`, 'node-1');
      await advance(20_000);
      h.sim.stopKubelet('node-1');
      // As the first taint write after our mark is sent, the kubelet posts Ready=True (its status
      // before its lease renewal); our watches show it 5 s late. The write gets a 409 and re-reads.
      let backAt: number | undefined;
      h.sim.onRequest = (req) => {
        if (
          backAt === undefined &&
          req.method === 'PATCH' &&
          req.path === '/api/v1/nodes/node-1' &&
          JSON.stringify(req.body).includes('node.kubernetes.io/unreachable')
        ) {
          backAt = Date.now();
          h.sim.delayWatch('nodes', 5_000);
          h.sim.delayWatch('leases', 5_000);
          h.sim.setReady('node-1', 'True');
        }
        return undefined;
      };
      await advance(GRACE_MS + 30_000);
      expect(backAt).toBeDefined();
      expect(unknownPatches(h)).toHaveLength(1);
      expect(podPatches(h).filter((p) => p.at >= backAt!)).toEqual([]);
    } finally {
      await h.stop();
    }
  });

  it('pod marks stopped by a blind spell go on as soon as the watches see again (found by the fault simulator: family threshold, seed 5)', async () => {
    const h = harness({ nodes: 3, qps: 1, burst: 1 });
    try {
      const before = await podsBeingMarked(h);
      // The connections cut and refused for 3 s: the pod write waiting for its token is withdrawn.
      const cutAt = now();
      await cutFor(h, 3_000);
      h.sim.setPath('up');
      expect(h.logs.some((l) => l.msg === 'Pod writes stopped: what decided them no longer holds')).toBe(
        true,
      );
      // Seeing again (a reconnect within the watch's backoff), the rest go on at once, one a second,
      // not a pod recheck interval (30 s) after the list.
      await advance(30_000);
      const pods = new Set(podPatches(h).map((p) => p.path));
      expect(pods.size).toBe(20);
      const last = Math.max(...podPatches(h).map((p) => p.at));
      expect(last - cutAt).toBeLessThan(3_000 + 2_000 + (20 - before) * 1_000 + 2_000);
    } finally {
      await h.stop();
    }
  });

  it('a NoExecute taint decided at 80 s that waits for its token until 90 s is withdrawn when the node renews at 84 s (asked on the first attempt too)', async () => {
    // 0.1 QPS, burst 1: the mark takes the burst token at 70 s, the NoSchedule taint the next at
    // 80 s; the zone admitted the NoExecute taint meanwhile, so it is decided at 80 s and waits
    // for the token of 90 s.
    const h = harness({ nodes: 3, qps: 0.1, burst: 1 });
    const noExecute = () =>
      h.sim.patches.filter(
        (p) => p.path === '/api/v1/nodes/node-1' && JSON.stringify(p.body).includes('"effect":"NoExecute"'),
      );
    try {
      await advance(20_000);
      h.sim.stopKubelet('node-1');
      await advance(GRACE_MS + 10_500); // 80.5 s
      const noSchedule = h.sim.patches.filter((p) => p.path === '/api/v1/nodes/node-1');
      expect(noSchedule.map((p) => Math.round((p.at - T0) / 1000))).toEqual([80]);
      expect(noExecute()).toEqual([]);
      await advance(3_500); // 84 s: the lease renewed, the taint still waiting for its token
      const renewedAt = now();
      h.sim.startKubelet('node-1');
      await advance(11_000); // past 90 s; the kubelet's status update comes at 95 s
      h.sim.setReady('node-1', 'True');
      await advance(30_000);
      expect(noExecute().filter((p) => p.at >= renewedAt)).toEqual([]);
      expect(
        await metric(h.registry, 'nlc_writes_total', { resource: 'nodes', outcome: 'withdrawn' }),
      ).toBeGreaterThan(0);
    } finally {
      await h.stop();
    }
  });

  it("a node that renews at 75 s while its NoExecute taint waits for its zone's token (80 s) is not tainted: the question after the zone's wait is asked too", async () => {
    // node-1 and node-2 of one zone die at 20 s and are marked at 70 s; node-1 takes the zone's
    // token then, node-2 waits for the next (0.1/s: 80 s). node-2's kubelet posts Ready at 85 s.
    const h = harness({ nodes: 10 });
    const noExecute = (name: string) =>
      h.sim.patches.filter(
        (p) => p.path === `/api/v1/nodes/${name}` && JSON.stringify(p.body).includes('"effect":"NoExecute"'),
      );
    try {
      await advance(20_000);
      h.sim.stopKubelet('node-1');
      h.sim.stopKubelet('node-2');
      await advance(GRACE_MS + 5_000); // 75 s
      expect(noExecute('node-1')).toHaveLength(1);
      expect(noExecute('node-2')).toEqual([]);
      const renewedAt = now();
      h.sim.startKubelet('node-2');
      await advance(10_000);
      h.sim.setReady('node-2', 'True');
      await advance(30_000);
      expect(noExecute('node-2').filter((p) => p.at >= renewedAt)).toEqual([]);
      expect(h.sim.nodes.get('node-2')?.spec?.taints ?? []).toEqual([]);
    } finally {
      await h.stop();
    }
  });

  it('a node withdrawn that way (renewed at 75 s and 85 s, never posting Ready) that dies for good at 90 s gets its NoExecute taint once it is lost again on our clock (135 s), not before', async () => {
    const h = harness({ nodes: 10 });
    const noExecute = () =>
      h.sim.patches.filter(
        (p) => p.path === '/api/v1/nodes/node-2' && JSON.stringify(p.body).includes('"effect":"NoExecute"'),
      );
    try {
      await advance(20_000);
      h.sim.stopKubelet('node-1');
      h.sim.stopKubelet('node-2');
      await advance(GRACE_MS + 5_000); // 75 s
      h.sim.startKubelet('node-2');
      await advance(15_000); // 90 s
      const lastRenewal = h.sim.stopKubelet('node-2');
      expect(lastRenewal - T0).toBe(85_000);
      expect(noExecute()).toEqual([]);
      await advance(GRACE_MS + 30_000);
      expect(noExecute()).toHaveLength(1);
      // Once it is lost again on our clock: its grace after its last renewal, not before.
      expect(noExecute()[0]!.at - lastRenewal).toBeGreaterThanOrEqual(GRACE_MS);
      expect(noExecute()[0]!.at - lastRenewal).toBeLessThanOrEqual(GRACE_MS + 1_000);
      expect(h.sim.readyOf('node-2')).toBe('Unknown');
    } finally {
      await h.stop();
    }
  });

  it("a node that renews while it waits for its zone's token gives up its place: the next lost node of the zone gets that token (80 s, not 90 s)", async () => {
    // node-3, node-1 and node-2 of one zone die at 20 s and are marked at 70 s; the zone's tokens
    // (0.1/s) go to them in that order: 70 s, 80 s, 90 s. node-1 renews at 75 s.
    const h = harness({ nodes: 10 });
    const noExecuteAt = (name: string) =>
      h.sim.patches
        .filter(
          (p) =>
            p.path === `/api/v1/nodes/${name}` && JSON.stringify(p.body).includes('"effect":"NoExecute"'),
        )
        .map((p) => Math.round((p.at - T0) / 1000));
    try {
      await advance(20_000);
      for (const n of ['node-1', 'node-2', 'node-3']) h.sim.stopKubelet(n);
      await advance(GRACE_MS + 5_000); // 75 s
      expect(noExecuteAt('node-3')).toEqual([70]);
      h.sim.startKubelet('node-1');
      await advance(20_000);
      expect(noExecuteAt('node-2')).toEqual([80]);
      expect(noExecuteAt('node-1')).toEqual([]);
    } finally {
      await h.stop();
    }
  });

  it("a renewal seen while the node's reconcile waits behind another (one worker) is judged when its admission comes in the same reconcile: no NoExecute taint", async () => {
    // node-1 and node-2 of one zone die at 20 s, are marked at 70 s; node-2 waits for the zone's
    // token of 80 s. From 79 s the only worker is held 2 s by node-5's taint write; node-2 renews at
    // 79.5 s: its renewal and its admission are one reconcile, at 81 s.
    const h = harness({ nodes: 10, workers: 1 });
    const noExecute = () =>
      h.sim.patches.filter(
        (p) => p.path === '/api/v1/nodes/node-2' && JSON.stringify(p.body).includes('"effect":"NoExecute"'),
      );
    try {
      await advance(20_000);
      h.sim.stopKubelet('node-1');
      h.sim.stopKubelet('node-2');
      await advance(GRACE_MS + 9_000); // 79 s
      h.sim.onRequest = (req) =>
        req.method === 'PATCH' && req.path === '/api/v1/nodes/node-5'
          ? new Promise((r) => setTimeout(r, 2_000))
          : undefined;
      h.sim.setReady('node-5', 'False');
      await advance(500);
      const renewedAt = now();
      h.sim.startKubelet('node-2');
      await advance(10_000);
      h.sim.setReady('node-2', 'True');
      await advance(20_000);
      expect(noExecute().filter((p) => p.at >= renewedAt)).toEqual([]);
      expect(h.sim.patches.some((p) => p.path === '/api/v1/nodes/node-5')).toBe(true);
    } finally {
      await h.stop();
    }
  });

  it('a node that recovered and dies again is judged from its new spell: leading again during it (a fresh grace), its NoExecute taint comes once it is lost again on our clock', async () => {
    // One zone at 0.01 taints/s (a token each 100 s). node-1 dies at 20 s: Unknown and NoExecute
    // at 70 s; back (renewed, Ready) at 80 s; dead again at 90 s: Unknown at 140 s, its NoExecute
    // waits for the token of 170 s. Leadership lost and won again at 150 s: a fresh grace, so the
    // node is not lost on our clock at 170 s (its admission is withdrawn; the token is spent, as
    // upstream's queue spends one on an item it requeues) and lost again at 200 s: tainted at the
    // next token, 270 s.
    const h = harness({ nodes: 10, nodeEvictionRate: 0.01 });
    const noExecuteAt = () =>
      h.sim.patches
        .filter(
          (p) => p.path === '/api/v1/nodes/node-1' && JSON.stringify(p.body).includes('"effect":"NoExecute"'),
        )
        .map((p) => Math.round((p.at - T0) / 1000));
    try {
      await advance(20_000);
      h.sim.stopKubelet('node-1');
      await advance(GRACE_MS + 10_000); // 80 s
      expect(noExecuteAt()).toEqual([70]);
      h.sim.startKubelet('node-1');
      h.sim.setReady('node-1', 'True');
      await advance(10_000); // 90 s
      expect(h.sim.nodes.get('node-1')?.spec?.taints ?? []).toEqual([]);
      h.sim.stopKubelet('node-1');
      await advance(GRACE_MS + 10_000); // 150 s
      expect(h.sim.readyOf('node-1')).toBe('Unknown');
      h.controller.setLeading(false);
      h.controller.setLeading(true);
      await advance(30_000); // 180 s
      expect(noExecuteAt()).toEqual([70]);
      await advance(30_000); // 210 s
      expect(noExecuteAt()).toEqual([70]);
      await advance(70_000); // 280 s
      expect(noExecuteAt()).toEqual([70, 270]);
    } finally {
      await h.stop();
    }
  });

  it('a NoSchedule taint decided at 70 s that waits for its token until 80 s is withdrawn when the controller goes blind at 72 s; written once it sees again', async () => {
    // 0.1 QPS, burst 1: the mark takes the burst token at 70 s, the NoSchedule taint decided
    // right after waits for the token of 80 s.
    const h = harness({ nodes: 3, qps: 0.1, burst: 1 });
    const taintPatches = () => h.sim.patches.filter((p) => p.path === '/api/v1/nodes/node-1');
    try {
      await advance(20_000);
      h.sim.stopKubelet('node-1');
      await advance(GRACE_MS + 2_000); // 72 s
      expect(h.sim.markedUnknownAt('node-1')).toBeDefined();
      expect(taintPatches()).toEqual([]);
      // The lease watch breaks and cannot reconnect (requests and kubelets unaffected): blind.
      h.sim.stallWatch('leases', true);
      h.sim.cut();
      const blindFrom = now();
      await advance(1_000);
      expect(h.controller.sight.blind).toBeDefined();
      await advance(17_000); // 90 s
      expect(h.controller.sight.blind).toBeDefined();
      expect(taintPatches()).toEqual([]);
      expect(await metric(h.registry, 'nlc_writes_total', { resource: 'nodes', outcome: 'withdrawn' })).toBe(
        1,
      );
      h.sim.stallWatch('leases', false);
      await advance(30_000);
      expect(h.controller.sight.blind).toBeUndefined();
      expect(taintPatches().length).toBeGreaterThan(0);
      expect(taintPatches()[0]!.at).toBeGreaterThan(blindFrom + 18_000);
    } finally {
      await h.stop();
    }
  });

  it('a lease re-read that waits 1.5 s for a client-side token is timed from when it is sent: no outage, the dead nodes marked at their grace', async () => {
    // Three of five nodes die at once; the two others keep renewing (no fleet-wide silence).
    const h = harness({ nodes: 5, sharedLimiter: true, qps: 1, burst: 1 });
    try {
      await advance(20_000);
      const last = h.sim.stopKubelet('node-0');
      h.sim.stopKubelet('node-1');
      h.sim.stopKubelet('node-2');
      await advance(GRACE_MS - 500);
      // Two other requests queue ahead of the re-reads due at 70 s.
      void h.limiter!.acquire();
      void h.limiter!.acquire();
      await advance(15_000);
      expect(await metric(h.registry, 'nlc_storage_outage_seconds_total')).toBe(0);
      for (const n of ['node-0', 'node-1', 'node-2']) {
        expect(h.sim.markedUnknownAt(n)! - last, n).toBeLessThanOrEqual(GRACE_MS + 12_000);
      }
    } finally {
      await h.stop();
    }
  });

  it('100 of 120 nodes lost at once at 20 QPS (renewals spread over 10 s), 3 pods each: every mark within 2 s of its deadline, not behind pod work for a worker or a token', async () => {
    const lost = 100;
    const h = harness({
      nodes: 120,
      sharedLimiter: true,
      qps: 20,
      burst: 30,
      workers: RECONCILE_WORKERS,
      ordinaryWorkers: ORDINARY_WORKERS,
    });
    try {
      for (let n = 0; n < lost; n++)
        for (let p = 0; p < 3; p++) h.sim.addPod('default', `web-${n}-${p}`, `node-${n}`);
      // The kubelets renew every 10 s, node-n 100 ms after node-(n-1), as a real fleet does.
      for (let n = 0; n < lost; n++) {
        await advance(100);
        h.sim.stopKubelet(`node-${n}`);
        h.sim.startKubelet(`node-${n}`);
      }
      await advance(30_000);
      const last = new Map<string, number>();
      for (let n = 0; n < lost; n++) last.set(`node-${n}`, h.sim.stopKubelet(`node-${n}`));
      await advance(GRACE_MS + 60_000);
      // A lease re-read and a status write per node: 200 requests over the 10 s the deadlines span,
      // as many tokens as 20 QPS gives then. The marks get them while the taint and pod requests
      // of the nodes marked first wait (less than AGING_MS); with fewer workers than lost nodes, or
      // aging sooner, the last marks come 5-25 s late.
      expect(AGING_MS).toBeGreaterThanOrEqual(10_000);
      for (const [name, at] of last) {
        const late = h.sim.markedUnknownAt(name)! - at - GRACE_MS;
        expect(late, name).toBeLessThanOrEqual(2_000);
      }
      for (let n = lost; n < 120; n++)
        expect(h.sim.markedUnknownAt(`node-${n}`), `node-${n}`).toBeUndefined();
      // The pod work came after, and came.
      for (let n = 0; n < lost; n++)
        for (let p = 0; p < 3; p++) expect(h.sim.podReadyOf(`default/web-${n}-${p}`)).toBe('False');
    } finally {
      await h.stop();
    }
  });

  it('500 Events queued in the shared limiter hold back neither the re-read nor the mark; those beyond 100 are dropped and counted', async () => {
    const h = harness({ nodes: 5, sharedLimiter: true, qps: 5, burst: 5 });
    try {
      await advance(20_000);
      const last = h.sim.stopKubelet('node-3');
      await advance(GRACE_MS - 1_000);
      for (let i = 0; i < 500; i++) {
        void h.writer.event({
          involved: { kind: 'Node', name: `other-${i}`, apiVersion: 'v1' },
          type: 'Normal',
          reason: 'Test',
          message: `event ${i}`,
        });
      }
      await advance(3_000);
      expect(h.sim.markedUnknownAt('node-3')! - last).toBeLessThanOrEqual(GRACE_MS + 1_000);
      expect(await metric(h.registry, 'nlc_writes_total', { resource: 'events', outcome: 'dropped' })).toBe(
        // The burst's first half went to the first Events at once (the second is the marks').
        400 - (5 - h.limiter!.reserve),
      );
    } finally {
      await h.stop();
    }
  });
});

describe('NodeLifecycleController: a failed pod step is retried at the next pass (virtual time)', () => {
  /** When each of node-1's pods was marked Ready=False (monotonic), by pod. */
  const podMarks = (h: Harness) =>
    h.sim.patches.filter((p) => p.path.startsWith('/api/v1/namespaces/default/pods/web-'));

  /**
   * node-1 (3 pods) dies at 20 s and is marked at 70 s; `fail` answers the controller's requests
   * of the first pod step instead of the server. Returns when the failure was answered.
   */
  async function failAtMark(h: Harness, fail: (req: KubeRequest) => boolean): Promise<number | undefined> {
    for (let i = 0; i < 3; i++) h.sim.addPod('default', `web-${i}`, 'node-1');
    await advance(20_000);
    h.sim.stopKubelet('node-1');
    let failedAt: number | undefined;
    h.sim.onRequest = (req) => {
      if (!fail(req)) return undefined;
      failedAt ??= now();
      throw new KubeApiError(500, { kind: 'Status', reason: 'InternalError', code: 500 }, {}, 'test');
    };
    await advance(GRACE_MS + 1_000);
    return failedAt;
  }

  for (const mode of ['always', 'upstream'] as const) {
    it(`--mark-pods-not-ready=${mode}: a pod list that fails at mark time (70 s) is retried at once, the pods marked by 75 s, not 30 s later`, async () => {
      const h = harness({ nodes: 3, policy: upstreamPolicy({ markPodsNotReady: mode }) });
      try {
        let lists = 0;
        const failedAt = await failAtMark(
          h,
          (r) => r.method === 'GET' && r.path === '/api/v1/pods' && ++lists === 1,
        );
        expect(h.sim.markedUnknownAt('node-1')).toBeDefined();
        expect(failedAt).toBeDefined();
        await advance(5_000);
        for (let i = 0; i < 3; i++) expect(h.sim.podReadyOf(`default/web-${i}`), `web-${i}`).toBe('False');
        expect(podMarks(h)).toHaveLength(3);
        for (const p of podMarks(h)) expect(p.at - failedAt!).toBeLessThanOrEqual(5_000);
      } finally {
        await h.stop();
      }
    });
  }

  it('--mark-pods-not-ready=upstream: a pod mark that fails at mark time (70 s) is retried, the pods marked within 5 s of the failure', async () => {
    const h = harness({ nodes: 3, policy: upstreamPolicy({ markPodsNotReady: 'upstream' }) });
    try {
      // The first pod's write answered 500 six times (70 s to about 73.5 s, the writer's backoffs):
      // its retries give up, the mark fails.
      let failures = 0;
      let gaveUpAt: number | undefined;
      await failAtMark(h, (r) => {
        if (r.method !== 'PATCH' || !r.path.endsWith('/status') || !r.path.includes('/pods/')) return false;
        if (++failures === 6) gaveUpAt = now();
        return failures <= 6;
      });
      await advance(10_000);
      expect(gaveUpAt).toBeDefined();
      expect(
        await metric(h.registry, 'nlc_writes_total', { resource: 'pods/status', outcome: 'failed' }),
      ).toBe(1);
      for (let i = 0; i < 3; i++) expect(h.sim.podReadyOf(`default/web-${i}`), `web-${i}`).toBe('False');
      for (const p of podMarks(h)) expect(p.at - gaveUpAt!).toBeLessThanOrEqual(5_000);
    } finally {
      await h.stop();
    }
  });
});
