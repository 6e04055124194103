import type { Lease, LeaseSpec } from '../kube/types.js';

/**
 * The leader-election record as it lives in a Lease's spec (client-go's LeaderElectionRecord).
 * Absent fields read as '' / 0 / undefined, the way client-go reads a LeaseSpec.
 */
export interface LeaderRecord {
  /** '' means nobody holds the lock (never held, or released). */
  holderIdentity: string;
  /** 0 when absent. */
  leaseDurationSeconds: number;
  acquireTime: string | undefined;
  renewTime: string | undefined;
  leaseTransitions: number;
  /** Coordinated leader election fields: carried over unchanged, never acted on. */
  strategy: string | undefined;
  preferredHolder: string | undefined;
}

/** MicroTime as the API server formats it: RFC 3339 UTC with exactly six fractional digits. */
export function microTime(wallMs: number): string {
  const iso = new Date(wallMs).toISOString(); // 2026-01-01T00:00:00.123Z
  return `${iso.slice(0, 23)}000Z`;
}

/**
 * A MicroTime for `wallMs`, but at least 1 µs after `after` (a MicroTime written by someone else,
 * e.g. the coordinator's pingTime): an answer must read as later than what it answers. An
 * unreadable `after` is ignored.
 */
export function microTimeAfter(wallMs: number, after: string): string {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z$/.exec(after);
  const seconds = m ? Date.parse(`${m[1]}Z`) : Number.NaN;
  if (!m || !Number.isFinite(seconds)) return microTime(wallMs);
  const afterMicros = seconds * 1000 + Number((m[2] ?? '').padEnd(6, '0').slice(0, 6)) + 1;
  const wallMicros = Math.floor(wallMs) * 1000;
  if (wallMicros >= afterMicros) return microTime(wallMs);
  const ms = Math.floor(afterMicros / 1000);
  return `${new Date(ms).toISOString().slice(0, 20)}${String(afterMicros % 1_000_000).padStart(6, '0')}Z`;
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

function int(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) ? Math.trunc(v) : 0;
}

/** Reads the record out of a Lease. Never throws on malformed input. */
export function recordOf(lease: Lease): LeaderRecord {
  const spec: LeaseSpec = typeof lease.spec === 'object' && lease.spec !== null ? lease.spec : {};
  return {
    holderIdentity: str(spec.holderIdentity) ?? '',
    leaseDurationSeconds: int(spec.leaseDurationSeconds),
    acquireTime: str(spec.acquireTime),
    renewTime: str(spec.renewTime),
    leaseTransitions: int(spec.leaseTransitions),
    strategy: str(spec.strategy),
    preferredHolder: str(spec.preferredHolder),
  };
}

/** Writes a record as a LeaseSpec (client-go writes every field, holderIdentity '' included). */
export function specOf(r: LeaderRecord): LeaseSpec {
  const spec: LeaseSpec = {
    holderIdentity: r.holderIdentity,
    leaseDurationSeconds: r.leaseDurationSeconds,
    leaseTransitions: r.leaseTransitions,
  };
  if (r.acquireTime !== undefined) spec.acquireTime = r.acquireTime;
  if (r.renewTime !== undefined) spec.renewTime = r.renewTime;
  if (r.strategy !== undefined) spec.strategy = r.strategy;
  if (r.preferredHolder !== undefined) spec.preferredHolder = r.preferredHolder;
  return spec;
}

/**
 * A string that changes whenever the record changes (client-go compares the marshalled record).
 * Only the record counts: a label edit or a new resourceVersion with the same spec is no renewal.
 */
export function recordKey(r: LeaderRecord): string {
  return JSON.stringify([
    r.holderIdentity,
    r.leaseDurationSeconds,
    r.acquireTime ?? null,
    r.renewTime ?? null,
    r.leaseTransitions,
    r.strategy ?? null,
    r.preferredHolder ?? null,
  ]);
}
