/**
 * The results record of ONE controller run of the side-by-side harness (`run.ts --json FILE`): what
 * bench/figures.ts pools across the runs of a set. Small (a few KB): the run's figures and, per
 * failed node, its latencies relative to its own failure; no absolute timestamps, no logs, no
 * machine paths (those stay in the run's folder under /tmp).
 */
import { publicPath, type RecordHeader, scrubPaths } from '../results.js';
import type { ControllerName } from './controllers.js';
import type { MachineShare } from './proc.js';
import { round } from './stats.js';
import { type ControllerResult, markedAt, type NodeDetection, type Options } from './table.js';

/** One failed node, ms relative to its own events; null where the event was not seen. */
export interface FailureRecord {
  node: string;
  /** "canary" or "wave-N". */
  wave: string;
  /** Ready=Unknown seen - (last heartbeat seen + grace). */
  overheadMs: number | null;
  unknownAfterFailMs: number | null;
  taintAfterUnknownMs: number | null;
  /** Failure to this node's unreachable NoExecute taint (rate-limited per zone). */
  taintAfterFailMs: number | null;
  podsNotReadyAfterUnknownMs: Array<number | null>;
  /** Ready=Unknown to the unreachable NoSchedule taint (absent in records from before). */
  noScheduleAfterUnknownMs?: number | null;
  /** Failure to the last of Ready=Unknown, the NoSchedule taint and its pods Ready=False (absent before). */
  markedAfterFailMs?: number | null;
  /** After recovery: Ready=True again to every node.kubernetes.io taint gone. */
  taintsRemovedAfterReadyMs: number | null;
}

export interface CompareRecord extends RecordHeader {
  bench: 'side-by-side';
  controller: ControllerName;
  version: string;
  /** The controller's command line, without the run's paths and loopback ports. */
  args: string[];
  options: {
    nodes: number;
    zones: number;
    pods: number;
    fail: number;
    waves: number;
    simulator: 'fleet' | 'kwok';
    preclean: boolean;
    recover: boolean;
    /** What the waves waited for (absent in records from before: noexecute). */
    waveUntil?: 'noexecute' | 'marked';
    graceMs: number;
    startupGraceMs: number;
    renewMs: number;
    steadyMs: number;
    qps: number;
    burst: number;
  };
  software: { k8s: string; etcd: string; oursBuiltAt: string };
  /** The machine's CPU (all CPUs) in the steady window and in the waves. */
  machineCpu: { steady?: MachineShare; waves?: MachineShare };
  healthyAfterMs: number | null;
  firstDecisionMs: number | null;
  convergedAfterMs: number | null;
  startupWrites: number;
  cpuSeconds: number;
  peakRssMiB: number;
  peakRssPhase: string | null;
  steady: ControllerResult['steady'];
  writes: ControllerResult['writes'];
  canary: FailureRecord;
  failures: FailureRecord[];
  missed: ControllerResult['missed'];
  falsePositives: string[];
  observerErrors: number;
  simulatorRenewErrors: number;
  notes: string[];
}

const after = (to: number | undefined, from: number | undefined): number | null =>
  to === undefined || from === undefined ? null : round(to - from, 1);

export function failureRecord(d: NodeDetection): FailureRecord {
  return {
    node: d.node,
    wave: d.group,
    overheadMs: d.overheadMs === undefined ? null : round(d.overheadMs, 1),
    unknownAfterFailMs: after(d.unknownAt, d.failAt),
    taintAfterUnknownMs: after(d.taintAt, d.unknownAt),
    taintAfterFailMs: after(d.taintAt, d.failAt),
    podsNotReadyAfterUnknownMs: d.podsNotReadyAt.map((p) => after(p, d.unknownAt)),
    noScheduleAfterUnknownMs: after(d.noScheduleAt, d.unknownAt),
    markedAfterFailMs: after(markedAt(d), d.failAt),
    taintsRemovedAfterReadyMs: after(d.taintsGoneAt, d.readyAgainAt),
  };
}

/** Flags whose values are this run's own (paths, loopback ports): left out of a record. */
const RUN_LOCAL = /^--(kubeconfig|bind-address|secure-port|metrics-bind-address|health-probe-bind-address)=/;

/** A controller's command line as a record keeps it: program and paths by their public names. */
export function publicArgs(command: readonly string[]): string[] {
  return command
    .filter((a) => !RUN_LOCAL.test(a))
    .map((a, i) => {
      if (i === 0) return publicPath(a);
      const eq = a.indexOf('=');
      const value = eq > 0 ? a.slice(eq + 1) : a;
      if (!value.startsWith('/')) return a;
      return eq > 0 ? `${a.slice(0, eq + 1)}${publicPath(value)}` : publicPath(value);
    });
}

export function compareRecord(
  header: RecordHeader,
  r: ControllerResult,
  o: Options,
  software: CompareRecord['software'],
): CompareRecord {
  return {
    ...header,
    bench: 'side-by-side',
    controller: r.controller,
    version: r.version,
    args: publicArgs(r.command),
    options: {
      nodes: o.nodes,
      zones: o.zones,
      pods: o.pods,
      fail: o.fail,
      waves: o.waves,
      simulator: o.simulator,
      preclean: o.preclean,
      recover: o.recover,
      waveUntil: o.waveUntil ?? 'noexecute',
      graceMs: o.graceMs,
      startupGraceMs: o.startupGraceMs,
      renewMs: o.renewMs,
      steadyMs: o.steadyMs,
      qps: o.qps ?? Number.NaN,
      burst: o.burst ?? Number.NaN,
    },
    software,
    machineCpu: r.machine ?? {},
    healthyAfterMs: r.healthyAfterMs === undefined ? null : round(r.healthyAfterMs),
    firstDecisionMs: r.firstDecisionMs === undefined ? null : round(r.firstDecisionMs),
    convergedAfterMs: r.convergedAfterMs === undefined ? null : round(r.convergedAfterMs),
    startupWrites: r.startupWrites,
    cpuSeconds: round(r.cpuSeconds, 2),
    peakRssMiB: r.peakRssMiB,
    peakRssPhase: r.peakRssPhase ?? null,
    steady: r.steady,
    writes: r.writes,
    canary: failureRecord(r.canary),
    failures: r.detections.map(failureRecord),
    missed: r.missed,
    falsePositives: r.falsePositives,
    observerErrors: r.observerErrors,
    simulatorRenewErrors: r.simulatorRenewErrors,
    notes: r.notes.map(scrubPaths),
  };
}
