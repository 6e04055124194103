/**
 * Result types of a side-by-side run and the markdown table made from them (used by run.ts, and by
 * report.ts to re-render a saved summary.json).
 */
import type { ControllerName } from './controllers.js';
import type { MachineShare } from './proc.js';
import { round, type Summary } from './stats.js';

export interface Options {
  nodes: number;
  fail: number;
  waves: number;
  controllers: ControllerName[];
  simulator: 'fleet' | 'kwok';
  graceMs: number;
  startupGraceMs: number;
  renewMs: number;
  pods: number;
  zones: number;
  steadyMs: number;
  /** `--kube-api-qps` / `--kube-api-burst` of both controllers (absent in summaries from before). */
  qps?: number;
  burst?: number;
  recover: boolean;
  /** What a wave waits for: every lost node's NoExecute taint, or only marked (absent: noexecute). */
  waveUntil?: 'noexecute' | 'marked';
  preclean: boolean;
  /**
   * --kubelet-endpoints: the fleet's kubelets serve a TLS endpoint on loopback (for
   * --second-opinion=kubelet); a failed node's endpoint closes with its lease (the machine is down).
   */
  kubeletEndpoints?: boolean;
  /** Our controller's entry script and the node flags it runs with. */
  oursEntry: string;
  oursNodeFlags: string[];
  /** Extra flags for our controller (--ours-flags), e.g. --watch-read-interval=100ms. */
  oursFlags?: string[];
  out: string;
}

export interface NodeDetection {
  node: string;
  group: string;
  failAt: number;
  lastBeatAt: number | undefined;
  unknownAt: number | undefined;
  /** unknownAt - (lastBeatAt + grace), ms. */
  overheadMs: number | undefined;
  taintAt: number | undefined;
  /** The node.kubernetes.io/unreachable NoSchedule taint (absent in summaries from before). */
  noScheduleAt?: number | undefined;
  podsNotReadyAt: Array<number | undefined>;
  recoverAt?: number;
  readyAgainAt?: number;
  taintsGoneAt?: number;
}

export interface WaveWindow {
  group: string;
  from: number;
  to: number;
}

export interface ControllerResult {
  controller: ControllerName;
  version: string;
  command: string[];
  loadAtStart: string;
  loadAtEnd: string;
  /**
   * The whole machine's CPU (all CPUs, every process) in the steady window and in the waves: how
   * busy it was and how much the hypervisor took (steal), to tell a noisy run from a slow controller.
   * Absent in summaries from before it was recorded.
   */
  machine?: { steady?: MachineShare; waves?: MachineShare };
  spawnAt: number;
  healthyAfterMs: number | undefined;
  firstDecisionMs: number | undefined;
  convergedAfterMs: number | undefined;
  startupWrites: number;
  canary: NodeDetection;
  detections: NodeDetection[];
  overheadMs: Summary;
  sinceFailMs: Summary;
  taintAfterUnknownMs: Summary;
  podNotReadyAfterUnknownMs: Summary;
  taintRemovalAfterReadyMs: Summary;
  /** Absent in summaries from before. */
  noScheduleAfterUnknownMs?: Summary;
  /** What the waves waited for (absent: noexecute); in 'marked' runs `missed.taint` counts NoSchedule. */
  waveUntil?: 'noexecute' | 'marked';
  missed: { unknown: number; taint: number; pods: number };
  falsePositives: string[];
  cpuSeconds: number;
  peakRssMiB: number;
  /** Phase of the run in which the high-water mark first reached its final value. */
  peakRssPhase?: string;
  processes: number;
  steady: {
    seconds: number;
    beats: number;
    controllerCpuSeconds: number;
    cpuMicrosPerRenewal: number;
    apiserverCpuSeconds: number;
    simulatorCpuSeconds: number;
    writes: number;
  };
  writes: {
    total: number;
    byKind: Record<string, number>;
    perFailedNode: number;
    perFailedNodeByKind: Record<string, number>;
    unattributedInWaves: number;
    /** kube-apiserver's time for the writes about failed nodes (audit log; absent before). */
    serverMs?: Summary;
    onHealthyNodes: number;
    canary: number;
  };
  metrics: Record<string, number>;
  observerErrors: number;
  simulatorRenewErrors: number;
  notes: string[];
}

export function ms(v: number | undefined): string {
  return v === undefined || !Number.isFinite(v) ? '-' : String(Math.round(v));
}
export function ratio(ours: number | undefined, kcm: number | undefined): string {
  if (ours === undefined || kcm === undefined || !Number.isFinite(ours) || !Number.isFinite(kcm) || kcm === 0)
    return '-';
  const r = ours / kcm;
  return `${r >= 1 ? round(r, 2) : Number(r.toPrecision(2))}x`;
}

/**
 * Seconds from a wave's failure to its last NoExecute taint, worst wave (rate limits show here);
 * NaN in a run whose waves did not wait for them (--wave-until marked).
 */
function lastTaintS(r: ControllerResult): number {
  let worst = Number.NaN;
  if (r.waveUntil === 'marked') return worst;
  for (const d of r.detections) {
    if (d.taintAt === undefined) return Number.POSITIVE_INFINITY;
    const s = (d.taintAt - d.failAt) / 1000;
    if (!(s <= worst)) worst = s;
  }
  return worst;
}

/**
 * Seconds from a wave's failure until every node of it is marked: Ready=Unknown, the unreachable
 * NoSchedule taint and every pod Ready=False, worst wave (infinite: one never was).
 */
export function allMarkedS(r: ControllerResult): number {
  let worst = Number.NaN;
  for (const d of r.detections) {
    const at = markedAt(d);
    if (at === undefined) return Number.POSITIVE_INFINITY;
    const s = (at - d.failAt) / 1000;
    if (!(s <= worst)) worst = s;
  }
  return worst;
}

/** When a node was marked: the last of Ready=Unknown, its NoSchedule taint, its pods not ready. */
export function markedAt(d: NodeDetection): number | undefined {
  const at = [d.unknownAt, d.noScheduleAt, ...d.podsNotReadyAt];
  return at.some((t) => t === undefined) ? undefined : Math.max(...(at as number[]));
}

/**
 * Label, numeric value (for ratios and medians), formatted cell, and whether an ours / kcm ratio
 * means anything (not for the machine's own figures, which describe the conditions of the run).
 */
export type Row = [
  string,
  (r: ControllerResult) => number | undefined,
  (r: ControllerResult) => string,
  { ratio: false }?,
];

const pct = (v: number | undefined): string => (v === undefined ? '-' : String(v));

/** The table's rows: label, numeric value (for ratios and medians), formatted cell. */
export const ROWS: Row[] = [
  ['detection overhead p50 (ms)', (r) => r.overheadMs.p50, (r) => ms(r.overheadMs.p50)],
  ['detection overhead p99 (ms)', (r) => r.overheadMs.p99, (r) => ms(r.overheadMs.p99)],
  ['detection overhead max (ms)', (r) => r.overheadMs.max, (r) => ms(r.overheadMs.max)],
  ['failure to Ready=Unknown p50 (ms)', (r) => r.sinceFailMs.p50, (r) => ms(r.sinceFailMs.p50)],
  [
    'Unknown to NoExecute taint p50 / max (ms)',
    (r) => r.taintAfterUnknownMs.p50,
    (r) => `${ms(r.taintAfterUnknownMs.p50)} / ${ms(r.taintAfterUnknownMs.max)}`,
  ],
  [
    'failure to last NoExecute taint of a wave, worst wave (s)',
    (r) => lastTaintS(r),
    (r) => String(round(lastTaintS(r), 1)),
  ],
  [
    'Unknown to NoSchedule taint p50 / max (ms)',
    (r) => r.noScheduleAfterUnknownMs?.p50,
    (r) => `${ms(r.noScheduleAfterUnknownMs?.p50)} / ${ms(r.noScheduleAfterUnknownMs?.max)}`,
  ],
  [
    'failure to every lost node marked (Unknown, NoSchedule, pods not ready), worst wave (s)',
    (r) => allMarkedS(r),
    (r) => String(round(allMarkedS(r), 1)),
  ],
  [
    'Unknown to pod Ready=False p50 / max (ms)',
    (r) => r.podNotReadyAfterUnknownMs.p50,
    (r) => `${ms(r.podNotReadyAfterUnknownMs.p50)} / ${ms(r.podNotReadyAfterUnknownMs.max)}`,
  ],
  [
    'Ready=True to taints removed p50 / max (ms)',
    (r) => r.taintRemovalAfterReadyMs.p50,
    (r) => `${ms(r.taintRemovalAfterReadyMs.p50)} / ${ms(r.taintRemovalAfterReadyMs.max)}`,
  ],
  [
    'start to first correct decision (s)',
    (r) => (r.firstDecisionMs === undefined ? undefined : r.firstDecisionMs / 1000),
    (r) => (r.firstDecisionMs === undefined ? '-' : String(round(r.firstDecisionMs / 1000, 2))),
  ],
  [
    'start to converged: last start-up write (s)',
    (r) => (r.convergedAfterMs === undefined ? undefined : r.convergedAfterMs / 1000),
    (r) => (r.convergedAfterMs === undefined ? '-' : String(round(r.convergedAfterMs / 1000, 1))),
  ],
  ['API writes until converged', (r) => r.startupWrites, (r) => String(r.startupWrites)],
  [
    'start to healthz 200 (s)',
    (r) => (r.healthyAfterMs === undefined ? undefined : r.healthyAfterMs / 1000),
    (r) => (r.healthyAfterMs === undefined ? '-' : String(round(r.healthyAfterMs / 1000, 2))),
  ],
  ['controller CPU, whole run (s)', (r) => r.cpuSeconds, (r) => String(round(r.cpuSeconds, 2))],
  [
    'controller CPU, steady (% of a core)',
    (r) => (r.steady.controllerCpuSeconds / r.steady.seconds) * 100,
    (r) => String(round((r.steady.controllerCpuSeconds / r.steady.seconds) * 100, 2)),
  ],
  [
    'controller CPU per renewal, steady (µs)',
    (r) => r.steady.cpuMicrosPerRenewal,
    (r) => `${r.steady.cpuMicrosPerRenewal} (${r.steady.beats} renewals)`,
  ],
  ['peak RSS (MiB)', (r) => r.peakRssMiB, (r) => String(r.peakRssMiB)],
  [
    'API writes per failed node',
    (r) => r.writes.perFailedNode,
    (r) =>
      `${r.writes.perFailedNode} (${Object.entries(r.writes.perFailedNodeByKind)
        .map(([kk, v]) => `${kk} ${v}`)
        .join(', ')})`,
  ],
  [
    "kube-apiserver's time for those writes p50 / p99 / max (ms)",
    (r) => r.writes.serverMs?.p99,
    (r) => `${ms(r.writes.serverMs?.p50)} / ${ms(r.writes.serverMs?.p99)} / ${ms(r.writes.serverMs?.max)}`,
  ],
  ['API writes, whole run', (r) => r.writes.total, (r) => String(r.writes.total)],
  ['API writes, steady window', (r) => r.steady.writes, (r) => String(r.steady.writes)],
  [
    'API writes to never-failed nodes (+ their pods, events)',
    (r) => r.writes.onHealthyNodes,
    (r) => String(r.writes.onHealthyNodes),
  ],
  [
    'kube-apiserver CPU, steady (% of a core)',
    (r) => (r.steady.apiserverCpuSeconds / r.steady.seconds) * 100,
    (r) => String(round((r.steady.apiserverCpuSeconds / r.steady.seconds) * 100, 1)),
  ],
  [
    'machine CPU busy, steady / waves (% of all CPUs)',
    (r) => r.machine?.steady?.busyPct,
    (r) => `${pct(r.machine?.steady?.busyPct)} / ${pct(r.machine?.waves?.busyPct)}`,
    { ratio: false },
  ],
  [
    'machine CPU stolen by the hypervisor, steady / waves (%)',
    (r) => r.machine?.steady?.stealPct,
    (r) => `${pct(r.machine?.steady?.stealPct)} / ${pct(r.machine?.waves?.stealPct)}`,
    { ratio: false },
  ],
  [
    'false positives / missed (Unknown, awaited taint, pods)',
    () => undefined,
    (r) => `${r.falsePositives.length} / ${r.missed.unknown}, ${r.missed.taint}, ${r.missed.pods}`,
  ],
];

export function markdownTable(results: ControllerResult[], o: Options, cmd: string): string {
  const by = new Map(results.map((r) => [r.controller, r]));
  const k = by.get('kcm');
  const u = by.get('ours');
  const cols = results.map((r) => r.controller);
  const both = k !== undefined && u !== undefined;
  const lines: string[] = [];
  lines.push(`| metric | ${cols.join(' | ')}${both ? ' | ours / kcm' : ''} |`);
  lines.push(`| --- | ${cols.map(() => '---').join(' | ')}${both ? ' | ---' : ''} |`);
  for (const [label, val, fmt, opts] of ROWS) {
    const cells = results.map((r) => fmt(r));
    const rat = both ? ` | ${opts?.ratio === false ? '-' : ratio(val(u!), val(k!))}` : '';
    lines.push(`| ${label} | ${cells.join(' | ')}${rat} |`);
  }
  if (both) {
    const met = (ok: boolean) => (ok ? 'met' : 'NOT met');
    lines.push('');
    lines.push(
      `Targets: detection overhead p99 <= 100 ms: ${met(u!.overheadMs.p99 <= 100)} (${ms(u!.overheadMs.p99)} ms over ${u!.overheadMs.n} nodes); ` +
        `peak RSS <= upstream: ${met(u!.peakRssMiB <= k!.peakRssMiB)} (${u!.peakRssMiB} vs ${k!.peakRssMiB} MiB); ` +
        `CPU per renewal within 2x upstream: ${met(u!.steady.cpuMicrosPerRenewal <= 2 * k!.steady.cpuMicrosPerRenewal)} ` +
        `(${u!.steady.cpuMicrosPerRenewal} vs ${k!.steady.cpuMicrosPerRenewal} µs).`,
    );
  }
  const extra = results
    .find((r) => r.controller === 'ours')
    ?.command.filter((a) => a.startsWith('--watch-silence'));
  const head = [
    `Command: \`${cmd}\``,
    `Nodes ${o.nodes} (${o.simulator}${o.preclean ? ', pre-cleaned: a controller restart' : ''}), ${o.zones} zones, ${o.pods} pods/node; ${o.fail} failed per wave x ${o.waves} wave(s) + 1 canary; grace ${o.graceMs / 1000} s, startup grace ${o.startupGraceMs / 1000} s, renew ${o.simulator === 'kwok' ? 10 : o.renewMs / 1000} s; steady window ${o.steadyMs / 1000} s.`,
    o.qps === undefined
      ? 'Client rate limits: each controller its own default (kcm 20/30, ours 50/100 QPS/burst).'
      : `Client rate limits, both: --kube-api-qps=${o.qps} --kube-api-burst=${o.burst} (they move convergence, whole-run CPU and the start-up memory peak).`,
    ...(extra?.length
      ? [`Ours also gets ${extra.join(' ')} (it requires a value below the grace period).`]
      : []),
    ...(o.oursEntry !== undefined
      ? [
          `Ours runs as \`node ${[...(o.oursNodeFlags ?? []), o.oursEntry.replace(/^.*\/(dist\/)/, '$1'), ...(o.oursFlags ?? [])].join(' ')}\`.`,
        ]
      : []),
    ...results.map((r) => `Load ${r.controller}: start ${r.loadAtStart}; end ${r.loadAtEnd}.`),
  ];
  return `${head.map((h) => `- ${h}`).join('\n')}\n\n${lines.join('\n')}\n`;
}
