import { describe, expect, it } from 'vitest';
import {
  DEFAULT_SECOND_OPINION,
  SecondOpinion,
  type SecondOpinionSettings,
  type SilentNode,
} from './verdict.js';

const S: SecondOpinionSettings = {
  confirmAfterMs: 20_000,
  retryMs: 3_000,
  intervalMs: 10_000,
  timeoutMs: 2_000,
  holdMs: 60_000,
};
const GRACE = 50_000;

function silent(name: string, since = 0, silence = since): SilentNode {
  return { name, silence, silentSince: since, graceEnds: since + GRACE };
}

/** Probes `node` at `at` with `outcome`, as the wiring does: plan, started, finished. */
function probe(o: SecondOpinion, node: SilentNode, at: number, outcome: 'answers' | 'refused' | 'timeout') {
  o.started(node, at);
  return o.finished(node, at, outcome, outcome);
}

describe('SecondOpinion', () => {
  it('the defaults confirm well inside upstream’s 50 s grace', () => {
    const d = DEFAULT_SECOND_OPINION;
    expect(d.confirmAfterMs + d.retryMs + d.timeoutMs).toBeLessThan(GRACE);
    expect(d.confirmAfterMs).toBeGreaterThanOrEqual(2 * 10_000);
  });

  it('probes a node first when it has been silent confirmAfter', () => {
    const o = new SecondOpinion(S);
    const n = silent('a', 1_000);
    expect(o.plan([n], 20_999, 8)).toEqual([]);
    expect(o.plan([n], 21_000, 8)).toEqual([n]);
    expect(o.nextProbe(n)).toBe(21_000);
  });

  it('confirms down after two failures retryMs apart, not after one', () => {
    const o = new SecondOpinion(S);
    const n = silent('a');
    expect(probe(o, n, 20_000, 'refused')).toBeUndefined();
    expect(o.opinion(n)).toEqual({ kind: 'none' });
    expect(o.nextProbe(n)).toBe(23_000);
    const down = probe(o, n, 23_000, 'timeout');
    expect(down).toEqual({ kind: 'down', at: 23_000, outcome: 'timeout', detail: 'timeout' });
    expect(o.opinion(n)).toMatchObject({ kind: 'down', at: 23_000 });
    // Confirmed: no more probes of this silence.
    expect(o.nextProbe(n)).toBeUndefined();
    expect(o.plan([n], 100_000, 8)).toEqual([]);
  });

  it('two failures closer than retryMs do not confirm', () => {
    const o = new SecondOpinion(S);
    const n = silent('a');
    probe(o, n, 20_000, 'refused');
    expect(probe(o, n, 22_999, 'refused')).toBeUndefined();
    // The next one, far enough from the one before it, does.
    expect(probe(o, n, 26_000, 'refused')).toMatchObject({ kind: 'down', at: 26_000 });
  });

  it('an answer between two failures breaks the chain', () => {
    const o = new SecondOpinion(S);
    const n = silent('a');
    probe(o, n, 20_000, 'refused');
    probe(o, n, 23_000, 'answers');
    expect(probe(o, n, 33_000, 'refused')).toBeUndefined();
    expect(probe(o, n, 36_000, 'refused')).toMatchObject({ kind: 'down' });
  });

  it('a renewal starts over: results of the old silence are dropped, one on the wire too', () => {
    const o = new SecondOpinion(S);
    const old = silent('a');
    probe(o, old, 20_000, 'refused');
    o.started(old, 23_000);
    const renewed = silent('a', 21_000);
    // The renewed node is not due until ITS silence is confirmAfter long.
    expect(o.plan([renewed], 23_500, 8)).toEqual([]);
    expect(o.finished(old, 23_000, 'refused', 'x')).toBeUndefined();
    expect(o.opinion(renewed)).toEqual({ kind: 'none' });
    expect(o.plan([renewed], 41_000, 8)).toEqual([renewed]);
    expect(probe(o, renewed, 41_000, 'refused')).toBeUndefined();
  });

  it('the same silence moved later (an outage forgiven, a blind spell) keeps what was probed', () => {
    const o = new SecondOpinion(S);
    probe(o, silent('a', 0, 7), 48_000, 'answers');
    const moved = silent('a', 5_000, 7);
    expect(o.plan([moved], 50_000, 8)).toEqual([]);
    expect(o.opinion(moved)).toEqual({ kind: 'answers', at: 48_000, holdUntil: 115_000 });
    expect(o.holdFor(moved, 56_000)).toBe(59_000);
    probe(o, moved, 58_000, 'refused');
    expect(probe(o, moved, 61_000, 'refused')).toMatchObject({ kind: 'down' });
  });

  it('a new silence starts over whichever call sees it first (started, nextProbe), not only plan', () => {
    const o = new SecondOpinion(S);
    const old = silent('a');
    probe(o, old, 20_000, 'refused');
    expect(probe(o, old, 23_000, 'refused')).toMatchObject({ kind: 'down' });
    const renewed = silent('a', 30_000);
    // Confirmed down was the old silence's: the new one is probed from its own confirm-after.
    expect(o.nextProbe(renewed)).toBe(50_000);
    // One failure of the new silence does not confirm it (the old ones do not count).
    expect(probe(o, renewed, 50_000, 'refused')).toBeUndefined();
    expect(o.opinion(renewed)).toEqual({ kind: 'none' });
  });

  it('confirmed down: later results of the same silence change nothing', () => {
    const o = new SecondOpinion(S);
    const n = silent('a');
    probe(o, n, 20_000, 'refused');
    probe(o, n, 23_000, 'refused');
    expect(probe(o, n, 33_000, 'refused')).toBeUndefined();
    expect(probe(o, n, 36_000, 'answers')).toBeUndefined();
    expect(o.opinion(n)).toMatchObject({ kind: 'down', at: 23_000 });
  });

  it('a result for a probe that is not the one on the wire is dropped', () => {
    const o = new SecondOpinion(S);
    const n = silent('a');
    probe(o, n, 20_000, 'refused');
    o.started(n, 23_000);
    expect(o.finished(n, 22_000, 'refused', 'stale')).toBeUndefined();
    expect(o.nextProbe(n)).toBeUndefined();
    expect(o.finished(n, 23_000, 'refused', 'x')).toMatchObject({ kind: 'down' });
  });

  it('one probe at a time per node, the next after an answer intervalMs later', () => {
    const o = new SecondOpinion(S);
    const n = silent('a');
    o.started(n, 20_000);
    expect(o.plan([n], 25_000, 8)).toEqual([]);
    o.finished(n, 20_000, 'answers', 'ok');
    expect(o.nextProbe(n)).toBe(30_000);
  });

  it('a node that stopped being silent (or went) is forgotten by the next plan', () => {
    const o = new SecondOpinion(S);
    probe(o, silent('a'), 20_000, 'refused');
    probe(o, silent('b'), 20_000, 'refused');
    expect(o.size).toBe(2);
    o.plan([silent('b')], 21_000, 8);
    expect(o.size).toBe(1);
    o.forget('b');
    expect(o.size).toBe(0);
  });

  it('plan takes the earliest due first, at most capacity', () => {
    const o = new SecondOpinion(S);
    const a = silent('a', 2_000);
    const b = silent('b', 0);
    const c = silent('c', 1_000);
    expect(o.plan([a, b, c], 30_000, 2).map((n) => n.name)).toEqual(['b', 'c']);
    expect(o.plan([a, b, c], 30_000, 0)).toEqual([]);
    // Same due time: by name, so the order does not depend on the input's.
    expect(o.plan([silent('y'), silent('x')], 30_000, 1).map((n) => n.name)).toEqual(['x']);
    expect(o.plan([silent('z'), silent('x'), silent('y')], 30_000, 3).map((n) => n.name)).toEqual([
      'x',
      'y',
      'z',
    ]);
  });

  describe('the hold (NoExecute for a kubelet that still answers)', () => {
    it('is on past the grace from the newest answer, however old (probes held back are no news), until the hold ends', () => {
      const o = new SecondOpinion(S);
      const n = silent('a');
      probe(o, n, 48_000, 'answers');
      // Not before the grace: nothing to hold.
      expect(o.holdFor(n, 49_000)).toBeUndefined();
      expect(o.opinion(n)).toEqual({ kind: 'answers', at: 48_000, holdUntil: 110_000 });
      expect(o.holdFor(n, 50_000)).toBe(60_000);
      expect(o.holdFor(n, 100_000)).toBe(10_000);
      expect(o.opinion(n)).toEqual({ kind: 'answers', at: 48_000, holdUntil: 110_000 });
      expect(o.holdFor(n, 110_000)).toBeUndefined();
    });

    it('ends at graceEnds + holdMs however fresh the answer; probing goes on (the out-of-service veto)', () => {
      const o = new SecondOpinion(S);
      const n = silent('a');
      probe(o, n, 105_000, 'answers');
      expect(o.holdFor(n, 109_999)).toBe(1);
      expect(o.holdFor(n, 110_000)).toBeUndefined();
      expect(o.nextProbe(n)).toBe(115_000);
    });

    it('one failure does not end it; the second in a row does (down)', () => {
      const o = new SecondOpinion(S);
      const n = silent('a');
      probe(o, n, 50_000, 'answers');
      probe(o, n, 60_000, 'refused');
      expect(o.holdFor(n, 60_500)).toBeGreaterThan(0);
      expect(o.nextProbe(n)).toBe(63_000);
      expect(probe(o, n, 63_000, 'refused')).toMatchObject({ kind: 'down' });
      expect(o.holdFor(n, 63_500)).toBeUndefined();
    });

    it('with holdMs 0 nothing is held', () => {
      const o = new SecondOpinion({ ...S, holdMs: 0 });
      const n = silent('a');
      probe(o, n, 49_000, 'answers');
      expect(o.holdFor(n, 50_001)).toBeUndefined();
    });
  });
});
