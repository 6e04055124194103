/**
 * Replays one seed with the replicas' logs at a higher verbosity and prints the report (what the
 * budget prints for a failing seed, and the logs around it). Run through `./dev run sim -- --seed=N`
 * (scripts/sim.mjs), which sets NLC_SIM_SEED, NLC_SIM_FAMILY and NLC_SIM_HOURS.
 */
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { report, simulate } from './simulate.js';

const seed = Number(process.env.NLC_SIM_SEED ?? '');
const family = process.env.NLC_SIM_FAMILY ?? 'mixed';
const hours = Number(process.env.NLC_SIM_HOURS ?? '1');
const verbosity = Number(process.env.NLC_SIM_V ?? '4');
const logLines = Number(process.env.NLC_SIM_LOG_LINES ?? '200');
/** NLC_SIM_STOP_AT=<s>: the run stops there (the same history up to it), so the logs end there. */
const stopAtMs = process.env.NLC_SIM_STOP_AT ? Number(process.env.NLC_SIM_STOP_AT) * 1000 : undefined;

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

it.runIf(Number.isInteger(seed))(
  `replays seed ${seed} (family ${family})`,
  async () => {
    const r = await simulate({
      seed,
      family,
      durationMs: hours * 3_600_000,
      verbosity,
      ...(stopAtMs === undefined ? {} : { stopAtMs }),
    });
    const logs = Object.entries(r.logs).map(
      ([id, lines]) => `--- ${id} (last ${logLines} lines)\n${lines.slice(-logLines).join('\n')}`,
    );
    console.log(`${report(r)}\n${logs.join('\n')}`);
    expect(r.violations.map((v) => `${v.invariant}: ${v.detail}`)).toEqual([]);
  },
  3_600_000,
);
