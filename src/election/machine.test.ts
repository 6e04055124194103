import { describe, expect, it } from 'vitest';
import type { Lease } from '../kube/types.js';
import {
  attemptFinished,
  attemptStarted,
  canWrite,
  decide,
  type ElectionState,
  fenceDeadline,
  healthCheck,
  initialState,
  type MachineConfig,
  observe,
  planWrite,
  preemptedBy,
  releaseSpec,
  setEligible,
  stepDown,
  writeSucceeded,
} from './machine.js';
import { microTime, recordOf } from './record.js';

// Monotonic time in these tests starts at 0 and is unrelated to the wall clock (WALL).
const cfg: MachineConfig = {
  identity: 'me_1',
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
  fenceSafetyMarginMs: 5_000,
};
const WALL = Date.parse('2026-03-01T12:00:00.000Z');
const HOUR = 3_600_000;

let rv = 1;
function lease(spec: Lease['spec'], name = 'nlc'): Lease {
  return { metadata: { name, namespace: 'ns', resourceVersion: String(++rv) }, spec };
}
function held(holder: string, renewWall: number, extra: Partial<NonNullable<Lease['spec']>> = {}): Lease {
  return lease({
    holderIdentity: holder,
    leaseDurationSeconds: 15,
    acquireTime: microTime(renewWall - 60_000),
    renewTime: microTime(renewWall),
    leaseTransitions: 3,
    ...extra,
  });
}
/**
 * A lock first found missing one lease duration before 0 and missing since: free to create at 0.
 * (Found missing at `t`, it is free only at `t` + leaseDuration: see 'a lock missing at the first look'.)
 */
function missingForALease(): ElectionState {
  return observe(cfg, initialState(-cfg.leaseDurationMs), undefined, -cfg.leaseDurationMs, 'get');
}
/** Applies a successful write of whatever planWrite returned, as the server would store it. */
function win(s: ElectionState, now: number, wall = WALL + now): ElectionState {
  const plan = planWrite(cfg, s, now, wall);
  if (plan.kind !== 'create' && plan.kind !== 'update') throw new Error(`expected a write, got ${plan.kind}`);
  const stored =
    plan.kind === 'create'
      ? lease(plan.spec)
      : { ...plan.body, metadata: { ...plan.body.metadata, resourceVersion: String(++rv) } };
  return writeSucceeded(cfg, attemptStarted(s, now), stored, now, now + 5);
}

describe('candidate', () => {
  it('a lock deleted under a live holder is free only when that lease would have expired', () => {
    let s = observe(cfg, initialState(0), held('other_2', WALL), 1_000, 'watch');
    s = observe(cfg, s, undefined, 4_000, 'watch');
    expect(s.lock).toEqual({ kind: 'absent', since: 4_000, heldUntil: 16_000, heldBy: 'other_2' });
    expect(decide(cfg, s, 4_000)).toMatchObject({ kind: 'attempt', read: true, why: 'poll' });
    // A GET that confirms the deletion changes nothing, and plans no create before 16 s.
    s = observe(cfg, s, undefined, 4_010, 'get');
    expect(planWrite(cfg, s, 4_010, WALL)).toEqual({ kind: 'held', holder: 'other_2', until: 16_000 });
    s = attemptFinished(cfg, attemptStarted(s, 4_000), 4_010, 0);
    expect(decide(cfg, s, 5_000)).toEqual({ kind: 'wait', until: 6_010 });
    // Polls before 16 s read it again and still plan nothing.
    expect(decide(cfg, s, 6_010)).toMatchObject({ kind: 'attempt', read: true, why: 'poll' });
    s = observe(cfg, s, undefined, 6_020, 'get');
    expect(planWrite(cfg, s, 15_999, WALL).kind).toBe('held');
    expect(decide(cfg, s, 16_000)).toMatchObject({ kind: 'attempt', read: false, why: 'free' });
    expect(planWrite(cfg, s, 16_000, WALL).kind).toBe('create');
    // A released lock deleted: free at once.
    const released = observe(cfg, initialState(0), held('', WALL), 1_000, 'watch');
    expect(observe(cfg, released, undefined, 2_000, 'watch').lock).toEqual({ kind: 'absent', since: 2_000 });
  });

  it('a lock missing at the first look is free only one lease duration later (issue 28 defect 8)', () => {
    // A holder we never saw may have renewed just before the lock was deleted, and may not have
    // seen the deletion yet: it may write until leaseDuration after its renewal, which came before
    // our look.
    let s = observe(cfg, initialState(0), undefined, 2_000, 'get');
    expect(s.lock).toEqual({ kind: 'absent', since: 2_000, heldUntil: 17_000, heldBy: '' });
    expect(planWrite(cfg, s, 2_000, WALL)).toEqual({ kind: 'held', holder: '', until: 17_000 });
    s = attemptFinished(cfg, attemptStarted(s, 2_000), 2_000, 1);
    expect(decide(cfg, s, 2_000)).toEqual({ kind: 'wait', until: 6_400 });
    s = attemptFinished(cfg, attemptStarted(observe(cfg, s, undefined, 15_200, 'get'), 15_200), 15_200, 1);
    // The next poll (15200 + 4400) would come later: the wait ends when the lock is free.
    expect(decide(cfg, s, 15_200)).toEqual({ kind: 'wait', until: 17_000 });
    expect(planWrite(cfg, s, 16_999, WALL).kind).toBe('held');
    expect(decide(cfg, s, 17_000)).toMatchObject({ kind: 'attempt', read: false, why: 'free' });
    expect(planWrite(cfg, s, 17_000, WALL).kind).toBe('create');
    // Seen created and deleted again meanwhile: the rules for a holder we saw apply.
    const seen = observe(
      cfg,
      observe(cfg, s, held('other_2', WALL), 3_000, 'watch'),
      undefined,
      4_000,
      'watch',
    );
    expect(seen.lock).toEqual({ kind: 'absent', since: 4_000, heldUntil: 18_000, heldBy: 'other_2' });
  });

  it('reads first, then creates a missing lock with transitions 0 and acquireTime = renewTime', () => {
    let s = initialState(0);
    expect(decide(cfg, s, 0)).toMatchObject({ kind: 'attempt', read: true });
    expect(planWrite(cfg, s, 0, WALL).kind).toBe('read');
    s = observe(cfg, s, undefined, 3, 'get');
    const plan = planWrite(cfg, s, 15_003, WALL);
    expect(plan).toEqual({
      kind: 'create',
      spec: {
        holderIdentity: 'me_1',
        leaseDurationSeconds: 15,
        acquireTime: '2026-03-01T12:00:00.000000Z',
        renewTime: '2026-03-01T12:00:00.000000Z',
        leaseTransitions: 0,
      },
    });
  });

  it('respects a live holder until observedTime + leaseDuration, then takes it at that instant', () => {
    let s = observe(cfg, initialState(0), held('other_2', WALL), 1_000, 'get');
    s = attemptFinished(cfg, attemptStarted(s, 1_000), 1_000, 0.5); // next poll at 1000 + 2000 x 1.6
    expect(planWrite(cfg, s, 1_000, WALL)).toMatchObject({ kind: 'held', holder: 'other_2', until: 16_000 });
    expect(decide(cfg, s, 1_000)).toEqual({ kind: 'wait', until: 4_200 });
    // Polls that see the same record do not move the expiry.
    s = attemptFinished(
      cfg,
      attemptStarted(observe(cfg, s, held('other_2', WALL), 4_200, 'get'), 4_200),
      4_210,
      0,
    );
    expect(decide(cfg, s, 4_210)).toEqual({ kind: 'wait', until: 6_210 });
    s = attemptFinished(cfg, attemptStarted(s, 14_000), 14_010, 1);
    // The next poll (14010 + 4400) would come after expiry: the wait ends at expiry instead.
    expect(decide(cfg, s, 14_010)).toEqual({ kind: 'wait', until: 16_000 });
    expect(decide(cfg, s, 15_999)).toEqual({ kind: 'wait', until: 16_000 });
    expect(decide(cfg, s, 16_000)).toMatchObject({ kind: 'attempt', read: false, why: 'free' });
    const plan = planWrite(cfg, s, 16_000, WALL + 16_000);
    expect(plan).toMatchObject({ kind: 'update', takeover: true });
    if (plan.kind !== 'update') throw new Error('unreachable');
    // A new holder: transitions + 1, acquireTime = now; the precondition is the observed version.
    expect(plan.body.spec).toMatchObject({
      holderIdentity: 'me_1',
      leaseTransitions: 4,
      acquireTime: '2026-03-01T12:00:16.000000Z',
      renewTime: '2026-03-01T12:00:16.000000Z',
      leaseDurationSeconds: 15,
    });
    expect(plan.body.metadata.resourceVersion).toBe(
      s.lock.kind === 'present' ? s.lock.lease.metadata.resourceVersion : '',
    );
  });

  it('a renewal by the holder (changed renewTime) restarts the expiry from when WE saw it', () => {
    let s = observe(cfg, initialState(0), held('other_2', WALL), 0, 'watch');
    s = observe(cfg, s, held('other_2', WALL + 2_000), 9_000, 'watch');
    expect(planWrite(cfg, s, 23_999, WALL)).toMatchObject({ kind: 'held', until: 24_000 });
    expect(planWrite(cfg, s, 24_000, WALL).kind).toBe('update');
  });

  it.each([
    ['hours in the future', 5 * HOUR],
    ['hours in the past', -5 * HOUR],
    ['years in the past', -3 * 365 * 24 * HOUR],
  ])('a remote renewTime %s does not change the expiry judgement', (_label, skew) => {
    const s = observe(cfg, initialState(0), held('other_2', WALL + skew), 1_000, 'get');
    expect(planWrite(cfg, s, 15_999, WALL).kind).toBe('held');
    expect(planWrite(cfg, s, 16_000, WALL).kind).toBe('update');
    expect(decide(cfg, attemptFinished(cfg, attemptStarted(s, 1_000), 1_000, 1), 1_000)).toEqual({
      kind: 'wait',
      until: 5_400,
    });
  });

  it("uses the record's own leaseDurationSeconds, like client-go", () => {
    const s = observe(cfg, initialState(0), held('other_2', WALL, { leaseDurationSeconds: 40 }), 0, 'get');
    expect(planWrite(cfg, s, 39_999, WALL).kind).toBe('held');
    expect(planWrite(cfg, s, 40_000, WALL).kind).toBe('update');
  });

  it('takes a released lock (empty holder) at once, keeping the transition count + 1', () => {
    let s = observe(cfg, initialState(0), held('other_2', WALL), 0, 'watch');
    s = attemptFinished(cfg, attemptStarted(s, 0), 0, 0);
    const released = lease(releaseSpec(recordOf(held('other_2', WALL)), WALL + 700));
    s = observe(cfg, s, released, 700, 'watch');
    expect(decide(cfg, s, 700)).toMatchObject({ kind: 'attempt', read: false, why: 'free' });
    const plan = planWrite(cfg, s, 700, WALL + 700);
    expect(plan).toMatchObject({ kind: 'update', takeover: true, body: { spec: { leaseTransitions: 4 } } });
  });

  it('does not hot-loop on a free lock after a failed attempt: waits for the jittered poll', () => {
    let s = missingForALease();
    expect(decide(cfg, s, 0)).toMatchObject({ kind: 'attempt', read: false });
    s = attemptFinished(cfg, attemptStarted(s, 0), 30, 0.25); // e.g. a 500 from create
    expect(decide(cfg, s, 30)).toEqual({ kind: 'wait', until: 30 + 2_000 * 1.3 });
    expect(decide(cfg, s, 2_630)).toMatchObject({ kind: 'attempt', read: true, why: 'poll' });
  });

  it('a new change after a failed attempt warrants an immediate attempt', () => {
    let s = observe(cfg, initialState(0), held('other_2', WALL), 0, 'get');
    s = attemptFinished(cfg, attemptStarted(s, 0), 0, 0);
    s = observe(cfg, s, lease(releaseSpec(recordOf(held('other_2', WALL)), WALL)), 50, 'watch');
    expect(decide(cfg, s, 50)).toMatchObject({ kind: 'attempt', why: 'free' });
  });

  it('jitters candidate polls over [retryPeriod, retryPeriod x 2.2)', () => {
    const s = observe(cfg, initialState(0), held('other_2', WALL), 0, 'get');
    expect(attemptFinished(cfg, s, 0, 0).nextAttemptAt).toBe(2_000);
    expect(attemptFinished(cfg, s, 0, 0.999).nextAttemptAt).toBeCloseTo(4_397.6);
  });

  it('a lock still naming our identity (say, an acquire whose response we lost) is ours: no new transition', () => {
    const s = observe(cfg, initialState(0), held('me_1', WALL), 0, 'get');
    expect(decide(cfg, s, 0)).toMatchObject({ kind: 'attempt', why: 'free' });
    const plan = planWrite(cfg, s, 0, WALL + 1);
    expect(plan).toMatchObject({
      kind: 'update',
      takeover: false,
      body: { spec: { leaseTransitions: 3, acquireTime: microTime(WALL - 60_000) } },
    });
  });
});

describe('leader', () => {
  const lead = () => win(missingForALease(), 10);

  it('renews every retryPeriod with acquireTime and transitions kept', () => {
    let s = lead();
    expect(s.phase).toBe('leader');
    expect(s.renewedAt).toBe(10);
    expect(decide(cfg, s, 15)).toEqual({ kind: 'wait', until: 2_015 });
    expect(decide(cfg, s, 2_015)).toMatchObject({ kind: 'attempt', read: false, why: 'renew' });
    const acquire = s.lock.kind === 'present' ? s.lock.record.acquireTime : undefined;
    const plan = planWrite(cfg, s, 2_015, WALL + 2_015);
    expect(plan).toMatchObject({
      kind: 'update',
      takeover: false,
      body: { spec: { acquireTime: acquire, leaseTransitions: 0, renewTime: microTime(WALL + 2_015) } },
    });
    s = win(s, 2_015);
    expect(s.renewedAt).toBe(2_015);
    expect(decide(cfg, s, 2_100)).toEqual({ kind: 'wait', until: 4_020 });
  });

  it('retries failed renewals every retryPeriod and loses exactly renewDeadline after the last success was sent', () => {
    let s = lead(); // renewedAt 10
    const seen: number[] = [];
    let now = 2_015;
    for (;;) {
      const d = decide(cfg, s, now);
      if (d.kind === 'lose') break;
      if (d.kind === 'attempt') {
        seen.push(now);
        s = attemptFinished(cfg, attemptStarted(s, now), now + 5, 0.9);
        now += 5;
      } else if (d.kind === 'wait') now = d.until;
      else throw new Error(d.kind);
    }
    expect(now).toBe(10_010);
    expect(seen).toEqual([2_015, 4_020, 6_025, 8_030]);
  });

  it('fence: open until min(renewDeadline, leaseDuration - margin) after the renewal was sent', () => {
    const s = lead();
    expect(fenceDeadline(cfg, s)).toBe(10_010);
    expect(canWrite(cfg, s, 10_009)).toBe(true);
    expect(canWrite(cfg, s, 10_010)).toBe(false);
    const wide = { ...cfg, fenceSafetyMarginMs: 2_000 }; // LD - 2 s = 13 s, capped by RD = 10 s
    expect(fenceDeadline(wide, s)).toBe(10_010);
    const narrow = { ...cfg, fenceSafetyMarginMs: 8_000 }; // LD - 8 s = 7 s
    expect(fenceDeadline(narrow, s)).toBe(7_010);
    expect(canWrite(narrow, s, 7_009)).toBe(true);
    expect(canWrite(narrow, s, 7_010)).toBe(false);
    expect(canWrite(cfg, initialState(0), 0)).toBe(false);
  });

  it('watch shows another holder: fence closes at once, a GET decides', () => {
    let s = lead();
    s = observe(cfg, s, held('thief_9', WALL), 500, 'watch');
    expect(s.phase).toBe('leader');
    expect(s.suspect).toBe(true);
    expect(canWrite(cfg, s, 500)).toBe(false);
    expect(decide(cfg, s, 500)).toMatchObject({ kind: 'attempt', read: true, why: 'verify' });
    // The GET says it was a stale event: we still hold it.
    const ours = observe(cfg, s, held('me_1', WALL + 10), 510, 'get');
    expect(ours.suspect).toBe(false);
    expect(canWrite(cfg, ours, 510)).toBe(true);
    // Or it confirms: leadership lost.
    const gone = observe(cfg, s, held('thief_9', WALL), 510, 'get');
    expect(gone.phase).toBe('lost');
    expect(gone.endReason).toBe('lock taken by thief_9');
    expect(canWrite(cfg, gone, 510)).toBe(false);
  });

  it('lock deleted while the fence would be open: stays leader, fence closed, creates it again', () => {
    let s = lead(); // renewedAt 10
    s = observe(cfg, s, undefined, 500, 'watch');
    expect(s).toMatchObject({ phase: 'leader', suspect: true });
    expect(canWrite(cfg, s, 500)).toBe(false);
    expect(decide(cfg, s, 500)).toMatchObject({ kind: 'attempt', read: true, why: 'verify' });
    // The GET confirms it: still leader, and the plan is to create it with our record.
    s = observe(cfg, s, undefined, 510, 'get');
    expect(s).toMatchObject({ phase: 'leader', suspect: true, lock: { kind: 'absent', since: 500 } });
    const plan = planWrite(cfg, s, 510, WALL + 510);
    expect(plan).toMatchObject({
      kind: 'create',
      spec: { holderIdentity: 'me_1', leaseDurationSeconds: 15 },
    });
    s = win(s, 510);
    expect(s).toMatchObject({ phase: 'leader', suspect: false, renewedAt: 510 });
    expect(canWrite(cfg, s, 520)).toBe(true);
    // Once the fence would have closed, a deleted lock ends leadership (anyone may have it by now).
    const late = observe(cfg, lead(), undefined, 10_010, 'get');
    expect(late).toMatchObject({ phase: 'lost', endReason: 'lock deleted' });
  });

  it('stepDown: a candidate that may not acquire, fence closed; a late renewal answer does not make it leader', () => {
    const s = lead();
    const down = stepDown(cfg, s, 500);
    expect(down).toMatchObject({ phase: 'candidate', eligible: false, renewedAt: undefined });
    expect(canWrite(cfg, down, 500)).toBe(false);
    expect(decide(cfg, down, 2_500)).toMatchObject({ kind: 'attempt', read: true, why: 'poll' });
    expect(planWrite(cfg, down, 2_500, WALL)).toEqual({ kind: 'ineligible' });
    const renewed = held('me_1', WALL + 600);
    const late = writeSucceeded(cfg, down, renewed, 400, 600);
    expect(late).toMatchObject({
      phase: 'candidate',
      eligible: false,
      lock: { kind: 'present', lease: renewed },
    });
    // Eligible again, it takes its own (free to it) lock at once.
    const back = setEligible(late, true);
    expect(decide(cfg, back, 700)).toMatchObject({ kind: 'attempt', read: false, why: 'free' });
  });

  it('a lost state ignores everything after', () => {
    const s = observe(cfg, lead(), held('thief_9', WALL), 100, 'get');
    expect(decide(cfg, s, 100)).toEqual({ kind: 'idle' });
    expect(writeSucceeded(cfg, s, held('me_1', WALL), 100, 101)).toBe(s);
    expect(observe(cfg, s, held('me_1', WALL), 102, 'get')).toBe(s);
  });

  it('release writes no holder, leaseDurationSeconds 1, transitions kept', () => {
    expect(releaseSpec(recordOf(held('me_1', WALL)), WALL + 5)).toEqual({
      holderIdentity: '',
      leaseDurationSeconds: 1,
      leaseTransitions: 3,
      acquireTime: microTime(WALL + 5),
      renewTime: microTime(WALL + 5),
    });
  });
});

describe('coordinated leader election (the coordinator names the holder)', () => {
  const co: MachineConfig = { ...cfg, coordinated: true };
  const STRATEGY = 'OldestEmulationVersion';
  /** The lock as kube-apiserver's coordinator writes it: 5 s, no acquireTime, its strategy. */
  function named(holder: string, extra: Partial<NonNullable<Lease['spec']>> = {}): Lease {
    return lease({
      holderIdentity: holder,
      leaseDurationSeconds: 5,
      renewTime: microTime(WALL),
      strategy: STRATEGY,
      ...extra,
    });
  }
  /** Seen released at 0, then named us by the coordinator: free at once. */
  function elected(): ElectionState {
    const released = observe(co, initialState(0), named('', { leaseDurationSeconds: 1 }), 0, 'get');
    return observe(co, released, named('me_1'), 0, 'watch');
  }
  /** Applies a successful write of what planWrite returned. */
  function renew(s: ElectionState, now: number): ElectionState {
    const plan = planWrite(co, s, now, WALL + now);
    if (plan.kind !== 'update') throw new Error(`expected an update, got ${plan.kind}`);
    const stored = { ...plan.body, metadata: { ...plan.body.metadata, resourceVersion: String(++rv) } };
    return writeSucceeded(co, attemptStarted(s, now), stored, now, now + 5);
  }

  it('a candidate never creates a missing lock, however long it stays missing', () => {
    let s = observe(co, initialState(0), undefined, 0, 'get');
    for (const now of [0, 15_000, 16_000, 10 * HOUR]) {
      expect(planWrite(co, s, now, WALL + now)).toEqual({ kind: 'await-coordinator', holder: '' });
      expect(decide(co, s, now)).not.toMatchObject({ why: 'free' });
      s = attemptFinished(co, attemptStarted(s, now), now, 0);
    }
    // The same state in ordinary mode creates it one lease duration after the first look.
    expect(planWrite(cfg, observe(cfg, initialState(0), undefined, 0, 'get'), 15_000, WALL).kind).toBe(
      'create',
    );
  });

  it('a candidate never takes a lock held by another, not even expired or released', () => {
    let s = observe(co, initialState(0), held('other_2', WALL), 0, 'get');
    expect(planWrite(co, s, 60_000, WALL)).toEqual({ kind: 'await-coordinator', holder: 'other_2' });
    expect(decide(co, s, 60_000)).toMatchObject({ kind: 'attempt', read: true, why: 'poll' });
    s = observe(
      co,
      s,
      lease({ holderIdentity: '', leaseDurationSeconds: 1, strategy: STRATEGY }),
      61_000,
      'watch',
    );
    expect(planWrite(co, s, 61_000, WALL)).toEqual({ kind: 'await-coordinator', holder: '' });
    expect(decide(co, s, 61_000)).not.toMatchObject({ why: 'free' });
    // Ordinary mode takes both.
    expect(
      planWrite(cfg, observe(cfg, initialState(0), held('other_2', WALL), 0, 'get'), 60_000, WALL).kind,
    ).toBe('update');
  });

  it('a lock the coordinator names us in after a release is renewed at once (read first), keeping its strategy', () => {
    let s = observe(co, initialState(0), named('other_2'), 0, 'get');
    s = observe(co, s, named('', { leaseDurationSeconds: 1 }), 1_000, 'watch'); // released
    s = observe(co, s, named('me_1'), 1_050, 'watch');
    expect(decide(co, s, 1_050)).toEqual({ kind: 'attempt', read: true, why: 'free' });
    const plan = planWrite(co, s, 1_060, WALL + 1_060);
    expect(plan).toMatchObject({ kind: 'update', takeover: true });
    expect(plan.kind === 'update' && plan.body.spec).toEqual({
      holderIdentity: 'me_1',
      leaseDurationSeconds: 15,
      acquireTime: microTime(WALL + 1_060),
      renewTime: microTime(WALL + 1_060),
      leaseTransitions: 0,
      strategy: STRATEGY,
    });
    s = renew(s, 1_060);
    expect(s.phase).toBe('leader');
    expect(canWrite(co, s, 1_070)).toBe(true);
    // Renewals keep acquireTime, the count and the strategy.
    const next = planWrite(co, s, 3_060, WALL + 3_060);
    expect(next.kind === 'update' && next.body.spec).toMatchObject({
      acquireTime: microTime(WALL + 1_060),
      renewTime: microTime(WALL + 3_060),
      strategy: STRATEGY,
    });
  });

  it('a lock handed to us while the holder before us may still write (by our observation) waits for that lease', () => {
    // We saw other_2 renew at 1 s (15 s lease); at 3 s the coordinator (its clock ahead) names us.
    let s = observe(co, initialState(0), held('other_2', WALL), 1_000, 'watch');
    s = observe(co, s, named('me_1'), 3_000, 'watch');
    expect(planWrite(co, s, 3_000, WALL)).toEqual({ kind: 'held', holder: 'other_2', until: 16_000 });
    expect(decide(co, s, 3_000)).toMatchObject({ kind: 'attempt', why: 'poll' });
    s = attemptFinished(co, attemptStarted(s, 3_000), 3_010, 0);
    expect(decide(co, s, 15_999)).not.toMatchObject({ why: 'free' });
    expect(decide(co, s, 16_000)).toEqual({ kind: 'attempt', read: true, why: 'free' });
    // A read that shows the same record keeps the wait's end; then it renews.
    s = observe(co, s, named('me_1'), 16_001, 'get');
    expect(planWrite(co, s, 16_001, WALL).kind).toBe('update');
    // Through a deletion too: seen at 1 s, deleted at 2 s, created by the coordinator naming us at 3 s.
    let d = observe(co, initialState(0), held('other_2', WALL), 1_000, 'watch');
    d = observe(co, d, undefined, 2_000, 'watch');
    d = observe(co, d, named('me_1'), 3_000, 'watch');
    expect(planWrite(co, d, 3_000, WALL)).toEqual({ kind: 'held', holder: 'other_2', until: 16_000 });
  });

  it('a lock that already names us at our first look: renewed at once only if a renewal of ours wrote it (acquireTime)', () => {
    // The coordinator hands a lock over with no acquireTime, from a holder we never saw: it may
    // still write for one lease duration from our first look, as for a lock missing then.
    let s = observe(co, initialState(0), named('me_1'), 2_000, 'get');
    expect(planWrite(co, s, 2_000, WALL)).toEqual({ kind: 'held', holder: '', until: 17_000 });
    expect(decide(co, s, 16_999)).not.toMatchObject({ why: 'free' });
    s = attemptFinished(co, attemptStarted(s, 2_000), 2_010, 0);
    expect(decide(co, s, 17_000)).toEqual({ kind: 'attempt', read: true, why: 'free' });
    // A read of the same record keeps the wait's end; then it renews.
    s = observe(co, s, named('me_1'), 17_001, 'get');
    expect(planWrite(co, s, 17_001, WALL)).toMatchObject({ kind: 'update', takeover: true });
    // The same first look through the watch.
    const w = observe(co, initialState(0), named('me_1'), 2_000, 'watch');
    expect(planWrite(co, w, 2_000, WALL)).toEqual({ kind: 'held', holder: '', until: 17_000 });
    // With an acquireTime our own renewal wrote it (this identity before a restart): at once.
    const own = observe(co, initialState(0), named('me_1', { acquireTime: microTime(WALL) }), 2_000, 'get');
    expect(decide(co, own, 2_000)).toEqual({ kind: 'attempt', read: true, why: 'free' });
    expect(planWrite(co, own, 2_000, WALL)).toMatchObject({ kind: 'update' });
  });

  it("a preferredHolder naming another replica preempts the leader: no renewal; one naming us doesn't", () => {
    let s = renew(elected(), 0);
    expect(preemptedBy(co, s)).toBeUndefined();
    s = observe(co, s, named('me_1', { preferredHolder: 'me_1' }), 500, 'watch');
    expect(preemptedBy(co, s)).toBeUndefined();
    expect(planWrite(co, s, 2_000, WALL).kind).toBe('update');
    s = observe(co, s, named('me_1', { preferredHolder: 'older_0' }), 1_000, 'watch');
    expect(preemptedBy(co, s)).toBe('older_0');
    expect(planWrite(co, s, 2_000, WALL)).toEqual({ kind: 'preempted', by: 'older_0' });
    // Ordinary mode does not act on it (as client-go).
    const o = observe(
      cfg,
      win(missingForALease(), 0),
      named('me_1', { preferredHolder: 'older_0' }),
      1,
      'get',
    );
    expect(preemptedBy(cfg, o)).toBeUndefined();
    // A renewal goes on the wire; then it steps down (staying eligible) and does not take the lock
    // back while the coordinator prefers another...
    s = stepDown(co, attemptStarted(s, 1_000), 1_000, true);
    expect(s).toMatchObject({ phase: 'candidate', eligible: true });
    expect(canWrite(co, s, 1_001)).toBe(false);
    expect(decide(co, s, 1_001)).not.toMatchObject({ why: 'free' });
    expect(planWrite(co, s, 1_001, WALL)).toEqual({ kind: 'preempted', by: 'older_0' });
    // ...and a renewal that was on the wire when it stepped down does not make it leader again.
    const late = writeSucceeded(co, s, named('me_1', { renewTime: microTime(WALL + 1_000) }), 1_000, 1_002);
    expect(late.phase).toBe('candidate');
  });

  it('a lock deleted under the leader is not created again: fence closed until the coordinator names us again', () => {
    let s = renew(elected(), 0);
    s = observe(co, s, undefined, 1_000, 'watch');
    expect(s).toMatchObject({ phase: 'leader', suspect: true });
    expect(canWrite(co, s, 1_000)).toBe(false);
    s = observe(co, s, undefined, 1_010, 'get');
    expect(s).toMatchObject({ phase: 'leader', suspect: true });
    expect(planWrite(co, s, 1_010, WALL)).toEqual({ kind: 'await-coordinator', holder: '' });
    // The coordinator creates it naming us: a read settles it, we renew and lead on.
    s = observe(co, s, named('me_1'), 1_200, 'get');
    expect(s.suspect).toBe(false);
    s = renew(s, 1_200);
    expect(canWrite(co, s, 1_300)).toBe(true);
    // Named another: lost.
    const other = observe(co, observe(co, s, undefined, 2_000, 'watch'), named('other_2'), 2_100, 'get');
    expect(other.phase).toBe('lost');
    // Nobody names us again: lost at the renew deadline.
    const gone = observe(co, s, undefined, 2_000, 'get');
    expect(decide(co, gone, 1_200 + 10_000)).toMatchObject({ kind: 'lose' });
  });

  it('release keeps the strategy (the coordinator names the next holder at once)', () => {
    const r = recordOf(named('me_1', { preferredHolder: 'older_0', leaseTransitions: 2 }));
    expect(releaseSpec(r, WALL, true)).toEqual({
      holderIdentity: '',
      leaseDurationSeconds: 1,
      leaseTransitions: 2,
      acquireTime: microTime(WALL),
      renewTime: microTime(WALL),
      strategy: STRATEGY,
    });
  });
});

describe('healthCheck (client-go Check)', () => {
  it('fails only for a leader not renewed within leaseDuration + tolerance', () => {
    const s = win(missingForALease(), 0);
    expect(healthCheck(cfg, s, 35_000, 20_000)).toBeUndefined();
    expect(healthCheck(cfg, s, 35_001, 20_000)).toMatch(/failed election to renew leadership/);
    // Durations as Go prints them, like the flags take them.
    expect(healthCheck(cfg, s, 95_000, 20_000)).toBe(
      'failed election to renew leadership: last renewal 1m35s ago, more than lease duration 15s + 20s',
    );
    expect(healthCheck(cfg, initialState(0), 99 * HOUR, 20_000)).toBeUndefined();
    // A leader that lost but has not exited is unhealthy too (the watchdog case).
    const lost = observe(cfg, s, held('thief_9', WALL), 1, 'get');
    expect(healthCheck(cfg, lost, 35_001, 20_000)).toBeDefined();
  });
});
