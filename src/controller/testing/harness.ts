/**
 * TEST SUPPORT ONLY (src/controller/*.test.ts): the controller as run.ts wires it (real watch layer,
 * tracker, disruption controller and writer) against the in-memory server, in virtual time (run it
 * under vi.useFakeTimers). Leading from the start (no election).
 */
import { Registry } from 'prom-client';
import { vi } from 'vitest';
import { ApiWriter, createWriterMetrics } from '../../apply/writer.js';
import type { Clock } from '../../clock/clock.js';
import type { Ticker } from '../../clock/ticker.js';
import { type CapSettings, createDisruptionMetrics, DisruptionController } from '../../disruption/index.js';
import { NodeHealthTracker } from '../../health/index.js';
import type { KubeClient, KubeRequest } from '../../kube/client.js';
import { RequestRateLimiter } from '../../kube/rate-limit.js';
import type { Lease, Node } from '../../kube/types.js';
import { memoryLogger } from '../../log/logger.js';
import type { MarkingPolicy } from '../../policy/index.js';
import type { OutOfServiceSettings } from '../../remediation/index.js';
import { asyncScheduler, type SchedulerLike } from '../../rx/index.js';
import type { SecondOpinionSettings } from '../../second-opinion/index.js';
import { Reflector } from '../../watch/reflector.js';
import { stripLease, stripNode, stripNodeWithKubelet } from '../../watch/strip.js';
import type { WatchHealth } from '../../watch/types.js';
import { createControllerMetrics } from '../metrics.js';
import { NodeLifecycleController } from '../node-lifecycle.js';
import type { Probe } from '../second-opinion.js';
import { SimApiServer } from './sim-api.js';

export const GRACE_MS = 50_000;
export const SILENCE_MS = 45_000;

export const advance = (ms: number) => vi.advanceTimersByTimeAsync(ms);
const now = () => Date.now();

export interface Harness {
  sim: SimApiServer;
  /** What the controller told leader election: setEligible values and step-down requests, timed. */
  election: Array<{ at: number; call: string }>;
  controller: NodeLifecycleController;
  registry: Registry;
  leases: Reflector<Lease>;
  nodes: Reflector<Node>;
  /** Intervals [from, to) in which either watch was synced but not connected. */
  blindIntervals: Array<[number, number]>;
  /** The delay of every action the controller and its watches scheduled on the clock. */
  scheduled: number[];
  /** Every line the controller logged. */
  logs: Array<Record<string, unknown>>;
  /** The shared client-side rate limiter (sharedLimiter), to queue other requests ahead. */
  limiter: RequestRateLimiter | undefined;
  /** The controller's writer (to record Events beside its own writes). */
  writer: ApiWriter;
  /** The disruption controller (zone queues, admissions in flight, the cap). */
  disruption: DisruptionController;
  stop(): Promise<void>;
}

/**
 * The controller as run.ts wires it (real watch layer, tracker, disruption controller and writer),
 * against the in-memory server, in virtual time. Leading from the start (no election).
 */
export function harness(o: {
  nodes: number;
  blindStepDownMs?: number;
  ticker?: Ticker;
  graceMs?: number;
  nodeEvictionRate?: number;
  /** The blast-radius cap (default: off). */
  cap?: CapSettings;
  /** Arranges the server before the controller starts. */
  before?: (sim: SimApiServer) => void;
  /** What is written for a lost node (default: upstream's). */
  policy?: MarkingPolicy;
  /** --out-of-service (default: off). */
  outOfService?: OutOfServiceSettings;
  /** --second-opinion=kubelet with these settings and this probe (default: off). */
  secondOpinion?: { settings: SecondOpinionSettings; probe: Probe };
  /** The writer computes and logs but sends nothing. */
  dryRun?: boolean;
  /** The writer's client-side rate limit (default 50 QPS, burst 100). */
  qps?: number;
  burst?: number;
  /** The controller's workers (default 8), and how many may take ordinary keys (default: all). */
  workers?: number;
  ordinaryWorkers?: number;
  /**
   * One client-side rate limiter (qps, burst) for every request, reads and writes alike, as
   * run.ts wires it (default: the writer's own, reads unthrottled).
   */
  sharedLimiter?: boolean;
}): Harness {
  const sim = new SimApiServer(now);
  for (let i = 0; i < o.nodes; i++) sim.addNode(`node-${i}`);
  o.before?.(sim);
  const scheduled: number[] = [];
  const clock: Clock = {
    scheduler: {
      now: () => asyncScheduler.now(),
      schedule: ((work: never, delay?: number, state?: never) => {
        scheduled.push(delay ?? 0);
        return asyncScheduler.schedule(work, delay, state);
      }) as SchedulerLike['schedule'],
    },
    wall: () => Date.now(),
  };
  const registry = new Registry();
  const logger = memoryLogger(2);
  const limiter = o.sharedLimiter
    ? new RequestRateLimiter(o.qps ?? 50, o.burst ?? 100, clock.scheduler)
    : undefined;
  const client = (limiter
    ? {
        request: async (req: KubeRequest) => {
          if (!req.throttled) await limiter.acquire(req.signal, req.priority);
          return sim.client.request(req);
        },
      }
    : sim.client) as unknown as KubeClient;
  const random = () => 0.5; // nominal backoff delays, no jitter
  const nodes = new Reflector<Node>({
    resource: 'nodes',
    transport: sim.transport('nodes'),
    scheduler: clock.scheduler,
    strip: o.secondOpinion ? stripNodeWithKubelet : stripNode,
    random,
  });
  const leases = new Reflector<Lease>({
    resource: 'leases',
    transport: sim.transport('leases'),
    scheduler: clock.scheduler,
    strip: stripLease,
    random,
    tuning: { idleTimeoutMs: (SILENCE_MS * 2) / 3 },
  });
  const writer = new ApiWriter({
    client,
    fence: () => undefined,
    dryRun: o.dryRun ?? false,
    logger,
    metrics: createWriterMetrics(registry),
    clock,
    qps: o.qps ?? 50,
    burst: o.burst ?? 100,
    ...(limiter ? { limiter } : {}),
    component: 'node-controller',
    instance: 'test',
  });
  const disruption = new DisruptionController(
    { nodeEvictionRate: o.nodeEvictionRate, ...(o.cap ? { cap: o.cap } : {}) },
    { metrics: createDisruptionMetrics(registry) },
  );
  const controller = new NodeLifecycleController({
    clock,
    logger,
    metrics: createControllerMetrics(registry),
    client,
    writer,
    tracker: new NodeHealthTracker({
      grace: { monitorGraceMs: o.graceMs ?? GRACE_MS, startupGraceMs: 60_000 },
    }),
    disruption,
    leases,
    nodes,
    watchSilenceThresholdMs: SILENCE_MS,
    monitorPeriodMs: 5_000,
    markPodsNotReady: 'always',
    policy: o.policy,
    ...(o.outOfService ? { outOfService: o.outOfService } : {}),
    ...(o.secondOpinion ? { secondOpinion: o.secondOpinion } : {}),
    ...(o.workers !== undefined ? { workers: o.workers } : {}),
    ...(o.ordinaryWorkers !== undefined ? { ordinaryWorkers: o.ordinaryWorkers } : {}),
    blindStepDownMs: o.blindStepDownMs,
    ticker: o.ticker,
    election: {
      setEligible: (e, why) => election.push({ at: now(), call: `eligible=${e}${why ? ` (${why})` : ''}` }),
      stepDown: (reason) => {
        election.push({ at: now(), call: `stepDown: ${reason}` });
        // As run.ts does on the elector's stopped-leading event.
        controller.setLeading(false);
      },
    },
  });
  const election: Harness['election'] = [];
  const blindIntervals: Array<[number, number]> = [];
  let blindFrom: number | undefined;
  const latest = new Map<string, WatchHealth>();
  const onHealth = (h: WatchHealth) => {
    latest.set(h.resource, h);
    const all = [...latest.values()];
    const synced = all.length === 2 && all.every((x) => x.synced);
    const blind = synced && all.some((x) => !x.connected);
    if (blind && blindFrom === undefined) blindFrom = now();
    if (!blind && blindFrom !== undefined) {
      blindIntervals.push([blindFrom, now()]);
      blindFrom = undefined;
    }
  };
  nodes.health$.subscribe(onHealth);
  leases.health$.subscribe(onHealth);
  controller.start();
  nodes.start();
  leases.start();
  controller.setLeading(true);
  return {
    sim,
    election,
    controller,
    registry,
    leases,
    nodes,
    blindIntervals,
    scheduled,
    logs: logger.lines,
    limiter,
    writer,
    disruption,
    async stop() {
      sim.stopAll();
      nodes.dispose();
      leases.dispose();
      // Workers finish what they hold, a write waiting for its rate-limit token included: move
      // virtual time until they have.
      let done = false;
      const stopped = controller.stop().finally(() => {
        done = true;
      });
      for (let i = 0; i < 600 && !done; i++) await advance(1000);
      await stopped;
    },
  };
}

/** A metric's value; with `labels`, the sum of the samples that have them (0 when none has). */
export async function metric(
  registry: Registry,
  name: string,
  labels?: Record<string, string>,
): Promise<number | undefined> {
  const values = (await registry.getSingleMetric(name)?.get())?.values;
  if (!labels) return values?.[0]?.value;
  const all = (values ?? []) as Array<{ value: number; labels: Record<string, unknown> }>;
  const matching = all.filter((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x));
  return matching.reduce((sum, v) => sum + v.value, 0);
}
