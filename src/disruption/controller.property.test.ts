import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DisruptionController, type NodeObservation } from './controller.js';

const ZONES = ['r:\u0000:a', 'r:\u0000:b', 'r:\u0000:c'];
const PER_ZONE = 20;
const FAILING = 5; // at most 5 of 20 not ready: every zone stays Normal (primary rate)

type Op =
  | { kind: 'fail'; zone: number; node: number; dt: number }
  | { kind: 'recover'; zone: number; node: number; dt: number }
  | { kind: 'wait'; dt: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant('fail' as const),
    zone: fc.integer({ min: 0, max: 2 }),
    node: fc.integer({ min: 0, max: FAILING - 1 }),
    dt: fc.integer({ min: 0, max: 5_000 }),
  }),
  fc.record({
    kind: fc.constant('recover' as const),
    zone: fc.integer({ min: 0, max: 2 }),
    node: fc.integer({ min: 0, max: FAILING - 1 }),
    dt: fc.integer({ min: 0, max: 5_000 }),
  }),
  fc.record({ kind: fc.constant('wait' as const), dt: fc.integer({ min: 0, max: 60_000 }) }),
);

describe('DisruptionController invariants (property)', () => {
  it('never exceeds the zone rate or the cap, keeps FIFO per zone, and makes progress', () => {
    fc.assert(
      fc.property(
        fc.array(opArb, { maxLength: 80 }),
        fc.integer({ min: 1, max: 4 }),
        fc.integer({ min: 5_000, max: 60_000 }),
        (ops, capN, windowMs) => {
          const dc = new DisruptionController({ cap: { maxNodes: capN, windowMs } });
          const all: NodeObservation[] = [];
          ZONES.forEach((zone, z) => {
            for (let i = 0; i < PER_ZONE; i++)
              all.push({ name: `${z}-${i}`, zone, ready: 'True', excluded: false });
          });
          dc.update(all, 0);
          const admissions: Array<{ name: string; zone: string; at: number; seq: number }> = [];
          const notReady = new Set<string>();
          const requestOrder = new Map<string, number>(); // name -> seq of its current request
          let seq = 0;
          let now = 0;
          const runUntil = (t: number) => {
            for (let guard = 0; ; guard++) {
              expect(guard).toBeLessThan(10_000); // a wakeup that admits nothing, again and again
              for (const a of dc.admit(now).admitted) {
                // never a node that recovered
                expect(notReady.has(a.name)).toBe(true);
                admissions.push({ name: a.name, zone: a.zone, at: now, seq: requestOrder.get(a.name)! });
                dc.settle(a.name, 'applied', now);
              }
              const next = dc.nextWakeup(now);
              if (next === undefined || next > t) break;
              expect(next).toBeGreaterThanOrEqual(now);
              now = next;
            }
            now = t;
          };
          for (const op of ops) {
            runUntil(now + op.dt);
            if (op.kind === 'wait') continue;
            const name = `${op.zone}-${op.node}`;
            const zone = ZONES[op.zone]!;
            if (op.kind === 'fail') {
              dc.observe({ name, zone, ready: 'Unknown', excluded: false });
              notReady.add(name);
              if (dc.requestNoExecute(name, zone, now) === 'queued') requestOrder.set(name, ++seq);
            } else {
              dc.observe({ name, zone, ready: 'True', excluded: false });
              notReady.delete(name);
            }
            dc.evaluate(now);
          }
          // Progress: with every zone Normal, the queue drains eventually.
          runUntil(now + 10 ** 8);
          expect(dc.queued()).toEqual([]);

          // Zone rate: 0.1/s with burst 1 -> admissions in a zone at least 10 s apart; FIFO per zone.
          for (const zone of ZONES) {
            const inZone = admissions.filter((a) => a.zone === zone);
            for (let i = 1; i < inZone.length; i++) {
              expect(inZone[i]!.at - inZone[i - 1]!.at).toBeGreaterThanOrEqual(10_000);
              expect(inZone[i]!.seq).toBeGreaterThan(inZone[i - 1]!.seq);
            }
          }
          // Cap: never more than capN admissions in any window of windowMs.
          for (let i = 0; i < admissions.length; i++) {
            const inWindow = admissions.filter(
              (a) => a.at > admissions[i]!.at - windowMs && a.at <= admissions[i]!.at,
            ).length;
            expect(inWindow).toBeLessThanOrEqual(capN);
          }
        },
      ),
      { numRuns: 300 },
    );
  });
});

// ---- Zones driven through PartialDisruption, FullDisruption, master disruption and back ----------
//
// The expected zone states, rates and limiters come from an oracle written from the upstream
// reference (shared reference, section 3, and upstream's SwapLimiter), not from zones.ts: the test
// keeps its own table of nodes and counts them itself.

type OracleState = 'Normal' | 'PartialDisruption' | 'FullDisruption';

/**
 * Reference: FullDisruption when no counted node is ready (and one is not); PartialDisruption when
 * more than two are not ready and they are at least 55% of the zone (20 * notReady >= 11 * total,
 * exact in integers); Normal otherwise.
 */
function oracleState(ready: number, notReady: number): OracleState {
  if (ready === 0 && notReady > 0) return 'FullDisruption';
  if (notReady > 2 && 20 * notReady >= 11 * (ready + notReady)) return 'PartialDisruption';
  return 'Normal';
}

interface Rates {
  primary: number;
  secondary: number;
  /** Zones with MORE counted nodes than this are large. */
  threshold: number;
}

/** Reference: Normal -> primary; Partial -> secondary in a large zone, 0 in a small one; Full (while
 *  another zone is not fully disrupted) -> primary, as upstream's HealthyQPSFunc. */
function oracleRate(state: OracleState, size: number, r: Rates): number {
  if (state === 'PartialDisruption') return size > r.threshold ? r.secondary : 0;
  return r.primary;
}

/** A burst-1 limiter as upstream's: `next` is when its token is there (Infinity: a rate-0 limiter). */
interface Limiter {
  rate: number;
  next: number;
}

/** Upstream's SwapLimiter: same rate: unchanged; rate 0: never; else a new limiter, full when the
 *  old one had a token at `now`, otherwise with that token taken at `now`. */
function swapLimiter(old: Limiter, rate: number, now: number): Limiter {
  if (rate === old.rate) return old;
  if (!(rate > 0)) return { rate: 0, next: Number.POSITIVE_INFINITY };
  const hadToken = old.rate > 0 && now >= old.next;
  return { rate, next: hadToken ? Number.NEGATIVE_INFINITY : now + 1000 / rate };
}

type StepOp =
  /** The first `count` counted nodes of a zone not ready (with `status`), the rest ready. */
  | { kind: 'set'; zone: number; pick: number; k: number; status: 'False' | 'Unknown'; dt: number }
  /** One node (counted or excluded) flips between ready and not ready. */
  | { kind: 'flip'; zone: number; node: number; dt: number }
  /** Every counted node down (master disruption) or up (recovery). */
  | { kind: 'all'; down: boolean; dt: number }
  | { kind: 'wait'; dt: number };

const stepArb: fc.Arbitrary<StepOp> = fc.oneof(
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant('set' as const),
      zone: fc.nat(),
      pick: fc.integer({ min: 0, max: 9 }),
      k: fc.nat(),
      status: fc.constantFrom('False' as const, 'Unknown' as const),
      dt: fc.integer({ min: 0, max: 20_000 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('flip' as const),
      zone: fc.nat(),
      node: fc.nat(),
      dt: fc.integer({ min: 0, max: 20_000 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      kind: fc.constant('all' as const),
      down: fc.boolean(),
      dt: fc.integer({ min: 0, max: 20_000 }),
    }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant('wait' as const), dt: fc.integer({ min: 0, max: 400_000 }) }),
  },
);

const scenarioArb = fc.record({
  zones: fc.array(
    fc.record({ counted: fc.integer({ min: 1, max: 24 }), excluded: fc.integer({ min: 0, max: 2 }) }),
    { minLength: 1, maxLength: 4 },
  ),
  rates: fc.record({
    primary: fc.constantFrom(0.1, 0.5, 1),
    secondary: fc.constantFrom(0.01, 0.02, 0.05),
    threshold: fc.integer({ min: 2, max: 20 }),
  }),
  cap: fc.option(
    fc.record({
      maxNodes: fc.integer({ min: 0, max: 4 }),
      maxPercent: fc.integer({ min: 0, max: 40 }),
      windowMs: fc.integer({ min: 1_000, max: 120_000 }),
    }),
    { nil: undefined },
  ),
  /** Every n-th taint write fails (0: none). */
  failEvery: fc.constantFrom(0, 0, 2, 3, 5),
  steps: fc.array(stepArb, { maxLength: 60 }),
});

type Scenario = typeof scenarioArb extends fc.Arbitrary<infer T> ? T : never;

/** How often the runs reached each situation (checked after the property: the test is not vacuous). */
interface Reached {
  admittedIn: Record<OracleState, number>;
  heldSmallPartial: number;
  heldInMaster: number;
  masterEntered: number;
  masterExited: number;
  heldByCap: number;
}

/** Runs one scenario against the oracle; throws (expect) on the first violation. */
function runScenario(s: Scenario, reached: Reached): void {
  const zoneKeys = s.zones.map((_, i) => `r:\u0000:z${i}`);
  const dc = new DisruptionController({
    nodeEvictionRate: s.rates.primary,
    secondaryNodeEvictionRate: s.rates.secondary,
    largeClusterSizeThreshold: s.rates.threshold,
    ...(s.cap ? { cap: s.cap } : {}),
  });

  // The test's own world.
  interface TestNode {
    name: string;
    zone: string;
    excluded: boolean;
    ready: 'True' | 'False' | 'Unknown';
  }
  const counted: TestNode[][] = [];
  const all: TestNode[] = [];
  s.zones.forEach((z, zi) => {
    const list: TestNode[] = [];
    for (let i = 0; i < z.counted; i++)
      list.push({ name: `z${zi}-${i}`, zone: zoneKeys[zi]!, excluded: false, ready: 'True' });
    counted.push(list);
    all.push(...list);
    for (let j = 0; j < z.excluded; j++)
      all.push({ name: `z${zi}-x${j}`, zone: zoneKeys[zi]!, excluded: true, ready: 'True' });
  });
  const byName = new Map(all.map((n) => [n.name, n]));
  const capLimit = (() => {
    if (!s.cap) return undefined;
    const bounds: number[] = [];
    if (s.cap.maxNodes > 0) bounds.push(s.cap.maxNodes);
    if (s.cap.maxPercent > 0) bounds.push(Math.max(1, Math.floor((s.cap.maxPercent * all.length) / 100)));
    return bounds.length > 0 ? Math.min(...bounds) : undefined;
  })();
  const windowMs = s.cap?.windowMs ?? 0;

  const states = new Map<string, OracleState>(zoneKeys.map((z) => [z, 'Normal']));
  // A new zone's limiter is full at the primary rate (upstream addPodEvictorForNewZone).
  const limiters = new Map<string, Limiter>(
    zoneKeys.map((z) => [z, { rate: s.rates.primary, next: Number.NEGATIVE_INFINITY }]),
  );
  let master = false;
  const queues = new Map<string, Array<{ name: string; seq: number }>>(zoneKeys.map((z) => [z, []]));
  let seq = 0;
  const tainted = new Set<string>();
  /** Cap grants not given back (failed writes give theirs back). */
  const grants: Array<{ name: string; at: number }> = [];
  let writes = 0;
  let now = 0;

  const zoneCounts = (zi: number) => {
    const notReady = counted[zi]!.filter((n) => n.ready !== 'True').length;
    return { ready: counted[zi]!.length - notReady, notReady };
  };
  const capUsed = (t: number) => grants.filter((g) => g.at > t - windowMs).length;
  const capFull = (t: number) => capLimit !== undefined && capUsed(t) >= capLimit;
  /** The earliest time anything may be admitted, by the oracle (undefined: not until something changes). */
  const earliest = (t: number): number | undefined => {
    if (master) return undefined;
    let best = Number.POSITIVE_INFINITY;
    for (const z of zoneKeys) {
      const l = limiters.get(z)!;
      if (queues.get(z)!.length > 0 && l.rate > 0) best = Math.min(best, Math.max(t, l.next));
    }
    if (!Number.isFinite(best)) return undefined;
    if (capLimit !== undefined) {
      const inWindow = grants.filter((g) => g.at > t - windowMs).sort((a, b) => a.at - b.at);
      if (inWindow.length >= capLimit)
        best = Math.max(best, inWindow[inWindow.length - capLimit]!.at + windowMs);
    }
    return best;
  };
  const dropFromQueue = (n: TestNode) => {
    const q = queues.get(n.zone)!;
    const i = q.findIndex((e) => e.name === n.name);
    if (i >= 0) q.splice(i, 1);
  };

  const setReady = (n: TestNode, ready: TestNode['ready']) => {
    if (n.ready === ready) return;
    n.ready = ready;
    dc.observe({ name: n.name, zone: n.zone, ready, excluded: n.excluded });
    if (ready === 'True') {
      dropFromQueue(n); // a ready node leaves the queue
      tainted.delete(n.name); // and its NoExecute taint is removed (not rate limited)
    }
  };

  const evaluate = () => {
    const u = dc.evaluate(now);
    const next = new Map<string, OracleState>();
    s.zones.forEach((_, zi) => {
      const { ready, notReady } = zoneCounts(zi);
      next.set(zoneKeys[zi]!, oracleState(ready, notReady));
    });
    const allFull = [...next.values()].every((st) => st === 'FullDisruption');
    if (allFull && !master) {
      master = true;
      reached.masterEntered++;
      for (const z of zoneKeys) limiters.set(z, swapLimiter(limiters.get(z)!, 0, now));
      expect(u.decisions).toEqual([{ kind: 'RemoveAllNoExecuteTaints' }]);
      tainted.clear();
    } else if (!allFull && master) {
      master = false;
      reached.masterExited++;
      zoneKeys.forEach((z, zi) => {
        limiters.set(
          z,
          swapLimiter(limiters.get(z)!, oracleRate(next.get(z)!, s.zones[zi]!.counted, s.rates), now),
        );
      });
      expect(u.decisions).toEqual([{ kind: 'ResetAllProbeTimestamps', now }]);
    } else {
      expect(u.decisions).toEqual([]);
      zoneKeys.forEach((z, zi) => {
        const to = next.get(z)!;
        // the limiter is swapped when the state changes, never in master disruption
        if (!master && to !== states.get(z)) {
          limiters.set(z, swapLimiter(limiters.get(z)!, oracleRate(to, s.zones[zi]!.counted, s.rates), now));
        }
      });
    }
    for (const [z, st] of next) states.set(z, st);
    expect(u.masterDisruptionActive).toBe(master);
    for (const z of zoneKeys) {
      expect(dc.zoneState(z)).toBe(states.get(z));
      expect(dc.rateOf(z)).toBe(limiters.get(z)!.rate);
    }
  };

  /** The caller is level based: every node that lacks the NoExecute taint it needs asks for it. */
  const request = () => {
    for (const n of all) {
      if (n.ready === 'True' || tainted.has(n.name)) continue;
      const q = queues.get(n.zone)!;
      const queued = q.some((e) => e.name === n.name);
      expect(dc.requestNoExecute(n.name, n.zone, now)).toBe(queued ? 'already-queued' : 'queued');
      if (!queued) q.push({ name: n.name, seq: ++seq });
    }
    // the controller's queues are the test's, in the same order
    for (const z of zoneKeys) {
      expect(
        dc
          .queued()
          .filter((q) => q.zone === z)
          .map((q) => q.name),
      ).toEqual(queues.get(z)!.map((e) => e.name));
    }
    zoneKeys.forEach((z, zi) => {
      const st = states.get(z)!;
      if (
        !master &&
        st === 'PartialDisruption' &&
        s.zones[zi]!.counted <= s.rates.threshold &&
        queues.get(z)!.length > 0
      )
        reached.heldSmallPartial++;
    });
    if (master && zoneKeys.some((z) => queues.get(z)!.length > 0)) reached.heldInMaster++;
  };

  /** One admit() at `now`, each admission checked against the oracle. Whether it did anything. */
  const admitOnce = (): boolean => {
    const r = dc.admit(now);
    for (const a of r.admitted) {
      // master disruption: no new NoExecute taint at all
      expect(master).toBe(false);
      const n = byName.get(a.name)!;
      expect(n.ready).not.toBe('True');
      expect(a.zone).toBe(n.zone);
      // FIFO per zone; the oldest request first among the zones that have a token
      const q = queues.get(n.zone)!;
      expect(q[0]?.name).toBe(a.name);
      for (const z of zoneKeys) {
        const head = queues.get(z)![0];
        const l = limiters.get(z)!;
        if (head && l.rate > 0 && now >= l.next) expect(head.seq).toBeGreaterThanOrEqual(q[0]!.seq);
      }
      // never faster than the zone's rate (the rate of the state the zone is in)
      const l = limiters.get(n.zone)!;
      expect(l.rate).toBeGreaterThan(0);
      expect(now).toBeGreaterThanOrEqual(l.next);
      limiters.set(n.zone, { rate: l.rate, next: now + 1000 / l.rate });
      // the blast-radius cap
      if (capLimit !== undefined) expect(capUsed(now)).toBeLessThan(capLimit);
      grants.push({ name: a.name, at: now });
      q.shift();
      const st = states.get(n.zone)!;
      reached.admittedIn[st]++;
    }
    // work conserving: nothing the oracle allows at `now` is left waiting, unless the cap is full
    if (!master && !capFull(now)) {
      for (const z of zoneKeys) {
        const l = limiters.get(z)!;
        expect(queues.get(z)!.length > 0 && l.rate > 0 && now >= l.next).toBe(false);
      }
    }
    if (capFull(now) && zoneKeys.some((z) => queues.get(z)!.length > 0)) reached.heldByCap++;
    for (const a of r.admitted) {
      const fail = s.failEvery > 0 && ++writes % s.failEvery === 0;
      dc.settle(a.name, fail ? 'failed' : 'applied', now);
      if (fail) {
        // the cap slot is given back; the node waits at the back of its zone queue
        grants.splice(grants.map((g) => g.name).lastIndexOf(a.name), 1);
        queues.get(byName.get(a.name)!.zone)!.push({ name: a.name, seq: ++seq });
      } else {
        tainted.add(a.name);
      }
    }
    return r.admitted.length + r.events.length > 0;
  };

  /** The caller's one timer: admit() at every nextWakeup() up to `until`. */
  const runUntil = (until: number) => {
    for (let guard = 0; ; guard++) {
      expect(guard).toBeLessThan(10_000);
      const acted = admitOnce();
      const next = dc.nextWakeup(now);
      const due = earliest(now);
      // the timer is never armed later than the oracle's first possible admission
      if (due !== undefined) {
        expect(next).toBeDefined();
        expect(next!).toBeLessThanOrEqual(due);
      }
      if (next === undefined || next > until) break;
      expect(next).toBeGreaterThanOrEqual(now);
      // waking at `now` again is a busy loop unless the last admit() did something (a failed write
      // gives its cap slot back; a node newly held by the cap is reported)
      if (next === now) expect(acted).toBe(true);
      now = next;
    }
    now = Math.max(now, until);
  };

  dc.update(
    all.map((n) => ({ name: n.name, zone: n.zone, ready: n.ready, excluded: n.excluded })),
    0,
  );
  for (const z of zoneKeys) expect(dc.zoneState(z)).toBe('Normal');

  for (const step of s.steps) {
    runUntil(now + step.dt);
    if (step.kind === 'wait') continue;
    if (step.kind === 'set') {
      const zi = step.zone % s.zones.length;
      const list = counted[zi]!;
      const n = list.length;
      const atThreshold = Math.floor((11 * n + 19) / 20); // fewest not-ready nodes that are >= 55%
      const choices = [0, 1, 2, 3, atThreshold - 1, atThreshold, n - 1, n];
      const count = Math.min(
        n,
        Math.max(0, step.pick < choices.length ? choices[step.pick]! : step.k % (n + 1)),
      );
      list.forEach((node, i) => {
        setReady(node, i < count ? step.status : 'True');
      });
    } else if (step.kind === 'flip') {
      const zone = zoneKeys[step.zone % s.zones.length]!;
      const inZone = all.filter((x) => x.zone === zone);
      const node = inZone[step.node % inZone.length]!;
      setReady(node, node.ready === 'True' ? 'Unknown' : 'True');
    } else {
      for (const list of counted) for (const node of list) setReady(node, step.down ? 'Unknown' : 'True');
    }
    evaluate();
    request();
  }

  // Recovery: every node ready again -> every zone Normal at the primary rate.
  runUntil(now + 1_000);
  for (const n of all) setReady(n, 'True');
  evaluate();
  for (const z of zoneKeys) {
    expect(dc.zoneState(z)).toBe('Normal');
    expect(dc.rateOf(z)).toBe(s.rates.primary);
  }
  // ... and new failures (at most two per zone and never all of it: it stays Normal, and excluded
  // nodes) are all tainted in the end.
  const failing = [
    ...counted.flatMap((list) => list.slice(0, Math.min(2, list.length - 1))),
    ...all.filter((n) => n.excluded),
  ];
  for (const node of failing) setReady(node, 'Unknown');
  evaluate();
  for (const z of zoneKeys) expect(dc.zoneState(z)).toBe('Normal');
  request();
  runUntil(now + 10 ** 9);
  expect(dc.queued()).toEqual([]);
  for (const node of failing) expect(tainted.has(node.name)).toBe(true);
}

describe('DisruptionController through disruption and master disruption (property, oracle)', () => {
  it('holds the zone rates, the cap and the master-disruption stop, and recovers to Normal rates', () => {
    const reached: Reached = {
      admittedIn: { Normal: 0, PartialDisruption: 0, FullDisruption: 0 },
      heldSmallPartial: 0,
      heldInMaster: 0,
      masterEntered: 0,
      masterExited: 0,
      heldByCap: 0,
    };
    fc.assert(
      fc.property(scenarioArb, (s) => {
        runScenario(s, reached);
      }),
      { numRuns: 200 },
    );
    // Not vacuous: the runs went through every state and admitted taints in each.
    expect(reached.admittedIn.Normal).toBeGreaterThan(50);
    expect(reached.admittedIn.FullDisruption).toBeGreaterThan(10);
    expect(reached.admittedIn.PartialDisruption).toBeGreaterThan(10); // large zones: secondary rate
    expect(reached.heldSmallPartial).toBeGreaterThan(10);
    expect(reached.heldInMaster).toBeGreaterThan(10);
    expect(reached.masterEntered).toBeGreaterThan(10);
    expect(reached.masterExited).toBeGreaterThan(10);
    expect(reached.heldByCap).toBeGreaterThan(10);
  });
});
