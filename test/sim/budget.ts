/**
 * The simulator's CI budget: a fixed range of seeds per family (so that a red CI always means the
 * code changed, never luck), each a run of `hoursPerSeed` simulated hours. The first failing seed
 * stops the family and its report (with the command that replays it) is the test's failure.
 * NLC_SIM_FIRST_SEED and NLC_SIM_SEEDS move the range (the soak command: `./dev run sim -- --soak`).
 * Writes the family's figures to .tmp/sim-<family>.json for the test command's SUMMARY line.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { report, simulate } from './simulate.js';

/** Real time, taken before the fake timers replace the clocks. */
const realNow = performance.now.bind(performance);

export const BUDGET = {
  /** Seeds per family in CI. */
  seeds: 34,
  hoursPerSeed: 2.5,
} as const;

export function familyBudget(family: string): void {
  const first = Number(process.env.NLC_SIM_FIRST_SEED ?? 1);
  const count = Number(process.env.NLC_SIM_SEEDS ?? BUDGET.seeds);
  const hours = Number(process.env.NLC_SIM_HOURS ?? BUDGET.hoursPerSeed);
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });
  it(`family ${family}: seeds ${first}..${first + count - 1}, ${hours} simulated hours each, no invariant violated`, async () => {
    const started = realNow();
    const cpu = process.cpuUsage();
    let simulatedMs = 0;
    let seeds = 0;
    const failures: string[] = [];
    for (let seed = first; seed < first + count; seed++) {
      const r = await simulate({ seed, family, durationMs: hours * 3_600_000 });
      simulatedMs += r.simulatedMs;
      seeds++;
      if (r.violations.length > 0) {
        failures.push(report(r));
        // NLC_SIM_KEEP_GOING=1 (a soak, or a survey of old code): every failing seed, not the first.
        if (process.env.NLC_SIM_KEEP_GOING !== '1') break;
        const v = r.violations[0]!;
        console.log(
          `[sim] ${family} seed ${seed}: ${(v.at / 1000).toFixed(1)}s ${v.invariant}: ${v.detail.split('\n')[0]}`,
        );
      }
    }
    const figures = {
      family,
      seeds,
      simulatedHours: simulatedMs / 3_600_000,
      wallSeconds: (realNow() - started) / 1000,
      cpuSeconds: (() => {
        const u = process.cpuUsage(cpu);
        return (u.user + u.system) / 1e6;
      })(),
      failed: failures.length,
    };
    mkdirSync('.tmp', { recursive: true });
    writeFileSync(`.tmp/sim-${family}.json`, `${JSON.stringify(figures)}\n`);
    for (const f of failures) console.log(f);
    console.log(
      `[sim] ${family}: ${seeds} seeds, ${figures.simulatedHours.toFixed(1)} simulated hours in ${figures.wallSeconds.toFixed(1)} s (CPU ${figures.cpuSeconds.toFixed(1)} s)`,
    );
    expect(failures.join('\n\n')).toBe('');
  });
}
