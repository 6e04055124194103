import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { memoryLogger } from '../log/logger.js';
import {
  DEFAULT_DISRUPTION_OPTIONS,
  DisruptionController,
  type NodeObservation,
  type ReadyStatus,
  validateDisruptionOptions,
} from './controller.js';
import { createDisruptionMetrics } from './metrics.js';

const A = 'r1:\u0000:a';
const B = 'r1:\u0000:b';
const C = 'r1:\u0000:c';

function nodes(zone: string, count: number, ready: ReadyStatus, prefix = zone.slice(-1)): NodeObservation[] {
  return Array.from({ length: count }, (_, i) => ({ name: `${prefix}-${i}`, zone, ready, excluded: false }));
}

function setReady(dc: DisruptionController, list: NodeObservation[], ready: ReadyStatus): void {
  for (const n of list) dc.observe({ ...n, ready });
}

/** Runs the caller's timer loop in virtual time: admit at every wakeup until `until`. */
function drain(dc: DisruptionController, from: number, until: number): Array<{ name: string; at: number }> {
  const out: Array<{ name: string; at: number }> = [];
  let now = from;
  for (let guard = 0; guard < 100_000; guard++) {
    for (const a of dc.admit(now).admitted) {
      out.push({ name: a.name, at: now });
      dc.settle(a.name, 'applied', now);
    }
    const next = dc.nextWakeup(now);
    if (next === undefined || next > until) return out;
    expect(next).toBeGreaterThanOrEqual(now);
    now = next;
  }
  throw new Error('drain did not converge');
}

describe('zone states', () => {
  it('Initial -> Normal on the first evaluation', () => {
    const dc = new DisruptionController();
    for (const n of nodes(A, 3, 'True')) dc.observe(n);
    expect(dc.zoneState(A)).toBe('Initial');
    const u = dc.evaluate(0);
    expect(u.transitions).toEqual([
      { zone: A, from: 'Initial', to: 'Normal', size: 3, notReady: 0, rate: 0.1 },
    ]);
    expect(u.zones).toEqual([
      { zone: A, state: 'Normal', size: 3, notReady: 0, excluded: 0, rate: 0.1, queued: 0 },
    ]);
    // no change, no transition
    expect(dc.evaluate(1).transitions).toEqual([]);
  });

  it('Normal -> PartialDisruption -> FullDisruption -> Normal', () => {
    const dc = new DisruptionController();
    const a = nodes(A, 10, 'True');
    dc.update([...a, ...nodes(B, 10, 'True')], 0);

    setReady(dc, a.slice(0, 5), 'Unknown'); // 5/10 = 0.5 < 0.55
    expect(dc.evaluate(1).transitions).toEqual([]);
    setReady(dc, a.slice(5, 6), 'False'); // 6/10 >= 0.55
    let u = dc.evaluate(2);
    expect(u.transitions).toEqual([
      { zone: A, from: 'Normal', to: 'PartialDisruption', size: 10, notReady: 6, rate: 0 },
    ]);
    expect(dc.rateOf(A)).toBe(0);

    setReady(dc, a, 'Unknown');
    u = dc.evaluate(3);
    expect(u.transitions).toEqual([
      { zone: A, from: 'PartialDisruption', to: 'FullDisruption', size: 10, notReady: 10, rate: 0.1 },
    ]);
    expect(u.masterDisruptionActive).toBe(false);

    setReady(dc, a, 'True');
    u = dc.evaluate(4);
    expect(u.transitions).toEqual([
      { zone: A, from: 'FullDisruption', to: 'Normal', size: 10, notReady: 0, rate: 0.1 },
    ]);
  });

  it('needs more than two not-ready nodes for PartialDisruption', () => {
    const dc = new DisruptionController();
    const a = nodes(A, 3, 'True');
    dc.update([...a, ...nodes(B, 3, 'True')], 0);
    setReady(dc, a.slice(0, 2), 'Unknown'); // 2/3 >= 0.55 but only 2
    dc.evaluate(1);
    expect(dc.zoneState(A)).toBe('Normal');
  });

  it('leaves exclude-disruption nodes out of the statistics', () => {
    const dc = new DisruptionController();
    const counted = nodes(A, 3, 'True');
    const excluded = nodes(A, 5, 'Unknown', 'x').map((n) => ({ ...n, excluded: true }));
    const u = dc.update([...counted, ...excluded], 0);
    expect(u.zones).toEqual([
      { zone: A, state: 'Normal', size: 3, notReady: 0, excluded: 5, rate: 0.1, queued: 0 },
    ]);
    // all counted nodes down: FullDisruption even though excluded nodes exist (and master disruption
    // because it is the only zone)
    setReady(dc, counted, 'Unknown');
    expect(dc.evaluate(1).zones[0]?.state).toBe('FullDisruption');
  });

  it('a zone of only excluded nodes has no state but its nodes are still tainted, rate limited', () => {
    const dc = new DisruptionController();
    const ex = nodes(C, 3, 'Unknown', 'x').map((n) => ({ ...n, excluded: true }));
    const u = dc.update([...nodes(A, 3, 'True'), ...ex], 0);
    expect(u.zones.map((z) => z.zone)).toEqual([A]);
    for (const n of ex) dc.requestNoExecute(n.name, n.zone, 0);
    expect(drain(dc, 0, 100_000)).toEqual([
      { name: 'x-0', at: 0 },
      { name: 'x-1', at: 10_000 },
      { name: 'x-2', at: 20_000 },
    ]);
  });

  it('excluded nodes wait in their zone queue (held when the zone rate is 0)', () => {
    const dc = new DisruptionController();
    const a = nodes(A, 10, 'True');
    const ex = { name: 'x-0', zone: A, ready: 'Unknown' as const, excluded: true };
    dc.update([...a, ex, ...nodes(B, 3, 'True')], 0);
    setReady(dc, a.slice(0, 8), 'Unknown');
    dc.evaluate(1);
    expect(dc.zoneState(A)).toBe('PartialDisruption');
    expect(dc.requestNoExecute('x-0', A, 1)).toBe('queued');
    expect(drain(dc, 1, 1e9)).toEqual([]);
  });

  it('forgets zones whose nodes are all gone', () => {
    const dc = new DisruptionController();
    dc.update([...nodes(A, 2, 'True'), ...nodes(B, 2, 'True')], 0);
    const u = dc.update(nodes(A, 2, 'True'), 1);
    expect(u.zones.map((z) => z.zone)).toEqual([A]);
    expect(dc.zoneState(B)).toBe('Initial');
  });

  it('logs zone transitions with constant messages', () => {
    const log = memoryLogger();
    const dc = new DisruptionController({}, { logger: log });
    dc.update(nodes(A, 3, 'True'), 0);
    expect(log.lines).toContainEqual(
      expect.objectContaining({
        msg: 'Controller detected that zone is now in new state',
        zone: 'r1/a',
        from: 'Initial',
        newState: 'Normal',
        component: 'disruption',
      }),
    );
  });
});

describe('rates', () => {
  it('primary 0.1/s: 10 nodes failing at once are admitted one per 10 s', () => {
    const dc = new DisruptionController();
    const a = nodes(A, 100, 'True');
    dc.update([...a, ...nodes(B, 10, 'True')], 0);
    setReady(dc, a.slice(0, 10), 'Unknown');
    dc.evaluate(1000);
    expect(dc.zoneState(A)).toBe('Normal');
    for (const n of a.slice(0, 10)) expect(dc.requestNoExecute(n.name, A, 1000)).toBe('queued');
    const got = drain(dc, 1000, 1e9);
    expect(got).toEqual(a.slice(0, 10).map((n, i) => ({ name: n.name, at: 1000 + i * 10_000 })));
  });

  it('secondary 0.01/s in a large partially disrupted zone', () => {
    const dc = new DisruptionController();
    const a = nodes(A, 60, 'True');
    dc.update([...a, ...nodes(B, 10, 'True')], 0);
    setReady(dc, a.slice(0, 40), 'Unknown'); // 40/60 = 0.67 -> Partial, 60 > 50
    dc.evaluate(5000);
    expect(dc.zoneState(A)).toBe('PartialDisruption');
    expect(dc.rateOf(A)).toBe(0.01);
    for (const n of a.slice(0, 4)) dc.requestNoExecute(n.name, A, 5000);
    expect(drain(dc, 5000, 1e9)).toEqual([
      { name: 'a-0', at: 5000 },
      { name: 'a-1', at: 105_000 },
      { name: 'a-2', at: 205_000 },
      { name: 'a-3', at: 305_000 },
    ]);
  });

  it('0 in a small partially disrupted zone: nothing is admitted, no wakeup', () => {
    const dc = new DisruptionController();
    const a = nodes(A, 10, 'True');
    dc.update([...a, ...nodes(B, 10, 'True')], 0);
    setReady(dc, a.slice(0, 7), 'Unknown');
    dc.evaluate(0);
    for (const n of a.slice(0, 7)) dc.requestNoExecute(n.name, A, 0);
    expect(dc.nextWakeup(0)).toBeUndefined();
    expect(dc.admit(10 ** 9).admitted).toEqual([]);
    expect(dc.heldBack()).toEqual({ 'rate-limit': 7, cap: 0, 'master-disruption': 0 });
  });

  it('full disruption of one zone while others are healthy uses the primary rate', () => {
    const dc = new DisruptionController();
    const a = nodes(A, 5, 'True');
    dc.update([...a, ...nodes(B, 5, 'True'), ...nodes(C, 5, 'True')], 0);
    setReady(dc, a, 'Unknown');
    const u = dc.evaluate(0);
    expect(u.masterDisruptionActive).toBe(false);
    expect(dc.zoneState(A)).toBe('FullDisruption');
    for (const n of a) dc.requestNoExecute(n.name, A, 0);
    expect(drain(dc, 0, 1e9).map((x) => x.at)).toEqual([0, 10_000, 20_000, 30_000, 40_000]);
  });

  it('swap from a held zone starts drained (upstream SwapLimiter)', () => {
    const dc = new DisruptionController();
    const a = nodes(A, 10, 'True');
    dc.update([...a, ...nodes(B, 10, 'True')], 0);
    setReady(dc, a.slice(0, 7), 'Unknown');
    dc.evaluate(0); // Partial, rate 0
    dc.requestNoExecute('a-0', A, 0);
    setReady(dc, a.slice(1, 7), 'True');
    dc.evaluate(50_000); // Normal again: new bucket drained because the 0 limiter had no token
    expect(dc.zoneState(A)).toBe('Normal');
    expect(dc.nextWakeup(50_000)).toBe(60_000);
    expect(drain(dc, 50_000, 1e9)).toEqual([{ name: 'a-0', at: 60_000 }]);
  });

  it('keeps FIFO per zone and the oldest request first across zones', () => {
    const dc = new DisruptionController({ nodeEvictionRate: 1 });
    dc.update([...nodes(A, 3, 'Unknown'), ...nodes(B, 2, 'Unknown'), ...nodes(C, 10, 'True')], 0);
    dc.requestNoExecute('a-2', A, 0);
    dc.requestNoExecute('b-1', B, 1);
    dc.requestNoExecute('a-0', A, 2);
    dc.requestNoExecute('b-0', B, 3);
    const got = drain(dc, 10, 1e9);
    expect(got).toEqual([
      { name: 'a-2', at: 10 },
      { name: 'b-1', at: 10 },
      { name: 'a-0', at: 1010 },
      { name: 'b-0', at: 1010 },
    ]);
  });
});

describe('queue bookkeeping', () => {
  it('dedupes by name, drops recovered and deleted nodes', () => {
    const dc = new DisruptionController();
    const a = nodes(A, 10, 'Unknown');
    dc.update([...a, ...nodes(B, 10, 'True')], 0);
    dc.admit(0); // nothing queued yet
    expect(dc.requestNoExecute('a-0', A, 0, 'node.kubernetes.io/unreachable')).toBe('queued');
    expect(dc.requestNoExecute('a-0', A, 1, 'node.kubernetes.io/not-ready')).toBe('already-queued');
    dc.requestNoExecute('a-1', A, 2);
    dc.requestNoExecute('a-2', A, 3);
    dc.requestNoExecute('a-3', A, 4);
    dc.observe({ ...a[1]!, ready: 'True' }); // recovered
    dc.forget('a-2'); // deleted
    expect(dc.cancel('a-3')).toBe(true);
    expect(dc.cancel('a-3')).toBe(false);
    expect(dc.queued().map((q) => q.name)).toEqual(['a-0']);
    const r = dc.admit(10);
    expect(r.admitted).toEqual([
      { name: 'a-0', zone: A, key: 'node.kubernetes.io/not-ready', requestedAt: 0, waitedMs: 10 },
    ]);
    expect(dc.requestNoExecute('a-1', A, 11)).toBe('ignored-ready');
  });

  it('ignores requests while admitted and unsettled, until settled or timed out', () => {
    const dc = new DisruptionController({ nodeEvictionRate: 1000, inFlightTimeoutMs: 5000 });
    dc.update([...nodes(A, 3, 'Unknown'), ...nodes(B, 3, 'True')], 0);
    dc.requestNoExecute('a-0', A, 0);
    expect(dc.admit(0).admitted.map((a) => a.name)).toEqual(['a-0']);
    expect(dc.requestNoExecute('a-0', A, 1)).toBe('in-flight');
    expect(dc.inFlightNames()).toEqual(['a-0']);
    expect(dc.requestNoExecute('a-0', A, 5000)).toBe('queued');
    expect(dc.settle('a-0', 'applied', 5001)).toBe(false);
  });

  it('a failed write goes to the back of its zone queue and gives the cap slot back', () => {
    const dc = new DisruptionController({ nodeEvictionRate: 1, cap: { maxNodes: 1, windowMs: 600_000 } });
    dc.update([...nodes(A, 3, 'Unknown'), ...nodes(B, 3, 'True')], 0);
    dc.requestNoExecute('a-0', A, 0);
    dc.requestNoExecute('a-1', A, 0);
    expect(dc.admit(0).admitted.map((a) => a.name)).toEqual(['a-0']);
    expect(dc.capUsed(0)).toBe(1);
    expect(dc.settle('a-0', 'failed', 100)).toBe(true);
    expect(dc.capUsed(100)).toBe(0);
    expect(dc.queued().map((q) => q.name)).toEqual(['a-1', 'a-0']);
    expect(dc.admit(1000).admitted.map((a) => a.name)).toEqual(['a-1']);
  });

  it('moves a pending request when the node changes zone', () => {
    const dc = new DisruptionController();
    dc.update([...nodes(A, 3, 'Unknown'), ...nodes(B, 3, 'True')], 0);
    dc.requestNoExecute('a-0', A, 0);
    dc.observe({ name: 'a-0', zone: B, ready: 'Unknown', excluded: false });
    expect(dc.queued()).toEqual([{ name: 'a-0', zone: B, requestedAt: 0, reason: 'rate-limit' }]);
  });

  it('orders a moved request after the requests already waiting', () => {
    const dc = new DisruptionController();
    dc.update([...nodes(A, 3, 'Unknown'), ...nodes(B, 3, 'Unknown'), ...nodes(C, 3, 'True')], 0);
    dc.requestNoExecute('a-0', A, 0);
    dc.requestNoExecute('b-0', B, 0);
    dc.observe({ name: 'a-0', zone: C, ready: 'Unknown', excluded: false });
    expect(dc.admit(0).admitted.map((a) => [a.name, a.zone])).toEqual([
      ['b-0', B],
      ['a-0', C],
    ]);
  });

  it('rejects invalid options naming the field', () => {
    expect(() => new DisruptionController({ nodeEvictionRate: -1 })).toThrow(/nodeEvictionRate: -1/);
    expect(() => new DisruptionController({ unhealthyZoneThreshold: 2 })).toThrow(
      /unhealthyZoneThreshold: 2/,
    );
    expect(() => new DisruptionController({ cap: { maxNodes: 2 } })).toThrow(/cap\.windowMs/);
  });
});

describe('blast-radius cap', () => {
  const fast = { nodeEvictionRate: 1000 }; // 1 ms per token: the rate never binds here

  it('caps at N within the sliding window and releases in order', () => {
    const dc = new DisruptionController({ ...fast, cap: { maxNodes: 3, windowMs: 60_000 } });
    dc.update([...nodes(A, 50, 'Unknown'), ...nodes(B, 50, 'Unknown'), ...nodes(C, 50, 'True')], 0);
    const order = ['a-0', 'b-0', 'a-1', 'b-1', 'a-2', 'b-2', 'a-3'];
    order.forEach((n, i) => {
      dc.requestNoExecute(n, n.startsWith('a') ? A : B, i);
    });
    const first = drain(dc, 10, 59_000);
    expect(first.map((x) => x.name)).toEqual(['a-0', 'b-0', 'a-1']);
    expect(dc.capUsed(59_000)).toBe(3);
    expect(dc.nextWakeup(59_000)).toBe(60_010);
    const rest = drain(dc, 59_000, 10 ** 6);
    expect(rest).toEqual([
      // a-0 and b-0 (admitted at 10) leave the window at 60 010, a-1 at 60 011
      { name: 'b-1', at: 60_010 },
      { name: 'a-2', at: 60_010 },
      { name: 'b-2', at: 60_011 },
      { name: 'a-3', at: 120_010 },
    ]);
  });

  it('returns the held-back Event once per node', () => {
    const dc = new DisruptionController({ ...fast, cap: { maxNodes: 1, windowMs: 60_000 } });
    dc.update([...nodes(A, 10, 'Unknown'), ...nodes(B, 10, 'True')], 0);
    dc.requestNoExecute('a-0', A, 0);
    dc.requestNoExecute('a-1', A, 0);
    dc.requestNoExecute('a-2', A, 0);
    const r0 = dc.admit(0);
    expect(r0.admitted.map((a) => a.name)).toEqual(['a-0']);
    expect(r0.events).toEqual([]);
    const r1 = dc.admit(1);
    expect(r1.events).toEqual([
      {
        involvedObject: { apiVersion: 'v1', kind: 'Node', name: 'a-1' },
        type: 'Warning',
        reason: 'NoExecuteTaintHeldByCap',
        message:
          'Adding the NoExecute taint is held back by the blast-radius cap: 1 of 1 node(s) allowed per 1m0s already tainted',
      },
    ]);
    expect(dc.admit(1).events).toEqual([]);
    const r2 = dc.admit(2);
    expect(r2.events.map((e) => e.involvedObject.name)).toEqual(['a-2']);
    // no more events while they stay held
    const events = [];
    for (let t = 3; t < 60_000; t += 997) events.push(...dc.admit(t).events);
    expect(events).toEqual([]);
    expect(dc.heldBack()).toEqual({ 'rate-limit': 0, cap: 2, 'master-disruption': 0 });
    expect(dc.admit(60_000).admitted.map((a) => a.name)).toEqual(['a-1']);
  });

  it('separates held by cap from held by rate', () => {
    // zone rate 0.1/s, cap 1 per 15 s: after the first admission the second node would be admitted
    // by the rate at 10 s, but the cap holds it until 15 s.
    const dc = new DisruptionController({ cap: { maxNodes: 1, windowMs: 15_000 } });
    dc.update(nodes(A, 30, 'Unknown').concat(nodes(B, 30, 'True')), 0);
    dc.update([...nodes(A, 3, 'Unknown'), ...nodes(A, 27, 'True', 'h'), ...nodes(B, 30, 'True')], 0);
    for (const n of ['a-0', 'a-1', 'a-2']) dc.requestNoExecute(n, A, 0);
    expect(dc.admit(0).admitted.map((a) => a.name)).toEqual(['a-0']);
    expect(dc.heldBack()).toEqual({ 'rate-limit': 2, cap: 0, 'master-disruption': 0 });
    expect(dc.nextWakeup(0)).toBe(10_000);
    const r = dc.admit(10_000);
    expect(r.admitted).toEqual([]);
    expect(r.events.map((e) => e.involvedObject.name)).toEqual(['a-1']);
    expect(dc.heldBack()).toEqual({ 'rate-limit': 1, cap: 1, 'master-disruption': 0 });
    expect(dc.nextWakeup(10_000)).toBe(15_000);
    expect(dc.admit(15_000).admitted.map((a) => a.name)).toEqual(['a-1']);
  });

  it("a node's second NoExecute taint (its out-of-service taint) rides on its slot: a full cap lets it through, ahead of an older held head of another zone", () => {
    const dc = new DisruptionController({ ...fast, cap: { maxNodes: 1, windowMs: 60_000 } });
    dc.update([...nodes(A, 10, 'Unknown'), ...nodes(B, 10, 'Unknown'), ...nodes(C, 10, 'True')], 0);
    dc.requestNoExecute('a-0', A, 0);
    expect(drain(dc, 0, 10).map((x) => x.name)).toEqual(['a-0']);
    dc.requestNoExecute('b-0', B, 20);
    dc.requestNoExecute('oos:a-0', A, 30, 'node.kubernetes.io/out-of-service', 'a-0');
    const r = dc.admit(40);
    expect(r.admitted.map((a) => a.name)).toEqual(['oos:a-0']);
    expect(r.events.map((e) => e.involvedObject.name)).toEqual(['b-0']);
    expect(dc.capUsed(40)).toBe(1);
    dc.settle('oos:a-0', 'applied', 40);
    expect(dc.queued()).toEqual([{ name: 'b-0', zone: B, requestedAt: 20, reason: 'cap' }]);
    expect(dc.nextWakeup(40)).toBe(60_000);
  });

  it("a second taint waits only for its zone's token while its node holds a slot, and is re-queued as one after a failed write", () => {
    const dc = new DisruptionController({ nodeEvictionRate: 0.1, cap: { maxNodes: 1, windowMs: 600_000 } });
    dc.update([...nodes(A, 10, 'Unknown'), ...nodes(B, 10, 'True')], 0);
    dc.requestNoExecute('a-0', A, 0);
    expect(drain(dc, 0, 1).map((x) => x.name)).toEqual(['a-0']);
    dc.requestNoExecute('oos:a-0', A, 1_000, undefined, 'a-0');
    // The zone's next token (10 s), not the cap's next free slot (600 s).
    expect(dc.nextWakeup(1_000)).toBe(10_000);
    expect(dc.admit(10_000).admitted.map((a) => a.name)).toEqual(['oos:a-0']);
    dc.settle('oos:a-0', 'failed', 10_000);
    expect(dc.capUsed(10_000)).toBe(1);
    expect(dc.nextWakeup(10_000)).toBe(20_000);
    expect(dc.admit(20_000).admitted.map((a) => a.name)).toEqual(['oos:a-0']);
    // Its node's slot gone (the window passed): it waits for the cap like any taint.
    dc.settle('oos:a-0', 'failed', 20_000);
    dc.requestNoExecute('a-1', A, 20_001);
    expect(dc.admit(600_000).admitted.map((a) => a.name)).toEqual(['oos:a-0']);
    expect(dc.capUsed(600_000)).toBe(1);
    // It took a slot of its own: a-1 is held by the cap until it leaves the window.
    expect(dc.admit(610_000)).toEqual({
      admitted: [],
      events: [expect.objectContaining({ reason: 'NoExecuteTaintHeldByCap' })],
    });
    expect(dc.nextWakeup(610_000)).toBe(1_200_000);
  });

  it('a second taint whose token is there already is admitted at once, not at the next token the cap check would wait for', () => {
    const dc = new DisruptionController({ nodeEvictionRate: 0.1, cap: { maxNodes: 1, windowMs: 600_000 } });
    dc.update([...nodes(A, 10, 'Unknown'), ...nodes(B, 10, 'True')], 0);
    dc.requestNoExecute('a-0', A, 0);
    expect(dc.admit(0).admitted.map((a) => a.name)).toEqual(['a-0']);
    dc.settle('a-0', 'applied', 0);
    dc.requestNoExecute('a-1', A, 1);
    // a-1 is held by the cap at 10 s: the zone's token stays unspent.
    expect(dc.admit(10_000).events.map((e) => e.involvedObject.name)).toEqual(['a-1']);
    dc.requestNoExecute('oos:a-0', A, 11_000, undefined, 'a-0');
    dc.cancel('a-1');
    expect(dc.nextWakeup(12_000)).toBe(12_000);
    expect(dc.admit(12_000).admitted.map((a) => a.name)).toEqual(['oos:a-0']);
  });

  it('caps at a percent of the fleet, the smaller bound winning', () => {
    const pct = new DisruptionController({ ...fast, cap: { maxPercent: 10, windowMs: 60_000 } });
    pct.update(nodes(A, 40, 'Unknown'), 0);
    pct.evaluate(0);
    expect(pct.capLimit()).toBe(4);
    const both = new DisruptionController({
      ...fast,
      cap: { maxNodes: 10, maxPercent: 10, windowMs: 60_000 },
    });
    both.update([...nodes(A, 20, 'Unknown'), ...nodes(B, 20, 'True')], 0);
    expect(both.capLimit()).toBe(4);
    for (let i = 0; i < 20; i++) both.requestNoExecute(`a-${i}`, A, 0);
    expect(drain(both, 0, 59_999).map((x) => x.name)).toEqual(['a-0', 'a-1', 'a-2', 'a-3']);
  });
});

describe('master disruption', () => {
  it('enters when every zone is fully disrupted and exits with a probe reset', () => {
    const dc = new DisruptionController();
    const a = nodes(A, 5, 'True');
    const b = nodes(B, 5, 'True');
    dc.update([...a, ...b], 0);
    setReady(dc, a, 'Unknown');
    expect(dc.evaluate(1000).masterDisruption).toBeNull();
    dc.requestNoExecute('a-0', A, 1000);

    setReady(dc, b, 'Unknown');
    const enter = dc.evaluate(2000);
    expect(enter.masterDisruption).toBe('entered');
    expect(enter.masterDisruptionActive).toBe(true);
    expect(enter.decisions).toEqual([{ kind: 'RemoveAllNoExecuteTaints' }]);
    expect(enter.transitions).toEqual([
      { zone: B, from: 'Normal', to: 'FullDisruption', size: 5, notReady: 5, rate: 0 },
    ]);
    for (const n of [...a, ...b]) dc.requestNoExecute(n.name, n.zone, 2000);
    expect(dc.admit(2000).admitted).toEqual([]);
    expect(dc.nextWakeup(2000)).toBeUndefined();
    expect(dc.heldBack()).toEqual({ 'rate-limit': 0, cap: 0, 'master-disruption': 10 });

    // staying in it: no new decisions
    expect(dc.evaluate(3000).decisions).toEqual([]);
    expect(dc.admit(10 ** 7).admitted).toEqual([]);

    setReady(dc, b.slice(0, 3), 'True'); // recovered nodes leave the queue
    const exit = dc.evaluate(600_000);
    expect(exit.masterDisruption).toBe('exited');
    expect(exit.masterDisruptionActive).toBe(false);
    expect(exit.decisions).toEqual([{ kind: 'ResetAllProbeTimestamps', now: 600_000 }]);
    expect(exit.transitions).toEqual([
      { zone: B, from: 'FullDisruption', to: 'Normal', size: 5, notReady: 2, rate: 0.1 },
    ]);
    expect(dc.zoneState(A)).toBe('FullDisruption');
    expect(dc.rateOf(A)).toBe(0.1);
    // limiters come back drained (swapped from 0): first admissions one interval later, FIFO
    const got = drain(dc, 600_000, 620_000);
    expect(got).toEqual([
      { name: 'a-0', at: 610_000 },
      { name: 'b-3', at: 610_000 },
      { name: 'a-1', at: 620_000 },
      { name: 'b-4', at: 620_000 },
    ]);
  });

  it('holds a zone that appears during master disruption, and its limiter starts drained on exit', () => {
    const dc = new DisruptionController();
    const a = nodes(A, 3, 'True');
    dc.update([...a, ...nodes(B, 3, 'Unknown')], 0);
    setReady(dc, a, 'Unknown');
    expect(dc.evaluate(1000).masterDisruption).toBe('entered');
    // a new zone, fully down too: still master disruption, its limiter stopped like the others
    dc.observe({ name: 'c-0', zone: C, ready: 'Unknown', excluded: false });
    expect(dc.evaluate(2000).masterDisruptionActive).toBe(true);
    expect(dc.zoneState(C)).toBe('FullDisruption');
    expect(dc.rateOf(C)).toBe(0);
    dc.requestNoExecute('c-0', C, 2000);
    expect(drain(dc, 2000, 500_000)).toEqual([]);
    setReady(dc, a, 'True');
    expect(dc.evaluate(500_000).masterDisruption).toBe('exited');
    // swapped from a stopped limiter: one interval before the first taint, as every other zone
    expect(drain(dc, 500_000, 600_000)).toEqual([{ name: 'c-0', at: 510_000 }]);
  });

  it('keeps a zone that lost its counted nodes stopped during master disruption', () => {
    const dc = new DisruptionController();
    const a = nodes(A, 3, 'Unknown');
    const b = nodes(B, 3, 'Unknown');
    const x = { name: 'x-0', zone: B, ready: 'Unknown' as const, excluded: true };
    expect(dc.update([...a, ...b, x], 0).masterDisruption).toBe('entered');
    dc.requestNoExecute('x-0', B, 0);
    // zone B's counted nodes are deleted: only its excluded node is left, still held
    for (const n of b) dc.forget(n.name);
    expect(dc.evaluate(1000).masterDisruptionActive).toBe(true);
    expect(dc.rateOf(B)).toBe(0);
    expect(drain(dc, 1000, 500_000)).toEqual([]);
    setReady(dc, a.slice(0, 1), 'True');
    expect(dc.evaluate(500_000).masterDisruption).toBe('exited');
    expect(dc.rateOf(B)).toBe(0.1);
    expect(drain(dc, 500_000, 600_000)).toEqual([{ name: 'x-0', at: 510_000 }]);
  });

  it('needs at least one zone', () => {
    const dc = new DisruptionController();
    expect(dc.update([], 0).masterDisruption).toBeNull();
    const ex = nodes(A, 2, 'Unknown').map((n) => ({ ...n, excluded: true }));
    expect(dc.update(ex, 1).masterDisruptionActive).toBe(false);
  });

  it('a single-zone cluster going fully down is master disruption', () => {
    const dc = new DisruptionController();
    const u = dc.update(nodes('', 4, 'Unknown'), 0);
    expect(u.masterDisruption).toBe('entered');
    expect(u.transitions).toEqual([
      { zone: '', from: 'Initial', to: 'FullDisruption', size: 4, notReady: 4, rate: 0 },
    ]);
  });
});

describe('metrics', () => {
  it('exports upstream zone metrics and ours', async () => {
    const registry = new Registry();
    const metrics = createDisruptionMetrics(registry);
    const dc = new DisruptionController({ cap: { maxNodes: 5, windowMs: 60_000 } }, { metrics });
    const a = nodes(A, 4, 'True');
    dc.update([...a, ...nodes(B, 2, 'True')], 0);
    setReady(dc, a.slice(0, 2), 'Unknown');
    dc.evaluate(1);
    dc.requestNoExecute('a-0', A, 1);
    dc.requestNoExecute('a-1', A, 1);
    const [adm] = dc.admit(1).admitted;
    dc.settle(adm!.name, 'applied', 2);

    const get = async (name: string) => (await registry.getSingleMetric(name)!.get()).values;
    expect(await get('node_collector_zone_size')).toContainEqual({ labels: { zone: A }, value: 4 });
    expect(await get('node_collector_zone_health')).toContainEqual({ labels: { zone: A }, value: 50 });
    expect(await get('node_collector_unhealthy_nodes_in_zone')).toContainEqual({
      labels: { zone: A },
      value: 2,
    });
    expect(await get('node_collector_evictions_total')).toEqual(
      expect.arrayContaining([
        { labels: { zone: A }, value: 1 },
        { labels: { zone: B }, value: 0 },
      ]),
    );
    expect(await get('nlc_zone_state')).toEqual(
      expect.arrayContaining([
        { labels: { zone: A, state: 'Normal' }, value: 1 },
        { labels: { zone: A, state: 'PartialDisruption' }, value: 0 },
      ]),
    );
    expect(await get('nlc_noexecute_held_back')).toEqual(
      expect.arrayContaining([
        { labels: { reason: 'rate-limit' }, value: 1 },
        { labels: { reason: 'cap' }, value: 0 },
      ]),
    );
    expect(await get('nlc_master_disruption_active')).toEqual([{ labels: {}, value: 0 }]);

    // zone B disappears: upstream keeps its series at 0 / 100 / 0
    dc.update(a, 3);
    expect(await get('node_collector_zone_size')).toContainEqual({ labels: { zone: B }, value: 0 });
    expect(await get('node_collector_zone_health')).toContainEqual({ labels: { zone: B }, value: 100 });
    expect((await get('nlc_zone_state')).filter((v) => v.labels.zone === B)).toEqual([]);

    setReady(dc, a, 'Unknown');
    dc.evaluate(4);
    dc.requestNoExecute('a-2', A, 4);
    expect(await get('nlc_master_disruption_active')).toEqual([{ labels: {}, value: 1 }]);
    expect(await get('nlc_master_disruption_transitions_total')).toEqual([
      { labels: { direction: 'enter' }, value: 1 },
    ]);
    expect(await get('nlc_noexecute_held_back')).toContainEqual({
      labels: { reason: 'master-disruption' },
      value: 1,
    });
  });
});

describe('options', () => {
  const valid = { ...DEFAULT_DISRUPTION_OPTIONS };

  it('accepts the boundary values', () => {
    for (const o of [
      { nodeEvictionRate: 0, secondaryNodeEvictionRate: 0 },
      { largeClusterSizeThreshold: 0 },
      { unhealthyZoneThreshold: 0 },
      { unhealthyZoneThreshold: 1 },
      { burst: 1 },
      { inFlightTimeoutMs: 1 },
    ]) {
      expect(validateDisruptionOptions({ ...valid, ...o })).toEqual([]);
    }
  });

  it.each([
    [
      { secondaryNodeEvictionRate: -0.5 },
      'secondaryNodeEvictionRate: -0.5: must be a number >= 0 (per second)',
    ],
    [{ nodeEvictionRate: Number.NaN }, 'nodeEvictionRate: NaN: must be a number >= 0 (per second)'],
    [{ largeClusterSizeThreshold: -1 }, 'largeClusterSizeThreshold: -1: must be an integer >= 0'],
    [{ largeClusterSizeThreshold: 2.5 }, 'largeClusterSizeThreshold: 2.5: must be an integer >= 0'],
    [{ unhealthyZoneThreshold: -0.1 }, 'unhealthyZoneThreshold: -0.1: must be a number in [0, 1]'],
    [{ unhealthyZoneThreshold: Number.NaN }, 'unhealthyZoneThreshold: NaN: must be a number in [0, 1]'],
    [{ burst: 0 }, 'burst: 0: must be an integer >= 1'],
    [{ burst: 1.5 }, 'burst: 1.5: must be an integer >= 1'],
    [{ inFlightTimeoutMs: 0 }, 'inFlightTimeoutMs: 0: must be > 0'],
    [{ inFlightTimeoutMs: Number.POSITIVE_INFINITY }, 'inFlightTimeoutMs: Infinity: must be > 0'],
    [{ cap: { maxNodes: 3 } }, 'cap.windowMs: undefined: must be > 0 when maxNodes or maxPercent is set'],
  ])('rejects %o', (o, message) => {
    expect(validateDisruptionOptions({ ...valid, ...o })).toEqual([message]);
  });

  it('burst and inFlightTimeoutMs may be left out; an undefined option takes the default', () => {
    const { burst: _b, inFlightTimeoutMs: _t, ...required } = valid;
    expect(validateDisruptionOptions(required)).toEqual([]);
    const dc = new DisruptionController({ nodeEvictionRate: undefined, unhealthyZoneThreshold: undefined });
    expect(dc.rateOf(A)).toBe(0.1);
  });

  it('names every bad field in the constructor error', () => {
    expect(() => new DisruptionController({ nodeEvictionRate: -1, burst: 0 })).toThrow(
      'invalid disruption options: nodeEvictionRate: -1: must be a number >= 0 (per second); burst: 0: must be an integer >= 1',
    );
  });
});

describe('bookkeeping edges', () => {
  it('takes an unobserved node in the zone it is requested for, and moves it when asked again', () => {
    const dc = new DisruptionController();
    dc.update([...nodes(A, 2, 'True'), ...nodes(B, 2, 'True')], 0);
    expect(dc.requestNoExecute('new-0', A, 0, 'k1')).toBe('queued');
    expect(dc.requestNoExecute('new-0', C, 1)).toBe('already-queued');
    expect(dc.queued()).toEqual([{ name: 'new-0', zone: C, requestedAt: 0, reason: 'rate-limit' }]);
    // an evaluate does not drop the zone that holds the request, though no node is known there
    dc.evaluate(2);
    // the key of the first request is kept when a later request gives none
    const [adm] = dc.admit(3).admitted;
    expect(adm).toEqual({ name: 'new-0', zone: C, key: 'k1', requestedAt: 0, waitedMs: 3 });
  });

  it('uses the observed zone over the requested one', () => {
    const dc = new DisruptionController();
    dc.update([...nodes(A, 2, 'Unknown'), ...nodes(B, 2, 'True')], 0);
    dc.requestNoExecute('a-0', B, 0);
    expect(dc.queued().map((q) => q.zone)).toEqual([A]);
  });

  it('reports how long an admitted node waited', () => {
    const dc = new DisruptionController();
    dc.update([...nodes(A, 3, 'Unknown'), ...nodes(B, 3, 'True')], 0);
    dc.requestNoExecute('a-0', A, 1000);
    dc.requestNoExecute('a-1', A, 2000);
    expect(dc.admit(2500).admitted.map((a) => [a.name, a.requestedAt, a.waitedMs])).toEqual([
      ['a-0', 1000, 1500],
    ]);
    expect(dc.admit(12_500).admitted.map((a) => [a.name, a.waitedMs])).toEqual([['a-1', 10_500]]);
  });

  it('times out an unsettled admission counted from when it was admitted', () => {
    const log = memoryLogger();
    const dc = new DisruptionController({ inFlightTimeoutMs: 5000 }, { logger: log });
    dc.update([...nodes(A, 3, 'Unknown'), ...nodes(B, 3, 'True')], 0);
    dc.requestNoExecute('a-0', A, 1000);
    expect(dc.admit(1000).admitted.map((a) => a.name)).toEqual(['a-0']);
    expect(dc.requestNoExecute('a-0', A, 5999)).toBe('in-flight');
    expect(dc.requestNoExecute('a-0', A, 6000)).toBe('queued');
    expect(log.lines).toContainEqual(
      expect.objectContaining({
        msg: 'NoExecute admission was never settled; accepting a new request',
        node: 'a-0',
      }),
    );
  });

  it('accepts a new request once an admission is settled', () => {
    const dc = new DisruptionController();
    dc.update([...nodes(A, 3, 'Unknown'), ...nodes(B, 3, 'True')], 0);
    dc.requestNoExecute('a-0', A, 0);
    dc.admit(0);
    expect(dc.settle('a-0', 'applied', 1)).toBe(true);
    // e.g. its taint was removed in master disruption: it asks again
    expect(dc.requestNoExecute('a-0', A, 2)).toBe('queued');
  });

  it('a dropped admission gives its cap slot back and is not queued again', () => {
    const registry = new Registry();
    const metrics = createDisruptionMetrics(registry);
    const dc = new DisruptionController(
      { nodeEvictionRate: 1000, cap: { maxNodes: 1, windowMs: 60_000 } },
      { metrics },
    );
    dc.update([...nodes(A, 3, 'Unknown'), ...nodes(B, 3, 'True')], 0);
    dc.requestNoExecute('a-0', A, 0);
    dc.requestNoExecute('a-1', A, 0);
    expect(dc.admit(0).admitted.map((a) => a.name)).toEqual(['a-0']);
    expect(dc.settle('a-0', 'dropped', 1)).toBe(true);
    expect(dc.capUsed(1)).toBe(0);
    expect(dc.queued().map((q) => q.name)).toEqual(['a-1']);
    expect(dc.admit(2).admitted.map((a) => a.name)).toEqual(['a-1']);
  });

  it('a failed write of a node that became ready, or was never observed, is handled', () => {
    const dc = new DisruptionController({ nodeEvictionRate: 1000 });
    dc.update([...nodes(A, 3, 'Unknown'), ...nodes(B, 3, 'True')], 0);
    dc.requestNoExecute('a-0', A, 0);
    dc.requestNoExecute('ghost', B, 0);
    expect(dc.admit(0).admitted.map((a) => a.name)).toEqual(['a-0', 'ghost']);
    dc.observe({ name: 'a-0', zone: A, ready: 'True', excluded: false });
    dc.settle('a-0', 'failed', 1);
    dc.settle('ghost', 'failed', 1);
    // the ready node needs no taint any more; the unobserved one waits in the zone it was admitted in
    expect(dc.queued()).toEqual([{ name: 'ghost', zone: B, requestedAt: 1, reason: 'rate-limit' }]);
  });

  it('a failed write is ordered after requests made before it failed', () => {
    const dc = new DisruptionController({ nodeEvictionRate: 1 });
    dc.update([...nodes(A, 3, 'Unknown'), ...nodes(B, 3, 'Unknown'), ...nodes(C, 3, 'True')], 0);
    dc.requestNoExecute('a-0', A, 0);
    dc.requestNoExecute('b-0', B, 0);
    expect(dc.admit(0).admitted.map((a) => a.name)).toEqual(['a-0', 'b-0']);
    dc.requestNoExecute('b-1', B, 0);
    dc.settle('a-0', 'failed', 0);
    expect(dc.admit(1000).admitted.map((a) => a.name)).toEqual(['b-1', 'a-0']);
  });

  it('counts what the cap holds, and forgets it when the node leaves the queue', () => {
    const dc = new DisruptionController({ nodeEvictionRate: 1000, cap: { maxNodes: 1, windowMs: 60_000 } });
    dc.update([...nodes(A, 4, 'Unknown'), ...nodes(B, 3, 'True')], 0);
    for (const n of ['a-0', 'a-1', 'a-2']) dc.requestNoExecute(n, A, 0);
    dc.admit(0);
    dc.admit(1);
    dc.admit(2);
    expect(dc.heldBack()).toEqual({ 'rate-limit': 0, cap: 2, 'master-disruption': 0 });
    expect(dc.queued().map((q) => q.reason)).toEqual(['cap', 'cap']);
    dc.observe({ name: 'a-1', zone: A, ready: 'True', excluded: false });
    expect(dc.heldBack()).toEqual({ 'rate-limit': 0, cap: 1, 'master-disruption': 0 });
    // a request held only by the rate leaves without touching the cap count
    dc.requestNoExecute('a-3', A, 3);
    expect(dc.heldBack()).toEqual({ 'rate-limit': 1, cap: 1, 'master-disruption': 0 });
    expect(dc.cancel('a-3')).toBe(true);
    expect(dc.heldBack()).toEqual({ 'rate-limit': 0, cap: 1, 'master-disruption': 0 });
    // a failed write comes back held by the rate, not by the cap
    dc.settle('a-0', 'failed', 4);
    expect(dc.heldBack()).toEqual({ 'rate-limit': 1, cap: 1, 'master-disruption': 0 });
    // the slot it gave back goes to the oldest request; the rate alone would let a-0 through now
    expect(dc.admit(5).admitted.map((a) => a.name)).toEqual(['a-2']);
    expect(dc.heldBack()).toEqual({ 'rate-limit': 0, cap: 1, 'master-disruption': 0 });
  });

  it('queued() says when master disruption holds the requests', () => {
    const dc = new DisruptionController();
    dc.update(nodes(A, 2, 'Unknown'), 0);
    dc.requestNoExecute('a-0', A, 0);
    expect(dc.queued()).toEqual([{ name: 'a-0', zone: A, requestedAt: 0, reason: 'master-disruption' }]);
  });

  it('wakes up for a zone that has a token while another zone is held at rate 0', () => {
    for (const cap of [undefined, { maxNodes: 5, windowMs: 60_000 }]) {
      const dc = new DisruptionController(cap ? { cap } : {});
      const a = nodes(A, 10, 'True');
      dc.update([...a, ...nodes(B, 10, 'Unknown')], 0);
      setReady(dc, a.slice(0, 7), 'Unknown');
      dc.evaluate(0);
      expect(dc.rateOf(A)).toBe(0); // small zone, PartialDisruption
      dc.requestNoExecute('a-0', A, 0);
      dc.requestNoExecute('b-0', B, 0);
      dc.requestNoExecute('b-1', B, 0);
      expect(dc.admit(0).admitted.map((x) => x.name)).toEqual(['b-0']);
      expect(dc.nextWakeup(0)).toBe(10_000);
    }
  });

  it('rateOf a zone it has never seen is the primary rate, or 0 in master disruption', () => {
    const dc = new DisruptionController();
    expect(dc.rateOf(C)).toBe(0.1);
    dc.update(nodes(A, 2, 'Unknown'), 0);
    expect(dc.rateOf(C)).toBe(0);
  });

  it('lists only zones evaluated with counted nodes', () => {
    const dc = new DisruptionController();
    dc.observe({ name: 'a-0', zone: A, ready: 'True', excluded: false });
    expect(dc.zoneStatuses()).toEqual([]);
    dc.evaluate(0);
    expect(dc.zoneStatuses().map((z) => z.zone)).toEqual([A]);
  });

  it('forgets excluded nodes and nodes it never saw', () => {
    const dc = new DisruptionController({ cap: { maxPercent: 50, windowMs: 60_000 } });
    const x = { name: 'x-0', zone: A, ready: 'Unknown' as const, excluded: true };
    dc.update([...nodes(A, 3, 'True'), x, ...nodes(B, 2, 'True')], 0);
    expect(dc.zoneStatuses().find((z) => z.zone === A)?.excluded).toBe(1);
    expect(dc.capLimit()).toBe(3);
    dc.forget('x-0');
    dc.forget('never-seen');
    dc.forget('b-0');
    const a = dc.evaluate(1).zones.find((z) => z.zone === A);
    expect(a).toMatchObject({ size: 3, notReady: 0, excluded: 0 });
    expect(dc.capLimit()).toBe(2); // 50% of the 4 nodes left
  });

  it('a re-created node is not in flight', () => {
    const dc = new DisruptionController();
    dc.update([...nodes(A, 3, 'Unknown'), ...nodes(B, 3, 'True')], 0);
    dc.requestNoExecute('a-0', A, 0);
    dc.admit(0);
    dc.forget('a-0');
    dc.observe({ name: 'a-0', zone: A, ready: 'Unknown', excluded: false });
    expect(dc.requestNoExecute('a-0', A, 1)).toBe('queued');
  });

  it('a zone that lost its counted nodes goes back to the primary rate for its excluded nodes', () => {
    const log = memoryLogger();
    const dc = new DisruptionController({}, { logger: log });
    const a = nodes(A, 10, 'True');
    const x = { name: 'x-0', zone: A, ready: 'Unknown' as const, excluded: true };
    dc.update([...a, x, ...nodes(B, 3, 'True')], 0);
    setReady(dc, a.slice(0, 8), 'Unknown');
    dc.evaluate(0);
    expect(dc.rateOf(A)).toBe(0);
    dc.requestNoExecute('x-0', A, 0);
    for (const n of a) dc.forget(n.name);
    const u = dc.evaluate(1000);
    expect(u.zones.map((z) => z.zone)).toEqual([B]);
    expect(log.lines).toContainEqual(
      expect.objectContaining({ msg: 'Zone has no counted nodes any more', zone: 'r1/a' }),
    );
    expect(dc.zoneState(A)).toBe('Initial');
    expect(dc.rateOf(A)).toBe(0.1);
    // swapped from the stopped limiter: one interval later
    expect(drain(dc, 1000, 100_000)).toEqual([{ name: 'x-0', at: 11_000 }]);
  });

  it('keeps the rate of a zone of only excluded nodes across evaluations', () => {
    const dc = new DisruptionController();
    const ex = nodes(C, 2, 'Unknown', 'x').map((n) => ({ ...n, excluded: true }));
    dc.update([...nodes(A, 3, 'True'), ...ex], 0);
    dc.requestNoExecute('x-0', C, 0);
    expect(drain(dc, 0, 1)).toEqual([{ name: 'x-0', at: 0 }]);
    dc.evaluate(1);
    dc.requestNoExecute('x-1', C, 1);
    expect(drain(dc, 1, 100_000)).toEqual([{ name: 'x-1', at: 10_000 }]);
  });

  it('a zone that vanished and comes back starts with a full limiter (upstream addPodEvictorForNewZone)', () => {
    const dc = new DisruptionController();
    dc.update([...nodes(A, 3, 'True'), ...nodes(B, 2, 'Unknown')], 0);
    dc.requestNoExecute('b-0', B, 0);
    expect(drain(dc, 0, 1)).toEqual([{ name: 'b-0', at: 0 }]);
    dc.update(nodes(A, 3, 'True'), 1);
    dc.observe({ name: 'b-9', zone: B, ready: 'Unknown', excluded: false });
    dc.evaluate(2);
    dc.requestNoExecute('b-9', B, 2);
    expect(drain(dc, 2, 100_000)).toEqual([{ name: 'b-9', at: 2 }]);
  });

  it('a new zone that ends master disruption is listed at once', () => {
    const log = memoryLogger();
    const dc = new DisruptionController({}, { logger: log });
    dc.update([...nodes(A, 2, 'Unknown'), ...nodes(B, 2, 'Unknown')], 0);
    expect(log.lines).toContainEqual(
      expect.objectContaining({
        msg: 'Controller detected that all Nodes are not-Ready. Entering master disruption mode',
        zones: 2,
      }),
    );
    dc.observe({ name: 'c-0', zone: C, ready: 'True', excluded: false });
    const u = dc.evaluate(1);
    expect(u.masterDisruption).toBe('exited');
    expect(u.zones.map((z) => [z.zone, z.state])).toEqual([
      [A, 'FullDisruption'],
      [B, 'FullDisruption'],
      [C, 'Normal'],
    ]);
    expect(log.lines).toContainEqual(
      expect.objectContaining({
        msg: 'Controller detected that some Nodes are Ready. Exiting master disruption mode',
        zones: 3,
      }),
    );
  });

  it('logs admissions and cap holds with constant messages', () => {
    const log = memoryLogger();
    const dc = new DisruptionController(
      { nodeEvictionRate: 1000, cap: { maxNodes: 1, windowMs: 60_000 } },
      { logger: log },
    );
    dc.update([...nodes(A, 3, 'Unknown'), ...nodes(B, 3, 'True')], 0);
    dc.requestNoExecute('a-0', A, 500);
    dc.requestNoExecute('a-1', A, 500);
    dc.admit(2000);
    dc.admit(2001);
    dc.observe({ name: 'a-1', zone: A, ready: 'True', excluded: false });
    expect(log.lines).toContainEqual(
      expect.objectContaining({ msg: 'Admitted NoExecute taint', node: 'a-0', zone: 'r1/a', waited: '1.5s' }),
    );
    expect(log.lines).toContainEqual(
      expect.objectContaining({
        msg: 'NoExecute taint held back by blast-radius cap',
        node: 'a-1',
        zone: 'r1/a',
        limit: 1,
        window: '1m0s',
      }),
    );
    expect(log.lines).toContainEqual(
      expect.objectContaining({ msg: 'Node is ready again: dropped its NoExecute request', node: 'a-1' }),
    );
  });
});

describe('metrics edges', () => {
  const get = async (registry: Registry, name: string) =>
    (await registry.getSingleMetric(name)!.get()).values;

  it('keeps the held-back and cap-used gauges current after every call that changes them', async () => {
    const registry = new Registry();
    const metrics = createDisruptionMetrics(registry);
    const dc = new DisruptionController(
      { nodeEvictionRate: 1, cap: { maxNodes: 2, windowMs: 60_000 } },
      { metrics },
    );
    const held = async () =>
      Object.fromEntries(
        (await get(registry, 'nlc_noexecute_held_back')).map((v) => [v.labels.reason, v.value]),
      );
    const capUsed = async () => (await get(registry, 'nlc_noexecute_cap_used'))[0]?.value;
    expect(await held()).toEqual({ 'rate-limit': 0, cap: 0, 'master-disruption': 0 });
    dc.update([...nodes(A, 4, 'Unknown'), ...nodes(B, 4, 'True')], 0);
    for (const n of ['a-0', 'a-1', 'a-2', 'a-3']) dc.requestNoExecute(n, A, 0);
    expect(await held()).toMatchObject({ 'rate-limit': 4 });
    dc.admit(0);
    expect(await capUsed()).toBe(1);
    expect(await held()).toMatchObject({ 'rate-limit': 3 });
    dc.observe({ name: 'a-1', zone: A, ready: 'True', excluded: false });
    expect(await held()).toMatchObject({ 'rate-limit': 2 });
    dc.forget('a-2');
    expect(await held()).toMatchObject({ 'rate-limit': 1 });
    dc.cancel('a-3');
    expect(await held()).toMatchObject({ 'rate-limit': 0 });
    dc.settle('a-0', 'failed', 10);
    expect(await held()).toMatchObject({ 'rate-limit': 1 });
    expect(await capUsed()).toBe(0);
    dc.admit(1000);
    expect(await capUsed()).toBe(1);
    dc.settle('a-0', 'applied', 1000);
    dc.evaluate(61_000);
    expect(await capUsed()).toBe(0);
    // a controller created again with the same metrics (a new leadership term) starts from 0
    dc.requestNoExecute('a-0', A, 61_000);
    expect(await held()).toMatchObject({ 'rate-limit': 1 });
    new DisruptionController({}, { metrics });
    expect(await held()).toEqual({ 'rate-limit': 0, cap: 0, 'master-disruption': 0 });
  });

  it('moves the held-back gauge to master-disruption when evaluate() enters it', async () => {
    const registry = new Registry();
    const dc = new DisruptionController({}, { metrics: createDisruptionMetrics(registry) });
    const a = nodes(A, 3, 'True');
    dc.update([...a, ...nodes(B, 2, 'Unknown')], 0);
    dc.requestNoExecute('b-0', B, 0);
    dc.requestNoExecute('b-1', B, 0);
    setReady(dc, a, 'Unknown');
    dc.evaluate(1);
    expect(dc.masterDisruptionActive).toBe(true);
    const held = await get(registry, 'nlc_noexecute_held_back');
    expect(held).toContainEqual({ labels: { reason: 'master-disruption' }, value: 2 });
    expect(held).toContainEqual({ labels: { reason: 'rate-limit' }, value: 0 });
  });

  it('counts master-disruption entries and exits by direction', async () => {
    const registry = new Registry();
    const dc = new DisruptionController({}, { metrics: createDisruptionMetrics(registry) });
    const a = nodes(A, 2, 'Unknown');
    dc.update(a, 0);
    setReady(dc, a, 'True');
    dc.evaluate(1);
    expect(await get(registry, 'nlc_master_disruption_transitions_total')).toEqual(
      expect.arrayContaining([
        { labels: { direction: 'enter' }, value: 1 },
        { labels: { direction: 'exit' }, value: 1 },
      ]),
    );
  });

  it('sets one nlc_zone_state series per state', async () => {
    const registry = new Registry();
    const dc = new DisruptionController({}, { metrics: createDisruptionMetrics(registry) });
    dc.update([...nodes(A, 2, 'Unknown'), ...nodes(B, 2, 'True')], 0);
    const states = (await get(registry, 'nlc_zone_state')).filter((v) => v.labels.zone === A);
    expect(states.map((v) => [v.labels.state, v.value]).sort()).toEqual([
      ['FullDisruption', 1],
      ['Initial', 0],
      ['Normal', 0],
      ['PartialDisruption', 0],
    ]);
  });

  it('a zone left with only excluded nodes reads as upstream shows a vanished zone', async () => {
    const registry = new Registry();
    const dc = new DisruptionController({}, { metrics: createDisruptionMetrics(registry) });
    const x = { name: 'x-0', zone: B, ready: 'True' as const, excluded: true };
    dc.update([...nodes(A, 2, 'True'), ...nodes(B, 2, 'Unknown'), x], 0);
    dc.update([...nodes(A, 2, 'True'), x], 1);
    expect((await get(registry, 'node_collector_zone_size')).find((v) => v.labels.zone === B)?.value).toBe(0);
    expect((await get(registry, 'node_collector_zone_health')).find((v) => v.labels.zone === B)?.value).toBe(
      100,
    );
    expect(
      (await get(registry, 'node_collector_unhealthy_nodes_in_zone')).find((v) => v.labels.zone === B)?.value,
    ).toBe(0);
    expect((await get(registry, 'nlc_zone_state')).filter((v) => v.labels.zone === B)).toEqual([]);
    dc.evaluate(2);
    expect((await get(registry, 'node_collector_zone_health')).find((v) => v.labels.zone === B)?.value).toBe(
      100,
    );
  });
});

describe('seed: the NoExecute taints in place when a replica starts acting', () => {
  const WALL = 1_700_000_000_000; // the wall clock at monotonic 100 000
  const inPlace = (name: string, zone: string, agoMs: number, second = false, node = name) => ({
    name,
    node,
    zone,
    addedAt: WALL - agoMs,
    second,
  });

  it('the cap counts them at their timeAdded: a new request waits until the oldest leaves the window; ours are not counted twice', () => {
    const fast = { nodeEvictionRate: 1000 };
    const dc = new DisruptionController({ ...fast, cap: { maxNodes: 3, windowMs: 300_000 } });
    dc.update([...nodes(A, 20, 'Unknown'), ...nodes(B, 20, 'True')], 0);
    dc.requestNoExecute('a-6', A, 10_000);
    expect(drain(dc, 10_000, 10_000).map((x) => x.name)).toEqual(['a-6']);
    const r = dc.seed(
      [inPlace('a-6', A, 90_000), inPlace('a-5', A, 10_000), inPlace('a-1', A, 400_000)],
      100_000,
      WALL,
    );
    expect(r).toEqual({ capUsed: 2, zonesWaiting: 0 });
    dc.requestNoExecute('a-12', A, 100_000);
    dc.requestNoExecute('a-13', A, 100_000);
    expect(drain(dc, 100_000, 10 ** 6)).toEqual([
      { name: 'a-12', at: 100_000 },
      // a-6 (ours at 10 s, its taint dated 10 s) leaves the window at 310 s.
      { name: 'a-13', at: 310_000 },
    ]);
  });

  it("a zone's bucket gives no token until one interval after its latest taint; other zones and old taints change nothing", () => {
    const dc = new DisruptionController();
    dc.update([...nodes(A, 20, 'True'), ...nodes(B, 20, 'True'), ...nodes(C, 20, 'True')], 0);
    const r = dc.seed(
      [inPlace('a-1', A, 7_000), inPlace('a-2', A, 9_000), inPlace('b-1', B, 10_000)],
      100_000,
      WALL,
    );
    expect(r).toEqual({ capUsed: 0, zonesWaiting: 1 });
    dc.observe({ name: 'a-3', zone: A, ready: 'Unknown', excluded: false });
    dc.observe({ name: 'b-3', zone: B, ready: 'Unknown', excluded: false });
    dc.observe({ name: 'c-3', zone: C, ready: 'Unknown', excluded: false });
    dc.evaluate(100_000);
    for (const [n, z] of [
      ['a-3', A],
      ['b-3', B],
      ['c-3', C],
    ] as const)
      dc.requestNoExecute(n, z, 100_000);
    expect(drain(dc, 100_000, 10 ** 6)).toEqual([
      { name: 'b-3', at: 100_000 },
      { name: 'c-3', at: 100_000 },
      { name: 'a-3', at: 103_000 },
    ]);
  });

  it('what holds a node after a seed is the zone rate, not the cap, while the cap has room', () => {
    const dc = new DisruptionController({ cap: { maxNodes: 5, windowMs: 300_000 } });
    dc.update([...nodes(A, 20, 'Unknown'), ...nodes(B, 20, 'True')], 0);
    dc.seed([inPlace('a-1', A, 2_000)], 100_000, WALL);
    dc.requestNoExecute('a-2', A, 100_000);
    const r = dc.admit(100_000);
    expect(r).toEqual({ admitted: [], events: [] });
    expect(dc.queued()).toEqual([{ name: 'a-2', zone: A, requestedAt: 100_000, reason: 'rate-limit' }]);
    expect(dc.nextWakeup(100_000)).toBe(108_000);
  });

  it("the node's observed zone wins over the one given; a node not observed is seeded in the one given", () => {
    const dc = new DisruptionController();
    dc.update([...nodes(A, 20, 'Unknown'), ...nodes(B, 20, 'True')], 0);
    dc.seed([inPlace('a-1', B, 1_000), inPlace('ghost', C, 1_000)], 100_000, WALL);
    dc.requestNoExecute('a-2', A, 100_000);
    dc.requestNoExecute('b-new', B, 100_000);
    dc.requestNoExecute('c-2', C, 100_000);
    expect(drain(dc, 100_000, 10 ** 6)).toEqual([
      { name: 'b-new', at: 100_000 },
      { name: 'a-2', at: 109_000 },
      { name: 'c-2', at: 109_000 },
    ]);
  });

  it("an out-of-service taint seeded with its node's own NoExecute taint takes no second slot", () => {
    const dc = new DisruptionController({ nodeEvictionRate: 1000, cap: { maxNodes: 2, windowMs: 300_000 } });
    dc.update([...nodes(A, 20, 'Unknown'), ...nodes(B, 20, 'True')], 0);
    const r = dc.seed(
      [inPlace('a-1', A, 60_000), inPlace('out-of-service:a-1', A, 30_000, true, 'a-1')],
      100_000,
      WALL,
    );
    expect(r.capUsed).toBe(1);
    dc.requestNoExecute('a-2', A, 100_000);
    expect(drain(dc, 100_000, 100_000).map((x) => x.name)).toEqual(['a-2']);
  });

  it('keeps the cap-used gauge current', async () => {
    const registry = new Registry();
    const dc = new DisruptionController(
      { cap: { maxNodes: 5, windowMs: 300_000 } },
      { metrics: createDisruptionMetrics(registry) },
    );
    dc.update(nodes(A, 5, 'True'), 0);
    dc.seed([inPlace('a-1', A, 1_000), inPlace('a-2', A, 2_000)], 100_000, WALL);
    const v = (await registry.getSingleMetric('nlc_noexecute_cap_used')!.get()).values[0]!.value;
    expect(v).toBe(2);
  });
});
