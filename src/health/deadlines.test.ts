import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DeadlineHeap, type Scheduled } from './deadlines.js';

interface Item extends Scheduled {
  key: string;
}
const item = (key: string): Item => ({ key, due: 0, heapAt: -1 });

describe('DeadlineHeap', () => {
  it('orders by due time and supports moves in both directions and removal', () => {
    const h = new DeadlineHeap<Item>();
    const [a, b, c] = [item('a'), item('b'), item('c')];
    h.schedule(a, 30);
    h.schedule(b, 10);
    h.schedule(c, 20);
    expect(h.peek()).toBe(b);
    expect(h.peekDue()).toBe(10);
    h.schedule(b, 40); // later
    expect(h.peek()).toBe(c);
    h.schedule(a, 5); // earlier
    expect(h.peek()).toBe(a);
    expect(h.remove(a)).toBe(true);
    expect(a.heapAt).toBe(-1);
    expect(h.remove(a)).toBe(false);
    expect(h.has(a)).toBe(false);
    expect(h.size).toBe(2);
    expect(h.pop()).toBe(c);
    expect(h.pop()).toBe(b);
    expect([b.due, b.heapAt]).toEqual([40, -1]);
    expect(h.pop()).toBeUndefined();
    expect(h.peek()).toBeUndefined();
    expect(h.peekDue()).toBeUndefined();
  });

  it('rebuild replaces content in one pass, at each item due time, an item listed twice once', () => {
    const h = new DeadlineHeap<Item>();
    const old = item('old');
    h.schedule(old, 1);
    const [x, y, z] = [item('x'), item('y'), item('z')];
    x.due = 3;
    y.due = 0.5;
    z.due = 2;
    h.rebuild([x, y, z, y]);
    expect(h.has(old)).toBe(false);
    expect(old.heapAt).toBe(-1);
    expect(h.size).toBe(3);
    expect([h.pop(), h.pop(), h.pop()]).toEqual([y, z, x]);
    expect(h.size).toBe(0);
  });

  it('matches a brute-force map under random operations (property)', () => {
    const op = fc.oneof(
      fc.record({
        t: fc.constant('schedule' as const),
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
        const h = new DeadlineHeap<Item>();
        const items = Array.from({ length: 16 }, (_, k) => item(`k${k}`));
        const oracle = new Map<Item, number>();
        for (const o of ops) {
          if (o.t === 'schedule') {
            h.schedule(items[o.k]!, o.d);
            oracle.set(items[o.k]!, o.d);
          } else if (o.t === 'remove') {
            expect(h.remove(items[o.k]!)).toBe(oracle.delete(items[o.k]!));
          } else if (o.t === 'rebuild') {
            oracle.clear();
            // The caller sets due before rebuild; the last value given for an item wins.
            for (const [k, d] of o.es) {
              items[k]!.due = d;
              oracle.set(items[k]!, d);
            }
            h.rebuild(o.es.map(([k]) => items[k]!));
          } else {
            const min = Math.min(...oracle.values());
            const got = h.pop();
            if (oracle.size === 0) expect(got).toBeUndefined();
            else {
              expect(got?.due).toBe(min);
              expect(oracle.get(got!)).toBe(min);
              oracle.delete(got!);
            }
          }
          expect(h.size).toBe(oracle.size);
          const top = h.peek();
          if (oracle.size > 0) expect(top?.due).toBe(Math.min(...oracle.values()));
          for (const it of items) {
            expect(h.has(it)).toBe(oracle.has(it));
            if (oracle.has(it)) expect(it.due).toBe(oracle.get(it));
            else expect(it.heapAt).toBe(-1);
          }
        }
      }),
      { numRuns: 300 },
    );
  });
});
