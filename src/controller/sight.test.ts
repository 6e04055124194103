import { describe, expect, it } from 'vitest';
import type { WatchHealth } from '../watch/types.js';
import { BLIND_REASONS, blindGauge, type SightConfig, SightMachine, type WatchesSeen } from './sight.js';

// Virtual time: the machine only ever sees the times it is given.
const T0 = 1_000_000;
const SILENCE = 45_000;
const LIMIT = 150_000;

/** A watch's health as its snapshot says: healthy and in contact at `contact` unless told otherwise. */
function watch(resource: string, o: Partial<WatchHealth> = {}): WatchHealth {
  return {
    resource,
    connected: true,
    synced: true,
    listing: false,
    lastEventAt: undefined,
    since: 0,
    lastContactAt: undefined,
    reconnects: 0,
    relists: 0,
    lastError: undefined,
    lastErrorAt: undefined,
    ...o,
  };
}

/** Both watches at `now`: healthy and in contact now, unless told otherwise. */
function seen(
  now: number,
  o: { nodes?: Partial<WatchHealth>; leases?: Partial<WatchHealth> } = {},
): WatchesSeen {
  return {
    now,
    nodes: watch('nodes', { lastContactAt: now, ...o.nodes }),
    leases: watch('leases', { lastContactAt: now, ...o.leases }),
  };
}

const down = { connected: false };
const unsynced = { synced: false, connected: false };

function machine(cfg: Partial<SightConfig> = {}): SightMachine {
  return new SightMachine(
    { watchSilenceThresholdMs: SILENCE, blindStepDownMs: LIMIT, election: true, ...cfg },
    T0,
  );
}

/** A machine that leads and acts since T0 + 1000 (watches synced, fresh grace given). */
function acting(cfg: Partial<SightConfig> = {}): SightMachine {
  const m = machine(cfg);
  m.see(seen(T0 + 1_000));
  m.setLeading(true);
  expect(m.judge(T0 + 1_000)).toMatchObject({ kind: 'acting', freshGrace: true });
  return m;
}

/** One evaluation as the controller does it: see, then judge. */
function evaluate(m: SightMachine, s: WatchesSeen) {
  const step = m.see(s);
  // A step carries only what was decided: no field set to undefined.
  expect(Object.values(step)).not.toContain(undefined);
  return { step, change: m.judge(s.now) };
}

describe('SightMachine: at start', () => {
  it('not leading and unsynced since it started; the first look tells election whether it may lead', () => {
    const m = machine();
    expect(m.blind).toBe('not_leader');
    expect(m.isLeading).toBe(false);
    expect(m.watch).toEqual({ reason: 'unsynced', since: T0 });
    // Still listing: not eligible (said once), nothing changes (not leading anyway).
    expect(evaluate(m, seen(T0 + 10, { nodes: unsynced, leases: unsynced }))).toEqual({
      step: { eligible: false, leaseWatch: 'lost' },
      change: undefined,
    });
    expect(evaluate(m, seen(T0 + 20, { nodes: unsynced, leases: unsynced }))).toEqual({
      step: {},
      change: undefined,
    });
    expect(m.watch).toEqual({ reason: 'unsynced', since: T0 });
    // Synced: eligible; the lease watch sees.
    expect(evaluate(m, seen(T0 + 500))).toEqual({
      step: { eligible: true, leaseWatch: 'sees' },
      change: undefined,
    });
    expect(m.watch).toBeUndefined();
    expect(m.blind).toBe('not_leader');
  });

  it('leading after the watches synced: acting, with a fresh grace for every node', () => {
    const m = machine();
    m.see(seen(T0 + 500));
    expect(m.setLeading(true)).toBe(true);
    expect(m.setLeading(true)).toBe(false);
    expect(m.judge(T0 + 2_000)).toEqual({
      kind: 'acting',
      was: 'not_leader',
      blindMs: 2_000,
      freshGrace: true,
      leaseBlindMs: 0,
    });
    expect(m.blind).toBeUndefined();
    expect(m.isLeading).toBe(true);
    expect(m.judge(T0 + 3_000)).toBeUndefined();
  });

  it('leading before the watches synced: blind (unsynced) until they do, then a fresh grace', () => {
    const m = machine();
    m.setLeading(true);
    expect(evaluate(m, seen(T0 + 100, { leases: unsynced })).change).toEqual({
      kind: 'blind',
      reason: 'unsynced',
      was: 'not_leader',
      spellBegan: undefined,
    });
    expect(evaluate(m, seen(T0 + 5_000)).change).toMatchObject({
      kind: 'acting',
      was: 'unsynced',
      freshGrace: true,
    });
  });

  it("the node watch's reason comes first when both are blind", () => {
    const m = acting();
    evaluate(m, seen(T0 + 2_000, { nodes: unsynced, leases: down }));
    expect(m.blind).toBe('unsynced');
    expect(m.watch?.reason).toBe('unsynced');
  });
});

describe('SightMachine: blind spells while leading', () => {
  it('the lease watch down 5 s: the spell begins when it is lost and moves deadlines by its 5 s', () => {
    const m = acting();
    const t = T0 + 10_000;
    expect(evaluate(m, seen(t, { leases: down }))).toEqual({
      step: { leaseWatch: 'lost', eligible: false },
      change: { kind: 'blind', reason: 'disconnected', was: undefined, spellBegan: t },
    });
    expect(m.watch).toEqual({ reason: 'disconnected', since: t });
    expect(evaluate(m, seen(t + 1_000, { leases: down }))).toEqual({ step: {}, change: undefined });
    expect(evaluate(m, seen(t + 5_000))).toEqual({
      step: { leaseWatch: 'sees', eligible: true },
      change: { kind: 'acting', was: 'disconnected', blindMs: 5_000, freshGrace: false, leaseBlindMs: 5_000 },
    });
    expect(m.watch).toBeUndefined();
  });

  it('a spell in which only the node watch was down moves no deadline (the lease watch saw every renewal)', () => {
    const m = acting();
    const t = T0 + 10_000;
    expect(evaluate(m, seen(t, { nodes: down }))).toEqual({
      step: { eligible: false },
      change: { kind: 'blind', reason: 'disconnected', was: undefined, spellBegan: t },
    });
    expect(evaluate(m, seen(t + 30_000)).change).toEqual({
      kind: 'acting',
      was: 'disconnected',
      blindMs: 30_000,
      freshGrace: false,
      leaseBlindMs: 0,
    });
  });

  it("the lease watch's blind times within one spell add up; the node watch's time around them does not", () => {
    const m = acting();
    const t = T0 + 10_000;
    evaluate(m, seen(t, { nodes: down }));
    expect(evaluate(m, seen(t + 1_000, { nodes: down, leases: down })).step).toEqual({ leaseWatch: 'lost' });
    expect(evaluate(m, seen(t + 3_000, { nodes: down })).step).toEqual({ leaseWatch: 'sees' });
    evaluate(m, seen(t + 10_000, { nodes: down, leases: down }));
    evaluate(m, seen(t + 14_000, { nodes: down }));
    expect(evaluate(m, seen(t + 20_000)).change).toEqual({
      kind: 'acting',
      was: 'disconnected',
      blindMs: 20_000,
      freshGrace: false,
      leaseBlindMs: 6_000,
    });
    // Counted once: the next spell starts from nothing.
    evaluate(m, seen(t + 30_000, { nodes: down }));
    expect(evaluate(m, seen(t + 31_000)).change).toMatchObject({ blindMs: 1_000, leaseBlindMs: 0 });
  });

  it('a silent lease watch is blind from its last contact, for the spell and for the deadlines', () => {
    const m = acting();
    const contact = T0 + 10_000;
    // In contact within the threshold: sees.
    expect(
      evaluate(m, seen(contact + SILENCE, { leases: { lastContactAt: contact } })).change,
    ).toBeUndefined();
    const t = contact + SILENCE + 1;
    expect(evaluate(m, seen(t, { leases: { lastContactAt: contact } }))).toEqual({
      step: { leaseWatch: 'lost', eligible: false },
      change: { kind: 'blind', reason: 'silent', was: undefined, spellBegan: contact },
    });
    expect(m.watch).toEqual({ reason: 'silent', since: contact });
    expect(evaluate(m, seen(t + 9_000)).change).toEqual({
      kind: 'acting',
      was: 'silent',
      blindMs: t + 9_000 - contact,
      freshGrace: false,
      leaseBlindMs: t + 9_000 - contact,
    });
  });

  it('a lease watch without any contact yet is silent from when it is found so', () => {
    const m = acting();
    const t = T0 + 10_000;
    const noContact = { lastContactAt: undefined, lastEventAt: undefined };
    expect(evaluate(m, seen(t, { leases: noContact })).change).toEqual({
      kind: 'blind',
      reason: 'silent',
      was: undefined,
      spellBegan: t,
    });
  });

  it('a watch silent by its last event alone (no contact recorded) is blind from when it is found so', () => {
    const m = acting();
    const t = T0 + 100_000;
    const c = evaluate(m, seen(t, { leases: { lastContactAt: undefined, lastEventAt: t - SILENCE - 1 } }));
    expect(c.change).toEqual({ kind: 'blind', reason: 'silent', was: undefined, spellBegan: t });
    expect(m.watch?.since).toBe(t);
  });

  it('the reason changes within a spell (disconnected, then silent): the spell keeps its start', () => {
    const m = acting();
    const t = T0 + 10_000;
    evaluate(m, seen(t, { leases: down }));
    const later = t + SILENCE + 5_000;
    expect(evaluate(m, seen(later, { leases: { lastContactAt: t - 1 } }))).toEqual({
      step: {},
      change: { kind: 'blind', reason: 'silent', was: 'disconnected', spellBegan: undefined },
    });
    expect(m.watch).toEqual({ reason: 'silent', since: t });
    expect(evaluate(m, seen(later + 1_000)).change).toMatchObject({
      blindMs: SILENCE + 6_000,
      freshGrace: false,
    });
  });

  it('a spell that passed through not leading ends with a fresh grace', () => {
    const m = acting();
    const t = T0 + 10_000;
    evaluate(m, seen(t, { leases: down }));
    m.setLeading(false);
    expect(m.judge(t + 1_000)).toEqual({
      kind: 'blind',
      reason: 'not_leader',
      was: 'disconnected',
      spellBegan: undefined,
    });
    m.setLeading(true);
    expect(m.judge(t + 2_000)).toMatchObject({ kind: 'blind', reason: 'disconnected', was: 'not_leader' });
    expect(evaluate(m, seen(t + 3_000)).change).toEqual({
      kind: 'acting',
      was: 'disconnected',
      blindMs: 3_000,
      freshGrace: true,
      leaseBlindMs: 3_000,
    });
  });

  it('a spell that passed through unsynced ends with a fresh grace', () => {
    const m = acting();
    const t = T0 + 10_000;
    evaluate(m, seen(t, { leases: down }));
    evaluate(m, seen(t + 1_000, { leases: unsynced }));
    expect(m.blind).toBe('unsynced');
    expect(evaluate(m, seen(t + 2_000)).change).toMatchObject({ kind: 'acting', freshGrace: true });
  });

  it('not leading, then leading: the spell began at start, and ends with a fresh grace', () => {
    const m = machine();
    m.see(seen(T0 + 1_000));
    m.setLeading(true);
    m.judge(T0 + 1_000);
    m.setLeading(false);
    // Lost leadership: a new spell begins (the storage's outage in progress ends there).
    expect(m.judge(T0 + 5_000)).toEqual({
      kind: 'blind',
      reason: 'not_leader',
      was: undefined,
      spellBegan: T0 + 5_000,
    });
    // The lease watch flaps while we do not lead: that time is not carried into the next spell.
    evaluate(m, seen(T0 + 6_000, { leases: down }));
    evaluate(m, seen(T0 + 8_000));
    m.setLeading(true);
    expect(m.judge(T0 + 9_000)).toEqual({
      kind: 'acting',
      was: 'not_leader',
      blindMs: 4_000,
      freshGrace: true,
      leaseBlindMs: 2_000,
    });
    evaluate(m, seen(T0 + 10_000, { nodes: down }));
    expect(evaluate(m, seen(T0 + 11_000)).change).toMatchObject({ freshGrace: false, leaseBlindMs: 0 });
  });

  it('the lease time of a spell started before it counts only from the spell on', () => {
    const m = acting();
    const t = T0 + 10_000;
    // Leadership lost while the lease watch is blind; regained later, still blind.
    evaluate(m, seen(t, { leases: down }));
    m.setLeading(false);
    m.judge(t);
    m.setLeading(true);
    m.judge(t + 1_000);
    expect(evaluate(m, seen(t + 4_000)).change).toMatchObject({ freshGrace: true, leaseBlindMs: 4_000 });
  });

  it('a spell that begins while the lease watch has been blind since before it: deadlines move from when it was lost', () => {
    const m = machine();
    m.see(seen(T0 + 1_000));
    // Not leading: the lease watch goes down; leading meanwhile; sight back: a fresh grace anyway.
    m.see(seen(T0 + 2_000, { leases: down }));
    m.setLeading(true);
    expect(m.judge(T0 + 3_000)).toMatchObject({ kind: 'blind', reason: 'disconnected', was: 'not_leader' });
    expect(evaluate(m, seen(T0 + 4_000)).change).toMatchObject({ kind: 'acting', freshGrace: true });
  });

  it('a spell begun while acting starts its lease time from zero', () => {
    const m = acting();
    // Lease watch down and back while the node watch is down too; the spell ends; the next spell
    // (node watch only) moves nothing.
    evaluate(m, seen(T0 + 10_000, { nodes: down, leases: down }));
    expect(evaluate(m, seen(T0 + 12_000)).change).toMatchObject({ leaseBlindMs: 2_000 });
    evaluate(m, seen(T0 + 20_000, { nodes: down }));
    expect(evaluate(m, seen(T0 + 21_000)).change).toMatchObject({ blindMs: 1_000, leaseBlindMs: 0 });
  });
});

describe('SightMachine: leadership follows sight', () => {
  it('eligible only while both watches can be trusted; told on each change only', () => {
    const m = machine();
    const calls: boolean[] = [];
    const look = (s: WatchesSeen) => {
      const e = m.see(s).eligible;
      if (e !== undefined) calls.push(e);
    };
    look(seen(T0 + 1, { leases: unsynced }));
    look(seen(T0 + 2, { leases: unsynced }));
    look(seen(T0 + 3));
    look(seen(T0 + 4));
    look(seen(T0 + 5, { nodes: down }));
    look(seen(T0 + 6, { nodes: down, leases: down }));
    look(seen(T0 + 7));
    expect(calls).toEqual([false, true, false, true]);
  });

  it('a leader blind for blindStepDownMs steps down once; a shorter spell does not', () => {
    const m = acting();
    const t = T0 + 10_000;
    evaluate(m, seen(t, { leases: down }));
    expect(m.see(seen(t + LIMIT - 1, { leases: down })).stepDown).toBeUndefined();
    expect(m.see(seen(t + LIMIT, { leases: down })).stepDown).toEqual({
      reason: 'disconnected',
      blindForMs: LIMIT,
      limitMs: LIMIT,
    });
    expect(m.see(seen(t + LIMIT + 1_000, { leases: down })).stepDown).toBeUndefined();
    // Leadership ends (the elector stepped down): a later term may step down again.
    m.setLeading(false);
    m.setLeading(true);
    expect(m.see(seen(t + LIMIT + 2_000, { leases: down })).stepDown).toMatchObject({
      blindForMs: LIMIT + 2_000,
    });
  });

  it('a spell shorter than the limit, and the next one, are measured each from its own start', () => {
    const m = acting();
    evaluate(m, seen(T0 + 10_000, { leases: down }));
    evaluate(m, seen(T0 + 10_000 + LIMIT - 1_000));
    expect(m.see(seen(T0 + 10_000 + LIMIT + 500, { leases: down })).stepDown).toBeUndefined();
  });

  it('a silent watch counts from its last contact for the step-down too', () => {
    const m = acting();
    const contact = T0 + 10_000;
    const s = m.see(seen(contact + LIMIT, { leases: { lastContactAt: contact } }));
    expect(s.stepDown).toEqual({ reason: 'silent', blindForMs: LIMIT, limitMs: LIMIT });
  });

  it('no step-down without leader election, with a limit of 0, or when not leading', () => {
    for (const cfg of [{ election: false }, { blindStepDownMs: 0 }]) {
      const m = acting(cfg);
      evaluate(m, seen(T0 + 10_000, { leases: down }));
      expect(m.see(seen(T0 + 10_000 + 10 * LIMIT, { leases: down })).stepDown).toBeUndefined();
    }
    const m = machine();
    m.see(seen(T0 + 10_000, { leases: down }));
    expect(m.see(seen(T0 + 10_000 + 10 * LIMIT, { leases: down })).stepDown).toBeUndefined();
  });

  it('a step-down that ends leadership at once: judged afterwards, nothing but not_leader is reported', () => {
    const m = machine();
    // Blind since start, for longer than the limit; then the lock is ours.
    m.see(seen(T0 + LIMIT + 1_000, { leases: down }));
    m.setLeading(true);
    const step = m.see(seen(T0 + LIMIT + 2_000, { leases: down }));
    expect(step.stepDown).toMatchObject({ reason: 'disconnected' });
    // The caller's elector steps down at once (run.ts's leading$ then says so).
    m.setLeading(false);
    expect(m.judge(T0 + LIMIT + 2_000)).toBeUndefined();
    expect(m.blind).toBe('not_leader');
  });
});

describe('blindGauge', () => {
  it('1 for the reason we do not act for, 0 for every other; all 0 while acting', () => {
    expect(blindGauge('silent')).toEqual([
      ['not_leader', 0],
      ['disconnected', 0],
      ['unsynced', 0],
      ['silent', 1],
    ]);
    expect(blindGauge(undefined).map(([, v]) => v)).toEqual([0, 0, 0, 0]);
    expect(BLIND_REASONS).toEqual(['not_leader', 'disconnected', 'unsynced', 'silent']);
  });
});
