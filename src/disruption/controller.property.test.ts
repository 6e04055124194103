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
            for (;;) {
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
