/**
 * The fault model, as a schedule generator: from one seed, a timed list of what happens to the
 * fleet (kubelets die, come back, flap, lose their path, report NotReady, announce a shutdown, are
 * fenced, skew their clocks, nodes are deleted and re-created), to the API server (down, hung, its
 * storage down or slow, 429 storms, restarts that cut or expire every watch) and to the replicas
 * (network path refusing or hanging, watches cut, stalled or late, crashes, rolling restarts).
 *
 * The schedule stays inside the model docs/guarantees.md states (MODEL below): the global outages
 * that keep kubelets from renewing are bounded one by one and in total over any window, and every
 * fault ends before the run's quiet tail, in which the controller must bring everything in line.
 */
import type { Prng } from './prng.js';

/** The fault model's bounds (docs/guarantees.md, "The fault model"), as multiples of the grace. */
export const MODEL = {
  /**
   * The longest single outage of the API server or its storage (kubelets cannot renew): what the
   * controller forgives is capped at a grace (src/health/tracker.ts, forgivenessCapOf), so a live
   * kubelet rides out L <= 2 x grace - R - 8 s; 1 s under that, and at most 1.2 x grace.
   */
  maxOutage: (graceMs: number) => Math.round(Math.min(graceMs * 1.2, 2 * graceMs - 10_000 - 9_000)),
  /** At most this much outage in any window of 2 x grace (several outages, any spacing). */
  maxOutageIn2Grace: (graceMs: number) => Math.round(Math.min(graceMs * 1.2, 2 * graceMs - 10_000 - 9_000)),
  /** The slowest a write or quorum read gets (kubelets still renew through it). */
  maxSlowMs: 2_500,
  /** The latest a watch event arrives while the watch is connected. */
  maxWatchLagMs: 5_000,
  /**
   * Outage lengths the controller can neither ride out nor see: a live kubelet's silence through an
   * outage of L is at most R + L + 7 s (its renew interval, the outage, its back-off after it), so
   * an outage under grace - R - 8 s needs no forgiveness; one of 1.5 R or more shows as a fleet-wide
   * silence (and one a deadline falls into, as a failed re-read). With a grace under 2.5 R + 8 s
   * (33 s at the kubelet's 10 s) the lengths between are out of the model: they may mark live
   * nodes, as kube-controller-manager would. Undefined when the grace leaves room.
   */
  blindBand: (graceMs: number, renewMs: number): [number, number] | undefined => {
    const rideOut = graceMs - renewMs - 8_000;
    const seen = 1.5 * renewMs + 1_000;
    return rideOut < seen ? [Math.max(0, rideOut - 500), seen] : undefined;
  },
  /** The quiet tail: no fault starts or lasts into it; then everything must be in line. */
  quietTailMs: 4 * 60_000,
} as const;

export type Fault =
  | {
      kind: 'kubelet-stop';
      node: string;
      forMs: number | 'forever';
      announce: boolean;
      cloudTaint: number | undefined;
      fence: number | undefined;
      fenceStaysMs: number | undefined;
      /** Back, its status post goes out before its lease renewal. */
      statusFirst?: boolean;
    }
  | {
      /**
       * A request failing at a chosen moment (a 429, as a throttle answers it): armed for
       * `forMs`, the first request of `request`'s kind about `node` once the node is marked
       * `Unknown` (and, for the out-of-service steps, fenced). `afterwards`: the node's kubelet back
       * `reviveAfterMs` after the failure, and down again (fenced) `againAfterMs` after that.
       */
      kind: 'trap';
      node: string;
      request: 'pods-list' | 'lease-get' | 'oos-patch';
      forMs: number;
      /**
       * Once it fired, every such request fails for this long (an admission webhook on nodes
       * failing, 500, long enough for the writer's retries to give up); otherwise one fails (429).
       */
      holdMs?: number;
      afterwards?: { reviveAfterMs: number; againAfterMs: number; cloudTaint: number } | undefined;
    }
  | { kind: 'kubelet-partition'; node: string; forMs: number }
  | { kind: 'kubelet-not-ready'; node: string; forMs: number }
  | { kind: 'kubelet-clock'; node: string; skewMs: number }
  | { kind: 'node-recreate'; node: string; afterMs: number }
  | { kind: 'storage-down'; forMs: number; answer: 'wait' | 'error' }
  | { kind: 'server-down'; forMs: number }
  | { kind: 'server-hung'; forMs: number }
  | { kind: 'storage-slow'; forMs: number; slowMs: number }
  | { kind: 'throttle'; forMs: number; share: number; retryAfterS: number }
  | { kind: 'server-restart'; compact: boolean }
  | { kind: 'path'; replica: string; state: 'refuse' | 'hang'; forMs: number }
  | { kind: 'watch-cut'; replica: string }
  | { kind: 'watch-stall'; replica: string; coll: string; forMs: number }
  | { kind: 'watch-lag'; replica: string; coll: string; lagMs: number; forMs: number }
  | { kind: 'replica-crash'; replica: string }
  | { kind: 'replica-restart'; replica: string };

export interface Timed {
  at: number;
  fault: Fault;
}

/** How often each kind of fault happens, per simulated hour (the fleet's: per node for kubelets). */
export interface Rates {
  kubeletStop: number;
  kubeletFlap: number;
  /** Many kubelets at once (a zone's power, a rack): per hour, for the fleet. */
  massDeath: number;
  /** The share of mass deaths during whose marks a replica's path hangs. */
  leaderCutAtMarks: number;
  /**
   * Fenced nodes back right as their out-of-service taint is sent, under a slow API server and late
   * watches (a 409's fresh copy is the first to show them back): per node, per hour.
   */
  backAtFenceUnderLag: number;
  /** The whole fleet dying while the storage is slow (issue 47's defect 2): per hour, for the fleet. */
  fleetDeathUnderSlow: number;
  /** A node dying whose pod list fails at its mark (defect 7): per node, per hour. */
  trapPodsList: number;
  /** A fenced node dying whose lease re-read before the out-of-service taint fails (defect 6): per node, per hour. */
  trapOutOfServiceRead: number;
  /**
   * A fenced node dying whose out-of-service write fails, back while its request waits in the zone
   * queue, then down and fenced again (defect 4): per node, per hour.
   */
  trapBackInQueue: number;
  partition: number;
  notReady: number;
  clock: number;
  recreate: number;
  outage: number;
  slow: number;
  throttle: number;
  serverRestart: number;
  path: number;
  watchCut: number;
  watchStall: number;
  watchLag: number;
  crash: number;
  rollingRestart: number;
}

export const BASE_RATES: Rates = {
  kubeletStop: 0.25,
  kubeletFlap: 0.3,
  massDeath: 0.3,
  leaderCutAtMarks: 0.2,
  backAtFenceUnderLag: 0,
  fleetDeathUnderSlow: 0,
  trapPodsList: 0,
  trapOutOfServiceRead: 0,
  trapBackInQueue: 0,
  partition: 0.15,
  notReady: 0.15,
  clock: 0.05,
  recreate: 0.03,
  outage: 5,
  slow: 2,
  throttle: 2,
  serverRestart: 2,
  path: 3,
  watchCut: 4,
  watchStall: 4,
  watchLag: 3,
  crash: 1,
  rollingRestart: 1,
};

/** The families: each stresses one part of the model more (every invariant is checked in all). */
export const FAMILIES: Record<string, Partial<Rates>> = {
  mixed: {},
  storage: { outage: 15, slow: 6, kubeletStop: 0.4 },
  network: { path: 8, watchCut: 10, watchStall: 10, watchLag: 8, throttle: 6 },
  lifecycle: {
    kubeletStop: 0.8,
    kubeletFlap: 0.8,
    partition: 0.4,
    notReady: 0.4,
    recreate: 0.1,
    massDeath: 2,
  },
  election: { crash: 5, rollingRestart: 4, path: 6, kubeletStop: 0.6, massDeath: 1.5, leaderCutAtMarks: 0.8 },
  // Watches silent while requests get through (the blind spells that only the gating covers), with
  // nodes dying and coming back under them.
  blind: { watchStall: 14, watchCut: 2, kubeletStop: 0.6, kubeletFlap: 1.2, notReady: 0.3 },
  // Near the thresholds that no other family meets often: fenced nodes back right as their
  // out-of-service taint is sent while the API server is slow and the watches late (its world
  // always has --out-of-service on: FAMILY_WORLD), and the whole fleet dying at once in zones of
  // at most two nodes (each goes from Normal to full disruption at once: only master disruption
  // stops their taints).
  threshold: { backAtFenceUnderLag: 0.6, massDeath: 2, kubeletStop: 0.3, path: 2, watchLag: 2 },
  // The seams between steps (issue 47's defects 2, 4, 6, 7): one request failing right where a
  // step must settle its bookkeeping (the pod list at a mark, the re-read before the out-of-service
  // taint, its write), and the fleet dying behind a slow API server; the background lighter, so
  // that the liveness bounds after each chain apply (its world always runs --out-of-service).
  seams: {
    fleetDeathUnderSlow: 0.3,
    trapPodsList: 0.15,
    trapOutOfServiceRead: 0.15,
    trapBackInQueue: 0.15,
    kubeletStop: 0.15,
    kubeletFlap: 0.15,
    massDeath: 0.1,
    outage: 1,
    slow: 0.5,
    throttle: 0.5,
    serverRestart: 0.5,
    path: 1,
    watchCut: 1,
    watchStall: 1,
    watchLag: 1,
    crash: 0.3,
    rollingRestart: 0.3,
  },
  // --second-opinion=kubelet (its world always runs it): nodes dying (probes fail: marked sooner)
  // and cut off from the API server while their kubelets run (probes answer: NoExecute held), the
  // watches stalling and cut (no probe result may be lost across a blind spell) and the leader
  // changing under them.
  'second-opinion': {
    kubeletStop: 0.8,
    kubeletFlap: 0.8,
    partition: 0.8,
    massDeath: 0.5,
    watchStall: 6,
    watchCut: 4,
    crash: 2,
    rollingRestart: 2,
  },
};

/** What a family needs of its world, drawn from the seed otherwise. */
export const FAMILY_WORLD: Record<
  string,
  { outOfService?: boolean; twoPerZone?: boolean; outOfServiceAfterS?: number[]; secondOpinion?: boolean }
> = {
  'second-opinion': { secondOpinion: true },
  threshold: { outOfService: true, twoPerZone: true },
  // --out-of-service-after 0 or 10 s: a taint that skips its zone's token shows beside the node's
  // own unreachable taint (10 s apart at the rate of 0.1).
  seams: { outOfService: true, outOfServiceAfterS: [0, 0, 10] },
};

interface Span {
  from: number;
  to: number;
}

/**
 * The schedule of one run: `durationMs` of simulated time, faults starting after `warmupMs`, all
 * over before the quiet tail.
 */
export function generateSchedule(
  rng: Prng,
  o: {
    durationMs: number;
    warmupMs: number;
    graceMs: number;
    nodes: string[];
    replicas: string[];
    rates: Rates;
    /** --out-of-service-after, when the taint is on: some revivals are timed to meet it. */
    outOfServiceAfterMs?: number | undefined;
  },
): Timed[] {
  const out: Timed[] = [];
  const end = o.durationMs - MODEL.quietTailMs;
  const hours = o.durationMs / 3_600_000;
  const g = o.graceMs;
  /** Start times of a Poisson process of `perHour` events. */
  const times = (perHour: number): number[] => {
    const ts: number[] = [];
    if (perHour <= 0) return ts;
    const mean = 3_600_000 / perHour;
    for (let t = o.warmupMs + rng.exp(mean); t < end; t += rng.exp(mean)) ts.push(Math.round(t));
    return ts;
  };
  /** A duration that ends before the quiet tail. */
  const within = (at: number, ms: number) => Math.max(1, Math.min(Math.round(ms), end - at));
  const n = o.nodes.length;
  const r = o.rates;
  void hours;

  for (const at of times(r.kubeletStop * n)) {
    const forever = rng.chance(0.3);
    const announce = rng.chance(0.3);
    const cloudTaint = rng.chance(0.4) ? Math.round(rng.between(5_000, 60_000)) : undefined;
    const fence = rng.chance(0.3) ? Math.round(rng.between(10_000, 120_000)) : undefined;
    let forMs: number | 'forever' = forever
      ? 'forever'
      : within(at, rng.chance(0.5) ? rng.between(5_000, 2 * g) : rng.between(2 * g, 10 * 60_000));
    // Near a threshold (as FoundationDB's buggify): some fenced nodes come back right as their
    // out-of-service taint is due (mark, signal, delay, a zone token), where the re-checks matter.
    const signalAt = announce
      ? 0
      : Math.min(cloudTaint ?? Number.POSITIVE_INFINITY, fence ?? Number.POSITIVE_INFINITY);
    if (o.outOfServiceAfterMs !== undefined && Number.isFinite(signalAt) && rng.chance(0.5)) {
      const due = Math.max(g, signalAt) + o.outOfServiceAfterMs;
      forMs = within(at, due + rng.between(-1_000, 12_000));
    }
    out.push({
      at,
      fault: {
        kind: 'kubelet-stop',
        node: rng.pick(o.nodes),
        forMs,
        announce,
        cloudTaint,
        fence,
        fenceStaysMs: rng.chance(0.2) ? undefined : Math.round(rng.between(0, 180_000)),
      },
    });
  }
  // Near a threshold (issue 47's defect 1): a fenced node back as its out-of-service taint is
  // sent, the API server slow (the re-read before the taint, then the patch, each a few seconds)
  // and every replica's watches late, so that the kubelet's status post (sent before its renewal)
  // lands between the controller's copy and its patch (a 409) while no watch has shown the renewal
  // yet, and the renewal lands after the re-read.
  if (o.outOfServiceAfterMs !== undefined && r.backAtFenceUnderLag > 0) {
    for (const at of times(r.backAtFenceUnderLag * n)) {
      // Fenced before its mark; its out-of-service taint is due --out-of-service-after after the
      // mark, and never sooner than its zone's next token (10 s after its unreachable taint's).
      const cloudTaint = Math.round(rng.between(2_000, g / 2));
      const due = g + Math.max(o.outOfServiceAfterMs, 10_000);
      const back = Math.round(due + rng.between(-6_000, 8_000));
      const slowFrom = at + due - 20_000;
      if (at + back + 60_000 > end || slowFrom < o.warmupMs) continue;
      out.push({
        at,
        fault: {
          kind: 'kubelet-stop',
          node: rng.pick(o.nodes),
          forMs: back,
          announce: false,
          cloudTaint,
          fence: undefined,
          fenceStaysMs: Math.round(rng.between(0, 60_000)),
          statusFirst: true,
        },
      });
      out.push({
        at: slowFrom,
        fault: {
          kind: 'storage-slow',
          forMs: 50_000,
          slowMs: Math.round(rng.between(1_000, MODEL.maxSlowMs)),
        },
      });
      const lagMs = Math.round(rng.between(2_500, MODEL.maxWatchLagMs));
      for (const replica of o.replicas)
        for (const coll of ['nodes', 'leases/kube-node-lease'])
          out.push({ at: slowFrom, fault: { kind: 'watch-lag', replica, coll, lagMs, forMs: 50_000 } });
    }
  }
  for (const at of times(r.kubeletFlap * n)) {
    out.push({
      at,
      fault: {
        kind: 'kubelet-stop',
        node: rng.pick(o.nodes),
        forMs: within(at, rng.between(500, 25_000)),
        announce: false,
        cloudTaint: undefined,
        fence: undefined,
        fenceStaysMs: undefined,
      },
    });
  }
  // Many at once: a share of the fleet (a zone, or nearly all of it), most for good, the rest back
  // within minutes; the survivors' flaps then test the forgiveness a silent fleet gets.
  for (const at of times(r.massDeath)) {
    const share = rng.chance(0.5) ? rng.between(0.3, 0.6) : rng.between(0.7, 1);
    const forever = rng.chance(0.35);
    // Near a threshold: a replica (the leader, half the time) cut off while those deaths are being
    // marked, for a little longer than its lease (what it sent last must not land after another
    // replica took over).
    if (rng.chance(r.leaderCutAtMarks)) {
      const from = Math.round(at + g - rng.between(3_000, 7_000));
      if (from < end) {
        out.push({
          at: from,
          fault: {
            kind: 'path',
            replica: rng.pick(o.replicas),
            state: 'hang',
            forMs: within(from, rng.between(14_000, 20_000)),
          },
        });
      }
    }
    for (const node of o.nodes) {
      if (!rng.chance(share)) continue;
      out.push({
        at: at + Math.round(rng.between(0, 2_000)),
        fault: {
          kind: 'kubelet-stop',
          node,
          forMs: forever ? 'forever' : within(at, rng.between(30_000, 6 * 60_000)),
          announce: false,
          cloudTaint: rng.chance(0.3) ? Math.round(rng.between(5_000, 60_000)) : undefined,
          fence: undefined,
          fenceStaysMs: undefined,
        },
      });
    }
  }
  for (const at of times(r.partition * n))
    out.push({
      at,
      fault: {
        kind: 'kubelet-partition',
        node: rng.pick(o.nodes),
        forMs: within(at, rng.between(2_000, 240_000)),
      },
    });
  for (const at of times(r.notReady * n))
    out.push({
      at,
      fault: {
        kind: 'kubelet-not-ready',
        node: rng.pick(o.nodes),
        forMs: within(at, rng.between(5_000, 180_000)),
      },
    });
  for (const at of times(r.clock * n))
    out.push({
      at,
      fault: {
        kind: 'kubelet-clock',
        node: rng.pick(o.nodes),
        skewMs: Math.round(rng.between(-600_000, 600_000)),
      },
    });
  for (const at of times(r.recreate * n))
    out.push({
      at,
      fault: {
        kind: 'node-recreate',
        node: rng.pick(o.nodes),
        afterMs: Math.round(rng.between(5_000, 120_000)),
      },
    });

  // Global outages, inside the model's bounds one by one and over any 2 x grace window.
  const outages: Span[] = [];
  // Near a threshold: two outages a moment apart, the first just long enough to be seen, the second
  // long enough to need forgiving, with one renewal or none between them (issue 47's defect 3).
  if (!MODEL.blindBand(g, 10_000)) {
    for (const at of times(r.outage / 4)) {
      const first = Math.round(g * rng.between(0.3, 0.4));
      const gap = Math.round(rng.between(200, 1_500));
      const second = Math.round(g * rng.between(0.76, 0.9));
      const spans = [
        { from: at, to: at + first },
        { from: at + first + gap, to: at + first + gap + second },
      ];
      if (spans[1]!.to > end || !spans.every((sp) => withinOutageBudget(outages, sp, g, spans))) continue;
      for (const sp of spans) {
        outages.push(sp);
        out.push({ at: sp.from, fault: { kind: 'storage-down', forMs: sp.to - sp.from, answer: 'error' } });
      }
    }
  }
  for (const at of times(r.outage)) {
    let forMs = within(
      at,
      rng.chance(0.6) ? rng.between(500, 15_000) : rng.between(15_000, MODEL.maxOutage(g)),
    );
    const band = MODEL.blindBand(g, 10_000);
    if (band && forMs > band[0] && forMs < band[1]) forMs = Math.round(rng.chance(0.5) ? band[0] : band[1]);
    if (forMs < 1 || at + forMs > end) continue;
    const span = { from: at, to: at + forMs };
    if (!withinOutageBudget(outages, span, g)) continue;
    outages.push(span);
    const k = rng.next();
    out.push({
      at,
      fault:
        k < 0.5
          ? { kind: 'storage-down', forMs, answer: rng.chance(0.5) ? 'wait' : 'error' }
          : k < 0.8
            ? { kind: 'server-down', forMs }
            : { kind: 'server-hung', forMs },
    });
  }
  for (const at of times(r.slow))
    out.push({
      at,
      fault: {
        kind: 'storage-slow',
        forMs: within(at, rng.between(10_000, 300_000)),
        slowMs: Math.round(rng.between(100, MODEL.maxSlowMs)),
      },
    });
  for (const at of times(r.throttle))
    out.push({
      at,
      fault: {
        kind: 'throttle',
        forMs: within(at, rng.between(5_000, 120_000)),
        share: rng.between(0.1, 0.8),
        retryAfterS: rng.int(1, 5),
      },
    });
  for (const at of times(r.serverRestart))
    out.push({ at, fault: { kind: 'server-restart', compact: rng.chance(0.5) } });

  for (const replica of o.replicas) {
    for (const at of times(r.path))
      out.push({
        at,
        fault: {
          kind: 'path',
          replica,
          state: rng.chance(0.5) ? 'refuse' : 'hang',
          // Near a threshold: a leader cut off around its lease's renew deadline and duration
          // (10 s, 15 s), when the writes it sent last must not land after another took over.
          forMs: within(at, rng.chance(0.4) ? rng.between(8_000, 25_000) : rng.between(1_000, 120_000)),
        },
      });
    for (const at of times(r.watchCut)) out.push({ at, fault: { kind: 'watch-cut', replica } });
    for (const at of times(r.watchStall))
      out.push({
        at,
        fault: {
          kind: 'watch-stall',
          replica,
          // '*': every watch of the replica at once (a load balancer dropping its long-lived
          // connections silently: new requests get through, the watches deliver nothing).
          coll: rng.pick(['nodes', 'leases/kube-node-lease', 'leases/kube-system', '*', '*']),
          forMs: within(at, rng.between(1_000, 80_000)),
        },
      });
    for (const at of times(r.watchLag))
      out.push({
        at,
        fault: {
          kind: 'watch-lag',
          replica,
          coll: rng.pick(['nodes', 'leases/kube-node-lease']),
          lagMs: Math.round(rng.between(100, MODEL.maxWatchLagMs)),
          forMs: within(at, rng.between(10_000, 180_000)),
        },
      });
    for (const at of times(r.crash)) out.push({ at, fault: { kind: 'replica-crash', replica } });
    for (const at of times(r.rollingRestart)) out.push({ at, fault: { kind: 'replica-restart', replica } });
  }
  seams(out, rng, o, times, within, end);
  return out.sort((a, b) => a.at - b.at);
}

/** The seams' chains (family seams; drawn last, so the other families' schedules do not move). */
function seams(
  out: Timed[],
  rng: Prng,
  o: { graceMs: number; nodes: string[]; rates: Rates; outOfServiceAfterMs?: number | undefined },
  times: (perHour: number) => number[],
  within: (at: number, ms: number) => number,
  end: number,
): void {
  const g = o.graceMs;
  const n = o.nodes.length;
  const r = o.rates;
  // Defect 2: the whole fleet dies behind a slow API server (no lease write at all meanwhile).
  for (const at of times(r.fleetDeathUnderSlow)) {
    const slowFrom = at - 15_000;
    const slowFor = 2 * g + 90_000;
    if (slowFrom + slowFor > end) continue;
    out.push({
      at: slowFrom,
      fault: {
        kind: 'storage-slow',
        forMs: slowFor,
        slowMs: Math.round(rng.between(1_200, MODEL.maxSlowMs)),
      },
    });
    const forever = rng.chance(0.2);
    for (const node of o.nodes)
      out.push({
        at: at + Math.round(rng.between(0, 2_000)),
        fault: {
          kind: 'kubelet-stop',
          node,
          forMs: forever ? 'forever' : within(at, rng.between(2 * g + 30_000, 6 * 60_000)),
          announce: false,
          cloudTaint: undefined,
          fence: undefined,
          fenceStaysMs: undefined,
        },
      });
  }
  const stop = (at: number, node: string, forMs: number, cloudTaint?: number): Timed => ({
    at,
    fault: {
      kind: 'kubelet-stop',
      node,
      forMs,
      announce: false,
      cloudTaint,
      fence: undefined,
      fenceStaysMs: 0,
    },
  });
  // Defect 7: the pod list at the mark fails.
  for (const at of times(r.trapPodsList * n)) {
    const node = rng.pick(o.nodes);
    if (at + 2 * g + 60_000 > end) continue;
    out.push(stop(at, node, within(at, rng.between(2 * g + 40_000, 5 * 60_000))));
    out.push({ at, fault: { kind: 'trap', node, request: 'pods-list', forMs: 2 * g + 30_000 } });
  }
  const after = o.outOfServiceAfterMs;
  if (after === undefined) return;
  // Defect 6: fenced before its mark; the lease re-read before its out-of-service taint fails.
  for (const at of times(r.trapOutOfServiceRead * n)) {
    const node = rng.pick(o.nodes);
    const armed = g + after + 90_000;
    if (at + armed + 120_000 > end) continue;
    out.push(
      stop(at, node, within(at, armed + rng.between(60_000, 180_000)), Math.round(rng.between(2_000, g / 2))),
    );
    out.push({ at, fault: { kind: 'trap', node, request: 'lease-get', forMs: armed } });
  }
  // Defect 4: its out-of-service write fails (the request goes back to the zone queue), the node is
  // back while it waits there, and down and fenced again a little later.
  for (const at of times(r.trapBackInQueue * n)) {
    const node = rng.pick(o.nodes);
    const armed = g + after + 60_000;
    if (at + armed + 6 * 60_000 > end) continue;
    out.push(stop(at, node, within(at, armed + 60_000), Math.round(rng.between(2_000, g / 2))));
    out.push({
      at,
      fault: {
        kind: 'trap',
        node,
        request: 'oos-patch',
        forMs: armed,
        holdMs: 4_000,
        // Back after the writer gave up (about 3.7 s) and before the zone's next token (10 s).
        afterwards: {
          reviveAfterMs: Math.round(rng.between(4_500, 9_000)),
          againAfterMs: Math.round(rng.between(30_000, 120_000)),
          cloudTaint: Math.round(rng.between(1_000, 5_000)),
        },
      },
    });
  }
}

/** Whether `span` keeps the outages within the model: the total in any 2 x grace window bounded. */
function withinOutageBudget(
  outages: readonly Span[],
  span: Span,
  graceMs: number,
  together: readonly Span[] = [],
): boolean {
  const all = [...outages, ...together.filter((t) => t !== span), span].sort((a, b) => a.from - b.from);
  const w = 2 * graceMs;
  // The total in a window is largest for a window starting at some outage's start.
  for (const s of all) {
    const wEnd = s.from + w;
    let total = 0;
    for (const x of all) total += Math.max(0, Math.min(x.to, wEnd) - Math.max(x.from, s.from));
    if (total > MODEL.maxOutageIn2Grace(graceMs)) return false;
  }
  // Nor may two outages overlap (one fault of each kind at a time). Where the grace leaves no room
  // (MODEL.blindBand), two short outages close together are one the controller cannot see either:
  // they keep a renew interval and a back-off (18 s) apart.
  const apart = MODEL.blindBand(graceMs, 10_000) ? 18_000 : 0;
  for (const x of outages) if (x.from < span.to + apart && span.from < x.to + apart) return false;
  return true;
}

export function describe(t: Timed): string {
  const f = t.fault as Record<string, unknown>;
  const rest = Object.entries(f)
    .filter(([k, v]) => k !== 'kind' && v !== undefined)
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(' ');
  return `${(t.at / 1000).toFixed(3)}s ${String(f.kind)} ${rest}`;
}
