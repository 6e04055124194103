import { formatDuration } from '../clock/duration.js';

/** What the adaptor needs from an elector (LeaderElector implements it). */
export interface ElectionHealthSource {
  check(toleranceMs: number): Error | undefined;
  /**
   * An Error when nobody has led the lock for longer than `limitMs` (the source's default when
   * undefined) while this replica is an eligible candidate that reads the lock.
   */
  checkLeaderless?(limitMs?: number): Error | undefined;
}

/** kube-controller-manager's tolerance beyond the lease duration before /healthz fails. */
export const DEFAULT_HEALTHZ_TOLERANCE_MS = 20_000;

/**
 * client-go's HealthzAdaptor: a /healthz check that fails when this replica leads (or led and has
 * not exited) but has not renewed the lease for leaseDuration + tolerance, e.g. a wedged event loop,
 * so the kubelet restarts it. It also fails when NOBODY has led the lock for long (the elector's
 * checkLeaderless: 10 lease durations, at least 2 minutes, unless `leaderlessLimitMs`) while this
 * replica is an eligible candidate that reads the lock: an election that elects nobody (no
 * coordinator, writes refused) must not look healthy. A standby that sees another replica lead is
 * healthy. It can be created before the elector and bound later. /readyz must NOT use it: a
 * standby has to be Ready.
 */
export class LeaderHealthzAdaptor {
  readonly name = 'leaderElection';
  private source: ElectionHealthSource | undefined;

  constructor(
    readonly toleranceMs: number = DEFAULT_HEALTHZ_TOLERANCE_MS,
    readonly leaderlessLimitMs?: number,
  ) {}

  setLeaderElection(source: ElectionHealthSource | undefined): void {
    this.source = source;
  }

  /** undefined when healthy, else the reason. */
  check(): Error | undefined {
    const s = this.source;
    return s?.check(this.toleranceMs) ?? s?.checkLeaderless?.(this.leaderlessLimitMs);
  }
}

/** While coordinated election waits for its decision: since when (monotonic), and the last failure. */
export interface PendingDecision {
  since: number;
  lastError?: string;
}

/**
 * Liveness while the coordinated-election decision has no real answer yet (checkCoordinatedElection
 * stays undecided while the API server fails): the replica does not campaign, so it cannot tell who
 * leads. It fails after `limitMs` (the caller passes LIVENESS_NO_API_ACCESS_MS, 5 minutes: it stays
 * undecided only while the API server fails, so it gets the bound of an outage).
 */
export function undecidedTooLong(
  pending: PendingDecision | undefined,
  now: number,
  lock: string,
  limitMs: number,
): string | undefined {
  if (!pending || now - pending.since <= limitMs) return undefined;
  return (
    `nobody has led the lock ${lock} as far as this replica knows for ` +
    `${formatDuration(Math.round((now - pending.since) / 1000) * 1000)}: it has not campaigned, coordinated leader ` +
    'election undecided (no real answer yet whether the API server serves LeaseCandidates and runs a coordinator' +
    `${pending.lastError ? `; last: ${pending.lastError}` : ''})`
  );
}
