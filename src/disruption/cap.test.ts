import { describe, expect, it } from 'vitest';
import { BlastRadiusCap, validateCapSettings } from './cap.js';

describe('BlastRadiusCap', () => {
  it('is off without bounds', () => {
    const c = new BlastRadiusCap({});
    expect(c.enabled).toBe(false);
    expect(c.limit(100)).toBeUndefined();
    expect(c.allows(0, 100)).toBe(true);
    expect(new BlastRadiusCap({ maxNodes: 0, maxPercent: 0, windowMs: 0 }).enabled).toBe(false);
  });

  it('takes the smaller of N and percent', () => {
    const c = new BlastRadiusCap({ maxNodes: 5, maxPercent: 10, windowMs: 1000 });
    expect(c.limit(30)).toBe(3);
    expect(c.limit(100)).toBe(5);
    expect(c.limit(1000)).toBe(5);
  });

  it('rounds the percent bound down but allows at least one', () => {
    const c = new BlastRadiusCap({ maxPercent: 10, windowMs: 1000 });
    expect(c.limit(39)).toBe(3);
    expect(c.limit(5)).toBe(1);
    expect(c.limit(0)).toBe(1);
  });

  it('frees slots as grants leave the sliding window', () => {
    const c = new BlastRadiusCap({ maxNodes: 2, windowMs: 60_000 });
    c.record('a', 0);
    c.record('b', 10_000);
    expect(c.allows(20_000, 10)).toBe(false);
    expect(c.nextFreeAt(20_000, 10)).toBe(60_000);
    expect(c.allows(59_999, 10)).toBe(false);
    expect(c.allows(60_000, 10)).toBe(true);
    expect(c.used(60_000)).toBe(1);
    c.record('c', 60_000);
    expect(c.nextFreeAt(60_000, 10)).toBe(70_000);
  });

  it('refunds a grant', () => {
    const c = new BlastRadiusCap({ maxNodes: 1, windowMs: 60_000 });
    c.record('a', 0);
    expect(c.allows(1, 10)).toBe(false);
    expect(c.refund('a')).toBe(true);
    expect(c.allows(1, 10)).toBe(true);
    expect(c.refund('a')).toBe(false);
  });

  it('is on with either bound alone', () => {
    expect(new BlastRadiusCap({ maxPercent: 10, windowMs: 1000 }).enabled).toBe(true);
    expect(new BlastRadiusCap({ maxNodes: 2, windowMs: 1000 }).enabled).toBe(true);
  });

  it('ignores a bound set to 0', () => {
    expect(new BlastRadiusCap({ maxNodes: 0, maxPercent: 10, windowMs: 1000 }).limit(30)).toBe(3);
    expect(new BlastRadiusCap({ maxNodes: 5, maxPercent: 0, windowMs: 1000 }).limit(30)).toBe(5);
  });

  it('counts only the grants inside the window, however many have left it', () => {
    const c = new BlastRadiusCap({ maxNodes: 1000, windowMs: 10 });
    for (let t = 0; t < 200; t++) {
      c.record(`n-${t}`, t);
      expect(c.used(t)).toBe(Math.min(t + 1, 10));
    }
    expect(c.used(205)).toBe(4);
    expect(c.used(1000)).toBe(0);
  });

  it('refunds the named grant, not the latest', () => {
    const c = new BlastRadiusCap({ maxNodes: 1, windowMs: 60_000 });
    c.record('a', 0);
    c.record('b', 10_000);
    expect(c.refund('a')).toBe(true);
    expect(c.used(10_000)).toBe(1);
    expect(c.nextFreeAt(10_000, 10)).toBe(70_000);
  });

  it('frees a slot only when enough grants left after the limit shrank', () => {
    const c = new BlastRadiusCap({ maxPercent: 50, windowMs: 100 });
    c.record('a', 0);
    c.record('b', 10);
    expect(c.limit(4)).toBe(2);
    expect(c.nextFreeAt(20, 4)).toBe(100);
    // the fleet shrank: the limit is 1, so both grants must leave
    expect(c.nextFreeAt(20, 2)).toBe(110);
  });

  it('a second taint of a node that holds a slot rides on it: no slot of its own, and a full cap lets it through', () => {
    const c = new BlastRadiusCap({ maxNodes: 2, windowMs: 60_000 });
    c.record('a', 0);
    expect(c.holds(0, 'a')).toBe(true);
    expect(c.holds(0, 'b')).toBe(false);
    c.record('out-of-service:a', 10_000, 'a');
    expect(c.used(10_000)).toBe(1);
    c.record('b', 20_000);
    expect(c.used(20_000)).toBe(2);
    expect(c.allows(20_000, 10)).toBe(false);
    expect(c.allows(20_000, 10, 'c')).toBe(false);
    expect(c.allows(20_000, 10, 'a')).toBe(true);
    expect(c.allows(20_000, 10, 'b')).toBe(true);
    // The rider frees nothing when it leaves; a's own grant frees its slot at 60 s.
    expect(c.nextFreeAt(20_000, 10)).toBe(60_000);
    expect(c.used(60_000)).toBe(1);
    expect(c.holds(60_000, 'a')).toBe(false);
    expect(c.allows(60_000, 10, 'c')).toBe(true);
    // A repeated taint of a node with no second-of is a grant of its own, as before.
    c.record('b', 61_000);
    expect(c.used(61_000)).toBe(2);
  });

  it('a second taint of a node that holds no slot takes one, and is refunded by its name', () => {
    const c = new BlastRadiusCap({ maxNodes: 1, windowMs: 60_000 });
    c.record('out-of-service:a', 0, 'a');
    expect(c.used(0)).toBe(1);
    expect(c.holds(0, 'a')).toBe(true);
    expect(c.allows(0, 10, 'b')).toBe(false);
    expect(c.nextFreeAt(0, 10)).toBe(60_000);
    expect(c.refund('out-of-service:a')).toBe(true);
    expect(c.used(0)).toBe(0);
    expect(c.holds(0, 'a')).toBe(false);
    // A rider refunded gives back nothing it did not take.
    c.record('a', 1_000);
    c.record('out-of-service:a', 2_000, 'a');
    expect(c.refund('out-of-service:a')).toBe(true);
    expect(c.used(2_000)).toBe(1);
    expect(c.holds(2_000, 'a')).toBe(true);
    // Two grants of one node that took slots: it holds one until both are gone.
    c.record('a', 3_000);
    expect(c.used(3_000)).toBe(2);
    expect(c.refund('a')).toBe(true);
    expect(c.holds(3_000, 'a')).toBe(true);
    expect(c.refund('a')).toBe(true);
    expect(c.holds(3_000, 'a')).toBe(false);
  });

  it("a node's slot is gone once its grant left the window, asked first thing then (holds, record)", () => {
    const c = new BlastRadiusCap({ maxNodes: 1, windowMs: 60_000 });
    c.record('a', 0);
    expect(c.holds(60_000, 'a')).toBe(false);
    const d = new BlastRadiusCap({ maxNodes: 1, windowMs: 60_000 });
    d.record('a', 0);
    // Its base gone, the second taint takes a slot of its own.
    d.record('out-of-service:a', 60_000, 'a');
    expect(d.used(60_000)).toBe(1);
    expect(d.nextFreeAt(60_000, 10)).toBe(120_000);
  });

  it('nextFreeAt skips the riders: only grants that took a slot free one', () => {
    const c = new BlastRadiusCap({ maxNodes: 2, windowMs: 100 });
    c.record('a', 0);
    c.record('out-of-service:a', 5, 'a');
    c.record('b', 10);
    c.record('c', 20);
    expect(c.used(20)).toBe(3);
    // Limit 2: two slots must free: a's at 100, b's at 110 (the rider at 5 is skipped).
    expect(c.nextFreeAt(20, 10)).toBe(110);
    expect(c.holds(20, 'a')).toBe(true);
    expect(new BlastRadiusCap({}).holds(0, 'a')).toBe(false);
  });

  describe('seed: the taints in place when a replica starts acting', () => {
    const g = (name: string, at: number, node = name) => ({ name, node, at, second: node !== name });

    it('counts each at its time: slots free as they leave the window, in time order', () => {
      const c = new BlastRadiusCap({ maxNodes: 3, windowMs: 300_000 });
      c.record('n6', 60_000);
      c.seed([g('n5', 90_000), g('n1', 20_000)], 100_000);
      expect(c.used(100_000)).toBe(3);
      expect(c.allows(100_000, 20)).toBe(false);
      expect(c.holds(100_000, 'n5')).toBe(true);
      expect(c.nextFreeAt(100_000, 20)).toBe(320_000);
      expect(c.used(320_000)).toBe(2);
      expect(c.nextFreeAt(320_000, 20)).toBe(320_000);
      expect(c.used(360_000)).toBe(1);
      expect(c.holds(360_000, 'n5')).toBe(true);
      expect(c.used(390_000)).toBe(0);
    });

    it('a grant of ours under the same name stands for its taint, at the later of the two times; ours whose taint is gone stay', () => {
      const c = new BlastRadiusCap({ maxNodes: 10, windowMs: 300_000 });
      c.record('n6', 60_000);
      c.record('n11', 70_000);
      c.record('gone', 75_000);
      // n6's timeAdded a second before our grant (truncated to the second), n11's written late.
      c.seed([g('n6', 59_000), g('n11', 72_000), g('n5', 90_000)], 100_000);
      expect(c.used(100_000)).toBe(4);
      expect(c.used(359_999)).toBe(4);
      expect(c.used(360_000)).toBe(3);
      expect(c.used(371_999)).toBe(3);
      expect(c.used(372_000)).toBe(2);
      expect(c.used(375_000)).toBe(1);
      expect(c.used(390_000)).toBe(0);
      // Refunded by name as before: the latest grant of that name.
      const d = new BlastRadiusCap({ maxNodes: 10, windowMs: 300_000 });
      d.record('n1', 0);
      d.seed([g('n1', 10_000)], 20_000);
      expect(d.refund('n1')).toBe(true);
      expect(d.used(20_000)).toBe(0);
    });

    it('the same taint seeded again (another edge) counts once', () => {
      const c = new BlastRadiusCap({ maxNodes: 10, windowMs: 300_000 });
      const list = [g('n1', 10_000), g('n2', 20_000)];
      c.seed(list, 30_000);
      c.seed(list, 40_000);
      c.seed([g('n1', 10_000), g('n1', 10_000)], 50_000);
      expect(c.used(50_000)).toBe(2);
      const d = new BlastRadiusCap({ maxNodes: 10, windowMs: 300_000 });
      d.seed([g('n1', 10_000), g('n1', 20_000)], 50_000);
      expect(d.used(50_000)).toBe(1);
      expect(d.used(319_999)).toBe(1);
      expect(d.used(320_000)).toBe(0);
    });

    it('a second taint does not ride on a rider: only a grant that took a slot holds one', () => {
      const c = new BlastRadiusCap({ maxNodes: 10, windowMs: 300_000 });
      c.record('n1', 0);
      c.record('oos:n1', 10_000, 'n1');
      expect(c.refund('n1')).toBe(true);
      expect(c.used(10_000)).toBe(0);
      c.seed([g('other:n1', 20_000, 'n1')], 30_000);
      expect(c.used(30_000)).toBe(1);
    });

    it("a second taint rides on its node's slot when the node's own grant is at or before it, and takes one otherwise", () => {
      // The limit is the fleet size given.
      const c = new BlastRadiusCap({ maxPercent: 100, windowMs: 300_000 });
      c.record('n1', 10_000);
      c.seed(
        [
          g('out-of-service:n1', 40_000, 'n1'), // n1 held a slot (our grant): rides
          g('n2', 20_000),
          g('out-of-service:n2', 20_000, 'n2'), // same time as n2's own: rides
          g('out-of-service:n3', 30_000, 'n3'), // before n3's own: a slot of its own
          g('n3', 35_000),
          g('out-of-service:n4', 30_000, 'n4'), // no taint of n4's own: a slot of its own
        ],
        50_000,
      );
      expect(c.used(50_000)).toBe(5);
      expect(c.holds(50_000, 'n4')).toBe(true);
      // The riders free nothing when they leave.
      expect(c.nextFreeAt(50_000, 100)).toBe(50_000);
      expect(c.nextFreeAt(50_000, 5)).toBe(310_000);
      expect(c.nextFreeAt(50_000, 1)).toBe(335_000);
      // Once n1's own grant is gone, a second taint of n1 takes a slot again.
      expect(c.allows(310_000, 4, 'n1')).toBe(false);
      expect(c.allows(309_999, 5, 'n1')).toBe(true);
    });

    it('a grant seeded outside the window leaves it at the next look; with the cap off nothing is kept', () => {
      const c = new BlastRadiusCap({ maxNodes: 10, windowMs: 60_000 });
      c.seed([g('n1', 0), g('n2', 30_000)], 60_000);
      expect(c.used(60_000)).toBe(1);
      expect(c.holds(60_000, 'n1')).toBe(false);
      const off = new BlastRadiusCap({});
      off.seed([g('n1', 0)], 0);
      expect(off.used(0)).toBe(0);
      expect(off.holds(0, 'n1')).toBe(false);
    });

    it('a grant of ours that left the window holds no slot a second taint could ride on', () => {
      const c = new BlastRadiusCap({ maxNodes: 10, windowMs: 60_000 });
      c.record('n1', 0);
      c.record('n2', 30_000);
      c.seed([g('out-of-service:n1', 50_000, 'n1')], 70_000);
      expect(c.used(70_000)).toBe(2);
      expect(c.holds(70_000, 'n1')).toBe(true);
    });

    it("our grants that left the window are not a taint's stand-in: the taint is counted", () => {
      const c = new BlastRadiusCap({ maxNodes: 1, windowMs: 60_000 });
      c.record('n1', 0);
      c.seed([g('n1', 50_000)], 70_000);
      expect(c.used(70_000)).toBe(1);
      expect(c.nextFreeAt(70_000, 1)).toBe(110_000);
    });
  });

  it('validates settings naming the field', () => {
    expect(validateCapSettings({ maxNodes: -1 })[0]).toMatch(/^cap\.maxNodes: -1/);
    expect(validateCapSettings({ maxPercent: 150, windowMs: 1 })[0]).toMatch(/^cap\.maxPercent: 150/);
    expect(validateCapSettings({ maxNodes: 3 })[0]).toMatch(/^cap\.windowMs: undefined: must be > 0/);
    expect(validateCapSettings({ maxNodes: 3, windowMs: 1000 })).toEqual([]);
    expect(() => new BlastRadiusCap({ maxNodes: 1.5, windowMs: 1 })).toThrow(RangeError);
  });

  it.each([
    [{ maxPercent: -1, windowMs: 1 }, 'cap.maxPercent: -1: must be a number in [0, 100] (0 disables)'],
    [
      { maxPercent: Number.NaN, windowMs: 1 },
      'cap.maxPercent: NaN: must be a number in [0, 100] (0 disables)',
    ],
    [{ maxPercent: 10 }, 'cap.windowMs: undefined: must be > 0 when maxNodes or maxPercent is set'],
    [{ maxNodes: 1, windowMs: 0 }, 'cap.windowMs: 0: must be > 0 when maxNodes or maxPercent is set'],
    [{ maxNodes: 1, windowMs: -5 }, 'cap.windowMs: -5: must be > 0 when maxNodes or maxPercent is set'],
    [
      { maxNodes: 1, windowMs: Number.POSITIVE_INFINITY },
      'cap.windowMs: Infinity: must be > 0 when maxNodes or maxPercent is set',
    ],
  ])('rejects %o', (settings, message) => {
    expect(validateCapSettings(settings)).toEqual([message]);
  });

  it('accepts 100 percent and names every problem', () => {
    expect(validateCapSettings({ maxPercent: 100, windowMs: 1 })).toEqual([]);
    expect(() => new BlastRadiusCap({ maxNodes: -1, maxPercent: 101, windowMs: 1 })).toThrow(
      'cap.maxNodes: -1: must be an integer >= 0 (0 disables); cap.maxPercent: 101: must be a number in [0, 100] (0 disables)',
    );
  });
});
