import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DeadlineHeap } from './deadlines.js';

describe('DeadlineHeap', () => {
  it('orders by due time and supports moves in both directions and removal', () => {
    const h = new DeadlineHeap();
    h.upsert('a', 30);
    h.upsert('b', 10);
    h.upsert('c', 20);
    expect(h.peek()).toEqual({ key: 'b', due: 10 });
    h.upsert('b', 40); // later
    expect(h.peek()).toEqual({ key: 'c', due: 20 });
    h.upsert('a', 5); // earlier
    expect(h.peek()).toEqual({ key: 'a', due: 5 });
    expect(h.remove('a')).toBe(true);
    expect(h.remove('a')).toBe(false);
    expect(h.size).toBe(2);
    expect(h.pop()).toEqual({ key: 'c', due: 20 });
    expect(h.pop()).toEqual({ key: 'b', due: 40 });
    expect(h.pop()).toBeUndefined();
    expect(h.peek()).toBeUndefined();
  });

  it('rebuild replaces content in one pass', () => {
    const h = new DeadlineHeap();
    h.upsert('old', 1);
    h.rebuild([
      ['x', 3],
      ['y', 1],
      ['z', 2],
      ['y', 0.5],
    ]);
    expect(h.has('old')).toBe(false);
    expect(h.size).toBe(3);
    expect([h.pop()?.key, h.pop()?.key, h.pop()?.key]).toEqual(['y', 'z', 'x']);
  });

  it('matches a brute-force map under random operations (property)', () => {
    const op = fc.oneof(
      fc.record({
        t: fc.constant('upsert' as const),
        k: fc.integer({ min: 0, max: 15 }),
        d: fc.integer({ min: 0, max: 100 }),
      }),
      fc.record({ t: fc.constant('remove' as const), k: fc.integer({ min: 0, max: 15 }) }),
      fc.record({ t: fc.constant('pop' as const) }),
      fc.record({
        t: fc.constant('rebuild' as const),
        es: fc.array(fc.tuple(fc.integer({ min: 0, max: 15 }), fc.integer({ min: 0, max: 100 })), {
          maxLength: 10,
        }),
      }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 200 }), (ops) => {
        const h = new DeadlineHeap();
        const oracle = new Map<string, number>();
        for (const o of ops) {
          if (o.t === 'upsert') {
            h.upsert(`k${o.k}`, o.d);
            oracle.set(`k${o.k}`, o.d);
          } else if (o.t === 'remove') {
            expect(h.remove(`k${o.k}`)).toBe(oracle.delete(`k${o.k}`));
          } else if (o.t === 'rebuild') {
            h.rebuild(o.es.map(([k, d]) => [`k${k}`, d] as const));
            oracle.clear();
            for (const [k, d] of o.es) oracle.set(`k${k}`, d);
          } else {
            const min = Math.min(...oracle.values());
            const got = h.pop();
            if (oracle.size === 0) expect(got).toBeUndefined();
            else {
              expect(got?.due).toBe(min);
              expect(oracle.get(got!.key)).toBe(min);
              oracle.delete(got!.key);
            }
          }
          expect(h.size).toBe(oracle.size);
          const top = h.peek();
          if (oracle.size > 0) expect(top?.due).toBe(Math.min(...oracle.values()));
          for (const [k, d] of oracle) expect(h.dueOf(k)).toBe(d);
        }
      }),
      { numRuns: 300 },
    );
  });
});
