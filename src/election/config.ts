import { randomBytes } from 'node:crypto';
import { formatDuration } from '../clock/duration.js';
import { COMPONENT_NAME } from '../names/index.js';

/** client-go's JitterFactor: candidates wait retryPeriod x [1, 1 + 1.2) between polls. */
export const JITTER_FACTOR = 1.2;

/** The component's own name (src/names): the default lock name and the identity-lease label value. */
export { COMPONENT_NAME };

/** Flag names (kube-controller-manager's), used in validation messages. */
export const LeaderElectionFlags = {
  leaseDuration: '--leader-elect-lease-duration',
  renewDeadline: '--leader-elect-renew-deadline',
  retryPeriod: '--leader-elect-retry-period',
  resourceName: '--leader-elect-resource-name',
  resourceNamespace: '--leader-elect-resource-namespace',
} as const;

export interface LeaderElectionTiming {
  /** --leader-elect-lease-duration: how long others wait, from their last observed change, before taking over. */
  leaseDurationMs: number;
  /** --leader-elect-renew-deadline: the leader gives up when no renewal succeeded for this long. */
  renewDeadlineMs: number;
  /** --leader-elect-retry-period: between renewals, and (jittered x[1,2.2)) between candidate polls. */
  retryPeriodMs: number;
}

export interface LeaderElectionConfig extends LeaderElectionTiming {
  /** --leader-elect-resource-namespace: namespace of the lock Lease (the controller's namespace). */
  namespace: string;
  /** --leader-elect-resource-name: name of the lock Lease. */
  name: string;
  /** This replica's identity, written as holderIdentity. See {@link defaultIdentity}. */
  identity: string;
  /**
   * The fence closes `leaseDuration - fenceSafetyMargin` after the last successful renewal was sent
   * (and never later than the renew deadline). Default: leaseDuration - renewDeadline, so the fence
   * closes exactly when the elector declares the loss, and the remaining leaseDuration -
   * renewDeadline (5 s at the defaults) is left for writes already in flight and for clock-rate
   * differences between replicas before anyone else may acquire.
   */
  fenceSafetyMarginMs: number;
}

export const LEADER_ELECTION_DEFAULTS: LeaderElectionTiming & { name: string } = {
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
  name: COMPONENT_NAME,
};

/**
 * Liveness: /healthz fails when nobody has led the lock for longer than this while this replica is
 * an eligible candidate that reads the lock (LeaderElector.checkLeaderless): 10 lease durations,
 * at least 2 minutes (2m30s at the defaults). Longer than every wait a normal election has: a
 * fresh lock's first leader (1 lease duration), a dead leader's lease running out (1 lease
 * duration and a poll), the coordinator's ping window (5 s), and the coordinated fall-back
 * (coordinatedRecheckMs, then up to 30 s of checking, then an ordinary acquisition).
 */
export function leaderlessLimitMs(leaseDurationMs: number): number {
  return Math.max(10 * leaseDurationMs, 120_000);
}

/**
 * Coordinated leader election: when nobody has led the lock for this long, a replica checks
 * whether the coordinator is still there and falls back to ordinary election if it is not
 * (CoordinationWatchdog): 4 lease durations, at least 30 s (1 minute at the defaults). The
 * coordinator elects within its 5 s ping window once the lock is free; 30 s is as long as a
 * restarted kube-apiserver takes to acquire the coordinator's own lease (2 x 15 s).
 */
export function coordinatedRecheckMs(leaseDurationMs: number): number {
  return Math.max(4 * leaseDurationMs, 30_000);
}

export class LeaderElectionConfigError extends Error {
  readonly problems: readonly string[];
  constructor(problems: string[]) {
    super(`invalid leader election configuration: ${problems.join('; ')}`);
    this.name = 'LeaderElectionConfigError';
    this.problems = problems;
  }
}

const fmt = formatDuration;

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Every problem with the timing, each naming the flag(s) to change. Empty when valid. */
export function validateTiming(t: LeaderElectionTiming): string[] {
  const F = LeaderElectionFlags;
  const problems: string[] = [];
  const positive = (v: number, flag: string) => {
    if (!Number.isFinite(v) || v <= 0) {
      problems.push(`${flag} must be greater than zero (got ${String(v)})`);
      return false;
    }
    return true;
  };
  const ok = [
    positive(t.leaseDurationMs, F.leaseDuration),
    positive(t.renewDeadlineMs, F.renewDeadline),
    positive(t.retryPeriodMs, F.retryPeriod),
  ].every(Boolean);
  if (!ok) return problems;
  if (t.leaseDurationMs < 1000) {
    // leaseDurationSeconds is a whole number of seconds on the wire.
    problems.push(`${F.leaseDuration} must be at least 1s (got ${fmt(t.leaseDurationMs)})`);
  }
  if (t.leaseDurationMs <= t.renewDeadlineMs) {
    problems.push(
      `${F.leaseDuration} (${fmt(t.leaseDurationMs)}) must be greater than ${F.renewDeadline} (${fmt(t.renewDeadlineMs)})`,
    );
  }
  if (t.renewDeadlineMs <= JITTER_FACTOR * t.retryPeriodMs) {
    problems.push(
      `${F.renewDeadline} (${fmt(t.renewDeadlineMs)}) must be greater than ${JITTER_FACTOR} x ${F.retryPeriod} ` +
        `(${JITTER_FACTOR} x ${fmt(t.retryPeriodMs)} = ${fmt(JITTER_FACTOR * t.retryPeriodMs)})`,
    );
  }
  return problems;
}

export type LeaderElectionConfigInput = Partial<LeaderElectionTiming> & {
  namespace: string;
  identity: string;
  name?: string;
  fenceSafetyMarginMs?: number;
};

/** Applies defaults and validates; throws LeaderElectionConfigError listing every problem. */
export function resolveLeaderElectionConfig(input: LeaderElectionConfigInput): LeaderElectionConfig {
  const F = LeaderElectionFlags;
  const timing: LeaderElectionTiming = {
    leaseDurationMs: input.leaseDurationMs ?? LEADER_ELECTION_DEFAULTS.leaseDurationMs,
    renewDeadlineMs: input.renewDeadlineMs ?? LEADER_ELECTION_DEFAULTS.renewDeadlineMs,
    retryPeriodMs: input.retryPeriodMs ?? LEADER_ELECTION_DEFAULTS.retryPeriodMs,
  };
  const name = input.name ?? LEADER_ELECTION_DEFAULTS.name;
  const problems = validateTiming(timing);
  if (!DNS_SUBDOMAIN.test(name) || name.length > 253) {
    problems.push(`${F.resourceName} must be a DNS subdomain name (got ${JSON.stringify(name)})`);
  }
  if (!DNS_LABEL.test(input.namespace) || input.namespace.length > 63) {
    problems.push(`${F.resourceNamespace} must be a DNS label (got ${JSON.stringify(input.namespace)})`);
  }
  if (input.identity.trim() === '') problems.push('leader election identity must not be empty');
  const margin = input.fenceSafetyMarginMs ?? timing.leaseDurationMs - timing.renewDeadlineMs;
  // Derived from the flags, the margin is wrong only when they are, and their own check says so in
  // their words; only a margin given here (no flag of its own) is checked as such.
  const given = input.fenceSafetyMarginMs !== undefined;
  if (given && (!Number.isFinite(margin) || margin < 0 || margin >= timing.leaseDurationMs)) {
    problems.push(
      `fence safety margin must be >= 0 and less than ${F.leaseDuration} (got ${Number.isFinite(margin) ? fmt(margin) : String(margin)})`,
    );
  }
  if (problems.length > 0) throw new LeaderElectionConfigError(problems);
  return {
    ...timing,
    namespace: input.namespace,
    name,
    identity: input.identity,
    fenceSafetyMarginMs: margin,
  };
}

/** A LeaseCandidate name (IsConfigMapKey, as kube-apiserver validates it): the election identity. */
const CANDIDATE_NAME = /^[-._a-zA-Z0-9]+$/;

export function candidateNameProblem(identity: string): string | undefined {
  if (identity.length <= 253 && CANDIDATE_NAME.test(identity)) return undefined;
  return (
    `the leader election identity ${JSON.stringify(identity)} cannot name a LeaseCandidate (coordinated ` +
    'leader election): it must be at most 253 characters of letters, digits, "-", "_" and "."'
  );
}

/**
 * POD_NAME-style identity: `<hostname>_<random>`, unique per process start even when a pod keeps
 * its name (StatefulSet) or two processes share a host. The caller passes the host or pod name.
 */
export function defaultIdentity(
  hostname: string,
  random: () => string = () => randomBytes(8).toString('hex'),
): string {
  return `${hostname}_${random()}`;
}
