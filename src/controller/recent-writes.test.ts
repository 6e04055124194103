import { describe, expect, it } from 'vitest';
import type { Node } from '../kube/types.js';
import { RecentWrites } from './recent-writes.js';

const node = (rv: string | undefined, ready = 'True'): Node => ({
  metadata: { name: 'n1', resourceVersion: rv },
  status: { conditions: [{ type: 'Ready', status: ready }] },
});

describe('RecentWrites', () => {
  it('stands in for an older cached copy until the cache shows that version or a newer one', () => {
    const w = new RecentWrites<Node>(60_000);
    const written = node('120', 'Unknown');
    w.remember('n1', written, 0);
    // The cache is behind our write: what we wrote wins.
    expect(w.current('n1', node('99'), 10)).toBe(written);
    // Compared as numbers, not strings ('99' > '120' as text).
    expect(w.current('n1', node('119'), 10)).toBe(written);
    // The cache caught up: it wins, and the entry is gone.
    const echo = node('120', 'Unknown');
    expect(w.current('n1', echo, 20)).toBe(echo);
    expect(w.size).toBe(0);
    expect(w.current('n1', node('99'), 30)?.metadata.resourceVersion).toBe('99');
  });

  it('a newer version in the cache (someone else wrote after us) wins at once', () => {
    const w = new RecentWrites<Node>(60_000);
    w.remember('n1', node('120', 'Unknown'), 0);
    const newer = node('121', 'True');
    expect(w.current('n1', newer, 5)).toBe(newer);
    expect(w.size).toBe(0);
  });

  it('keeps the newest of several writes; an older answer does not replace it', () => {
    const w = new RecentWrites<Node>(60_000);
    const second = node('130');
    w.remember('n1', node('120'), 0);
    w.remember('n1', second, 1);
    w.remember('n1', node('125'), 2);
    expect(w.current('n1', node('100'), 3)).toBe(second);
  });

  it('never stands in for an object the cache no longer has, nor past its ttl', () => {
    const w = new RecentWrites<Node>(1000);
    w.remember('n1', node('120'), 0);
    expect(w.current('n1', undefined, 10)).toBeUndefined();
    expect(w.size).toBe(0);
    w.remember('n1', node('120'), 0);
    const old = node('99');
    expect(w.current('n1', old, 1001)).toBe(old);
    expect(w.size).toBe(0);
  });

  it('a resourceVersion that is not a whole number never overrides the cache', () => {
    const w = new RecentWrites<Node>(60_000);
    w.remember('n1', node('abc'), 0);
    w.remember('n1', undefined, 0);
    expect(w.size).toBe(0);
    w.remember('n1', node('120'), 0);
    const odd = node('x7');
    expect(w.current('n1', odd, 1)).toBe(odd);
    w.remember('n1', node('120'), 0);
    w.forget('n1');
    expect(w.size).toBe(0);
  });
});
