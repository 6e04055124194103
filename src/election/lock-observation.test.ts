import { describe, expect, it } from 'vitest';
import { KubeApiError } from '../kube/client.js';
import { type KV, memoryLogger } from '../log/logger.js';
import { LOCK_WARNING_INTERVAL_MS, LockObservation, lockFailureCause } from './lock-observation.js';

const GAP = 20_000;

function observation(since = 0): { seen: LockObservation; logs: KV[] } {
  const log = memoryLogger(6);
  return {
    seen: new LockObservation({ log, namespace: 'nlc-system', observeGapMs: GAP, since }),
    logs: log.lines,
  };
}

const status = (code: number, reason: string) =>
  new KubeApiError(code, { kind: 'Status', reason }, {}, 'update lease');

describe('LockObservation: what one elector has seen of its lock', () => {
  it('apiAccess: a 2xx, 404 or 409 proves access; 403 and 429 only authentication; anything else neither', () => {
    const { seen } = observation(5);
    expect(seen.apiAccess()).toEqual({
      since: 5,
      okAt: undefined,
      authenticatedAt: undefined,
      lastError: undefined,
    });
    seen.answered(10);
    seen.answered(11, status(404, 'NotFound'));
    seen.answered(12, status(409, 'Conflict'));
    expect(seen.apiAccess()).toEqual({ since: 5, okAt: 12, authenticatedAt: 12, lastError: undefined });
    seen.answered(13, status(403, 'Forbidden'));
    expect(seen.apiAccess()).toMatchObject({
      okAt: 12,
      authenticatedAt: 13,
      lastError: 'update lease: 403 Forbidden',
    });
    seen.answered(14, status(429, 'TooManyRequests'));
    expect(seen.apiAccess()).toMatchObject({ okAt: 12, authenticatedAt: 14 });
    seen.answered(15, new Error('connect ECONNREFUSED'));
    expect(seen.apiAccess()).toMatchObject({
      okAt: 12,
      authenticatedAt: 14,
      lastError: 'connect ECONNREFUSED',
    });
    expect(seen.lastError()).toBe('connect ECONNREFUSED');
    seen.answered(16);
    expect(seen.lastError()).toBeUndefined();
  });

  it('leaderlessFor counts from the latest of: the last live lease, the start, the current run of answers', () => {
    const { seen } = observation();
    expect(seen.leaderlessFor(1_000)).toBeUndefined(); // nothing answered yet
    seen.started(1_000);
    seen.answered(2_000);
    expect(seen.leaderlessFor(3_000)).toBe(1_000); // from the run's first answer (after the start)
    seen.leaderLiveUntil(5_000);
    seen.leaderLiveUntil(4_000); // an earlier end does not move it back
    seen.answered(4_500);
    expect(seen.leaderlessFor(4_500)).toBeUndefined(); // a leader is still live
    seen.answered(9_000);
    expect(seen.leaderlessFor(9_000)).toBe(4_000);
  });

  it('an outage is not time without a leader: a gap in answers longer than the limit starts a new run', () => {
    const { seen } = observation();
    seen.started(0);
    seen.answered(1_000);
    expect(seen.leaderlessFor(1_000 + GAP)).toBe(GAP);
    expect(seen.leaderlessFor(1_001 + GAP)).toBeUndefined(); // last answer too old: cannot tell
    seen.answered(1_000 + GAP); // within the gap: the same run
    expect(seen.leaderlessFor(2_000 + GAP)).toBe(1_000 + GAP);
    seen.answered(1_001 + 2 * GAP); // one ms past the gap: a new run
    expect(seen.leaderlessFor(1_001 + 2 * GAP)).toBe(0);
    seen.answered(2_000 + 2 * GAP, new Error('ECONNREFUSED')); // a failure neither ends nor starts a run
    expect(seen.leaderlessFor(2_000 + 2 * GAP)).toBe(999);
  });

  it('warns once per interval for one cause (counting repeats), at once for a new one, and says when it recovers', () => {
    const { seen, logs } = observation();
    const warnings = () => logs.filter((l) => l.level === 'warn');
    seen.warnFailure(0, status(403, 'Forbidden'));
    seen.warnFailure(1_000, status(403, 'Forbidden'));
    seen.warnFailure(LOCK_WARNING_INTERVAL_MS - 1, status(403, 'Forbidden'));
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]).toMatchObject({
      msg: 'Cannot read or create the leader election lock',
      cause: '403 Forbidden',
      hint: "RBAC: the controller's user needs get, create and update on leases in namespace nlc-system",
    });
    expect(warnings()[0]).not.toHaveProperty('repeatsSinceLastWarning');
    seen.warnFailure(LOCK_WARNING_INTERVAL_MS, status(403, 'Forbidden'));
    expect(warnings()).toHaveLength(2);
    expect(warnings()[1]).toMatchObject({ repeatsSinceLastWarning: 2 });
    seen.warnFailure(LOCK_WARNING_INTERVAL_MS + 1, status(404, 'NotFound'));
    expect(warnings()[2]).toMatchObject({
      cause: '404 NotFound',
      hint: 'namespace nlc-system does not exist (--leader-elect-resource-namespace, else POD_NAMESPACE)',
    });
    expect(warnings()[2]).not.toHaveProperty('repeatsSinceLastWarning');
    seen.warnFailure(
      LOCK_WARNING_INTERVAL_MS + 2,
      Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }),
    );
    expect(warnings()[3]).toMatchObject({ cause: 'ECONNREFUSED', err: 'refused' });
    expect(warnings()[3]).not.toHaveProperty('hint');
    seen.succeeded();
    seen.succeeded();
    expect(logs.filter((l) => l.msg === 'Leader election lock requests succeed again')).toMatchObject([
      { level: 'info', after: 'ECONNREFUSED' },
    ]);
  });

  it('names a failure by status and reason, else by its error code', () => {
    expect(lockFailureCause(status(500, 'InternalError'))).toBe('500 InternalError');
    expect(lockFailureCause(Object.assign(new Error('x'), { code: 'ETIMEDOUT' }))).toBe('ETIMEDOUT');
    expect(lockFailureCause(Object.assign(new Error('x'), { code: '' }))).toBe('error');
    expect(lockFailureCause(undefined)).toBe('error');
  });
});
