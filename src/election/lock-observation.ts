import { KubeApiError } from '../kube/client.js';
import type { Logger } from '../log/logger.js';

/**
 * A lock request that fails for one cause over and over (a retry every retry period) is logged as a
 * warning once per this interval, and at once when the cause changes.
 */
export const LOCK_WARNING_INTERVAL_MS = 60_000;

/** What failed, short and stable across retries: `403 Forbidden`, `500 InternalError`, `ECONNREFUSED`. */
export function lockFailureCause(err: unknown): string {
  if (err instanceof KubeApiError) return `${err.status} ${err.reason}`;
  const code = (err as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && code !== '' ? code : 'error';
}

/** What the API server's answers to our lock requests say about our access (monotonic times). */
export interface ApiAccess {
  /** When the elector started. */
  readonly since: number;
  /** Last lock request answered as for an authorized client (2xx, or 404/409 on the lock). */
  readonly okAt: number | undefined;
  /** Last answer that shows our credentials were accepted (also 403, 429). */
  readonly authenticatedAt: number | undefined;
  /** The last failure, if the last request failed. */
  readonly lastError: string | undefined;
}

/**
 * What one elector has seen of its lock, apart from the lock itself (the machine's state holds
 * that): the answers to its lock requests (API access for the probes; the current run of answered
 * requests), the warnings about requests that keep failing, and how long the lock has been
 * observed without a live leader. All times monotonic, given by the caller.
 */
export class LockObservation {
  private readonly log: Logger;
  private readonly namespace: string;
  /** The longest gap between two answered lock reads of a campaigning candidate, plus a timeout. */
  private readonly observeGapMs: number;
  private readonly since: number;
  private access: { okAt?: number; authenticatedAt?: number; lastError?: string } = {};
  /** The first answer of the current run of answered lock requests (no gap longer than observeGapMs). */
  private observingSince: number | undefined;
  /** When campaigning started. */
  private startedAt: number | undefined;
  /** Until when the last leader we observed was live: its lease by our observation. */
  private leaderUntil = Number.NEGATIVE_INFINITY;
  /** The last lock failure warned about (the rate limit), and how often it repeated since. */
  private warned: { cause: string; at: number; repeats: number } | undefined;
  /** The cause last warned about, until an attempt succeeds (then said once, at info). */
  private failing: string | undefined;

  constructor(opts: { log: Logger; namespace: string; observeGapMs: number; since: number }) {
    this.log = opts.log;
    this.namespace = opts.namespace;
    this.observeGapMs = opts.observeGapMs;
    this.since = opts.since;
  }

  /** Campaigning started at `now`. */
  started(now: number): void {
    this.startedAt = now;
  }

  /** A leader (any holder, us included) is live until `until` by our observation. */
  leaderLiveUntil(until: number): void {
    this.leaderUntil = Math.max(this.leaderUntil, until);
  }

  /** Records the outcome of one lock request: `err` undefined for a success. */
  answered(now: number, err?: unknown): void {
    const status = err instanceof KubeApiError ? err.status : undefined;
    if (err === undefined || status === 404 || status === 409) {
      const prev = this.access.okAt;
      if (prev === undefined || now - prev > this.observeGapMs) this.observingSince = now;
      this.access = { okAt: now, authenticatedAt: now };
    } else if (status === 403 || status === 429) {
      this.access = { ...this.access, authenticatedAt: now, lastError: (err as Error).message };
    } else {
      this.access = { ...this.access, lastError: err instanceof Error ? err.message : String(err) };
    }
  }

  /** What the answers to our lock requests say about our access to the API server (probes). */
  apiAccess(): ApiAccess {
    return {
      since: this.since,
      okAt: this.access.okAt,
      authenticatedAt: this.access.authenticatedAt,
      lastError: this.access.lastError,
    };
  }

  /** The last failure, if the last request failed. */
  lastError(): string | undefined {
    return this.access.lastError;
  }

  /**
   * How long the lock has been observed without a live leader at `now`, for a campaigning
   * candidate (the caller decides that): undefined while a leader is live or when our reads of the
   * lock are not answered (an outage does not count as time without a leader). Counted from the
   * latest of: the end of the last live lease observed, the start of campaigning, and the start of
   * the current run of answered reads.
   */
  leaderlessFor(now: number): number | undefined {
    const okAt = this.access.okAt;
    if (okAt === undefined || now - okAt > this.observeGapMs || this.observingSince === undefined) {
      return undefined;
    }
    const from = Math.max(this.leaderUntil, this.startedAt ?? now, this.observingSince);
    return now >= from ? now - from : undefined;
  }

  /**
   * A candidate's lock request failed for a reason other than a lost race (409): the lock cannot be
   * read or created (403 RBAC, 404 a namespace that does not exist, 5xx, no connection). That keeps
   * this replica from ever leading, so it is a warning, with the lock (in the logger's context) and
   * the cause; once per LOCK_WARNING_INTERVAL_MS while the cause stays the same (with how often it
   * repeated meanwhile), at once when it changes, and debug in between.
   */
  warnFailure(now: number, err: unknown): void {
    const cause = lockFailureCause(err);
    const last = this.warned;
    if (last?.cause === cause && now - last.at < LOCK_WARNING_INTERVAL_MS) {
      last.repeats++;
      this.log.debug(2, 'Failed to acquire lease', { err });
      return;
    }
    const hint =
      err instanceof KubeApiError && err.status === 403
        ? `RBAC: the controller's user needs get, create and update on leases in namespace ${this.namespace}`
        : err instanceof KubeApiError && err.status === 404
          ? `namespace ${this.namespace} does not exist (--leader-elect-resource-namespace, else POD_NAMESPACE)`
          : undefined;
    this.log.warn('Cannot read or create the leader election lock', {
      cause,
      err: err instanceof Error ? err.message : String(err),
      ...(hint ? { hint } : {}),
      ...(last?.cause === cause ? { repeatsSinceLastWarning: last.repeats } : {}),
    });
    this.warned = { cause, at: now, repeats: 0 };
    this.failing = cause;
  }

  /** An attempt that ended without an error, after one that was warned about. */
  succeeded(): void {
    if (this.failing === undefined) return;
    this.log.info('Leader election lock requests succeed again', { after: this.failing });
    this.failing = undefined;
  }
}
