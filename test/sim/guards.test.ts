/**
 * The simulator bites: with each safety guard removed (test/sim/guards.ts), the CI budget's seeds
 * find a violation (the seed recorded for it first, then the rest of the budget in order: a code
 * change may move a history). With NLC_SIM_GUARD_SEARCH=1 (`./dev run sim -- --guards`) it
 * searches from the first seed instead and prints what test/sim/guards.ts and docs/guarantees.md
 * record. NLC_SIM_GUARD=<id>[,<id>...] takes those guards only.
 */
import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BUDGET } from './budget.js';
import { FAMILIES } from './faults.js';
import { GUARDS, rewrite } from './guards.js';
import { simulate } from './simulate.js';

const search = process.env.NLC_SIM_GUARD_SEARCH === '1';
const only = process.env.NLC_SIM_GUARD ? new Set(process.env.NLC_SIM_GUARD.split(',')) : undefined;
/** A search over some families only (NLC_SIM_GUARD_FAMILIES=a,b): their seeds in the budget's order. */
const families = process.env.NLC_SIM_GUARD_FAMILIES?.split(',');
const realNow = performance.now.bind(performance);
const g = globalThis as { __nlcGuardsOff?: Set<string> };

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
  g.__nlcGuardsOff = undefined;
});

describe('the guard table is in step with the code', () => {
  it('every guard has a seed that finds it, or says why the budget cannot', () => {
    expect(
      GUARDS.filter((x) => (x.found === undefined) === (x.notCaught === undefined)).map((x) => x.id),
    ).toEqual([]);
  });
  for (const file of new Set(GUARDS.flatMap((x) => x.edits.map((e) => e.file)))) {
    it(`${file}: every edit fits once`, () => {
      expect(() => rewrite(file, readFileSync(file, 'utf8'))).not.toThrow();
    });
  }
});

/** The budget's seeds in the order they are tried: each seed in every family; `first` before all. */
function* budgetSeeds(first?: { family: string; seed: number }): Generator<{ family: string; seed: number }> {
  if (first) yield first;
  for (let seed = 1; seed <= BUDGET.seeds; seed++) {
    for (const family of Object.keys(FAMILIES)) {
      if (search && families && !families.includes(family)) continue;
      if (first && family === first.family && seed === first.seed) continue;
      yield { family, seed };
    }
  }
}

/** Runs the budget's seeds (from `first`) with guard `id` removed until one finds a violation. */
async function hunt(id: string, first?: { family: string; seed: number }) {
  const off = new Set([id, ...(GUARDS.find((x) => x.id === id)?.alsoOff ?? [])]);
  g.__nlcGuardsOff = off;
  let hours = 0;
  let tried = 0;
  for (const s of budgetSeeds(first)) {
    const r = await simulate({ seed: s.seed, family: s.family, durationMs: BUDGET.hoursPerSeed * 3_600_000 });
    hours += r.simulatedMs / 3_600_000;
    tried++;
    if (r.violations.length === 0) continue;
    // Only a violation the guard's removal causes counts: the same seed with every guard in place
    // must not show it (the budget's own runs would fail then anyway).
    g.__nlcGuardsOff = undefined;
    const base = await simulate({
      seed: s.seed,
      family: s.family,
      durationMs: BUDGET.hoursPerSeed * 3_600_000,
    });
    g.__nlcGuardsOff = off;
    const v = r.violations[0]!;
    if (base.violations.some((b) => b.invariant === v.invariant && b.at <= v.at)) continue;
    return { at: s, hours, tried, violation: v };
  }
  return { at: undefined, hours, tried, violation: undefined };
}

if (!search) {
  describe('each guard removed, the budget finds a violation (its recorded seed first)', () => {
    for (const guard of GUARDS.filter((x) => x.notCaught === undefined && (!only || only.has(x.id)))) {
      const rec = guard.found;
      it(`${guard.id}: ${rec ? `${rec.family} seed ${rec.seed}` : 'no seed recorded'}`, async () => {
        const found = await hunt(guard.id, rec);
        if (found.violation && rec && (found.tried > 1 || found.violation.invariant !== rec.invariant)) {
          console.log(
            `[guards] ${guard.id}: the recorded seed (${rec.family} ${rec.seed}, ${rec.invariant}) no longer finds it first; ${found.at?.family} seed ${found.at?.seed} does (${found.violation.invariant}): update test/sim/guards.ts (./dev run sim -- --guards)`,
          );
        }
        const why = `the budget found no violation in ${found.hours.toFixed(0)} simulated hours with ${guard.id} removed`;
        expect(found.violation, why).toBeDefined();
      });
    }
  });
}

if (search) {
  describe('search: the first budget seed that finds each guard removed', () => {
    for (const guard of GUARDS.filter((x) => !only || only.has(x.id))) {
      it(guard.id, async () => {
        const started = realNow();
        const found = await hunt(guard.id);
        const secs = ((realNow() - started) / 1000).toFixed(0);
        if (found.violation && found.at) {
          const rec = `{ family: '${found.at.family}', seed: ${found.at.seed}, invariant: '${found.violation.invariant}', hoursSearched: ${found.hours.toFixed(1)} }`;
          console.log(
            `[guards] ${guard.id}: found: ${rec} (${secs} s): ${found.violation.detail.split('\n')[0]}`,
          );
        } else
          console.log(
            `[guards] ${guard.id}: NOT FOUND in ${found.hours.toFixed(1)} simulated hours (${secs} s)`,
          );
        expect(found.violation).toBeDefined();
      });
    }
  });
}
