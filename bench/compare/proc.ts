/**
 * CPU and memory of a process tree, read from /proc (Linux only).
 *
 * CPU = utime + stime of the process and every live descendant, plus cutime + cstime of the root
 * (children it has already reaped). Peak RSS = VmHWM of each process (the kernel's high-water mark).
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Clock ticks per second (`getconf CLK_TCK`); 100 on every Linux we run on. */
const CLK_TCK = 100;

interface StatLine {
  pid: number;
  ppid: number;
  /** utime + stime, seconds. */
  self: number;
  /** cutime + cstime, seconds. */
  reaped: number;
}

function readStat(pid: number): StatLine | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // comm may contain spaces and parentheses: fields start after the LAST ')'.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // rest[0] = state (field 3), so field n is rest[n - 3].
  const num = (field: number) => Number(rest[field - 3] ?? 0);
  return {
    pid,
    ppid: num(4),
    self: (num(14) + num(15)) / CLK_TCK,
    reaped: (num(16) + num(17)) / CLK_TCK,
  };
}

function readHwmKiB(pid: number): number {
  try {
    const m = /VmHWM:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

function readRssKiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** Pids of `root` and all its live descendants. */
export function processTree(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const st = readStat(Number(entry));
    if (!st) continue;
    const list = children.get(st.ppid) ?? [];
    list.push(st.pid);
    children.set(st.ppid, list);
  }
  const out: number[] = [];
  const stack = [root];
  while (stack.length > 0) {
    const pid = stack.pop()!;
    out.push(pid);
    stack.push(...(children.get(pid) ?? []));
  }
  return out;
}

export interface TreeSample {
  /** Absolute ms (performance.timeOrigin + performance.now()). */
  at: number;
  cpuSeconds: number;
  /** Largest VmHWM of any process in the tree, KiB. */
  peakRssKiB: number;
  /** Sum of VmRSS over the tree at this moment, KiB. */
  rssKiB: number;
  processes: number;
}

export const nowMs = (): number => performance.timeOrigin + performance.now();

/** One reading of a process tree; undefined when the root is gone. */
export function sampleTree(root: number): TreeSample | undefined {
  const rootStat = readStat(root);
  if (!rootStat) return undefined;
  const pids = processTree(root);
  let cpu = rootStat.reaped;
  let hwm = 0;
  let rss = 0;
  for (const pid of pids) {
    const st = pid === root ? rootStat : readStat(pid);
    if (!st) continue;
    cpu += st.self;
    hwm = Math.max(hwm, readHwmKiB(pid));
    rss += readRssKiB(pid);
  }
  return { at: nowMs(), cpuSeconds: cpu, peakRssKiB: hwm, rssKiB: rss, processes: pids.length };
}

/**
 * Samples a process tree every `intervalMs` and keeps the last good reading (the process may exit
 * between samples; what it used until the last sample is what we report).
 */
export class TreeSampler {
  private timer: NodeJS.Timeout | undefined;
  last: TreeSample | undefined;
  /** Every reading, in order (one per interval: ~1,200 for a 20-minute run). */
  readonly series: TreeSample[] = [];
  peakRssKiB = 0;
  peakTreeRssKiB = 0;

  constructor(
    readonly pid: number,
    intervalMs = 1000,
  ) {
    this.sample();
    this.timer = setInterval(() => this.sample(), intervalMs);
    this.timer.unref();
  }

  sample(): TreeSample | undefined {
    const s = sampleTree(this.pid);
    if (s) {
      this.last = s;
      this.series.push(s);
      this.peakRssKiB = Math.max(this.peakRssKiB, s.peakRssKiB);
      this.peakTreeRssKiB = Math.max(this.peakTreeRssKiB, s.rssKiB);
    }
    return this.last;
  }

  stop(): TreeSample | undefined {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    return this.sample();
  }
}

/** Cumulative CPU time of the whole machine (all CPUs) from /proc/stat, in clock ticks. */
export interface MachineCpu {
  total: number;
  /** user + nice + system + irq + softirq (guest time is already in user). */
  busy: number;
  /** Time the hypervisor ran something else while this machine wanted a CPU. */
  steal: number;
}

export function machineCpu(): MachineCpu | undefined {
  let line: string | undefined;
  try {
    line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0];
  } catch {
    return undefined;
  }
  const f = line?.split(/\s+/).slice(1, 9).map(Number);
  if (
    line === undefined ||
    !line.startsWith('cpu ') ||
    f === undefined ||
    f.length < 8 ||
    f.some((x) => !Number.isFinite(x))
  )
    return undefined;
  const [user, nice, system, idle, iowait, irq, softirq, steal] = f as [
    number,
    number,
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  return {
    total: user + nice + system + idle + iowait + irq + softirq + steal,
    busy: user + nice + system + irq + softirq,
    steal,
  };
}

/** The machine's CPU between two readings, in percent of all CPUs. */
export interface MachineShare {
  busyPct: number;
  stealPct: number;
}

/** Share of the machine's CPU time between two readings, in percent of all CPUs (undefined without both). */
export function machineShare(a: MachineCpu | undefined, b: MachineCpu | undefined): MachineShare | undefined {
  if (a === undefined || b === undefined || b.total <= a.total) return undefined;
  const t = b.total - a.total;
  return {
    busyPct: Math.round((1000 * (b.busy - a.busy)) / t) / 10,
    stealPct: Math.round((1000 * (b.steal - a.steal)) / t) / 10,
  };
}
