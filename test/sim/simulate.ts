/**
 * One simulation run: a seed -> a world (fleet, zones, replicas, flags), a fault schedule, the run
 * in virtual time with the invariants checked as it goes, and the result. Run it under vitest's
 * fake timers (vi.useFakeTimers): `simulate` drives time itself.
 */
import { vi } from 'vitest';
import { DEFAULT_SECOND_OPINION } from '../../src/second-opinion/index.js';
import { Checker, type Violation } from './checker.js';
import {
  BASE_RATES,
  describe,
  FAMILIES,
  FAMILY_WORLD,
  generateSchedule,
  MODEL,
  type Rates,
  type Timed,
} from './faults.js';
import { Injector } from './injector.js';
import { Prng } from './prng.js';
import { World } from './world.js';

export interface RunResult {
  seed: number;
  family: string;
  simulatedMs: number;
  violations: Violation[];
  schedule: Timed[];
  /** Figures of the run. */
  figures: {
    writes: number;
    marks: number;
    requests: number;
    restarts: number;
    faults: number;
    /** Traps that fired (a request failed at a chosen moment). */
    traps: number;
    renewals: number;
  };
  /** The flags the replicas ran with. */
  flags: string[];
  /** The last lines each replica logged (for a failure's report). */
  logs: Record<string, string[]>;
}

export interface RunOptions {
  seed: number;
  family: string;
  durationMs: number;
  /** Log verbosity of the replicas (replays raise it). */
  verbosity?: number;
  /** Stop at the first violation (default true). */
  stopAtFirst?: boolean;
  /** Stop the run here (ms of simulated time; the schedule is still drawn for `durationMs`): a replay's logs end there. */
  stopAtMs?: number;
}

const T0 = Date.UTC(2026, 11, 1, 8, 0, 0);
const TICK_MS = 5_000;

/** The world's shape and the controller's flags, drawn from the seed. */
function drawWorld(rng: Prng, need: (typeof FAMILY_WORLD)[string] = {}) {
  const graceMs = rng.chance(0.6) ? 50_000 : 20_000;
  const drawnNodes = rng.int(4, 10);
  const drawnZones = rng.int(1, Math.min(4, drawnNodes));
  // Zones of at most two nodes never pass through partial disruption (it needs three not Ready):
  // a zone whose nodes all die goes from Normal to full disruption at once, at the full rate.
  const nodes = need.twoPerZone ? Math.min(drawnNodes, 8) : drawnNodes;
  const zones = need.twoPerZone ? Math.ceil(nodes / 2) : drawnZones;
  const oos = rng.chance(0.5);
  const outOfService =
    (need.outOfService ?? oos)
      ? { afterMs: rng.pick(need.outOfServiceAfterS ?? [0, 10, 30]) * 1000 }
      : undefined;
  const capOn = rng.chance(0.4);
  const cap = capOn ? { max: rng.int(1, 4), windowMs: rng.pick([60_000, 300_000, 600_000]) } : undefined;
  const flags = [
    `--node-monitor-grace-period=${graceMs / 1000}s`,
    `--node-eviction-rate=0.1`,
    ...(cap ? [`--max-noexecute-taints=${cap.max}`, `--max-noexecute-window=${cap.windowMs / 1000}s`] : []),
    ...(outOfService
      ? ['--out-of-service=true', `--out-of-service-after=${outOfService.afterMs / 1000}s`]
      : []),
  ];
  const silenceMs = graceMs > 45_000 ? 45_000 : Math.floor((graceMs * 3) / 4);
  // Drawn last, and only where the family asks for it: the other families' draws stay as they were.
  const secondOpinion = need.secondOpinion
    ? {
        ...DEFAULT_SECOND_OPINION,
        // Below the grace less the confirming probe's 6 s (the flag's rule).
        confirmAfterMs: (graceMs > 20_000 ? rng.pick([10, 20, 30]) : 10) * 1000,
        holdMs: rng.pick([0, 60, 300]) * 1000,
      }
    : undefined;
  if (secondOpinion) {
    flags.push(
      '--second-opinion=kubelet',
      `--confirm-after=${secondOpinion.confirmAfterMs / 1000}s`,
      `--cut-off-hold=${secondOpinion.holdMs / 1000}s`,
    );
  }
  return { graceMs, nodes, zones, flags, cap, silenceMs, outOfService, secondOpinion };
}

export async function simulate(o: RunOptions): Promise<RunResult> {
  vi.setSystemTime(T0);
  // One seed, one history per family (the families' schedules share nothing but the seed).
  let familySalt = 0;
  for (const ch of o.family) familySalt = (Math.imul(familySalt, 31) + ch.charCodeAt(0)) >>> 0;
  const rng = new Prng((o.seed ^ familySalt) >>> 0);
  // Every Math.random in the wiring (backoff jitter, lease names) comes from the seed too.
  const jitter = rng.fork();
  const random = vi.spyOn(Math, 'random').mockImplementation(() => jitter.next());
  const w = drawWorld(rng, FAMILY_WORLD[o.family]);
  const clock = { now: () => Date.now(), wall: () => Date.now() };
  const world = new World(
    rng.fork(),
    {
      nodes: w.nodes,
      zones: w.zones,
      podsPerNode: 2,
      replicas: 2,
      graceMs: w.graceMs,
      renewMs: 10_000,
      flags: w.flags,
      restartDelayMs: 5_000,
      verbosity: o.verbosity ?? 0,
    },
    clock,
  );
  const rates: Rates = { ...BASE_RATES, ...FAMILIES[o.family] };
  const schedule = generateSchedule(rng.fork(), {
    durationMs: o.durationMs,
    warmupMs: 2 * w.graceMs,
    graceMs: w.graceMs,
    nodes: [...world.kubelets.keys()],
    replicas: world.ids,
    rates,
    outOfServiceAfterMs: w.outOfService?.afterMs,
  });
  const injector = new Injector(world, rng.fork(), clock.now);
  const checker = new Checker(world.server, injector, {
    graceMs: w.graceMs,
    evictionRate: 0.1,
    cap: w.cap,
    outOfService: w.outOfService,
    secondOpinion: w.secondOpinion,
    kubeletRuns: (node) => world.kubelets.get(node)?.runs ?? [],
    silenceMs: w.silenceMs,
    now: clock.now,
  });
  checker.context = (node) => {
    const brief = (n: import('./api-server.js').Obj | undefined) => {
      if (!n) return 'none';
      const ready = (n.status?.conditions as Array<Record<string, unknown>> | undefined)?.find(
        (c) => c.type === 'Ready',
      );
      const taints = ((n.spec?.taints as Array<{ key: string; effect: string }> | undefined) ?? []).map(
        (t) => `${t.key.split('/')[1]}:${t.effect}`,
      );
      return `rv=${n.metadata.resourceVersion} Ready=${String(ready?.status)} hb=${String(ready?.lastHeartbeatTime)} taints=[${taints.join(',')}] ann=${JSON.stringify(n.metadata.annotations ?? {})}`;
    };
    const views = [...world.replicas.values()].map((r) => {
      const lease = r.leaseStore?.get(`kube-node-lease/${node}`) ?? r.leaseStore?.get(node);
      return `${r.id}: node ${brief(r.nodeStore?.get(node) as never)} lease ${String((lease as { spec?: { renewTime?: string } } | undefined)?.spec?.renewTime)} sight=${JSON.stringify(r.controller?.sight.blind ?? 'acting')}`;
    });
    const k = world.kubelets.get(node);
    return `server: ${brief(world.server.get('nodes', node))} lease ${String((world.server.get('leases/kube-node-lease', node)?.spec as { renewTime?: string } | undefined)?.renewTime)}; kubelet running=${String(k?.running)}; ${views.join('; ')}`;
  };
  const started = world.startReplica.bind(world);
  world.startReplica = (id: string) => {
    checker?.replicaStarted(id);
    started(id);
  };
  world.start();
  injector.arm(schedule, T0);
  const stopAtFirst = o.stopAtFirst ?? true;
  const end = T0 + Math.min(o.durationMs, o.stopAtMs ?? o.durationMs);
  let timerLimit = 0;
  try {
    while (Date.now() < end) {
      await vi.advanceTimersByTimeAsync(TICK_MS);
      checker.tick();
      if (Date.now() - T0 === 2 * w.graceMs) timerLimit = vi.getTimerCount() * 3 + 50;
      if (timerLimit > 0 && (Date.now() - T0) % 10_000 === 0) {
        checker.bounded(
          [...world.replicas.values()].map((r) => ({
            replica: r.id,
            queued: r.controller?.sight.queued ?? 0,
          })),
          world.server.openWatches,
          vi.getTimerCount(),
          { queue: 4 * w.nodes + 10, watches: 8 * world.ids.length, timers: timerLimit },
        );
      }
      if (world.startFailures.length > 0) {
        checker.violations.push({
          at: Date.now(),
          invariant: 'wiring',
          detail: world.startFailures.join('; '),
        });
      }
      if (stopAtFirst && checker.violations.length > 0) break;
    }
    if ((checker.violations.length === 0 || !stopAtFirst) && o.stopAtMs === undefined) checker.finish();
  } finally {
    await world.stop();
    await vi.advanceTimersByTimeAsync(60_000);
    random.mockRestore();
  }
  const logs: Record<string, string[]> = {};
  for (const r of world.replicas.values()) logs[r.id] = r.log.tail();
  let renewals = 0;
  for (const k of world.kubelets.values()) renewals += k.renewals;
  return {
    seed: o.seed,
    family: o.family,
    simulatedMs: Math.min(Date.now(), end) - T0,
    violations: checker.violations.map((v) => ({ ...v, at: v.at - T0 })),
    schedule,
    figures: {
      writes: checker.writes,
      marks: checker.marks,
      requests: world.server.requests,
      restarts: world.restarts,
      faults: injector.executed,
      traps: injector.trapsFired,
      renewals,
    },
    flags: w.flags,
    logs,
  };
}

/** A failure's report: the seed, the command that replays it, the violations, the schedule. */
export function report(r: RunResult): string {
  const lines = [
    `seed ${r.seed} (family ${r.family}): ${r.violations.length} violation(s) after ${(r.simulatedMs / 1000).toFixed(1)}s simulated`,
    `replay: ./dev run sim -- --family=${r.family} --seed=${r.seed}`,
    `flags: ${r.flags.join(' ')}`,
    ...r.violations.map(
      (v) => `  ${(v.at / 1000).toFixed(3)}s ${v.invariant}${v.node ? ` [${v.node}]` : ''}: ${v.detail}`,
    ),
    'schedule (up to the first violation):',
    ...r.schedule
      .filter((t) => t.at <= (r.violations[0]?.at ?? Number.POSITIVE_INFINITY))
      .map((t) => `  ${describe(t)}`),
  ];
  return lines.join('\n');
}

export { MODEL };
