import { describe, expect, it } from 'vitest';
import type { Node, NodeCondition } from '../kube/types.js';
import { findCondition, readyStatus, underMaintenance, unknownConditionsDecision } from './conditions.js';

const CREATED = '2025-12-31T00:00:00Z';
const WALL = Date.UTC(2026, 0, 1, 12, 0, 0, 700);
const NOW = '2026-01-01T12:00:00Z';

function cond(type: string, status: string, hb = '2026-01-01T11:00:00Z'): NodeCondition {
  return {
    type,
    status,
    reason: `K${type}`,
    message: `m ${type}`,
    lastHeartbeatTime: hb,
    lastTransitionTime: '2026-01-01T10:00:00Z',
  };
}
function node(conditions?: NodeCondition[]): Node {
  return {
    metadata: { name: 'n1', uid: 'u1', resourceVersion: '42', creationTimestamp: CREATED },
    status: conditions ? { conditions } : {},
  };
}

describe("underMaintenance (KEP-5683's node lifecycle conditions)", () => {
  const withCondition = (type: string, status: string) =>
    ({
      metadata: { name: 'n' },
      status: {
        conditions: [
          { type: 'Ready', status: 'Unknown' },
          { type, status },
        ],
      },
    }) as Node;
  it('MaintenanceInProgress, DrainInProgress or Drained True; not MaintenancePlanned, not False', () => {
    for (const t of ['MaintenanceInProgress', 'DrainInProgress', 'Drained']) {
      expect(underMaintenance(withCondition(t, 'True')), t).toBe(true);
      expect(underMaintenance(withCondition(t, 'False')), t).toBe(false);
    }
    expect(underMaintenance(withCondition('MaintenancePlanned', 'True'))).toBe(false);
    expect(underMaintenance({ metadata: { name: 'n' } } as Node)).toBe(false);
  });
});

describe('unknownConditionsDecision (upstream timeout write)', () => {
  it('True/False -> Unknown with NodeStatusUnknown, heartbeat kept; NetworkUnavailable untouched', () => {
    const n = node([
      cond('Ready', 'True'),
      cond('MemoryPressure', 'False'),
      cond('DiskPressure', 'True'),
      cond('PIDPressure', 'False'),
      cond('NetworkUnavailable', 'False'),
      cond('CustomThing', 'True'),
    ]);
    const d = unknownConditionsDecision(n, WALL)!;
    expect(d).toMatchObject({
      node: 'n1',
      uid: 'u1',
      resourceVersion: '42',
      readyBefore: 'True',
      flippedFromTrue: true,
    });
    for (const type of ['Ready', 'MemoryPressure', 'DiskPressure', 'PIDPressure']) {
      expect(findCondition(d.conditions, type)).toEqual({
        type,
        status: 'Unknown',
        reason: 'NodeStatusUnknown',
        message: 'Kubelet stopped posting node status.',
        lastHeartbeatTime: '2026-01-01T11:00:00Z',
        lastTransitionTime: NOW,
      });
    }
    expect(findCondition(d.conditions, 'NetworkUnavailable')).toEqual(cond('NetworkUnavailable', 'False'));
    expect(findCondition(d.conditions, 'CustomThing')).toEqual(cond('CustomThing', 'True'));
    // minimal strategic-merge patch: the four changed ones, no heartbeat (kept server-side)
    expect(d.patch.status.conditions.map((c) => c.type)).toEqual([
      'Ready',
      'MemoryPressure',
      'DiskPressure',
      'PIDPressure',
    ]);
    expect(d.patch.status.conditions[0]).toEqual({
      type: 'Ready',
      status: 'Unknown',
      reason: 'NodeStatusUnknown',
      message: 'Kubelet stopped posting node status.',
      lastTransitionTime: NOW,
    });
    expect(d.events).toEqual([
      {
        involvedObject: { apiVersion: 'v1', kind: 'Node', name: 'n1', namespace: '', uid: 'u1' },
        type: 'Normal',
        reason: 'NodeNotReady',
        message: 'Node n1 status is now: NodeNotReady',
      },
    ]);
    // input not mutated
    expect(readyStatus(n)).toBe('True');
  });

  it('missing conditions are appended with NodeStatusNeverUpdated, heartbeat = creationTimestamp', () => {
    const d = unknownConditionsDecision(node(), WALL)!;
    expect(d.readyBefore).toBeUndefined();
    expect(d.flippedFromTrue).toBe(false);
    expect(d.events).toEqual([]);
    expect(d.conditions.map((c) => c.type)).toEqual([
      'Ready',
      'MemoryPressure',
      'DiskPressure',
      'PIDPressure',
    ]);
    for (const c of d.conditions) {
      expect(c).toEqual({
        type: c.type,
        status: 'Unknown',
        reason: 'NodeStatusNeverUpdated',
        message: 'Kubelet never posted node status.',
        lastHeartbeatTime: CREATED,
        lastTransitionTime: NOW,
      });
    }
    expect(d.patch.status.conditions).toEqual(d.conditions);
  });

  it('already-Unknown conditions are untouched; partial sets mix both rules', () => {
    const unknownReady: NodeCondition = { ...cond('Ready', 'Unknown'), reason: 'Whatever' };
    const d = unknownConditionsDecision(
      node([cond('Ready', 'False'), cond('MemoryPressure', 'Unknown')]),
      WALL,
    )!;
    expect(d.readyBefore).toBe('False');
    expect(d.flippedFromTrue).toBe(false);
    expect(d.events).toEqual([]);
    expect(findCondition(d.conditions, 'MemoryPressure')).toEqual(cond('MemoryPressure', 'Unknown'));
    expect(findCondition(d.conditions, 'DiskPressure')?.reason).toBe('NodeStatusNeverUpdated');
    expect(d.patch.status.conditions.map((c) => c.type)).toEqual(['Ready', 'DiskPressure', 'PIDPressure']);
    // Ready already Unknown: upstream writes nothing even if others would change ...
    const stale = node([unknownReady, cond('MemoryPressure', 'True')]);
    expect(unknownConditionsDecision(stale, WALL)).toBeUndefined();
    // ... unless asked to
    const all = unknownConditionsDecision(stale, WALL, { onlyWhenReadyChanges: false })!;
    expect(all.patch.status.conditions.map((c) => c.type)).toEqual([
      'MemoryPressure',
      'DiskPressure',
      'PIDPressure',
    ]);
    expect(findCondition(all.conditions, 'Ready')).toEqual(unknownReady);
    // everything already Unknown: nothing at all
    const done = node(
      ['Ready', 'MemoryPressure', 'DiskPressure', 'PIDPressure'].map((t) => cond(t, 'Unknown')),
    );
    expect(unknownConditionsDecision(done, WALL, { onlyWhenReadyChanges: false })).toBeUndefined();
  });

  it('bad data: no name, junk conditions, no creationTimestamp', () => {
    expect(unknownConditionsDecision({ metadata: { name: '' } }, WALL)).toBeUndefined();
    const junk = {
      metadata: { name: 'j' },
      status: { conditions: [null, 7, cond('Ready', 'True')] },
    } as unknown as Node;
    const d = unknownConditionsDecision(junk, WALL)!;
    expect(d.conditions).toHaveLength(4);
    expect(findCondition(d.conditions, 'DiskPressure')?.lastHeartbeatTime).toBeNull();
    expect(d.uid).toBeUndefined();
  });
});
