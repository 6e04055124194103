import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { upstreamPolicy } from '../policy/index.js';
import { FENCE_SIGNALS, FENCED_ANNOTATION, OUT_OF_SERVICE_TAINT } from '../remediation/index.js';
import type { ProbeOutcome, SecondOpinionSettings } from '../second-opinion/index.js';
import type { Probe } from './second-opinion.js';
import { advance, GRACE_MS, type Harness, harness, metric } from './testing/harness.js';

/** --second-opinion=kubelet in the controller as run.ts wires it, against the in-memory server, in virtual time. */
const T0 = Date.parse('2026-05-01T08:00:00.000Z');
const SETTINGS: SecondOpinionSettings = {
  confirmAfterMs: 20_000,
  retryMs: 3_000,
  intervalMs: 10_000,
  timeoutMs: 3_000,
  holdMs: 60_000,
};
const UR = 'node.kubernetes.io/unreachable';

beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
});

/** Simulated kubelet endpoints: what each node's port answers (default: answers), and every probe. */
class Kubelets {
  readonly outcomes = new Map<string, ProbeOutcome>();
  readonly probes: Array<{ at: number; node: string; outcome: ProbeOutcome }> = [];
  readonly probe: Probe = async (target, { timeoutMs }) => {
    const node = `node-${target.port - 20_000}`;
    const outcome = this.outcomes.get(node) ?? 'answers';
    this.probes.push({ at: Date.now(), node, outcome });
    if (outcome === 'timeout') await new Promise((r) => setTimeout(r, timeoutMs));
    return { outcome, detail: outcome === 'refused' ? 'connection refused' : outcome };
  };
  of(node: string) {
    return this.probes.filter((p) => p.node === node);
  }
}

function start(k: Kubelets, settings: Partial<SecondOpinionSettings> = {}): Harness {
  return harness({ nodes: 10, secondOpinion: { settings: { ...SETTINGS, ...settings }, probe: k.probe } });
}

const taintsOf = (h: Harness, name: string) =>
  (h.sim.nodes.get(name)?.spec?.taints ?? []).map((t) => `${t.key}:${t.effect}`);
const noExecuteAt = (h: Harness, name: string) =>
  h.sim.patches.find(
    (p) => p.path === `/api/v1/nodes/${name}` && JSON.stringify(p.body).includes('"effect":"NoExecute"'),
  )?.at;
const readyMessage = (h: Harness, name: string) =>
  h.sim.nodes.get(name)?.status?.conditions?.find((c) => c.type === 'Ready')?.message;

describe('--second-opinion=kubelet: down nodes marked sooner', () => {
  it('a node whose lease and kubelet both stopped is marked at confirm-after + the confirming probe, not at the grace', async () => {
    const k = new Kubelets();
    const h = start(k);
    try {
      await advance(30_000);
      // Live nodes past confirm-after? None: every lease renews every 10 s.
      expect(k.probes).toEqual([]);
      const last = h.sim.stopKubelet('node-3');
      k.outcomes.set('node-3', 'refused');
      await advance(GRACE_MS + 10_000);
      const probes = k.of('node-3');
      // First probed once silent 20 s (on the 1 s tick), the confirming one 3 s later; no more after.
      expect(probes.length).toBe(2);
      expect(probes[0]!.at - last).toBeGreaterThanOrEqual(20_000);
      expect(probes[0]!.at - last).toBeLessThanOrEqual(21_000);
      expect(probes[1]!.at - probes[0]!.at).toBeGreaterThanOrEqual(3_000);
      expect(probes[1]!.at - probes[0]!.at).toBeLessThanOrEqual(4_000);
      const marked = h.sim.markedUnknownAt('node-3');
      expect(marked).toBeDefined();
      expect(marked! - probes[1]!.at).toBeLessThan(100);
      expect(marked! - last).toBeLessThan(GRACE_MS / 2);
      expect(readyMessage(h, 'node-3')).toBe(
        'Kubelet stopped posting node status. Confirmed down before the grace: its kubelet at 127.0.0.1:20003 did not answer two probes (connection refused).',
      );
      // The rest follows as for any lost node: NoSchedule, and NoExecute (the zone's first token).
      expect(taintsOf(h, 'node-3')).toEqual([`${UR}:NoSchedule`, `${UR}:NoExecute`]);
      for (let i = 0; i < 10; i++) if (i !== 3) expect(h.sim.readyOf(`node-${i}`)).toBe('True');
      expect(await metric(h.registry, 'nlc_second_opinion_confirmed_down_total')).toBe(1);
      expect(await metric(h.registry, 'nlc_second_opinion_probes_total', { outcome: 'refused' })).toBe(2);
    } finally {
      await h.stop();
    }
  });

  it('timeouts confirm too; the mark waits for the second probe to time out', async () => {
    const k = new Kubelets();
    const h = start(k);
    try {
      await advance(30_000);
      const last = h.sim.stopKubelet('node-3');
      k.outcomes.set('node-3', 'timeout');
      await advance(GRACE_MS + 10_000);
      const probes = k.of('node-3');
      expect(probes.length).toBe(2);
      const marked = h.sim.markedUnknownAt('node-3')!;
      expect(marked - probes[1]!.at).toBeGreaterThanOrEqual(SETTINGS.timeoutMs);
      expect(marked - last).toBeLessThanOrEqual(20_000 + 1_000 + 4_000 + SETTINGS.timeoutMs + 100);
    } finally {
      await h.stop();
    }
  });

  it('a node that renews between the two probes is not marked (the first failure is forgotten)', async () => {
    const k = new Kubelets();
    const h = start(k);
    try {
      await advance(30_000);
      h.sim.stopKubelet('node-3');
      k.outcomes.set('node-3', 'refused');
      await advance(21_500);
      expect(k.of('node-3').length).toBe(1);
      h.sim.startKubelet('node-3');
      k.outcomes.set('node-3', 'answers');
      await advance(GRACE_MS + 10_000);
      expect(h.sim.markedUnknownAt('node-3')).toBeUndefined();
      expect(await metric(h.registry, 'nlc_second_opinion_confirmed_down_total')).toBe(0);
    } finally {
      await h.stop();
    }
  });

  it('the lease re-read still decides: a renewal the watch has not shown stops the early mark', async () => {
    const k = new Kubelets();
    const h = start(k);
    try {
      await advance(30_000);
      // Its kubelet renews, but the controller's watch does not show it; the port refuses.
      h.sim.holdLease('node-3', true);
      k.outcomes.set('node-3', 'refused');
      await advance(26_000);
      expect(k.of('node-3').length).toBeGreaterThanOrEqual(2);
      expect(h.sim.markedUnknownAt('node-3')).toBeUndefined();
      expect(await metric(h.registry, 'nlc_watch_lag_detected_total')).toBeGreaterThanOrEqual(1);
    } finally {
      await h.stop();
    }
  });

  it('blind (the watches cut): probes go on (reads of the node network), nothing is marked until it sees again', async () => {
    const k = new Kubelets();
    const h = start(k);
    try {
      await advance(30_000);
      h.sim.stopKubelet('node-3');
      k.outcomes.set('node-3', 'refused');
      h.sim.setPath('refuse');
      h.sim.cut();
      await advance(5_000);
      expect(h.controller.sight.blind).toBeDefined();
      await advance(40_000);
      expect(k.of('node-3').length).toBe(2);
      expect(h.sim.markedUnknownAt('node-3')).toBeUndefined();
      // Blind time does not count against a node (the tracker moves its silence's start by it):
      // once it sees again, a node silent for --confirm-after again is probed and confirmed.
      h.sim.setPath('up');
      await advance(10_000);
      expect(h.controller.sight.blind).toBeUndefined();
      const seeing = Date.now();
      await advance(30_000);
      const marked = h.sim.markedUnknownAt('node-3');
      expect(marked).toBeDefined();
      expect(marked! - seeing).toBeLessThan(SETTINGS.confirmAfterMs + 5_000);
      expect(readyMessage(h, 'node-3')).toContain('Confirmed down before the grace');
    } finally {
      h.sim.setPath('up');
      await h.stop();
    }
  });
});

describe('--second-opinion=kubelet: cut-off nodes not evicted', () => {
  it('a node whose lease stopped but whose kubelet answers: Unknown and NoSchedule at the grace, NoExecute held, then at once when it stops answering', async () => {
    const k = new Kubelets();
    const h = start(k);
    try {
      await advance(30_000);
      const last = h.sim.stopKubelet('node-3');
      await advance(GRACE_MS + 1_000);
      const marked = h.sim.markedUnknownAt('node-3');
      expect(marked).toBeDefined();
      // At the grace, not before (its kubelet answers: nothing confirmed).
      expect(marked! - last).toBeGreaterThan(GRACE_MS);
      expect(readyMessage(h, 'node-3')).toBe('Kubelet stopped posting node status.');
      await advance(30_000);
      expect(taintsOf(h, 'node-3')).toEqual([`${UR}:NoSchedule`]);
      expect(noExecuteAt(h, 'node-3')).toBeUndefined();
      expect(await metric(h.registry, 'nlc_second_opinion_held_nodes')).toBe(1);
      const events = h.sim.events.filter((e) => JSON.stringify(e.body).includes('KubeletStillAnswering'));
      expect(events).toHaveLength(1);
      expect(JSON.stringify(events[0]!.body)).toContain('the kubelet at 127.0.0.1:20003 answers');
      // Its kubelet stops answering: two failures, then NoExecute.
      const stopped = Date.now();
      k.outcomes.set('node-3', 'refused');
      await advance(20_000);
      const ne = noExecuteAt(h, 'node-3');
      expect(ne).toBeDefined();
      // The next probe within the 10 s interval (+1 s tick), the confirming one 3-4 s later.
      expect(ne! - stopped).toBeLessThanOrEqual(SETTINGS.intervalMs + 1_000 + 4_000 + 100);
      expect(await metric(h.registry, 'nlc_second_opinion_held_nodes')).toBe(0);
    } finally {
      await h.stop();
    }
  });

  it('the hold is announced (its Event) only while the controller sees, not when the grace ends during a blind spell', async () => {
    const k = new Kubelets();
    const h = start(k);
    const announced = () =>
      h.sim.events.filter((e) => JSON.stringify(e.body).includes('KubeletStillAnswering'));
    try {
      await advance(20_000);
      // The lease watch goes silent (blind once silent 45 s); the kubelet stops renewing at 30 s.
      h.sim.stallWatch('leases', true);
      await advance(10_000);
      h.sim.stopKubelet('node-3');
      await advance(40_000);
      expect(h.controller.sight.blind).toBeDefined();
      // Its grace ends while blind (last renewal seen before 20 s): held, its kubelet answering.
      await advance(25_000);
      expect(k.of('node-3').length).toBeGreaterThanOrEqual(2);
      expect(announced()).toEqual([]);
      h.sim.stallWatch('leases', false);
      await advance(90_000);
      expect(h.controller.sight.blind).toBeUndefined();
      expect(announced()).toHaveLength(1);
      expect(noExecuteAt(h, 'node-3')).toBeUndefined();
    } finally {
      h.sim.stallWatch('leases', false);
      await h.stop();
    }
  });

  it('a blind spell (the watches cut for 20 s) does not lift the hold', async () => {
    const k = new Kubelets();
    const h = start(k);
    try {
      await advance(30_000);
      h.sim.stopKubelet('node-3');
      await advance(GRACE_MS + 5_000);
      expect(h.sim.readyOf('node-3')).toBe('Unknown');
      h.sim.setPath('refuse');
      h.sim.cut();
      await advance(20_000);
      expect(h.controller.sight.blind).toBeDefined();
      h.sim.setPath('up');
      await advance(30_000);
      expect(h.controller.sight.blind).toBeUndefined();
      expect(noExecuteAt(h, 'node-3')).toBeUndefined();
      expect(taintsOf(h, 'node-3')).toEqual([`${UR}:NoSchedule`]);
    } finally {
      h.sim.setPath('up');
      await h.stop();
    }
  });

  for (const mode of ['always', 'upstream'] as const) {
    it(`--mark-pods-not-ready=${mode}: a held node's pods stay Ready (serving behind their Services) until its kubelet stops answering`, async () => {
      const k = new Kubelets();
      const h = harness({
        nodes: 10,
        policy: upstreamPolicy({ markPodsNotReady: mode }),
        secondOpinion: { settings: SETTINGS, probe: k.probe },
        before: (sim) => {
          sim.addPod('ns', 'web-0', 'node-3');
          sim.addPod('ns', 'web-1', 'node-3');
        },
      });
      try {
        await advance(30_000);
        h.sim.stopKubelet('node-3');
        await advance(GRACE_MS + 30_000);
        expect(h.sim.readyOf('node-3')).toBe('Unknown');
        expect(h.sim.podReadyOf('ns/web-0')).toBe('True');
        expect(h.sim.podReadyOf('ns/web-1')).toBe('True');
        k.outcomes.set('node-3', 'refused');
        await advance(20_000);
        expect(noExecuteAt(h, 'node-3')).toBeDefined();
        // The flip happened while held: upstream's mode marks them now all the same.
        expect(h.sim.podReadyOf('ns/web-0')).toBe('False');
        expect(h.sim.podReadyOf('ns/web-1')).toBe('False');
      } finally {
        await h.stop();
      }
    });
  }

  it('pod marks waiting for their tokens are withdrawn once the kubelet is heard answering', async () => {
    const k = new Kubelets();
    // One write token every 20 s: the mark takes the burst at the grace (80 s), NoSchedule goes at
    // 100 s, the two pod marks decided then wait until 120 s and 140 s; the kubelet is first probed
    // at 105 s (past what the flags allow: the seam alone) and answers.
    const h = harness({
      nodes: 10,
      qps: 0.05,
      burst: 1,
      secondOpinion: {
        settings: { ...SETTINGS, confirmAfterMs: GRACE_MS + 25_000, holdMs: 600_000 },
        probe: k.probe,
      },
      before: (sim) => {
        sim.addPod('ns', 'web-0', 'node-3');
        sim.addPod('ns', 'web-1', 'node-3');
      },
    });
    try {
      await advance(30_000);
      h.sim.stopKubelet('node-3');
      await advance(GRACE_MS + 80_000);
      expect(h.sim.readyOf('node-3')).toBe('Unknown');
      expect(k.of('node-3').length).toBeGreaterThanOrEqual(1);
      expect(h.sim.podReadyOf('ns/web-0')).toBe('True');
      expect(h.sim.podReadyOf('ns/web-1')).toBe('True');
    } finally {
      await h.stop();
    }
  });

  // The veto is asked twice, as every out-of-service decision is: when decided (the step's check) and
  // after the write's waits (its re-check); each covers for the other (red with both removed).
  it('--out-of-service: a fenced node whose kubelet answers gets no out-of-service taint (a veto), until it stops answering', async () => {
    const k = new Kubelets();
    const h = harness({
      nodes: 10,
      outOfService: { signals: FENCE_SIGNALS, afterMs: 5_000 },
      secondOpinion: { settings: { ...SETTINGS, holdMs: 0 }, probe: k.probe },
    });
    const oos = () => taintsOf(h, 'node-3').includes(`${OUT_OF_SERVICE_TAINT.key}:NoExecute`);
    try {
      await advance(30_000);
      h.sim.stopKubelet('node-3');
      h.sim.updateNode('node-3', (n) => ({
        ...n,
        metadata: { ...n.metadata, annotations: { ...n.metadata.annotations, [FENCED_ANNOTATION]: 'true' } },
      }));
      await advance(GRACE_MS + 60_000);
      // No hold (0): marked and NoExecute as usual; but the kubelet answers, so no force-deletion.
      expect(h.sim.readyOf('node-3')).toBe('Unknown');
      expect(noExecuteAt(h, 'node-3')).toBeDefined();
      expect(oos()).toBe(false);
      k.outcomes.set('node-3', 'refused');
      await advance(60_000);
      expect(oos()).toBe(true);
    } finally {
      await h.stop();
    }
  });

  it('a zone whose silent nodes all answer is reported cut off from the control plane, not lost, until one of them stops answering', async () => {
    const k = new Kubelets();
    const h = start(k);
    const cut = () => metric(h.registry, 'nlc_second_opinion_cut_off_zones', { zone: '' });
    try {
      await advance(30_000);
      for (const n of ['node-3', 'node-4', 'node-5']) h.sim.stopKubelet(n);
      await advance(GRACE_MS + 3_000);
      expect(await cut()).toBe(1);
      expect(h.logs.filter((l) => String(l.msg).startsWith('Zone cut off'))).toEqual([
        expect.objectContaining({ zone: '', nodes: 3 }),
      ]);
      // One of them is down after all: the zone is not cut off, it is losing nodes.
      k.outcomes.set('node-4', 'refused');
      await advance(20_000);
      expect(await cut()).toBe(0);
      expect(h.logs.filter((l) => l.msg === 'Zone no longer cut off from the control plane')).toHaveLength(1);
    } finally {
      await h.stop();
    }
  });

  it('the hold ends at grace + --cut-off-hold however long the kubelet answers; it is probed on every 10 s', async () => {
    const k = new Kubelets();
    const h = start(k);
    try {
      await advance(30_000);
      const last = h.sim.stopKubelet('node-3');
      await advance(GRACE_MS + SETTINGS.holdMs + 5_000);
      const ne = noExecuteAt(h, 'node-3');
      expect(ne).toBeDefined();
      expect(ne! - last).toBeGreaterThanOrEqual(GRACE_MS + SETTINGS.holdMs);
      expect(ne! - last).toBeLessThanOrEqual(GRACE_MS + SETTINGS.holdMs + 1_100);
      const n = k.of('node-3').length;
      await advance(60_000);
      expect(k.of('node-3').length).toBe(n + 6);
    } finally {
      await h.stop();
    }
  });

  it('--cut-off-hold=0: the sooner mark only, nothing held', async () => {
    const k = new Kubelets();
    const h = start(k, { holdMs: 0 });
    try {
      await advance(30_000);
      const last = h.sim.stopKubelet('node-3');
      await advance(GRACE_MS + 5_000);
      const ne = noExecuteAt(h, 'node-3');
      expect(ne).toBeDefined();
      expect(ne! - last).toBeLessThanOrEqual(GRACE_MS + 1_100);
    } finally {
      await h.stop();
    }
  });

  it('a NoExecute taint waiting for its token is withdrawn once the kubelet is heard answering', async () => {
    const k = new Kubelets();
    // One write token every 20 s: the mark at the grace (80 s) takes the burst, NoSchedule goes at
    // 100 s, and the NoExecute write decided then (admitted) waits for its token until 120 s. The
    // kubelet is first probed at 105 s (past what the flags allow: the seam alone) and answers.
    const h = harness({
      nodes: 10,
      qps: 0.05,
      burst: 1,
      secondOpinion: { settings: { ...SETTINGS, confirmAfterMs: GRACE_MS + 25_000 }, probe: k.probe },
    });
    try {
      await advance(30_000);
      h.sim.stopKubelet('node-3');
      await advance(GRACE_MS + 60_000);
      expect(h.sim.readyOf('node-3')).toBe('Unknown');
      expect(k.of('node-3').length).toBeGreaterThanOrEqual(1);
      expect(taintsOf(h, 'node-3')).toEqual([`${UR}:NoSchedule`]);
      expect(noExecuteAt(h, 'node-3')).toBeUndefined();
      expect(
        h.logs.some((l) => JSON.stringify(l).includes('its kubelet still answers (NoExecute held)')),
      ).toBe(true);
    } finally {
      await h.stop();
    }
  });
});
