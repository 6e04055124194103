import { describe, expect, it } from 'vitest';
import type { Lease, Node, NodeCondition } from '../kube/types.js';
import { DeadlineHeap } from './deadlines.js';
import { AnomalyKind } from './reasons.js';
import { DEADLINE_EPSILON_MS, NodeHealthTracker } from './tracker.js';

const CREATED = '2026-01-01T00:00:00Z';
const WALL = Date.UTC(2026, 0, 1, 12, 0, 0);

function iso(sec: number): string {
  return new Date(Date.UTC(2026, 0, 1) + sec * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}
function micro(ms: number): string {
  return `${new Date(Date.UTC(2026, 0, 1) + ms).toISOString().slice(0, 23)}000Z`;
}

function lease(name: string, renewTime: string | null | undefined, holder: string | null = name): Lease {
  return {
    metadata: { name, namespace: 'kube-node-lease' },
    spec: { holderIdentity: holder, leaseDurationSeconds: 40, renewTime },
  };
}

function ready(status: string, hbSec: number, ltSec = 0): NodeCondition {
  return {
    type: 'Ready',
    status,
    reason: 'KubeletReady',
    lastHeartbeatTime: iso(hbSec),
    lastTransitionTime: iso(ltSec),
  };
}

function node(name: string, conditions?: NodeCondition[], extra: Partial<Node['metadata']> = {}): Node {
  return {
    metadata: { name, uid: `uid-${name}`, creationTimestamp: CREATED, ...extra },
    status: conditions ? { conditions } : {},
  };
}

const kinds = (r: { anomalies: { kind: string }[] }) => r.anomalies.map((a) => a.kind);

describe('observeLeaseRead (the lease re-read before marking)', () => {
  it("only that node's Lease counts; anything else is lease_read_invalid and shows nothing", () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('n1', [ready('True', 1)]), 0);
    t.observeLease(lease('n1', micro(1000)), 1_000);
    const renewed = { kind: 'Lease', ...lease('n1', micro(9000)) };
    const wrong: Array<[unknown, RegExp]> = [
      ['<html><body>502 Bad Gateway</body></html>', /^not a JSON object: "<html><body>502/],
      [null, /^not a JSON object: null$/],
      [[renewed], /^not a JSON object/],
      [{ ...renewed, kind: 'Node' }, /: kind=Node name=kube-node-lease\/n1$/],
      [{ ...renewed, kind: undefined }, /: kind=undefined name=kube-node-lease\/n1$/],
      [
        { kind: 'Lease', ...lease('n2', micro(9000)) },
        /^not the node's Lease kube-node-lease\/n1: kind=Lease name=kube-node-lease\/n2$/,
      ],
      [{ ...renewed, metadata: { name: 'n1', namespace: 'kube-system' } }, /name=kube-system\/n1$/],
    ];
    for (const [i, [body, detail]] of wrong.entries()) {
      const r = t.observeLeaseRead('n1', body, 10_000 + i);
      expect(r.valid, String(i)).toBe(false);
      expect(r.refreshed, String(i)).toBe(false);
      expect(r.anomalies, String(i)).toEqual([
        expect.objectContaining({ kind: AnomalyKind.LeaseReadInvalid, name: 'n1', first: i === 0 }),
      ]);
      expect(r.anomalies[0]!.detail, String(i)).toMatch(detail);
    }
    expect(t.health('n1')?.probeTimestamp).toBe(1_000);
    const ok = t.observeLeaseRead('n1', renewed, 20_000);
    expect(ok).toMatchObject({ valid: true, refreshed: true, anomalies: [] });
    expect(t.health('n1')?.probeTimestamp).toBe(20_000);
  });
});

describe('a watch catching up with a re-read', () => {
  it('the renewals a lagging watch delivers after a re-read showed a later one are neither renewals nor anomalies', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('n1', [ready('True', 1)]), 0);
    expect(t.observeLease(lease('n1', micro(1_000)), 1_000).refreshed).toBe(true);
    // The watch is behind: the re-read before marking shows the renewal at 40 s.
    const read = t.observeLeaseRead('n1', { kind: 'Lease', ...lease('n1', micro(40_000)) }, 41_000);
    expect(read).toMatchObject({ refreshed: true, anomalies: [] });
    // The watch delivers the renewals in between, then the one the read showed.
    for (const [i, ms] of [10_000, 20_000, 30_000, 40_000].entries()) {
      const r = t.observeLease(lease('n1', micro(ms)), 42_000 + i);
      expect(r, String(ms)).toMatchObject({ refreshed: false, anomalies: [] });
    }
    expect(t.health('n1')?.probeTimestamp).toBe(41_000);
    expect(t.stats().backwardSteps).toBe(0);
    // Caught up: the next renewal counts, and a step back after it is an anomaly again.
    expect(t.observeLease(lease('n1', micro(50_000)), 50_000).refreshed).toBe(true);
    const back = t.observeLease(lease('n1', micro(45_000)), 51_000);
    expect(kinds(back)).toContain(AnomalyKind.RenewTimeBackward);
  });

  it('a watch that skips the read renewal (its next event is later) is caught up as well', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('n1', [ready('True', 1)]), 0);
    t.observeLease(lease('n1', micro(1_000)), 1_000);
    t.observeLeaseRead('n1', { kind: 'Lease', ...lease('n1', micro(40_000)) }, 41_000);
    expect(t.observeLease(lease('n1', micro(50_000)), 50_000).refreshed).toBe(true);
    expect(kinds(t.observeLease(lease('n1', micro(30_000)), 51_000))).toContain(
      AnomalyKind.RenewTimeBackward,
    );
  });
});

describe('lease rule', () => {
  it('first lease and every advance set probe = now; an equal renewTime is ignored', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('n1', [ready('True', 1)]), 0);
    expect(t.observeLease(lease('n1', micro(1000)), 5_000).refreshed).toBe(true);
    expect(t.health('n1')?.probeTimestamp).toBe(5_000);
    // same object again (relist / unrelated update): not a renewal
    expect(t.observeLease(lease('n1', micro(1000)), 9_000).refreshed).toBe(false);
    expect(t.health('n1')?.probeTimestamp).toBe(5_000);
    // same instant, different spelling: still not a renewal
    expect(t.observeLease(lease('n1', micro(1000).replace('000Z', 'Z')), 9_500).refreshed).toBe(false);
    expect(t.observeLease(lease('n1', micro(11_000)), 15_000).refreshed).toBe(true);
    expect(t.health('n1')?.probeTimestamp).toBe(15_000);
    expect(t.health('n1')?.lastSeenRenewTime).toBe(micro(11_000));
  });

  it('a sub-millisecond MicroTime change is a renewal', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('n1', [ready('True', 1)]), 0);
    t.observeLease(lease('n1', '2026-01-01T00:00:10.000001Z'), 1_000);
    expect(t.observeLease(lease('n1', '2026-01-01T00:00:10.000002Z'), 2_000).refreshed).toBe(true);
  });

  it('leaseDurationSeconds is never read: only grace decides', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('n1', [ready('True', 1)]), 0);
    const l = lease('n1', micro(1));
    l.spec!.leaseDurationSeconds = 1;
    t.observeLease(l, 0);
    expect(t.isTimedOut('n1', 50_000)).toBe(false);
    expect(t.isTimedOut('n1', 50_001)).toBe(true);
  });

  it('kubelet clock 10 min ahead or behind behaves like any other', () => {
    for (const skewMs of [600_000, -600_000]) {
      const t = new NodeHealthTracker();
      t.observeNode(node('n1', [ready('True', 1)]), 0);
      for (let now = 0; now <= 300_000; now += 10_000) {
        const r = t.observeLease(lease('n1', micro(now + skewMs)), now);
        expect(r.refreshed).toBe(true);
        expect(t.popDue(now)).toEqual([]);
      }
      expect(t.nextDeadline()).toBe(300_000 + 50_000 + DEADLINE_EPSILON_MS);
    }
  });

  it("a backward step counts as a renewal and is counted ('changed' rule, default)", () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('n1', [ready('True', 1)]), 0);
    t.observeLease(lease('n1', micro(100_000)), 0);
    const r = t.observeLease(lease('n1', micro(40_000)), 10_000); // clock stepped back 70s
    expect(r.refreshed).toBe(true);
    expect(kinds(r)).toContain(AnomalyKind.RenewTimeBackward);
    expect(t.health('n1')?.probeTimestamp).toBe(10_000);
    expect(t.observeLease(lease('n1', micro(50_000)), 20_000).refreshed).toBe(true);
    expect(t.stats().backwardSteps).toBe(1);
  });

  it("upstream 'advanced' rule: a backward step is ignored until the clock passes the old value", () => {
    const t = new NodeHealthTracker({ leaseRule: 'advanced' });
    t.observeNode(node('n1', [ready('True', 1)]), 0);
    t.observeLease(lease('n1', micro(100_000)), 0);
    const r = t.observeLease(lease('n1', micro(40_000)), 10_000);
    expect(r.refreshed).toBe(false);
    expect(kinds(r)).toContain(AnomalyKind.RenewTimeNotAdvanced);
    expect(t.observeLease(lease('n1', micro(100_000)), 20_000).refreshed).toBe(false); // equal
    expect(t.observeLease(lease('n1', micro(100_001)), 30_000).refreshed).toBe(true);
    expect(t.stats().backwardSteps).toBe(0);
  });

  it('a replayed older lease (stale cache after relist) is not a renewal', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('n1', [ready('True', 1)]), 0);
    t.observeLease(lease('n1', micro(10_000)), 10_000);
    t.observeLease(lease('n1', micro(20_000)), 20_000);
    const r = t.observeLease(lease('n1', micro(10_000)), 25_000);
    expect(r.refreshed).toBe(false);
    expect(kinds(r)).toContain(AnomalyKind.RenewTimeReplayed);
    // the current value coming back after the replay is not a renewal either (seen before)
    expect(t.observeLease(lease('n1', micro(20_000)), 26_000).refreshed).toBe(false);
    expect(t.health('n1')?.probeTimestamp).toBe(20_000);
  });

  it('replay memory is bounded: a value older than renewHistorySize renewals counts again', () => {
    const t = new NodeHealthTracker({ renewHistorySize: 2 });
    t.observeNode(node('n1', [ready('True', 1)]), 0);
    t.observeLease(lease('n1', micro(1_000)), 1);
    t.observeLease(lease('n1', micro(2_000)), 2);
    expect(t.observeLease(lease('n1', micro(1_000)), 3).refreshed).toBe(false); // still remembered
    t.observeLease(lease('n1', micro(3_000)), 4); // evicts 1_000
    expect(t.observeLease(lease('n1', micro(1_000)), 5).refreshed).toBe(true);
  });

  it('missing or unparsable renewTime is ignored and counted; logged once', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('n1', [ready('True', 1)]), 0);
    const a = t.observeLease(lease('n1', 'not-a-time'), 10_000);
    expect(a.refreshed).toBe(false);
    expect(a.anomalies).toContainEqual(
      expect.objectContaining({ kind: AnomalyKind.RenewTimeUnparsable, first: true }),
    );
    const b = t.observeLease(lease('n1', 'also-bad'), 11_000);
    expect(b.anomalies).toContainEqual(
      expect.objectContaining({ kind: AnomalyKind.RenewTimeUnparsable, first: false }),
    );
    expect(kinds(t.observeLease(lease('n1', null), 12_000))).toContain(AnomalyKind.RenewTimeMissing);
    expect(
      kinds(t.observeLease({ metadata: { name: 'n1', namespace: 'kube-node-lease' } }, 13_000)),
    ).toContain(AnomalyKind.RenewTimeMissing);
    expect(t.health('n1')?.probeTimestamp).toBe(0);
    expect(t.stats().anomalies[AnomalyKind.RenewTimeUnparsable]).toBe(2);
    // a good value afterwards is a renewal
    expect(t.observeLease(lease('n1', micro(1)), 14_000).refreshed).toBe(true);
  });

  it('null or foreign holderIdentity is reported; renewals still count (upstream ignores holder)', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('n1', [ready('True', 1)]), 0);
    const r = t.observeLease(lease('n1', micro(1), null), 1_000);
    expect(r.refreshed).toBe(true);
    expect(kinds(r)).toContain(AnomalyKind.HolderMissing);
    expect(kinds(t.observeLease(lease('n1', micro(2), 'other'), 2_000))).toContain(
      AnomalyKind.HolderMismatch,
    );
  });

  it('a lease without a node is tracked, reported, and never marked', () => {
    const t = new NodeHealthTracker();
    t.listsSynced();
    const r = t.observeLease(lease('ghost', micro(1)), 0);
    expect(r.anomalies).toContainEqual(
      expect.objectContaining({ kind: AnomalyKind.LeaseWithoutNode, first: true }),
    );
    expect(t.leasesWithoutNode()).toEqual(['ghost']);
    expect(t.stats()).toMatchObject({ nodes: 0, leases: 1, leasesWithoutNode: 1, scheduled: 0 });
    expect(t.nextDeadline()).toBeUndefined();
    expect(t.popDue(10_000_000)).toEqual([]);
    expect(t.recheckAll(10_000_000)).toEqual([]);
    expect(t.isTimedOut('ghost', 10_000_000)).toBe(false);
    expect(t.markUnknown(node('ghost', [ready('True', 1)]), 10_000_000, WALL)).toBeUndefined();
    // the node shows up later: fresh grace from that moment
    const n = t.observeNode(node('ghost', [ready('True', 1)]), 20_000_000);
    expect(n.registered).toBe(true);
    expect(t.leasesWithoutNode()).toEqual([]);
    expect(t.nextDeadline()).toBe(20_050_000 + DEADLINE_EPSILON_MS);
  });

  it('a lease without a node is judged only once both lists are complete', () => {
    const t = new NodeHealthTracker();
    // Leases listed before their nodes (start-up): not an anomaly yet.
    expect(kinds(t.observeLease(lease('n1', micro(1)), 0))).toEqual([]);
    expect(kinds(t.observeLease(lease('ghost', micro(1)), 0))).toEqual([]);
    t.observeNode(node('n1', [ready('True', 1)]), 100);
    // Both lists done: the lease whose node is really missing is reported, once.
    expect(t.listsSynced()).toEqual([
      expect.objectContaining({ kind: AnomalyKind.LeaseWithoutNode, name: 'ghost', first: true }),
    ]);
    expect(t.listsSynced()).toEqual([]);
    // From now on each observation of it counts (logged once), and a new orphan is reported.
    expect(t.observeLease(lease('ghost', micro(2)), 200).anomalies).toEqual([
      expect.objectContaining({ kind: AnomalyKind.LeaseWithoutNode, first: false }),
    ]);
    expect(t.observeLease(lease('late', micro(2)), 200).anomalies).toEqual([
      expect.objectContaining({ kind: AnomalyKind.LeaseWithoutNode, name: 'late', first: true }),
    ]);
    expect(kinds(t.observeLease(lease('n1', micro(2)), 200))).toEqual([]);
  });

  it('leases outside kube-node-lease and nameless objects are ignored', () => {
    const t = new NodeHealthTracker();
    const r = t.observeLease(
      { metadata: { name: 'x', namespace: 'kube-system' }, spec: { renewTime: micro(1) } },
      0,
    );
    expect(kinds(r)).toEqual([AnomalyKind.LeaseWrongNamespace]);
    expect(kinds(t.observeLease({ metadata: {} } as Lease, 0))).toEqual([AnomalyKind.MissingName]);
    expect(kinds(t.observeNode({ metadata: {} } as Node, 0))).toEqual([AnomalyKind.MissingName]);
    expect(t.stats()).toMatchObject({ nodes: 0, leases: 0 });
  });
});

describe('status rule (upstream order)', () => {
  it('no saved health -> probe = transition = now (fresh grace after restart)', () => {
    const t = new NodeHealthTracker();
    const r = t.observeNode(node('n1', [ready('True', 1)]), 7_000);
    expect(r).toMatchObject({ registered: true, refreshed: true });
    expect(t.health('n1')).toMatchObject({
      probeTimestamp: 7_000,
      readyTransitionTimestamp: 7_000,
      graceKind: 'monitor',
    });
    expect(t.observeNode(node('n1', [ready('True', 1)]), 8_000).registered).toBe(false);
  });

  it('Ready appearing -> now; a new heartbeat -> probe = now, transition only if lastTransitionTime changed', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('n1'), 0);
    expect(t.health('n1')?.graceKind).toBe('startup');
    expect(t.observeNode(node('n1', [ready('True', 10, 10)]), 10_000).refreshed).toBe(true);
    expect(t.health('n1')).toMatchObject({
      probeTimestamp: 10_000,
      readyTransitionTimestamp: 10_000,
      graceKind: 'monitor',
    });
    // heartbeat moves, transition time unchanged
    t.observeNode(node('n1', [ready('True', 20, 10)]), 20_000);
    expect(t.health('n1')).toMatchObject({ probeTimestamp: 20_000, readyTransitionTimestamp: 10_000 });
    // heartbeat and transition move
    t.observeNode(node('n1', [ready('False', 30, 30)]), 30_000);
    expect(t.health('n1')).toMatchObject({
      probeTimestamp: 30_000,
      readyTransitionTimestamp: 30_000,
      readyStatus: 'False',
    });
  });

  it('same heartbeat (labels changed, our own write echoed) -> nothing', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('n1', [ready('True', 10, 10)]), 0);
    const r = t.observeNode(node('n1', [ready('Unknown', 10, 99)], { labels: { a: 'b' } }), 40_000);
    expect(r.refreshed).toBe(false);
    expect(t.health('n1')?.probeTimestamp).toBe(0);
  });

  it('Ready disappearing is reported and does not refresh; grace becomes startup grace', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('n1', [ready('True', 10)]), 0);
    const r = t.observeNode(node('n1', []), 30_000);
    expect(r.refreshed).toBe(false);
    expect(kinds(r)).toContain(AnomalyKind.ReadyConditionRemoved);
    expect(t.health('n1')).toMatchObject({ probeTimestamp: 0, graceKind: 'startup', graceMs: 60_000 });
    // reappearing is a refresh (upstream: "Creating timestamp entry")
    expect(t.observeNode(node('n1', [ready('True', 10)]), 40_000).refreshed).toBe(true);
  });

  it('the placeholder Ready a node controller appends on timeout is not a heartbeat', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('n1'), 0);
    const placeholder: NodeCondition = {
      type: 'Ready',
      status: 'Unknown',
      reason: 'NodeStatusNeverUpdated',
      message: 'Kubelet never posted node status.',
      lastHeartbeatTime: CREATED,
      lastTransitionTime: iso(100),
    };
    expect(t.observeNode(node('n1', [placeholder]), 61_000).refreshed).toBe(false);
    expect(t.health('n1')?.probeTimestamp).toBe(0);
  });

  it('a node without a lease lives on Ready heartbeats', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('n1', [ready('True', 0)]), 0);
    t.observeNode(node('n1', [ready('True', 40)]), 40_000);
    expect(t.isTimedOut('n1', 90_000)).toBe(false);
    expect(t.isTimedOut('n1', 90_001)).toBe(true);
  });

  it('a node re-created under the same name (new uid) gets a fresh grace', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('n1', [ready('True', 10)]), 0);
    const r = t.observeNode(node('n1', [ready('True', 10)], { uid: 'other' }), 30_000);
    expect(r.refreshed).toBe(true);
    expect(t.health('n1')?.probeTimestamp).toBe(30_000);
  });

  it('an unparsable heartbeat is compared as text and reported', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('n1', [{ type: 'Ready', status: 'True', lastHeartbeatTime: 'garbage' }]), 0);
    const same = t.observeNode(
      node('n1', [{ type: 'Ready', status: 'True', lastHeartbeatTime: 'garbage' }]),
      1_000,
    );
    expect(same.refreshed).toBe(false);
    expect(kinds(same)).toContain(AnomalyKind.HeartbeatUnparsable);
    expect(
      t.observeNode(node('n1', [{ type: 'Ready', status: 'True', lastHeartbeatTime: 'garbage2' }]), 2_000)
        .refreshed,
    ).toBe(true);
  });

  it('junk conditions and duplicate types never throw', () => {
    const t = new NodeHealthTracker();
    const junk = {
      metadata: { name: 'j' },
      status: { conditions: [null, 3, { type: 'Ready' }, ready('True', 1), ready('False', 2)] },
    };
    const r = t.observeNode(junk as unknown as Node, 0);
    expect(kinds(r)).toContain(AnomalyKind.DuplicateCondition);
    expect(t.health('j')?.readyStatus).toBe('True');
    expect(() =>
      t.observeNode({ metadata: { name: 'k' }, status: { conditions: 'x' } } as unknown as Node, 0),
    ).not.toThrow();
  });
});

describe('grace and timeout', () => {
  it('startup grace (60s) without Ready, monitor grace (50s) with it, strictly after', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('new'), 0);
    t.observeNode(node('old', [ready('True', 1)]), 0);
    expect(t.nextDeadline()).toBe(50_000 + DEADLINE_EPSILON_MS);
    expect(t.popDue(50_000)).toEqual([]); // now == probe + grace: not yet
    expect(t.isTimedOut('old', 50_000)).toBe(false);
    expect(t.popDue(50_000.5)).toEqual(['old']);
    expect(t.popDue(50_001)).toEqual([]); // reported once
    expect(t.nextDeadline()).toBe(60_000 + DEADLINE_EPSILON_MS);
    expect(t.popDue(60_000)).toEqual([]);
    expect(t.popDue(60_001)).toEqual(['new']);
    expect(t.nextDeadline()).toBeUndefined();
  });

  it('per-node grace from the resolver; junk or throwing resolvers fall back to defaults', () => {
    const t = new NodeHealthTracker({
      grace: { monitorGraceMs: 40_000 },
      graceFor: (n) => {
        const pool = n.metadata.labels?.pool;
        if (pool === 'gpu') return { monitorGraceMs: 120_000 };
        if (pool === 'bad') return { monitorGraceMs: Number.NaN, startupGraceMs: -1 };
        if (pool === 'boom') throw new Error('boom');
        return undefined;
      },
    });
    t.observeNode(node('a', [ready('True', 1)], { labels: { pool: 'gpu' } }), 0);
    t.observeNode(node('b', [ready('True', 1)]), 0);
    const bad = t.observeNode(node('c', [ready('True', 1)], { labels: { pool: 'bad' } }), 0);
    const boom = t.observeNode(node('d', [ready('True', 1)], { labels: { pool: 'boom' } }), 0);
    t.observeNode(node('e', [], { labels: { pool: 'gpu' } }), 0);
    expect(kinds(bad)).toContain(AnomalyKind.InvalidGrace);
    expect(kinds(boom)).toContain(AnomalyKind.InvalidGrace);
    expect(t.health('a')?.graceMs).toBe(120_000);
    expect(t.health('b')?.graceMs).toBe(40_000);
    expect(t.health('c')?.graceMs).toBe(40_000);
    expect(t.health('d')?.graceMs).toBe(40_000);
    expect(t.health('e')?.graceMs).toBe(60_000); // startup default kept
    expect(t.popDue(40_001).sort()).toEqual(['b', 'c', 'd']);
  });

  it('a grace change moves the deadline; an already reported node is not reported twice', () => {
    let grace = 50_000;
    const t = new NodeHealthTracker({ graceFor: () => ({ monitorGraceMs: grace }) });
    t.observeNode(node('n1', [ready('True', 1)]), 0);
    grace = 100_000;
    t.observeNode(node('n1', [ready('True', 1)], { labels: { changed: 'yes' } }), 10_000);
    expect(t.popDue(60_000)).toEqual([]);
    expect(t.popDue(100_001)).toEqual(['n1']);
    t.observeNode(node('n1', [ready('True', 1)], { labels: { changed: 'again' } }), 110_000);
    expect(t.popDue(120_000)).toEqual([]);
    expect(t.health('n1')?.reported).toBe(true);
  });

  it('recovery: a renewal after the node was reported', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('n1', [ready('True', 1)]), 0);
    t.observeLease(lease('n1', micro(1)), 0);
    expect(t.popDue(60_000)).toEqual(['n1']);
    const r = t.observeLease(lease('n1', micro(70_000)), 70_000);
    expect(r).toMatchObject({ refreshed: true, recovered: true });
    expect(t.isTimedOut('n1', 70_000)).toBe(false);
    expect(t.nextDeadline()).toBe(120_000 + DEADLINE_EPSILON_MS);
  });

  it('resetAll gives every node a fresh grace, including reported ones', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('a', [ready('True', 1)]), 0);
    t.observeNode(node('b'), 0);
    t.observeLease(lease('ghost', micro(1)), 0);
    expect(t.popDue(55_000)).toEqual(['a']);
    t.resetAll(100_000);
    expect(t.health('a')).toMatchObject({
      probeTimestamp: 100_000,
      readyTransitionTimestamp: 100_000,
      reported: false,
    });
    expect(t.isTimedOut('a', 150_000)).toBe(false);
    expect(t.popDue(150_001)).toEqual(['a']);
    expect(t.popDue(160_001)).toEqual(['b']);
    expect(t.stats().scheduled).toBe(0);
  });

  it('extendBlind moves every deadline by the blind time, but never a probe past now', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('a', [ready('True', 1)]), 0); // silent since before the spell
    t.observeNode(node('b', [ready('True', 1)]), 0);
    t.observeLease(lease('b', micro(1)), 35_000); // seen during the spell [30 s, 40 s]
    expect(t.popDue(50_001)).toEqual(['a']);
    t.extendBlind(10_000, 40_000);
    // a: 10 s of the grace had not run out when the spell began; it keeps them.
    expect(t.health('a')).toMatchObject({
      probeTimestamp: 10_000,
      readyTransitionTimestamp: 0,
      reported: false,
    });
    expect(t.isTimedOut('a', 60_000)).toBe(false);
    // b: seen 5 s into the spell, unseen for the last 5 s: a full grace from the end of the spell.
    expect(t.health('b')?.probeTimestamp).toBe(40_000);
    expect(t.popDue(60_000)).toEqual([]);
    expect(t.popDue(60_001)).toEqual(['a']);
    expect(t.popDue(90_001)).toEqual(['b']);
    // Nothing for a zero, negative or non-finite spell.
    t.extendBlind(0, 100_000);
    t.extendBlind(-5, 100_000);
    t.extendBlind(Number.NaN, 100_000);
    expect(t.health('a')?.probeTimestamp).toBe(10_000);
  });

  it('holdAll: no node timed out before `until`, at most a fresh grace from now; later deadlines stay', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('a', [ready('True', 1)]), 0); // due at 50 s
    t.observeNode(node('b', [ready('True', 1)]), 58_000); // due at 108 s
    expect(t.popDue(50_001)).toEqual(['a']);
    t.holdAll(68_000, 60_000);
    expect(t.health('a')?.probeTimestamp).toBe(18_000);
    expect(t.health('b')?.probeTimestamp).toBe(58_000);
    expect(t.popDue(68_000)).toEqual([]);
    expect(t.popDue(68_001)).toEqual(['a']);
    // Never past now: a hold beyond a grace gives a fresh grace from now (renewed at 60 s, so the
    // cap on what holds forgive, 50 s past that, is not what stops it).
    t.observeLease(lease('a', micro(60_000)), 60_000);
    t.holdAll(500_000, 100_000);
    expect(t.health('a')?.probeTimestamp).toBe(100_000);
    // Nothing for a hold that is over or not finite.
    t.holdAll(90_000, 120_000);
    t.holdAll(Number.NaN, 120_000);
    expect(t.health('a')?.probeTimestamp).toBe(100_000);
  });

  it("forgiveOutage moves probes as a blind spell does, but storage outages and holds together never more than the node's grace past its last observation", () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('a', [ready('True', 1)]), 0); // grace 50 s: due at 50 s
    t.forgiveOutage(30_000, 40_000);
    expect(t.health('a')).toMatchObject({ probeTimestamp: 30_000, forgivenMs: 30_000, reported: false });
    // Never past now, as a blind spell.
    t.forgiveOutage(30_000, 35_000);
    expect(t.health('a')?.probeTimestamp).toBe(35_000);
    // 60 s would be forgiven in all: capped at the grace (50 s).
    t.forgiveOutage(25_000, 90_000);
    expect(t.health('a')).toMatchObject({ probeTimestamp: 50_000, forgivenMs: 50_000 });
    t.forgiveOutage(10_000, 95_000);
    t.holdAll(150_000, 95_000);
    expect(t.health('a')?.probeTimestamp).toBe(50_000);
    expect(t.popDue(100_000)).toEqual([]);
    expect(t.popDue(100_001)).toEqual(['a']);
    // A renewal is an observation: the cap starts again from it.
    t.observeLease(lease('a', micro(110_000)), 110_000);
    expect(t.health('a')).toMatchObject({ probeTimestamp: 110_000, forgivenMs: 0 });
    t.forgiveOutage(20_000, 140_000);
    expect(t.health('a')).toMatchObject({ probeTimestamp: 130_000, forgivenMs: 20_000 });
    // So is a fresh grace.
    t.resetAll(200_000);
    expect(t.health('a')).toMatchObject({ probeTimestamp: 200_000, forgivenMs: 0 });
    // Nothing for a zero, negative or non-finite outage, nor a hold that is over: a node already
    // reported stays reported (not reported again at the next popDue).
    expect(t.popDue(250_001)).toEqual(['a']);
    t.forgiveOutage(0, 250_001);
    t.extendBlind(0, 250_001);
    t.holdAll(250_001, 250_001);
    expect(t.popDue(250_002)).toEqual([]);
    t.forgiveOutage(0, 300_000);
    t.forgiveOutage(-5, 300_000);
    t.forgiveOutage(Number.NaN, 300_000);
    t.forgiveOutage(10_000, Number.NaN);
    expect(t.health('a')).toMatchObject({ probeTimestamp: 200_000, forgivenMs: 0 });
  });

  it('holds at every deadline (a fleet that died behind a silence) end at the cap: the node is timed out by its last observation + 2 x grace', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('a', [ready('True', 1)]), 0);
    let now = 0;
    for (let i = 0; i < 20; i++) {
      now = (t.nextDeadline() ?? Number.NaN) + 1_000; // each re-read answered 1 s after the deadline
      t.holdAll(now + 8_000, now);
    }
    expect(t.health('a')).toMatchObject({ probeTimestamp: 50_000, forgivenMs: 50_000 });
    expect(t.isTimedOut('a', 100_000)).toBe(false);
    expect(t.isTimedOut('a', 100_001)).toBe(true);
  });

  it("the cap is the node's own grace: 60 s for a node still in its startup grace", () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('starting'), 0); // no Ready yet: startup grace 60 s
    t.observeNode(node('ready', [ready('True', 1)]), 0);
    t.forgiveOutage(100_000, 200_000);
    expect(t.health('starting')).toMatchObject({ probeTimestamp: 60_000, forgivenMs: 60_000 });
    expect(t.health('ready')).toMatchObject({ probeTimestamp: 50_000, forgivenMs: 50_000 });
  });

  it('blind spells are not capped and do not use up the cap; a lease without a node is capped too', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('a', [ready('True', 1)]), 0);
    t.observeLease(lease('ghost', micro(1)), 0); // startup grace (60 s) until its Node shows
    t.forgiveOutage(70_000, 70_000);
    expect(t.health('a')).toMatchObject({ probeTimestamp: 50_000, forgivenMs: 50_000 });
    expect(t.health('ghost')).toMatchObject({ probeTimestamp: 60_000, forgivenMs: 60_000 });
    t.extendBlind(30_000, 100_000);
    expect(t.health('a')).toMatchObject({ probeTimestamp: 80_000, forgivenMs: 50_000 });
    t.forgiveOutage(10_000, 120_000);
    t.holdAll(200_000, 120_000);
    expect(t.health('a')?.probeTimestamp).toBe(80_000);
  });

  it('recheckAll reports every timed-out node and repairs the schedule', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('a', [ready('True', 1)]), 0);
    t.observeNode(node('b', [ready('True', 1)]), 30_000);
    expect(t.popDue(50_001)).toEqual(['a']);
    expect(t.recheckAll(50_001)).toEqual(['a']);
    expect(t.recheckAll(80_001)).toEqual(['a', 'b']);
    expect(t.nextDeadline()).toBeUndefined();
    expect(t.popDue(90_000)).toEqual([]);
  });

  it('forgetNode unschedules; forgetLease falls back to status heartbeats; a re-created lease renews', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('a', [ready('True', 1)]), 0);
    t.observeLease(lease('a', micro(1)), 0);
    expect(t.forgetLease('a')).toBe(true);
    expect(t.forgetLease('a')).toBe(false);
    expect(t.observeLease(lease('a', micro(2)), 10_000).refreshed).toBe(true);
    expect(t.forgetNode('a')).toBe(true);
    expect(t.forgetNode('a')).toBe(false);
    expect(t.nextDeadline()).toBeUndefined();
    expect(t.leasesWithoutNode()).toEqual(['a']);
    t.forgetLease('a');
    expect(t.health('a')).toBeUndefined();
    expect(t.stats()).toMatchObject({ nodes: 0, leases: 0, leasesWithoutNode: 0, scheduled: 0 });
  });

  it('non-finite now is refused, never corrupting the schedule', () => {
    const t = new NodeHealthTracker();
    expect(kinds(t.observeNode(node('a', [ready('True', 1)]), Number.NaN))).toEqual([AnomalyKind.InvalidNow]);
    expect(t.health('a')).toBeUndefined();
    expect(t.popDue(Number.NaN)).toEqual([]);
  });
});

describe('confirmDown (a second opinion before the grace ends)', () => {
  it('times the node out at once, for the silence it judged, and a renewal undoes it', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('a', [ready('True', 1)]), 0);
    t.observeNode(node('b', [ready('True', 1)]), 0);
    t.observeLease(lease('a', micro(1_000)), 1_000);
    expect(t.confirmDown('a', 1_000, 25_000)).toBe(true);
    expect(t.isTimedOut('a', 25_000)).toBe(true);
    expect(t.health('a')).toMatchObject({ deadline: 25_000 - DEADLINE_EPSILON_MS, confirmedAt: 24_999 });
    expect(t.nextDeadline()).toBe(25_000);
    expect(t.popDue(25_000)).toEqual(['a']);
    expect(t.isTimedOut('b', 25_000)).toBe(false);
    // A renewal: a new silence, judged afresh (its full grace).
    const heartbeats = t.health('a')!.heartbeats;
    t.observeLease(lease('a', micro(26_000)), 26_000);
    expect(t.health('a')!.heartbeats).toBe(heartbeats + 1);
    expect(t.isTimedOut('a', 26_001)).toBe(false);
    expect(t.health('a')).toMatchObject({ deadline: 76_000, confirmedAt: undefined });
  });

  it('refuses a silence that no longer stands, an untracked node, one already timed out', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('a', [ready('True', 1)]), 0);
    t.observeLease(lease('a', micro(1_000)), 1_000);
    expect(t.confirmDown('a', 0, 25_000)).toBe(false);
    expect(t.isTimedOut('a', 25_000)).toBe(false);
    expect(t.confirmDown('zz', 1_000, 25_000)).toBe(false);
    t.observeLease(lease('lease-only', micro(1_000)), 1_000);
    expect(t.confirmDown('lease-only', 1_000, 25_000)).toBe(false);
    expect(t.confirmDown('a', 1_000, 51_001)).toBe(false);
    expect(t.health('a')?.confirmedAt).toBeUndefined();
  });

  it('forgiveness (an outage, a blind spell) moves the silence: the confirmation goes with it', () => {
    const t = new NodeHealthTracker();
    t.observeNode(node('a', [ready('True', 1)]), 0);
    t.observeLease(lease('a', micro(1_000)), 1_000);
    t.confirmDown('a', 1_000, 25_000);
    const heartbeats = t.health('a')!.heartbeats;
    t.forgiveOutage(10_000, 30_000);
    // The same silence, moved: not a heartbeat.
    expect(t.health('a')!.heartbeats).toBe(heartbeats);
    expect(t.isTimedOut('a', 30_000)).toBe(false);
    expect(t.health('a')).toMatchObject({ probeTimestamp: 11_000, confirmedAt: undefined, deadline: 61_000 });
    t.confirmDown('a', 11_000, 35_000);
    t.extendBlind(5_000, 40_000);
    expect(t.isTimedOut('a', 40_000)).toBe(false);
  });
});

describe('markUnknown through the tracker', () => {
  it('only after the grace expired; the written status echoed back is not a heartbeat', () => {
    const t = new NodeHealthTracker();
    const n = node('n1', [ready('True', 1)]);
    t.observeNode(n, 0);
    expect(t.markUnknown(n, 50_000, WALL)).toBeUndefined();
    const d = t.markUnknown(n, 50_001, WALL);
    expect(d?.flippedFromTrue).toBe(true);
    t.noteMarkedUnknown(d!, 50_010);
    expect(t.health('n1')).toMatchObject({
      readyStatus: 'Unknown',
      readyTransitionTimestamp: 50_010,
      probeTimestamp: 0,
    });
    const echoed: Node = { ...n, status: { conditions: d!.conditions } };
    expect(t.observeNode(echoed, 50_100).refreshed).toBe(false);
    expect(t.markUnknown(echoed, 50_200, WALL)).toBeUndefined(); // already Unknown
  });

  it('never-posted node: placeholder conditions after the startup grace, echo not a heartbeat', () => {
    const t = new NodeHealthTracker();
    const n = node('n1');
    t.observeNode(n, 0);
    expect(t.markUnknown(n, 60_000, WALL)).toBeUndefined();
    const d = t.markUnknown(n, 60_001, WALL)!;
    expect(d.readyBefore).toBeUndefined();
    expect(d.flippedFromTrue).toBe(false);
    const echoed: Node = { ...n, status: { conditions: d.conditions } };
    expect(t.observeNode(echoed, 60_100).refreshed).toBe(false);
    expect(t.isTimedOut('n1', 60_100)).toBe(true);
  });
});

describe('event-driven detection in virtual time', () => {
  it('one timer at nextDeadline catches a dead kubelet among 5000 within 1 ms of its deadline', () => {
    // A tiny discrete-event loop (virtual time; the event queue is itself a DeadlineHeap, tested above
    // against a brute-force oracle). Kubelets renew every 10s; node-42 dies at 120s; everyone stops at
    // 300s. The "I/O edge" keeps exactly one timer, re-armed at nextDeadline() after every event.
    const t = new NodeHealthTracker();
    const N = 5000;
    const deadAt = 120_000;
    const stopAt = 300_000;
    const queue = new DeadlineHeap<{ key: string; due: number; heapAt: number }>();
    const ev = (key: string) => ({ key, due: 0, heapAt: -1 });
    const timer = ev('~timer');
    const kubelets = Array.from({ length: N }, (_, i) => ev(`node-${i}`));
    const detected = new Map<string, number>();
    let now = 0;
    let popCalls = 0;
    const arm = () => {
      const at = t.nextDeadline();
      if (at === undefined) queue.remove(timer);
      else queue.schedule(timer, at);
    };
    for (let i = 0; i < N; i++) {
      t.observeNode(node(`node-${i}`, [ready('True', 1)]), 0);
      queue.schedule(kubelets[i]!, (i * 7) % 10_000);
    }
    arm();
    for (let next = queue.pop(); next !== undefined; next = queue.pop()) {
      now = next.due;
      if (next === timer) {
        popCalls++;
        for (const name of t.popDue(now)) {
          expect(detected.has(name)).toBe(false);
          detected.set(name, now);
        }
      } else {
        const dead = next.key === 'node-42' && now >= deadAt;
        if (!dead && now < stopAt) {
          t.observeLease(lease(next.key, micro(now)), now);
          queue.schedule(next, now + 10_000);
        }
      }
      arm();
    }
    const offset = (42 * 7) % 10_000;
    const lastRenewal = Math.floor((deadAt - 1 - offset) / 10_000) * 10_000 + offset;
    expect(detected.get('node-42')).toBe(lastRenewal + 50_000 + DEADLINE_EPSILON_MS);
    expect(detected.size).toBe(N);
    for (const [name, at] of detected) {
      const i = Number(name.slice(5));
      const last =
        i === 42
          ? lastRenewal
          : Math.floor((stopAt - 1 - ((i * 7) % 10_000)) / 10_000) * 10_000 + ((i * 7) % 10_000);
      expect(at - (last + 50_000)).toBe(DEADLINE_EPSILON_MS);
    }
    // the timer fired only when something was due: no polling
    expect(popCalls).toBeLessThanOrEqual(N);
  });
});
