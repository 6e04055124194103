import { describe, expect, it } from 'vitest';
import {
  defaultIdentity,
  LEADER_ELECTION_DEFAULTS,
  LeaderElectionConfigError,
  resolveLeaderElectionConfig,
  validateTiming,
} from './config.js';

describe('leader election config', () => {
  it('defaults to 15s / 10s / 2s, lock named after the component, fence margin = LD - RD', () => {
    const c = resolveLeaderElectionConfig({ namespace: 'nlc-system', identity: 'pod-0_ab' });
    expect(c).toEqual({
      namespace: 'nlc-system',
      name: 'node-lifecycle-controller',
      identity: 'pod-0_ab',
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      fenceSafetyMarginMs: 5_000,
    });
    expect(LEADER_ELECTION_DEFAULTS.name).toBe('node-lifecycle-controller');
  });

  it('requires leaseDuration > renewDeadline, naming both flags', () => {
    expect(
      validateTiming({ leaseDurationMs: 10_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 }),
    ).toEqual([
      '--leader-elect-lease-duration (10s) must be greater than --leader-elect-renew-deadline (10s)',
    ]);
  });

  it('requires renewDeadline > 1.2 x retryPeriod, naming both flags', () => {
    expect(validateTiming({ leaseDurationMs: 15_000, renewDeadlineMs: 2_400, retryPeriodMs: 2_000 })).toEqual(
      [
        '--leader-elect-renew-deadline (2.4s) must be greater than 1.2 x --leader-elect-retry-period (1.2 x 2s = 2.4s)',
      ],
    );
    expect(validateTiming({ leaseDurationMs: 15_000, renewDeadlineMs: 2_401, retryPeriodMs: 2_000 })).toEqual(
      [],
    );
  });

  it('rejects zero/negative durations and sub-second lease durations', () => {
    expect(validateTiming({ leaseDurationMs: 0, renewDeadlineMs: -1, retryPeriodMs: Number.NaN })).toEqual([
      '--leader-elect-lease-duration must be greater than zero (got 0)',
      '--leader-elect-renew-deadline must be greater than zero (got -1)',
      '--leader-elect-retry-period must be greater than zero (got NaN)',
    ]);
    expect(validateTiming({ leaseDurationMs: 900, renewDeadlineMs: 800, retryPeriodMs: 100 })).toEqual([
      '--leader-elect-lease-duration must be at least 1s (got 900ms)',
    ]);
  });

  it('throws one error listing every problem, including name and namespace', () => {
    let err: unknown;
    try {
      resolveLeaderElectionConfig({
        namespace: 'Bad_NS',
        name: 'Not A Name',
        identity: ' ',
        leaseDurationMs: 3_000,
        renewDeadlineMs: 3_000,
        retryPeriodMs: 500,
      });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(LeaderElectionConfigError);
    const problems = (err as LeaderElectionConfigError).problems;
    expect(problems).toHaveLength(4);
    expect(problems.join('\n')).toContain('--leader-elect-resource-name must be a DNS subdomain name');
    expect(problems.join('\n')).toContain('--leader-elect-resource-namespace must be a DNS label');
    expect(problems.join('\n')).toContain('identity must not be empty');
    expect((err as Error).message).toContain('--leader-elect-lease-duration (3s) must be greater than');
  });

  it('flags that make the derived fence margin wrong are named in their own words, not as a "fence safety margin"', () => {
    let err: unknown;
    try {
      resolveLeaderElectionConfig({
        namespace: 'n',
        identity: 'i',
        leaseDurationMs: 10_000,
        renewDeadlineMs: 12_000,
      });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(LeaderElectionConfigError);
    expect((err as LeaderElectionConfigError).problems).toEqual([
      '--leader-elect-lease-duration (10s) must be greater than --leader-elect-renew-deadline (12s)',
    ]);
  });

  it('validates the fence margin against the lease duration', () => {
    expect(() =>
      resolveLeaderElectionConfig({ namespace: 'n', identity: 'i', fenceSafetyMarginMs: 15_000 }),
    ).toThrow(/fence safety margin/);
    expect(
      resolveLeaderElectionConfig({ namespace: 'n', identity: 'i', fenceSafetyMarginMs: 2_000 })
        .fenceSafetyMarginMs,
    ).toBe(2_000);
  });

  it('builds POD_NAME-style identities <hostname>_<random>, unique per call', () => {
    expect(defaultIdentity('nlc-7d9f-x2', () => 'abc')).toBe('nlc-7d9f-x2_abc');
    const a = defaultIdentity('h');
    const b = defaultIdentity('h');
    expect(a).toMatch(/^h_[0-9a-f]{16}$/);
    expect(a).not.toBe(b);
  });
});
