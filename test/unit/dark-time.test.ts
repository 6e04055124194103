import { describe, expect, it } from 'vitest';
import { darkTime } from '../support/flaky-tcp-proxy.js';

/** Chunk times every `step` ms from `a` to `b` inclusive: a connection that streams over [a, b]. */
function streaming(a: number, b: number, step = 500): number[] {
  const out: number[] = [];
  for (let t = a; t <= b; t += step) out.push(t);
  return out;
}

describe('darkTime (the flapping e2e judges blindness from the proxy with it)', () => {
  it('one stream: the time no connection streamed; gaps above maxGap are dark', () => {
    expect(darkTime([streaming(0, 10_000)], 0, 10_000, 2000, 1)).toBe(0);
    // Up 0-3 s, a 4 s gap, up 7-10 s.
    expect(darkTime([[...streaming(0, 3000), ...streaming(7000, 10_000)]], 0, 10_000, 2000, 1)).toBe(4000);
    // The window clips: only 2 s of the gap lie inside [5 s, 10 s].
    expect(darkTime([[...streaming(0, 3000), ...streaming(7000, 10_000)]], 5000, 10_000, 2000, 1)).toBe(2000);
    expect(darkTime([], 0, 10_000, 2000, 1)).toBe(10_000);
  });

  it('two streams needed: dark while either is down, however the other streams', () => {
    const leases = [...streaming(0, 3000), ...streaming(7000, 20_000)]; // down 3-7 s
    const nodes = [...streaming(0, 12_000), ...streaming(16_000, 20_000)]; // down 12-16 s
    expect(darkTime([leases, nodes], 0, 20_000, 2000, 2)).toBe(8000);
    // One stream is enough to light the window in the old sense: only the overlap is dark.
    expect(darkTime([leases, nodes], 0, 20_000, 2000, 1)).toBe(0);
    // Overlapping outages count once.
    const nodesOverlap = [...streaming(0, 2000), ...streaming(5000, 20_000)]; // down 2-5 s
    expect(darkTime([leases, nodesOverlap], 0, 20_000, 2000, 2)).toBe(5000);
  });

  it('a request answered in two chunks lights only its own few ms; connections that only touch are never both up', () => {
    const watch = [...streaming(0, 4000), ...streaming(9000, 10_000)]; // down 4-9 s
    const answer = [6000, 6010];
    expect(darkTime([watch, answer], 0, 10_000, 2000, 1)).toBe(4990);
    // Two connections that merely touch at 5 s are never both up.
    expect(
      darkTime(
        [
          [5000, 6000, 7000],
          [0, 1000, 2000, 3000, 4000, 5000],
        ],
        0,
        7000,
        2000,
        2,
      ),
    ).toBe(7000);
  });
});
