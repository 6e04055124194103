/**
 * The results records the benches write with --json (bench/compare/record.ts has the side-by-side
 * harness's): what each bench writes and bench/figures.ts reads. Types only; also imported by the
 * ingest benches, which run under `node --experimental-transform-types`.
 */
import type { MachineShare } from './compare/proc.js';
import type { RecordHeader } from './results.js';

export interface WatchIngestRecord extends RecordHeader {
  options: { runs: number; rounds: number; parse: string };
  throughput: Array<{
    leases: number;
    events: number;
    bytesPerEvent: number;
    pathEventsPerS: number;
    bareParseLinesPerS: number;
    ratio: number;
    pathRuns: number[];
  }>;
  memory: Array<{ object: string; strip: string; count: number; heapBytes: number; wireBytes: number }>;
}

export interface DecisionsRecord extends RecordHeader {
  options: {
    sizes: number[];
    runs: number;
    eventsPerLease: number;
    sections: string[];
    realtimeSeconds: number;
    graceMs: number;
    parse: string;
  };
  throughput: Array<{
    nodes: number;
    events: number;
    decisionsEventsPerS: number;
    watchStoreEventsPerS: number;
    bareParseLinesPerS: number;
    ratio: number;
  }>;
  heapPerNode: Array<{ nodes: number; bytes: number }>;
  precision: Array<{
    nodes: number;
    eventsPerS: number;
    found: number;
    stopped: number;
    /** null when no silent node was found. */
    latenessMs: { p50: number | null; p99: number | null; max: number | null };
    eventLoopUtilization: number;
  }>;
}

export interface SteadyRecord extends RecordHeader {
  options: { nodes: number; rounds: number; windowMs: number; warmupMs: number; podsPerNode: number };
  variants: Array<{
    name: string;
    command: string;
    rounds: Array<{
      round: number;
      renewals: number;
      cpuMs: number;
      mainThreadMs: number;
      cpuMicrosPerRenewal: number;
      corePct: number;
      wakeupsPerS: number;
      peakRssMiB: number;
      rssMiB: number;
      heapUsedMiB: number | null;
      machineCpu: MachineShare | null;
    }>;
  }>;
}

export interface HandoverRecord extends RecordHeader {
  options: { nodes: number; replicas: number; rounds: number; pods: number; main: string };
  mainBuiltAt: string;
  benchEventLoopLagMs: { p99: number; max: number };
  markings: number;
  rounds: Array<{
    lockMovedMs: number | null;
    startedLeadingMs: number | null;
    masterStatusMs: number | null;
    actingMs: number | null;
    oldExitedMs: number | null;
    exitCode: number | null;
    released: boolean;
    steps: Record<string, number | null>;
  }>;
}

export interface ReplicasRecord extends RecordHeader {
  options: { nodes: number; rounds: number; windowMs: number; warmupMs: number; podsPerNode: number };
  rounds: Array<{ round: number; renewals: number; machineCpu: MachineShare | null }>;
  replicas: Array<{
    name: string;
    rounds: Array<{
      cpuMicrosPerRenewal: number;
      corePct: number;
      mainThreadPct: number;
      wakeupsPerS: number;
      peakRssMiB: number;
      rssMiB: number;
    }>;
  }>;
}
