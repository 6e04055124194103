import { describe, expect, it } from 'vitest';
import { type Anomaly, AnomalyKind, NodeHealthTracker } from '../health/index.js';
import type { Lease, Node } from '../kube/types.js';
import { type KV, memoryLogger } from '../log/logger.js';
import { createRegistry } from '../metrics/registry.js';
import { AnomalyReporter, PATTERN_DETAIL_V } from './anomalies.js';
import { createControllerMetrics } from './metrics.js';

const MISMATCH = 'Lease holders differ from node names; renewals still count';

function node(name: string): Node {
  return {
    metadata: { name, uid: `uid-${name}`, creationTimestamp: '2026-01-01T00:00:00Z' },
    status: {
      conditions: [
        {
          type: 'Ready',
          status: 'True',
          lastHeartbeatTime: '2026-01-01T00:00:01Z',
          lastTransitionTime: '2026-01-01T00:00:00Z',
        },
      ],
    },
  };
}

/** A lease as KWOK writes it: holderIdentity `<host>_<uuid>`, not the node name. */
function kwokLease(name: string, renewMs: number, holder = `kwok-host_0b6f4c1e-${name}`): Lease {
  return {
    metadata: { name, namespace: 'kube-node-lease' },
    spec: {
      holderIdentity: holder,
      leaseDurationSeconds: 40,
      renewTime: new Date(Date.UTC(2026, 0, 1) + renewMs).toISOString().replace('Z', '000Z'),
    },
  };
}

async function metric(registry: ReturnType<typeof createRegistry>, kind: string): Promise<number> {
  const m = await registry.getSingleMetric('nlc_bad_objects_total')?.get();
  return m?.values.find((v) => v.labels.kind === kind)?.value ?? 0;
}

function setup(verbosity = 0) {
  const registry = createRegistry();
  const metrics = createControllerMetrics(registry);
  const log = memoryLogger(verbosity);
  const reporter = new AnomalyReporter(log, metrics.anomalies);
  const tracker = new NodeHealthTracker();
  const observe = (l: Lease, now: number) => {
    const r = tracker.observeLease(l, now);
    reporter.note(r.anomalies);
    return r;
  };
  const lines = (msg?: string): KV[] => log.lines.filter((l) => msg === undefined || l.msg === msg);
  return { registry, log, reporter, tracker, observe, lines };
}

describe('anomaly reporting: a cluster-wide pattern is logged once, with a count', () => {
  it('500 KWOK leases at start: one info line naming the pattern, no warnings; renewals still count', async () => {
    const { registry, reporter, tracker, observe, lines } = setup(0);
    const N = 500;
    for (let i = 0; i < N; i++) tracker.observeNode(node(`kwok-${i}`), 0);
    // The first list (InitApply events), then InitDone.
    for (let i = 0; i < N; i++) observe(kwokLease(`kwok-${i}`, 1_000), 10);
    expect(lines(MISMATCH)).toHaveLength(0); // nothing before the list is complete
    reporter.leasesSynced();
    expect(lines().filter((l) => l.level === 'warn')).toEqual([]);
    const summary = lines(MISMATCH);
    expect(summary).toHaveLength(1);
    expect(summary[0]).toMatchObject({
      level: 'info',
      kind: AnomalyKind.HolderMismatch,
      leases: N,
      example: 'kube-node-lease/kwok-0',
      exampleHolder: 'kwok-host_0b6f4c1e-kwok-0',
      metric: 'nlc_bad_objects_total{kind="holder_mismatch"}',
    });
    expect(JSON.stringify(lines())).not.toContain('Skipping');

    // Renewals: counted as renewals (the lease is NOT skipped), counted in the metric, not logged.
    for (let i = 0; i < N; i++) expect(observe(kwokLease(`kwok-${i}`, 11_000), 10_010).refreshed).toBe(true);
    expect(tracker.health('kwok-7')?.probeTimestamp).toBe(10_010);
    expect(await metric(registry, AnomalyKind.HolderMismatch)).toBe(2 * N);
    // A relist ends with InitDone again: still one line.
    reporter.leasesSynced();
    expect(lines(MISMATCH)).toHaveLength(1);
    expect(lines()).toHaveLength(1);
  });

  it('the per-lease detail is there at debug verbosity (V4), once per lease', () => {
    const { reporter, tracker, observe, lines } = setup(PATTERN_DETAIL_V);
    for (let i = 0; i < 3; i++) tracker.observeNode(node(`kwok-${i}`), 0);
    for (let i = 0; i < 3; i++) observe(kwokLease(`kwok-${i}`, 1_000), 10);
    for (let i = 0; i < 3; i++) observe(kwokLease(`kwok-${i}`, 11_000), 10_010);
    reporter.leasesSynced();
    const detail = lines(MISMATCH).filter((l) => l.level === 'debug');
    expect(detail.map((l) => l.name)).toEqual([
      'kube-node-lease/kwok-0',
      'kube-node-lease/kwok-1',
      'kube-node-lease/kwok-2',
    ]);
    expect(detail[1]).toMatchObject({ v: PATTERN_DETAIL_V, detail: 'kwok-host_0b6f4c1e-kwok-1' });
    expect(lines(MISMATCH).filter((l) => l.level === 'info')).toHaveLength(1);
  });

  it('a pattern that first shows after the initial list is logged at once, and only once', () => {
    const { reporter, tracker, observe, lines } = setup(0);
    tracker.observeNode(node('a'), 0);
    observe(kwokLease('a', 1_000, 'a'), 10); // kubelet style: holder = node name
    reporter.leasesSynced();
    expect(lines()).toEqual([]);
    tracker.observeNode(node('kwok-1'), 20);
    tracker.observeNode(node('kwok-2'), 20);
    observe(kwokLease('kwok-1', 1_000), 30);
    expect(lines(MISMATCH)).toHaveLength(1);
    expect(lines(MISMATCH)[0]).toMatchObject({ level: 'info', leases: 1, example: 'kube-node-lease/kwok-1' });
    observe(kwokLease('kwok-2', 1_000), 40);
    expect(lines(MISMATCH)).toHaveLength(1);
  });

  it('leases without a holder are a pattern of their own', () => {
    const { reporter, tracker, observe, lines } = setup(0);
    for (const n of ['x', 'y']) {
      tracker.observeNode(node(n), 0);
      const l = kwokLease(n, 1_000);
      observe({ ...l, spec: { ...l.spec, holderIdentity: null } }, 10);
    }
    reporter.leasesSynced();
    expect(lines()).toEqual([
      expect.objectContaining({
        level: 'info',
        msg: 'Leases without a holder; renewals still count',
        kind: AnomalyKind.HolderMissing,
        leases: 2,
      }),
    ]);
  });
});

describe('anomaly reporting: other kinds say what happens to the data', () => {
  const a = (kind: Anomaly['kind'], first = true): Anomaly => ({ kind, object: 'Lease', name: 'n1', first });

  it('skipped data: "Skipping bad data"; data still used: "Unexpected data, still used" and how', async () => {
    const { registry, reporter, lines } = setup(0);
    reporter.note([a(AnomalyKind.RenewTimeUnparsable), a(AnomalyKind.RenewTimeBackward)]);
    reporter.note([a(AnomalyKind.RenewTimeUnparsable, false), a(AnomalyKind.RenewTimeBackward, false)]);
    expect(lines()).toEqual([
      expect.objectContaining({ level: 'warn', msg: 'Skipping bad data', kind: 'renew_time_unparsable' }),
      expect.objectContaining({
        level: 'warn',
        msg: 'Unexpected data, still used',
        kind: 'renew_time_backward',
        handling: 'still counted as a renewal',
      }),
    ]);
    expect(await metric(registry, 'renew_time_unparsable')).toBe(2);
    expect(await metric(registry, 'renew_time_backward')).toBe(2);
  });
});
