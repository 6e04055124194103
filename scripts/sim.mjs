#!/usr/bin/env node
// The fault simulator's commands (test/sim, docs/guarantees.md):
//
//   ./dev run sim                                  the CI budget (every family, fixed seeds)
//   ./dev run sim -- --seed=N [--family=F] [--hours=H] [--v=4] [--lines=200]
//                                                  replays one seed: its report and the replicas' logs
//   ./dev run sim -- --soak [--seeds=N] [--from=S] [--hours=H] [--family=F]
//                                                  a longer run over seeds CI does not use (for the night)
//   ./dev run sim -- --guards [--only=id,id] [--families=f,f]
//                                                  with each safety guard removed, the first budget seed
//                                                  that finds a violation (test/sim/guards.ts records them;
//                                                  --families searches those families' seeds only)
import { spawnSync } from 'node:child_process';

const args = Object.fromEntries(
  process.argv.slice(2).map((a) => {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(a);
    if (!m) {
      console.error(`sim: unknown argument ${a} (see the usage at the top of scripts/sim.mjs)`);
      process.exit(2);
    }
    return [m[1], m[2] ?? 'true'];
  }),
);
const env = { ...process.env };
let vitest;
if (args.seed !== undefined) {
  if (!/^\d+$/.test(args.seed)) {
    console.error(`sim: invalid value ${JSON.stringify(args.seed)} for --seed (accepted: a whole number)`);
    process.exit(2);
  }
  env.NLC_SIM_SEED = args.seed;
  env.NLC_SIM_FAMILY = args.family ?? 'mixed';
  if (args.hours) env.NLC_SIM_HOURS = args.hours;
  if (args.v) env.NLC_SIM_V = args.v;
  if (args.lines) env.NLC_SIM_LOG_LINES = args.lines;
  vitest = ['vitest', 'run', '--project', 'sim-replay'];
} else if (args.guards) {
  env.NLC_SIM_GUARD_SEARCH = '1';
  if (args.only) env.NLC_SIM_GUARD = args.only;
  if (args.families) env.NLC_SIM_GUARD_FAMILIES = args.families;
  vitest = ['vitest', 'run', '--project', 'sim-guards'];
} else {
  if (args.soak) {
    env.NLC_SIM_FIRST_SEED = args.from ?? '100000';
    env.NLC_SIM_SEEDS = args.seeds ?? '400';
    // A soak reports every failing seed, not only the first of each family.
    env.NLC_SIM_KEEP_GOING = '1';
  }
  if (args.hours) env.NLC_SIM_HOURS = args.hours;
  vitest = [
    'vitest',
    'run',
    '--project',
    'sim',
    ...(args.family ? [`test/sim/budget/${args.family}.test.ts`] : []),
  ];
}
const r = spawnSync('npx', vitest, { stdio: 'inherit', env });
process.exit(r.status ?? 1);
