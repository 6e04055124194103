import { describe, expect, it } from 'vitest';
import type { ApiAccess } from '../election/elector.js';
import type { Check } from '../http/server.js';
import type { WatchHealth } from '../watch/types.js';
import { LIVENESS_NO_API_ACCESS_MS, livenessChecks, type ProbeSources, readinessChecks } from './probes.js';

const healthy = (resource: string, at: number): WatchHealth => ({
  resource,
  connected: true,
  synced: true,
  listing: false,
  lastEventAt: at,
  since: 0,
  lastContactAt: at,
  reconnects: 0,
  relists: 0,
  lastError: undefined,
  lastErrorAt: undefined,
});

function world() {
  const w = {
    now: 100_000,
    nodes: healthy('nodes', 99_000),
    leases: healthy('leases', 99_000),
    access: { since: 0, okAt: 99_000, authenticatedAt: 99_000, lastError: undefined } as ApiAccess,
  };
  const src: ProbeSources = {
    now: () => w.now,
    nodes: () => w.nodes,
    leases: () => w.leases,
    access: () => w.access,
    startedAt: 0,
  };
  return { w, src };
}

const failing = (checks: Check[]) =>
  checks.flatMap((c) => {
    const r = c.check();
    return r === undefined ? [] : [`${c.name}: ${r}`];
  });

const OPTS = { watchSilenceThresholdMs: 45_000, lockAccessMs: 15_000 };

describe('readiness', () => {
  it('ready while both watches are healthy and a lock request was answered within the lease duration', () => {
    const { w, src } = world();
    const checks = readinessChecks(src, OPTS);
    expect(checks.map((c) => c.name)).toEqual(['nodes-watch', 'leases-watch', 'lock-access']);
    expect(failing(checks)).toEqual([]);
    w.now = 99_000 + 15_000;
    expect(failing(checks)).toEqual([]);
  });

  it('not ready when a watch is unsynced, disconnected or (leases) silent', () => {
    const { w, src } = world();
    const checks = readinessChecks(src, OPTS);
    w.nodes = { ...w.nodes, connected: false, since: 90_000, lastError: 'network' };
    w.leases = { ...w.leases, lastContactAt: 50_000 };
    expect(failing(checks)).toEqual([
      'nodes-watch: node watch disconnected for 10s (network)',
      'leases-watch: lease watch silent for 50s (threshold 45s)',
    ]);
    w.nodes = { ...w.nodes, synced: false };
    expect(failing(checks)[0]).toBe('nodes-watch: node watch not synced');
  });

  it('a replica whose lock requests get only 401s goes unready after the lease duration', () => {
    const { w, src } = world();
    const checks = readinessChecks(src, OPTS);
    w.access = { ...w.access, lastError: 'GET lease: 401 Unauthorized' };
    w.now = 99_000 + 15_001;
    w.nodes = { ...w.nodes, lastContactAt: w.now };
    w.leases = { ...w.leases, lastContactAt: w.now };
    expect(failing(checks)).toEqual([
      'lock-access: no answer to a leader-election lock request for 15s (last: GET lease: 401 Unauthorized)',
    ]);
    // Before any answer at all.
    w.access = { since: 0, okAt: undefined, authenticatedAt: undefined, lastError: undefined };
    expect(failing(checks)).toEqual(['lock-access: no answer to a leader-election lock request yet']);
  });

  it('without leader election there is no lock check', () => {
    const { src } = world();
    const { access: _, ...noElection } = src;
    expect(readinessChecks(noElection, OPTS).map((c) => c.name)).toEqual(['nodes-watch', 'leases-watch']);
  });
});

describe('liveness', () => {
  it('fails only after 5 minutes without an answer accepting our credentials', () => {
    const { w, src } = world();
    const checks = livenessChecks(src, OPTS);
    w.access = { ...w.access, okAt: 10_000, authenticatedAt: 10_000, lastError: '401 Unauthorized' };
    w.now = 10_000 + LIVENESS_NO_API_ACCESS_MS;
    expect(failing(checks)).toEqual([]);
    w.now += 1;
    expect(failing(checks)).toEqual([
      'api-access: no answer from the API server accepting our credentials for 5m0s (limit 5m0s): 401 Unauthorized; a restart re-reads them',
    ]);
    // A 403 proves the credentials work: restarting would not help.
    w.access = { ...w.access, authenticatedAt: w.now - 1_000 };
    expect(failing(checks)).toEqual([]);
  });

  it('counts from the start before any answer, and uses the watches without leader election', () => {
    const { w, src } = world();
    w.access = { since: 0, okAt: undefined, authenticatedAt: undefined, lastError: undefined };
    w.now = LIVENESS_NO_API_ACCESS_MS;
    expect(failing(livenessChecks(src, OPTS))).toEqual([]);
    w.now += 1;
    expect(failing(livenessChecks(src, OPTS))).toHaveLength(1);
    const { access: _, ...noElection } = src;
    w.leases = { ...w.leases, lastContactAt: w.now - 1_000 };
    expect(failing(livenessChecks(noElection, OPTS))).toEqual([]);
    expect(failing(livenessChecks(noElection, { ...OPTS, liveAccessMs: 500 }))).toHaveLength(1);
  });
});
