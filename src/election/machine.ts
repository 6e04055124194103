/**
 * The leader-election state machine, pure: it is given observations of the lock Lease, the
 * outcomes of our own writes and a monotonic `now`, and decides what to do next. No I/O, no
 * timers, no wall clock (wall time is passed in only to be written into renewTime/acquireTime).
 *
 * Semantics follow client-go's tools/leaderelection:
 * - Expiry is judged from `since`, OUR monotonic time when we observed the record change, plus the
 *   record's leaseDurationSeconds; the remote renewTime is only compared for change, never with
 *   our clock (clock-skew proof).
 * - Acquiring a lock held by someone else increments leaseTransitions and sets acquireTime; a
 *   holder renewing keeps both. A missing lock is created with leaseTransitions 0.
 * - The leader renews every retryPeriod and gives up when no renewal succeeded for renewDeadline.
 *
 * Where it is stricter or faster than client-go:
 * - The renew deadline counts from the moment the last SUCCESSFUL renewal was SENT (client-go
 *   restarts its deadline at each renew cycle, so it can hold on up to retryPeriod longer).
 * - A candidate acts the moment a change makes the lock free (released, deleted, or owned by our
 *   identity) and at the exact instant the lease expires, not at its next 2 s poll.
 * - A leader that sees (through the watch) the lock deleted or held by someone else closes its
 *   fence at once and verifies with a GET; a GET that confirms another holder ends leadership.
 * - A lock confirmed deleted while our fence would still be open is created again and we keep
 *   leading, as client-go does on its next renewal; but a candidate does not treat a lock deleted
 *   under a live holder as free before that holder's lease would have expired (client-go creates
 *   it at once, while the holder, whose watch may lag, can still be writing), not even when a poll
 *   finds it still missing; and a lock missing at our first look is created only one lease
 *   duration later (client-go creates it at once, while a holder we never saw may still write).
 *   So a fresh cluster's first leader starts one lease duration after the first replica looked.
 * - A replica that cannot see (its watches are not healthy) is not eligible: it keeps reading the
 *   lock but does not acquire it. A leader told to step down (blind for too long) becomes such a
 *   candidate: its fence closes at once, and it releases the lock (elector.ts).
 *
 * Coordinated leader election (`coordinated`, KEP-4355; client-go's Coordinated mode): the
 * coordinator in kube-apiserver names the holder, so a candidate never creates the lock and never
 * takes it from anyone: it only renews a lock that names it, keeping the coordinator's `strategy`.
 * A leader whose lock names another replica as `preferredHolder` is preempted (preemptedBy: the
 * elector steps down). Where it is stricter than client-go: a lock handed to us while the previous
 * holder's lease may still run by OUR observation (the coordinator judges expiry by comparing
 * renewTime with its own clock) is renewed only once that lease would have expired; a released
 * lock (no holder) is renewed at once. As in ordinary mode, a holder we never saw gets one lease
 * duration from our first look: a lock missing then, or one that already names us by the
 * coordinator's hand (no acquireTime), is renewed no earlier than that.
 */

import { formatDuration } from '../clock/duration.js';
import type { Lease, LeaseSpec } from '../kube/types.js';
import { JITTER_FACTOR } from './config.js';
import { type LeaderRecord, microTime, recordKey, recordOf, specOf } from './record.js';

export interface MachineConfig {
  identity: string;
  leaseDurationMs: number;
  renewDeadlineMs: number;
  retryPeriodMs: number;
  fenceSafetyMarginMs: number;
  /** Coordinated leader election: never create or take the lock; renew it only when it names us. */
  coordinated?: boolean;
}

/** What we know about the lock Lease. `since` is our monotonic time of the last observed change. */
export type LockView =
  | { readonly kind: 'unknown' }
  | {
      readonly kind: 'absent';
      readonly since: number;
      /**
       * A holder may still write until then: deleted while another holder's lease was live (that
       * lease still runs), or missing at our first look (a holder we never saw may have renewed
       * just before the deletion: one lease duration from that look).
       */
      readonly heldUntil?: number;
      /** The holder whose lease runs until heldUntil, '' when we never saw it. */
      readonly heldBy?: string;
    }
  | {
      readonly kind: 'present';
      /** The newest object seen with this record (its resourceVersion is our update precondition). */
      readonly lease: Lease;
      readonly record: LeaderRecord;
      readonly key: string;
      readonly since: number;
      /**
       * Coordinated mode, a lock that names us: another holder we saw may still write until then
       * (its lease, from our observation, had not run out when the lock was handed to us).
       */
      readonly heldUntil?: number;
      /** The holder whose lease runs until heldUntil ('' when we never saw it). */
      readonly heldBy?: string;
    };

/** candidate -> leader -> lost (terminal); any -> stopped (terminal: stop() or release()). */
export type Phase = 'candidate' | 'leader' | 'lost' | 'stopped';

export interface ElectionState {
  readonly phase: Phase;
  readonly lock: LockView;
  /** Bumped on every observed change of the lock. */
  readonly seq: number;
  /** When the next poll (candidate) or renewal (leader) is due. */
  readonly nextAttemptAt: number;
  /** Start and lock-seq of the last attempt: a change after it warrants an immediate new attempt. */
  readonly lastAttempt:
    | {
        readonly at: number;
        readonly seq: number /** Started while leading (a renewal). */;
        readonly asLeader: boolean;
      }
    | undefined;
  /** Leader: when the last successful acquire/renew request was SENT (monotonic). */
  readonly renewedAt: number | undefined;
  /** Leader: the watch contradicted our leadership; fence closed until a GET settles it. */
  readonly suspect: boolean;
  /** Why the phase became lost/stopped. */
  readonly endReason: string | undefined;
  /** A candidate that is not eligible reads the lock but never acquires it. */
  readonly eligible: boolean;
}

export type Decision =
  /** Nothing to do, ever (lost or stopped). */
  | { readonly kind: 'idle' }
  /** Leadership is over: the renew deadline passed. */
  | { readonly kind: 'lose'; readonly reason: string }
  /** Try to acquire or renew now. `read`: GET the lock first instead of trusting our copy. */
  | { readonly kind: 'attempt'; readonly read: boolean; readonly why: string }
  /** Nothing before `until` (monotonic), unless an observation arrives. */
  | { readonly kind: 'wait'; readonly until: number };

export type WritePlan =
  /** We know nothing about the lock: GET it first. */
  | { readonly kind: 'read' }
  /**
   * Someone else holds a live lease; it expires at `until` unless it changes. Also a missing lock
   * whose last holder may still write until `until` (holder '' when we never saw it).
   */
  | { readonly kind: 'held'; readonly holder: string; readonly until: number }
  /** We are a candidate that may not acquire now (see ElectionState.eligible). */
  | { readonly kind: 'ineligible' }
  /** Coordinated: the lock is missing or names another holder; the coordinator decides. */
  | { readonly kind: 'await-coordinator'; readonly holder: string }
  /** Coordinated: the lock names us, but the coordinator prefers `by`: do not renew it. */
  | { readonly kind: 'preempted'; readonly by: string }
  | { readonly kind: 'create'; readonly spec: LeaseSpec }
  | { readonly kind: 'update'; readonly body: Lease; readonly takeover: boolean };

export function initialState(now: number): ElectionState {
  return {
    phase: 'candidate',
    lock: { kind: 'unknown' },
    seq: 0,
    nextAttemptAt: now,
    lastAttempt: undefined,
    renewedAt: undefined,
    suspect: false,
    endReason: undefined,
    eligible: true,
  };
}

/** leaseDurationSeconds we write: rounded UP so others never wait less than our leaseDuration. */
export function writtenLeaseDurationSeconds(cfg: MachineConfig): number {
  return Math.max(1, Math.ceil(cfg.leaseDurationMs / 1000));
}

/** How long a record stays valid after we observed it: its own leaseDurationSeconds (client-go). */
export function recordLeaseMs(cfg: MachineConfig, r: LeaderRecord): number {
  return r.leaseDurationSeconds > 0 ? r.leaseDurationSeconds * 1000 : cfg.leaseDurationMs;
}

/**
 * Until when (monotonic) the lock shows a leader by our observation: a holder's lease from the
 * moment we saw its record change (the expiry every candidate judges by). -Infinity when the lock
 * is unknown, missing or names no holder.
 */
export function liveUntil(cfg: MachineConfig, s: ElectionState): number {
  const lock = s.lock;
  if (lock.kind !== 'present' || lock.record.holderIdentity === '') return Number.NEGATIVE_INFINITY;
  return lock.since + recordLeaseMs(cfg, lock.record);
}

/** The holder as last observed: '' for none/absent, undefined while unknown. */
export function observedHolder(s: ElectionState): string | undefined {
  if (s.lock.kind === 'unknown') return undefined;
  return s.lock.kind === 'absent' ? '' : s.lock.record.holderIdentity;
}

function ended(s: ElectionState): boolean {
  return s.phase === 'lost' || s.phase === 'stopped';
}

/**
 * Records an observation of the lock (`undefined`: it does not exist). `source` is 'get' for an
 * authoritative read, 'watch' for the change stream (which may lag).
 */
export function observe(
  cfg: MachineConfig,
  s: ElectionState,
  lease: Lease | undefined,
  now: number,
  source: 'get' | 'watch',
): ElectionState {
  if (ended(s)) return s;
  let lock: LockView;
  let seq = s.seq;
  if (lease === undefined) {
    if (s.lock.kind === 'absent') lock = s.lock;
    else lock = absentSince(cfg, s.lock, now);
  } else {
    const record = recordOf(lease);
    const key = recordKey(record);
    // Same record (maybe new labels or resourceVersion): keep `since`, refresh our copy.
    lock =
      s.lock.kind === 'present' && s.lock.key === key
        ? { ...s.lock, lease }
        : { kind: 'present', lease, record, key, since: now, ...handedOver(cfg, s.lock, record, now) };
  }
  if (
    lock.kind !== s.lock.kind ||
    (lock.kind === 'present' && s.lock.kind === 'present' && lock.key !== s.lock.key)
  ) {
    seq++;
  }
  const next: ElectionState = { ...s, lock, seq };
  if (s.phase !== 'leader') return next;
  const holder = lock.kind === 'present' ? lock.record.holderIdentity : undefined;
  // A read that shows us as holder settles a suspicion raised by the watch.
  if (holder === cfg.identity) return source === 'get' ? { ...next, suspect: false } : next;
  if (holder === undefined && s.renewedAt !== undefined && now < s.renewedAt + fenceWindowMs(cfg)) {
    // The lock was deleted. Nobody else may take it before our lease would have expired (see
    // freeAt), so while our fence would still be open we create it again at once and keep
    // leading; the fence stays closed until that create succeeds. Someone faster wins by the
    // normal rules (our create fails, a read shows their record). Coordinated mode: planWrite
    // never creates it; the fence stays closed until the coordinator names us again (a read
    // settles it), names another (lost), or the renew deadline passes (lost).
    return { ...next, suspect: true, nextAttemptAt: now };
  }
  const reason =
    holder === undefined
      ? 'lock deleted'
      : holder === ''
        ? 'lock released by another client'
        : `lock taken by ${holder}`;
  // An authoritative read settles it. The watch may lag, so it only closes the fence and asks
  // for a read now.
  if (source === 'get') return { ...next, phase: 'lost', suspect: false, endReason: reason };
  return { ...next, suspect: true, nextAttemptAt: now };
}

/**
 * The lock, last seen as `prev`, is missing at `now`. A deletion does not shorten another holder's
 * lease: it may write until the lease would have expired, from our observation of it (it may not
 * have seen the deletion yet). A lock missing at our first look may have been deleted just now
 * under a holder we never saw (a replica that starts right after `kubectl delete` or a GitOps
 * prune): we give that holder our own lease duration from this look, as if we had just seen it
 * renew. So a fresh cluster, where there never was a lock, gets its first leader one lease
 * duration after the first replica looked.
 */
function absentSince(cfg: MachineConfig, prev: LockView, now: number): LockView {
  if (prev.kind === 'unknown')
    return { kind: 'absent', since: now, heldUntil: now + cfg.leaseDurationMs, heldBy: '' };
  const holder = prev.kind === 'present' ? prev.record.holderIdentity : '';
  const heldUntil =
    prev.kind === 'present' && holder !== '' && holder !== cfg.identity
      ? prev.since + recordLeaseMs(cfg, prev.record)
      : undefined;
  return heldUntil !== undefined && heldUntil > now
    ? { kind: 'absent', since: now, heldUntil, heldBy: holder }
    : { kind: 'absent', since: now };
}

/**
 * Coordinated mode: the lock now names us. If the holder before us (or before the lock went
 * missing) may still write by our observation, we wait for that: the coordinator hands the lock
 * over when ITS clock says the lease expired, and another replica's renewTime is written with
 * THAT replica's clock.
 */
function handedOver(
  cfg: MachineConfig,
  prev: LockView,
  record: LeaderRecord,
  now: number,
): { heldUntil?: number; heldBy?: string } {
  if (!cfg.coordinated || record.holderIdentity !== cfg.identity) return {};
  let until: number | undefined;
  let by = '';
  if (prev.kind === 'unknown') {
    // Our first look already names us. With an acquireTime, a renewal of ours wrote it (this
    // identity before a restart: nobody else holds it, as in ordinary mode). Without, the
    // coordinator handed it to us (it clears acquireTime) from a holder we never saw, which may
    // still write: the same one lease duration from this look as a lock missing at our first look.
    if (record.acquireTime === undefined) until = now + cfg.leaseDurationMs;
  } else if (prev.kind === 'absent') {
    until = prev.heldUntil;
    by = prev.heldBy ?? '';
  } else if (prev.kind === 'present') {
    const h = prev.record.holderIdentity;
    if (h === cfg.identity) {
      until = prev.heldUntil;
      by = prev.heldBy ?? '';
    } else if (h !== '') {
      until = prev.since + recordLeaseMs(cfg, prev.record);
      by = h;
    }
  }
  return until !== undefined && until > now ? { heldUntil: until, heldBy: by } : {};
}

/**
 * The monotonic moment the lock became (or becomes) free for us; undefined while unknown. In
 * coordinated mode only a lock that names us is ever free (Infinity otherwise).
 */
export function freeAt(cfg: MachineConfig, lock: LockView): number | undefined {
  if (lock.kind === 'unknown') return undefined;
  if (cfg.coordinated) {
    if (lock.kind === 'absent' || lock.record.holderIdentity !== cfg.identity) return Infinity;
    return Math.max(lock.since, lock.heldUntil ?? lock.since);
  }
  if (lock.kind === 'absent') return Math.max(lock.since, lock.heldUntil ?? lock.since);
  const h = lock.record.holderIdentity;
  if (h === '' || h === cfg.identity) return lock.since;
  return lock.since + recordLeaseMs(cfg, lock.record);
}

export function decide(cfg: MachineConfig, s: ElectionState, now: number): Decision {
  if (ended(s)) return { kind: 'idle' };
  if (s.phase === 'leader') {
    const lostAt = (s.renewedAt ?? now) + cfg.renewDeadlineMs;
    if (now >= lostAt) return { kind: 'lose', reason: 'failed to renew lease within the renew deadline' };
    if (now >= s.nextAttemptAt)
      return { kind: 'attempt', read: s.suspect, why: s.suspect ? 'verify' : 'renew' };
    return { kind: 'wait', until: Math.min(s.nextAttemptAt, lostAt) };
  }
  if (!s.eligible) {
    // Keep reading the lock (who leads, and proof that we reach the API server), never take it.
    if (now >= s.nextAttemptAt) return { kind: 'attempt', read: true, why: 'poll' };
    return { kind: 'wait', until: s.nextAttemptAt };
  }
  const at = freeAt(cfg, s.lock);
  if (at === undefined) return { kind: 'attempt', read: true, why: 'initial' };
  const tried = s.lastAttempt !== undefined && s.lastAttempt.seq === s.seq && s.lastAttempt.at >= at;
  // Coordinated: read first, so that a preferredHolder our copy may not show yet is seen.
  if (now >= at && !tried) return { kind: 'attempt', read: cfg.coordinated === true, why: 'free' };
  if (now >= s.nextAttemptAt) return { kind: 'attempt', read: true, why: 'poll' };
  return { kind: 'wait', until: at > now ? Math.min(s.nextAttemptAt, at) : s.nextAttemptAt };
}

export function attemptStarted(s: ElectionState, now: number): ElectionState {
  return { ...s, lastAttempt: { at: now, seq: s.seq, asLeader: s.phase === 'leader' } };
}

/** What to write now, from what we know of the lock. `wallMs` only feeds the timestamps written. */
export function planWrite(cfg: MachineConfig, s: ElectionState, now: number, wallMs: number): WritePlan {
  const lock = s.lock;
  if (lock.kind === 'unknown') return { kind: 'read' };
  if (s.phase !== 'leader' && !s.eligible) return { kind: 'ineligible' };
  const stamp = microTime(wallMs);
  const durationSeconds = writtenLeaseDurationSeconds(cfg);
  if (cfg.coordinated) return planCoordinated(cfg, s, lock, now, stamp, durationSeconds);
  if (lock.kind === 'absent') {
    // A candidate's poll that finds the lock still missing does not create it while a holder may
    // still write (a leader's own deleted lock has no heldUntil: it creates it again, see observe).
    if (lock.heldUntil !== undefined && now < lock.heldUntil) {
      return { kind: 'held', holder: lock.heldBy ?? '', until: lock.heldUntil };
    }
    const spec = specOf({
      holderIdentity: cfg.identity,
      leaseDurationSeconds: durationSeconds,
      acquireTime: stamp,
      renewTime: stamp,
      leaseTransitions: 0,
      strategy: undefined,
      preferredHolder: undefined,
    });
    return { kind: 'create', spec };
  }
  const r = lock.record;
  const ours = r.holderIdentity === cfg.identity;
  const until = lock.since + recordLeaseMs(cfg, r);
  if (!ours && (s.phase === 'leader' || (r.holderIdentity !== '' && now < until))) {
    return { kind: 'held', holder: r.holderIdentity, until };
  }
  const spec: LeaseSpec = specOf({
    holderIdentity: cfg.identity,
    leaseDurationSeconds: durationSeconds,
    // A holder renewing keeps acquireTime and leaseTransitions; a new holder bumps transitions.
    acquireTime: ours ? (r.acquireTime ?? stamp) : stamp,
    renewTime: stamp,
    leaseTransitions: ours ? r.leaseTransitions : r.leaseTransitions + 1,
    strategy: undefined,
    preferredHolder: undefined,
  });
  return { kind: 'update', body: { ...lock.lease, spec }, takeover: !ours };
}

/**
 * Coordinated mode: never create, never take. A lock that names us is renewed (a candidate first
 * waits for the lease of the holder before us, see handedOver), keeping the coordinator's strategy;
 * not when the coordinator prefers another holder.
 */
function planCoordinated(
  cfg: MachineConfig,
  s: ElectionState,
  lock: Exclude<LockView, { kind: 'unknown' }>,
  now: number,
  stamp: string,
  durationSeconds: number,
): WritePlan {
  if (lock.kind === 'absent') return { kind: 'await-coordinator', holder: '' };
  const r = lock.record;
  if (r.holderIdentity !== cfg.identity) {
    if (s.phase === 'leader') {
      return { kind: 'held', holder: r.holderIdentity, until: lock.since + recordLeaseMs(cfg, r) };
    }
    return { kind: 'await-coordinator', holder: r.holderIdentity };
  }
  if (r.preferredHolder !== undefined && r.preferredHolder !== '' && r.preferredHolder !== cfg.identity) {
    return { kind: 'preempted', by: r.preferredHolder };
  }
  if (s.phase !== 'leader' && lock.heldUntil !== undefined && now < lock.heldUntil) {
    return { kind: 'held', holder: lock.heldBy ?? '', until: lock.heldUntil };
  }
  const spec = specOf({
    holderIdentity: cfg.identity,
    leaseDurationSeconds: durationSeconds,
    // The coordinator writes no acquireTime: the first renewal by the new holder sets it.
    acquireTime: s.phase === 'leader' ? (r.acquireTime ?? stamp) : stamp,
    renewTime: stamp,
    // The coordinator hands the lock over without counting; client-go's coordinated renewal keeps
    // the count too.
    leaseTransitions: r.leaseTransitions,
    strategy: r.strategy,
    preferredHolder: r.preferredHolder,
  });
  return { kind: 'update', body: { ...lock.lease, spec }, takeover: s.phase !== 'leader' };
}

/**
 * Coordinated mode: the replica the coordinator prefers over us while we lead (the lock's
 * preferredHolder names another replica), else undefined. The elector then steps down.
 */
export function preemptedBy(cfg: MachineConfig, s: ElectionState): string | undefined {
  if (!cfg.coordinated || s.phase !== 'leader' || s.lock.kind !== 'present') return undefined;
  const r = s.lock.record;
  if (r.holderIdentity !== cfg.identity) return undefined;
  const pref = r.preferredHolder;
  return pref !== undefined && pref !== '' && pref !== cfg.identity ? pref : undefined;
}

/** Our create/update succeeded: `response` is the stored object, `sentAt` when we sent it. */
export function writeSucceeded(
  cfg: MachineConfig,
  s: ElectionState,
  response: Lease,
  sentAt: number,
  now: number,
): ElectionState {
  if (ended(s)) return s;
  const record = recordOf(response);
  if (record.holderIdentity !== cfg.identity) return attemptFinished(cfg, s, now, 0);
  const key = recordKey(record);
  const same = s.lock.kind === 'present' && s.lock.key === key;
  const stored: Pick<ElectionState, 'lock' | 'seq'> = {
    lock: {
      kind: 'present',
      lease: response,
      record,
      key,
      since: same && s.lock.kind === 'present' ? s.lock.since : now,
    },
    seq: same ? s.seq : s.seq + 1,
  };
  // A renewal that was already on its way when we stepped down: we hold the lock again on the
  // server, but we do not lead. Keep the fresh copy for the release.
  if (s.phase !== 'leader' && (!s.eligible || s.lastAttempt?.asLeader === true)) return { ...s, ...stored };
  return {
    ...s,
    ...stored,
    phase: 'leader',
    renewedAt: sentAt,
    suspect: false,
    nextAttemptAt: now + cfg.retryPeriodMs,
  };
}

/**
 * An attempt ended without a successful write (error, conflict, or the lock is held). The leader
 * retries after retryPeriod; a candidate polls again after retryPeriod x [1, 1 + JitterFactor).
 */
export function attemptFinished(
  cfg: MachineConfig,
  s: ElectionState,
  now: number,
  jitter01: number,
): ElectionState {
  if (ended(s)) return s;
  const wait =
    s.phase === 'leader'
      ? cfg.retryPeriodMs
      : cfg.retryPeriodMs * (1 + JITTER_FACTOR * Math.min(Math.max(jitter01, 0), 1));
  return { ...s, nextAttemptAt: now + wait };
}

/** Whether a candidate may acquire the lock (a leader is not affected: see stepDown). */
export function setEligible(s: ElectionState, eligible: boolean): ElectionState {
  if (s.eligible === eligible) return s;
  // Polls made while not eligible did not try to take a free lock: try at once.
  return eligible ? { ...s, eligible, lastAttempt: undefined } : { ...s, eligible };
}

/**
 * A leader gives leadership up without ending: it becomes a candidate, its fence closed at once;
 * one that is not eligible (blind), unless `keepEligible` (preempted by the coordinator: it stays
 * a candidate the coordinator may elect again). Releasing the lock is the elector's job (after
 * writes in flight ended).
 */
export function stepDown(
  cfg: MachineConfig,
  s: ElectionState,
  now: number,
  keepEligible = false,
): ElectionState {
  if (s.phase !== 'leader') return s;
  return {
    ...s,
    phase: 'candidate',
    eligible: keepEligible && s.eligible,
    renewedAt: undefined,
    suspect: false,
    nextAttemptAt: now + cfg.retryPeriodMs,
  };
}

export function lose(s: ElectionState, reason: string): ElectionState {
  if (ended(s)) return s;
  return { ...s, phase: 'lost', suspect: false, endReason: reason };
}

export function stop(s: ElectionState, reason: string): ElectionState {
  if (s.phase === 'stopped') return s;
  return { ...s, phase: 'stopped', suspect: false, endReason: s.endReason ?? reason };
}

/**
 * The lock spec that gives the lease up (client-go's ReleaseOnCancel): no holder, 1 s duration. In
 * coordinated mode the coordinator's strategy stays (it then names the next holder at once).
 */
export function releaseSpec(r: LeaderRecord, wallMs: number, coordinated = false): LeaseSpec {
  const stamp = microTime(wallMs);
  return specOf({
    holderIdentity: '',
    leaseDurationSeconds: 1,
    acquireTime: stamp,
    renewTime: stamp,
    leaseTransitions: r.leaseTransitions,
    strategy: coordinated ? r.strategy : undefined,
    preferredHolder: undefined,
  });
}

/** How long after the last successful renewal was sent writes stay allowed. */
export function fenceWindowMs(cfg: MachineConfig): number {
  return Math.min(cfg.renewDeadlineMs, cfg.leaseDurationMs - cfg.fenceSafetyMarginMs);
}

/** The monotonic instant the fence closes, or undefined when it is closed already. */
export function fenceDeadline(cfg: MachineConfig, s: ElectionState): number | undefined {
  if (s.phase !== 'leader' || s.suspect || s.renewedAt === undefined) return undefined;
  return s.renewedAt + fenceWindowMs(cfg);
}

/** True only while we hold the lease and `now` is before the fence deadline. */
export function canWrite(cfg: MachineConfig, s: ElectionState, now: number): boolean {
  const deadline = fenceDeadline(cfg, s);
  return deadline !== undefined && now < deadline;
}

/**
 * client-go's LeaderElector.Check: an error message when we hold (or held, and have not exited)
 * the lease but have not renewed it for leaseDuration + tolerance. Non-leaders are healthy.
 */
export function healthCheck(
  cfg: MachineConfig,
  s: ElectionState,
  now: number,
  toleranceMs: number,
): string | undefined {
  if ((s.phase !== 'leader' && s.phase !== 'lost') || s.renewedAt === undefined) return undefined;
  const age = now - s.renewedAt;
  if (age <= cfg.leaseDurationMs + toleranceMs) return undefined;
  return (
    `failed election to renew leadership: last renewal ${formatDuration(Math.round(age))} ago, more than ` +
    `lease duration ${formatDuration(cfg.leaseDurationMs)} + ${formatDuration(toleranceMs)}`
  );
}
