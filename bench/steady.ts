/**
 * What the steady-state benches (steady-cost.ts, replicas-cost.ts) share: their common options and
 * what they read of a process from /proc (Linux).
 */
import { readFileSync } from 'node:fs';
import { tryParseDuration } from '../src/clock/duration.js';

/** Every value of `--name=VALUE` on the command line. */
export function args(name: string): string[] {
  return process.argv.filter((a) => a.startsWith(`--${name}=`)).map((a) => a.slice(name.length + 3));
}
/** The last `--name=VALUE`, or the default. */
function arg(name: string, dflt: string): string {
  return args(name).at(-1) ?? dflt;
}
function durationMs(name: string, dflt: string): number {
  const v = arg(name, dflt);
  const r = tryParseDuration(v);
  const ms = r.ok ? r.ms : 0;
  if (ms <= 0) {
    console.error(`--${name}=${v}: need a positive duration such as 60s or 1m30s`);
    process.exit(2);
  }
  return ms;
}

/** --nodes (100), --rounds (3), --window (60s), --warmup (20s); exits 2 on a bad value. */
export function steadyOptions(): { nodes: number; rounds: number; windowMs: number; warmupMs: number } {
  const nodes = Number(arg('nodes', '100'));
  const rounds = Number(arg('rounds', '3'));
  if (!(Number.isInteger(nodes) && nodes > 0 && Number.isInteger(rounds) && rounds > 0)) {
    console.error('--nodes and --rounds need whole numbers > 0');
    process.exit(2);
  }
  return { nodes, rounds, windowMs: durationMs('window', '60s'), warmupMs: durationMs('warmup', '20s') };
}

const TICK = 100; // clock ticks per second in /proc/<pid>/stat (USER_HZ on Linux)

/** utime + stime in ms, and voluntary context switches, of a process or one of its threads. */
export function cpuOf(statDir: string): { cpuMs: number; wakeups: number } {
  const stat = readFileSync(`${statDir}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const status = readFileSync(`${statDir}/status`, 'utf8');
  const wakeups = Number(/voluntary_ctxt_switches:\s*(\d+)/.exec(status)?.[1] ?? 0);
  return { cpuMs: ((Number(f[11]) + Number(f[12])) * 1000) / TICK, wakeups };
}

/** Peak (VmHWM) and current (VmRSS) resident memory of a process. */
export function memOf(pid: number): { hwmMiB: number; rssMiB: number } {
  const s = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string) => Number(new RegExp(`${k}:\\s*(\\d+)`).exec(s)?.[1] ?? 0);
  return { hwmMiB: kb('VmHWM') / 1024, rssMiB: kb('VmRSS') / 1024 };
}
