import { describe, expect, it } from 'vitest';
import { type Delivery, judgeDeliveries } from '../support/watch-store.js';

const ev = (rv: number): Delivery => ({ rv: BigInt(rv), via: 'event' });
const list = (rv: number): Delivery => ({ rv: BigInt(rv), via: 'list' });
const writes = (rvs: number[]) => new Map([['a', rvs.map((r) => BigInt(r))]]);

describe('judgeDeliveries (the watch-outage e2e test judge)', () => {
  it('every write delivered as its own event', () => {
    expect(judgeDeliveries(writes([1, 3, 5]), new Map([['a', [list(1), ev(3), ev(5)]]]))).toEqual({
      problems: [],
      delivered: 3,
      folded: 0,
    });
  });

  it('writes a relist covers are folded, not lost', () => {
    // 3 and 5 were written while the watch was down; the relist returned 5; the watch went on.
    expect(judgeDeliveries(writes([1, 3, 5, 7]), new Map([['a', [list(1), list(5), ev(7)]]]))).toEqual({
      problems: [],
      delivered: 3,
      folded: 1,
    });
  });

  it('a relist may repeat the version last seen', () => {
    expect(judgeDeliveries(writes([1, 3]), new Map([['a', [list(1), ev(3), list(3)]]])).problems).toEqual([]);
  });

  it('a write the watch went past without a list is lost', () => {
    expect(judgeDeliveries(writes([1, 3, 5]), new Map([['a', [list(1), ev(5)]]])).problems).toEqual([
      'a: write 3 lost (next delivered: event 5)',
    ]);
  });

  it('a replayed or backward event is reported', () => {
    expect(judgeDeliveries(writes([1, 3]), new Map([['a', [list(1), ev(3), ev(3)]]])).problems).toEqual([
      'a: event 3 after event 3',
    ]);
    expect(judgeDeliveries(writes([1, 3]), new Map([['a', [list(3), ev(1)]]])).problems).toContain(
      'a: event 1 after list 3',
    );
  });

  it('a write newer than anything delivered, or of an object never delivered, is reported', () => {
    expect(judgeDeliveries(writes([1, 3]), new Map([['a', [list(1)]]])).problems).toEqual([
      'a: write 3 never delivered',
    ]);
    expect(judgeDeliveries(writes([1]), new Map()).problems).toEqual(['a: write 1 never delivered']);
  });
});
