import { formatDuration } from '../clock/duration.js';
import type { ApiAccess } from '../election/index.js';
import type { Check } from '../http/server.js';
import { type WatchHealth, watchBlindness } from '../watch/index.js';

/**
 * How long without any answer from the API server that accepts our credentials before /healthz
 * fails, so that the kubelet restarts the process (which re-reads its credentials: a token or
 * certificate that was rotated under a process that kept an old one, a broken exec plugin).
 *
 * Every replica sees an API server outage at the same moment, so this must be longer than the
 * outages that are part of normal operation, or they would restart every replica at once (and
 * the kubelet's crash-loop backoff could then keep them down after the server is back):
 * kube-apiserver restarts and control-plane upgrades take seconds to a couple of minutes. Five
 * minutes (plus the probe's 3 x 10 s) rides those out, and still replaces a replica whose
 * credentials are dead well within the time a human would take to notice.
 */
export const LIVENESS_NO_API_ACCESS_MS = 5 * 60_000;

/** Where the probes read from. Times are monotonic ms from the same clock as `now`. */
export interface ProbeSources {
  now(): number;
  nodes(): WatchHealth;
  leases(): WatchHealth;
  /** Leader election's view of our access (absent without leader election). */
  access?(): ApiAccess;
  /** When the process started watching (the reference before any answer). */
  startedAt: number;
}

export interface ProbeOptions {
  /** --watch-silence-threshold: a lease watch quiet for longer is not healthy. */
  watchSilenceThresholdMs: number;
  /**
   * Not Ready when no lock request was answered for this long (a replica that cannot reach the
   * lock could not take over either): the lease duration, at least three of a standby's polls.
   */
  lockAccessMs: number;
  /** Not live after this long with no answer that accepts our credentials. */
  liveAccessMs?: number;
}

const secs = (ms: number) => formatDuration(Math.round(ms / 100) * 100);

function watchCheck(
  name: string,
  what: string,
  h: () => WatchHealth,
  now: () => number,
  silenceMs: number,
): Check {
  return {
    name,
    check: () => {
      const health = h();
      const t = now();
      switch (watchBlindness(health, t, silenceMs)) {
        case 'unsynced':
          return `${what} watch not synced`;
        case 'disconnected':
          return `${what} watch disconnected for ${secs(t - health.since)}${health.lastError ? ` (${health.lastError})` : ''}`;
        case 'silent':
          return `${what} watch silent for ${secs(t - (health.lastContactAt ?? health.since))} (threshold ${secs(silenceMs)})`;
        default:
          return undefined;
      }
    },
  };
}

/**
 * /readyz: this replica sees (both watches synced and connected, the lease watch in contact
 * within the silence threshold) and reaches the lock (leader election). A standby is Ready when
 * it could take over; a leader that cannot see is not Ready.
 */
export function readinessChecks(src: ProbeSources, o: ProbeOptions): Check[] {
  const checks: Check[] = [
    watchCheck('nodes-watch', 'node', src.nodes, src.now, Number.POSITIVE_INFINITY),
    watchCheck('leases-watch', 'lease', src.leases, src.now, o.watchSilenceThresholdMs),
  ];
  const access = src.access;
  if (access) {
    checks.push({
      name: 'lock-access',
      check: () => {
        const a = access();
        const t = src.now();
        if (a.okAt !== undefined && t - a.okAt <= o.lockAccessMs) return undefined;
        const since = a.okAt === undefined ? 'yet' : `for ${secs(t - a.okAt)}`;
        return `no answer to a leader-election lock request ${since}${a.lastError ? ` (last: ${a.lastError})` : ''}`;
      },
    });
  }
  return checks;
}

/**
 * /healthz additions: fails after LIVENESS_NO_API_ACCESS_MS with no answer from the API server
 * that accepted our credentials (lock requests; without leader election, any watch contact).
 */
export function livenessChecks(src: ProbeSources, o: ProbeOptions): Check[] {
  const limit = o.liveAccessMs ?? LIVENESS_NO_API_ACCESS_MS;
  return [
    {
      name: 'api-access',
      check: () => {
        const t = src.now();
        let last: number | undefined;
        let lastError: string | undefined;
        if (src.access) {
          const a = src.access();
          last = a.authenticatedAt;
          lastError = a.lastError;
        } else {
          const contacts = [src.nodes().lastContactAt, src.leases().lastContactAt].filter(
            (x): x is number => x !== undefined,
          );
          last = contacts.length ? Math.max(...contacts) : undefined;
        }
        const since = Math.max(last ?? src.startedAt, src.startedAt);
        if (t - since <= limit) return undefined;
        return `no answer from the API server accepting our credentials for ${secs(t - since)} (limit ${secs(limit)})${lastError ? `: ${lastError}` : ''}; a restart re-reads them`;
      },
    },
  ];
}
