import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Lease, Node, NodeCondition } from '../kube/types.js';
import { DEADLINE_EPSILON_MS, NodeHealthTracker } from './tracker.js';

/**
 * Random sequences of lease/node/forget/reset events and time advances, checked after every step
 * against a brute-force oracle that re-implements the rules in the plainest way (remote timestamps
 * are modelled by explicit instant ids, never parsed here).
 */

const NAMES = ['a', 'b', 'c', 'd'] as const;
const CREATED = '2026-01-01T00:00:00Z';
const BASE = Date.UTC(2026, 0, 1);
const HISTORY = 3;
const DEFAULTS = { monitorGraceMs: 10_000, startupGraceMs: 12_000 };
const POOLS: Record<string, { monitorGraceMs: number; startupGraceMs: number }> = {
  fast: { monitorGraceMs: 4_000, startupGraceMs: 6_000 },
  slow: { monitorGraceMs: 20_000, startupGraceMs: 30_000 },
};

/** Remote timestamps: raw text and the instant it denotes (undefined = unparsable). */
interface Stamp {
  raw: string | null | undefined;
  id: number | string | undefined;
}
function stampAt(offsetMs: number, spelling: 0 | 1): Stamp {
  const iso = new Date(BASE + offsetMs).toISOString(); // ...T00:00:01.000Z
  const raw = spelling === 0 ? `${iso.slice(0, 19)}.${iso.slice(20, 23)}000Z` : `${iso.slice(0, 19)}Z`;
  return { raw, id: spelling === 1 ? Math.floor(offsetMs / 1000) * 1000 : offsetMs };
}
// Renew times: forward, backward (clock behind / stepped back), 10 min ahead, equal spellings, junk.
const RENEW_OFFSETS = [1_000, 2_000, 3_000, 4_000, -600_000, 600_000, 2_500];
const renewArb: fc.Arbitrary<Stamp> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc
      .tuple(fc.constantFrom(...RENEW_OFFSETS), fc.constantFrom(0 as const, 1 as const))
      .map(([o, s]) => stampAt(o, s)),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom<Stamp>(
      { raw: 'garbage', id: undefined },
      { raw: null, id: undefined },
      { raw: undefined, id: undefined },
    ),
  },
);
// Heartbeats: comparison by instant; unparsable ones compare as raw text.
const hbArb: fc.Arbitrary<Stamp> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc
      .tuple(fc.constantFrom(1_000, 2_000, 3_000, -5_000), fc.constantFrom(0 as const, 1 as const))
      .map(([o, s]) => stampAt(o, s)),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom<Stamp>({ raw: 'junk-hb', id: 'junk-hb' }, { raw: null, id: 'null' }),
  },
);

type ReadyKind = 'none' | 'placeholder' | 'True' | 'False' | 'Unknown';
type Step =
  | { t: 'node'; name: string; ready: ReadyKind; hb: Stamp; lt: 0 | 1; pool: string | undefined; uid: 0 | 1 }
  | {
      t: 'lease';
      name: string;
      renew: Stamp;
      holder: 'self' | 'null' | 'other';
      ns: 'ok' | 'wrong' | 'absent';
    }
  | { t: 'forgetNode' | 'forgetLease'; name: string }
  | { t: 'reset' }
  | { t: 'advance'; ms: number }
  | { t: 'pop' }
  | { t: 'fire' }
  | { t: 'recheck' }
  | { t: 'junk'; as: 'node' | 'lease'; value: unknown };

const nameArb = fc.constantFrom(...NAMES);
const stepArb: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      t: fc.constant('node' as const),
      name: nameArb,
      ready: fc.constantFrom<ReadyKind>('none', 'placeholder', 'True', 'True', 'False', 'Unknown'),
      hb: hbArb,
      lt: fc.constantFrom(0 as const, 1 as const),
      pool: fc.constantFrom(undefined, 'fast', 'slow'),
      uid: fc.constantFrom(0 as const, 0 as const, 0 as const, 1 as const),
    }),
  },
  {
    weight: 6,
    arbitrary: fc.record({
      t: fc.constant('lease' as const),
      name: nameArb,
      renew: renewArb,
      holder: fc.constantFrom('self' as const, 'self' as const, 'null' as const, 'other' as const),
      ns: fc.constantFrom('ok' as const, 'ok' as const, 'ok' as const, 'absent' as const, 'wrong' as const),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constantFrom('forgetNode' as const, 'forgetLease' as const),
      name: nameArb,
    }),
  },
  { weight: 1, arbitrary: fc.constant({ t: 'reset' as const }) },
  {
    weight: 6,
    arbitrary: fc.record({ t: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 15_000 }) }),
  },
  { weight: 3, arbitrary: fc.constant({ t: 'pop' as const }) },
  { weight: 3, arbitrary: fc.constant({ t: 'fire' as const }) },
  { weight: 1, arbitrary: fc.constant({ t: 'recheck' as const }) },
  {
    weight: 1,
    arbitrary: fc.record({
      t: fc.constant('junk' as const),
      as: fc.constantFrom('node' as const, 'lease' as const),
      value: fc.anything(),
    }),
  },
);

function buildNode(s: Extract<Step, { t: 'node' }>): Node {
  const conditions: NodeCondition[] = [];
  if (s.ready === 'placeholder') {
    conditions.push({
      type: 'Ready',
      status: 'Unknown',
      reason: 'NodeStatusNeverUpdated',
      message: 'Kubelet never posted node status.',
      lastHeartbeatTime: CREATED,
      lastTransitionTime: '2026-01-01T00:00:09Z',
    });
  } else if (s.ready !== 'none') {
    conditions.push({
      type: 'Ready',
      status: s.ready,
      lastHeartbeatTime: s.hb.raw,
      lastTransitionTime: s.lt === 0 ? '2026-01-01T00:00:00Z' : '2026-01-01T00:00:05Z',
    });
  }
  return {
    metadata: {
      name: s.name,
      uid: `${s.name}-${s.uid}`,
      creationTimestamp: CREATED,
      labels: s.pool ? { pool: s.pool } : {},
    },
    status: { conditions },
  };
}

function buildLease(s: Extract<Step, { t: 'lease' }>): Lease {
  const metadata: Lease['metadata'] = { name: s.name };
  if (s.ns === 'ok') metadata.namespace = 'kube-node-lease';
  if (s.ns === 'wrong') metadata.namespace = 'default';
  return {
    metadata,
    spec: {
      holderIdentity: s.holder === 'self' ? s.name : s.holder === 'null' ? null : 'x',
      renewTime: s.renew.raw,
    },
  };
}

interface OEntry {
  hasNode: boolean;
  uid: string | undefined;
  ready: { hbId: number | string } | undefined;
  graceMs: number;
  lastChange: number;
  hasLease: boolean;
  saved: number | undefined;
  history: number[];
  reported: boolean;
}

class Oracle {
  readonly m = new Map<string, OEntry>();
  backward = 0;
  private get(name: string, now: number): OEntry {
    let e = this.m.get(name);
    if (!e) {
      e = {
        hasNode: false,
        uid: undefined,
        ready: undefined,
        graceMs: 0,
        lastChange: now,
        hasLease: false,
        saved: undefined,
        history: [],
        reported: false,
      };
      this.m.set(name, e);
    }
    return e;
  }
  timedOut(e: OEntry | undefined, now: number): boolean {
    return !!e && e.hasNode && now > e.lastChange + e.graceMs;
  }
  node(s: Extract<Step, { t: 'node' }>, now: number): void {
    const e = this.get(s.name, now);
    const uid = `${s.name}-${s.uid}`;
    const cur =
      s.ready === 'none'
        ? undefined
        : s.ready === 'placeholder'
          ? { hbId: 'placeholder' }
          : { hbId: s.hb.id ?? 'undef' };
    if (!e.hasNode) {
      e.hasNode = true;
      e.lastChange = now;
    } else if (e.uid !== uid) {
      e.lastChange = now;
    } else if (!e.ready && cur && s.ready !== 'placeholder') {
      e.lastChange = now;
    } else if (e.ready && cur && e.ready.hbId !== cur.hbId) {
      e.lastChange = now;
    }
    e.uid = uid;
    e.ready = cur;
    const g = (s.pool && POOLS[s.pool]) || DEFAULTS;
    e.graceMs = cur ? g.monitorGraceMs : g.startupGraceMs;
    e.reported = e.reported && this.timedOut(e, now);
  }
  lease(s: Extract<Step, { t: 'lease' }>, now: number): void {
    if (s.ns === 'wrong') return;
    const e = this.get(s.name, now);
    e.hasLease = true;
    const id = s.renew.id;
    if (typeof id !== 'number') return;
    if (e.saved !== undefined && id === e.saved) return;
    if (e.history.includes(id)) return;
    if (e.saved !== undefined && id < e.saved) this.backward++;
    e.saved = id;
    e.history.push(id);
    if (e.history.length > HISTORY) e.history.shift();
    e.lastChange = now;
    e.reported = false;
  }
  forgetNode(name: string): void {
    const e = this.m.get(name);
    if (!e?.hasNode) return;
    Object.assign(e, { hasNode: false, uid: undefined, ready: undefined, reported: false });
    if (!e.hasLease) this.m.delete(name);
  }
  forgetLease(name: string): void {
    const e = this.m.get(name);
    if (!e?.hasLease) return;
    e.hasLease = false;
    e.saved = undefined;
    if (!e.hasNode) this.m.delete(name);
  }
  reset(now: number): void {
    for (const e of this.m.values()) {
      e.lastChange = now;
      e.reported = false;
    }
  }
}

function run(steps: Step[]): void {
  const t = new NodeHealthTracker({
    grace: DEFAULTS,
    graceFor: (n) => POOLS[n.metadata.labels?.pool ?? ''],
    renewHistorySize: HISTORY,
  });
  const o = new Oracle();
  let now = 1_000;
  for (const s of steps) {
    switch (s.t) {
      case 'node':
        t.observeNode(buildNode(s), now);
        o.node(s, now);
        break;
      case 'lease':
        t.observeLease(buildLease(s), now);
        o.lease(s, now);
        break;
      case 'forgetNode':
        expect(t.forgetNode(s.name)).toBe(!!o.m.get(s.name)?.hasNode);
        o.forgetNode(s.name);
        break;
      case 'forgetLease':
        expect(t.forgetLease(s.name)).toBe(!!o.m.get(s.name)?.hasLease);
        o.forgetLease(s.name);
        break;
      case 'reset':
        t.resetAll(now);
        o.reset(now);
        break;
      case 'advance':
        now += s.ms;
        break;
      case 'pop':
      case 'fire': {
        if (s.t === 'fire') {
          const at = t.nextDeadline();
          if (at === undefined) break;
          now = Math.max(now, at);
        }
        const due = t.popDue(now);
        if (s.t === 'fire') expect(due.length).toBeGreaterThan(0);
        for (const name of due) {
          const e = o.m.get(name);
          // SAFETY: never reported before its grace has passed since the last observed change
          expect(o.timedOut(e, now)).toBe(true);
          expect(e!.reported).toBe(false);
          e!.reported = true;
        }
        // COMPLETENESS: every node past its grace has been reported (now or earlier, not refreshed since)
        for (const [name, e] of o.m)
          if (o.timedOut(e, now)) expect({ name, reported: e.reported }).toEqual({ name, reported: true });
        break;
      }
      case 'recheck': {
        const want = [...o.m]
          .filter(([, e]) => o.timedOut(e, now))
          .map(([n]) => n)
          .sort();
        expect(t.recheckAll(now)).toEqual(want);
        for (const [, e] of o.m) e.reported = o.timedOut(e, now);
        break;
      }
      case 'junk':
        if (s.as === 'node') t.observeNode(s.value as Node, now);
        else t.observeLease(s.value as Lease, now);
        break;
    }
    // After every step: state, timeout judgement and the next deadline agree with the oracle.
    let min: number | undefined;
    for (const name of NAMES) {
      const e = o.m.get(name);
      const h = t.health(name);
      expect(h === undefined).toBe(e === undefined);
      expect(t.isTimedOut(name, now)).toBe(o.timedOut(e, now));
      if (e?.hasNode) {
        expect(h).toMatchObject({ probeTimestamp: e.lastChange, graceMs: e.graceMs, reported: e.reported });
        if (!e.reported) min = Math.min(min ?? Number.POSITIVE_INFINITY, e.lastChange + e.graceMs);
      }
    }
    expect(t.nextDeadline()).toBe(min === undefined ? undefined : min + DEADLINE_EPSILON_MS);
    const st = t.stats();
    const entries = [...o.m.values()];
    expect(st.nodes).toBe(entries.filter((e) => e.hasNode).length);
    expect(st.leases).toBe(entries.filter((e) => e.hasLease).length);
    expect(st.leasesWithoutNode).toBe(entries.filter((e) => e.hasLease && !e.hasNode).length);
    expect(st.backwardSteps).toBe(o.backward);
  }
}

describe('NodeHealthTracker properties', () => {
  it('matches the brute-force oracle on random event sequences (never throws, safe, complete)', () => {
    fc.assert(
      fc.property(fc.array(stepArb, { minLength: 1, maxLength: 120 }), (steps) => {
        run(steps);
      }),
      { numRuns: 500 },
    );
  });

  it('never throws on arbitrary objects', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.anything(), fc.anything(), fc.double()), { maxLength: 30 }), (xs) => {
        const t = new NodeHealthTracker({ graceFor: () => ({ monitorGraceMs: -1 }) });
        for (const [a, b, now] of xs) {
          t.observeNode(a as Node, now);
          t.observeLease(b as Lease, now);
          t.observeNode({ metadata: { name: 'n' }, status: { conditions: a } } as unknown as Node, now);
          t.observeLease({ metadata: { name: 'n' }, spec: b } as unknown as Lease, now);
          t.popDue(now);
          t.recheckAll(now);
          t.markUnknown({ metadata: { name: 'n' }, status: { conditions: b } } as unknown as Node, now, now);
        }
        expect(t.stats().nodes).toBeLessThanOrEqual(xs.length + 1);
      }),
      { numRuns: 300 },
    );
  });
});

describe('NodeHealthTracker: inferred forgiveness is capped', () => {
  type Op =
    | { t: 'advance'; ms: number }
    | { t: 'renew' }
    | { t: 'reset' }
    | { t: 'outage'; ms: number }
    | { t: 'hold'; ms: number }
    | { t: 'blind'; ms: number };
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ t: fc.constant('advance' as const), ms: fc.integer({ min: 1, max: 30_000 }) }),
    fc.record({ t: fc.constant('renew' as const) }),
    fc.record({ t: fc.constant('reset' as const) }),
    fc.record({ t: fc.constant('outage' as const), ms: fc.integer({ min: -10, max: 40_000 }) }),
    fc.record({ t: fc.constant('hold' as const), ms: fc.integer({ min: -10, max: 40_000 }) }),
    fc.record({ t: fc.constant('blind' as const), ms: fc.integer({ min: -10, max: 40_000 }) }),
  );

  it("storage outages and holds never move a probe more than the node's grace past its last observation plus what blind spells moved it; short of the cap they move it as far as asked; the probe never goes back nor past now", () => {
    fc.assert(
      fc.property(fc.array(opArb, { minLength: 1, maxLength: 80 }), (ops) => {
        const grace = DEFAULTS.monitorGraceMs;
        const t = new NodeHealthTracker({ grace: DEFAULTS });
        let now = 1_000;
        let renewal = 0;
        const ready: NodeCondition = { type: 'Ready', status: 'True', lastHeartbeatTime: CREATED };
        t.observeNode({ metadata: { name: 'a', uid: 'u' }, status: { conditions: [ready] } }, now);
        let base = now; // the probe the last observation set
        let blind = 0; // how far blind spells moved it since
        const probe = () => t.health('a')!.probeTimestamp;
        for (const op of ops) {
          const before = probe();
          let target: number | undefined;
          switch (op.t) {
            case 'advance':
              now += op.ms;
              break;
            case 'renew':
              renewal += 1_000;
              t.observeLease(
                {
                  metadata: { name: 'a', namespace: 'kube-node-lease' },
                  spec: { renewTime: stampAt(renewal, 0).raw },
                },
                now,
              );
              base = now;
              blind = 0;
              break;
            case 'reset':
              t.resetAll(now);
              base = now;
              blind = 0;
              break;
            case 'outage':
              t.forgiveOutage(op.ms, now);
              if (op.ms > 0) target = Math.max(before, Math.min(before + op.ms, now));
              break;
            case 'hold':
              t.holdAll(now + op.ms, now);
              if (op.ms > 0) target = Math.max(before, Math.min(now + op.ms - grace, now));
              break;
            case 'blind':
              t.extendBlind(op.ms, now);
              blind += probe() - before;
              break;
          }
          const after = probe();
          const forgiven = after - base - blind;
          expect(forgiven).toBeLessThanOrEqual(grace);
          expect(t.health('a')!.forgivenMs).toBe(forgiven);
          if (op.t !== 'renew' && op.t !== 'reset') expect(after).toBeGreaterThanOrEqual(before);
          expect(after).toBeLessThanOrEqual(now);
          if (target !== undefined) expect(after === target || forgiven === grace).toBe(true);
          if (target === undefined && (op.t === 'outage' || op.t === 'hold')) expect(after).toBe(before);
        }
      }),
      { numRuns: 500 },
    );
  });
});
