import { describe, expect, it } from 'vitest';
import { planSeed, type TaintInPlace } from './seed.js';

const NOW = 1_000_000; // our monotonic clock
const WALL = 1_700_000_000_000; // our wall clock at NOW
const WINDOW = 300_000;

function taint(name: string, agoMs: number, o: Partial<TaintInPlace> = {}): TaintInPlace {
  return { name, node: name, zone: 'a', addedAt: WALL - agoMs, second: false, ...o };
}

describe('planSeed: the NoExecute taints in place, dated on our clock', () => {
  it('a taint added 40 s ago on the wall clock is a grant 40 s ago on ours', () => {
    const s = planSeed([taint('n1', 40_000)], NOW, WALL, WINDOW);
    expect(s.grants).toEqual([{ name: 'n1', node: 'n1', at: NOW - 40_000, second: false }]);
    expect(s.zones).toEqual(new Map([['a', NOW - 40_000]]));
  });

  it('a timeAdded ahead of our wall clock counts as now', () => {
    const s = planSeed([taint('n1', -5_000)], NOW, WALL, WINDOW);
    expect(s.grants).toEqual([{ name: 'n1', node: 'n1', at: NOW, second: false }]);
    expect(s.zones.get('a')).toBe(NOW);
  });

  it('only taints added within the window are grants; the window ends exactly WINDOW ago', () => {
    const s = planSeed(
      [taint('old', WINDOW), taint('edge', WINDOW - 1), taint('older', WINDOW + 60_000)],
      NOW,
      WALL,
      WINDOW,
    );
    expect(s.grants.map((g) => g.name)).toEqual(['edge']);
    expect(s.grants[0]!.at).toBe(NOW - WINDOW + 1);
  });

  it('with the cap off (window 0) no grant, the zones still dated', () => {
    const s = planSeed([taint('n1', 0), taint('n2', 1_000, { zone: 'b' })], NOW, WALL, 0);
    expect(s.grants).toEqual([]);
    expect(s.zones).toEqual(
      new Map([
        ['a', NOW],
        ['b', NOW - 1_000],
      ]),
    );
  });

  it("each zone gets its latest taint's time, however old, whatever the order of the list", () => {
    const list = [
      taint('n1', 500_000),
      taint('n2', 20_000),
      taint('n3', 90_000),
      taint('m1', 700_000, { zone: 'b' }),
      taint('m2', 800_000, { zone: 'b' }),
    ];
    for (const l of [list, [...list].reverse()]) {
      const s = planSeed(l, NOW, WALL, WINDOW);
      expect(s.zones).toEqual(
        new Map([
          ['a', NOW - 20_000],
          ['b', NOW - 700_000],
        ]),
      );
    }
  });

  it("a second taint keeps its flag and its node's name; the list keeps the order given", () => {
    const s = planSeed(
      [taint('out-of-service:n1', 10_000, { node: 'n1', second: true }), taint('n1', 10_000)],
      NOW,
      WALL,
      WINDOW,
    );
    expect(s.grants).toEqual([
      { name: 'out-of-service:n1', node: 'n1', at: NOW - 10_000, second: true },
      { name: 'n1', node: 'n1', at: NOW - 10_000, second: false },
    ]);
  });

  it('a taint whose time is not a number is skipped', () => {
    const s = planSeed(
      [taint('n1', 0, { addedAt: Number.NaN }), taint('n2', 0, { addedAt: Number.POSITIVE_INFINITY })],
      NOW,
      WALL,
      WINDOW,
    );
    expect(s.grants).toEqual([]);
    expect(s.zones.size).toBe(0);
  });
});
