import { describe, expect, it } from 'vitest';
import { kcmLeader, kcmRegistrations, type Registration, registeredEvidence } from './kcm-registered.js';

const T0 = Date.parse('2026-12-04T12:00:00Z');
const HOUR = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString();
const seconds = (ms: number) => iso(ms).replace(/\.\d{3}Z$/, 'Z');

/** A RegisteredNode Event as kube-controller-manager v1.37's recorder writes it (core/v1, legacy recorder). */
function event(node: string, at: number, o: { manager?: string; reason?: string; component?: string } = {}) {
  return {
    metadata: {
      name: `${node}.18a`,
      namespace: 'default',
      creationTimestamp: seconds(at + 20),
      managedFields: [
        { manager: o.manager ?? 'kube-controller-manager', operation: 'Update', time: seconds(at) },
      ],
    },
    involvedObject: { kind: 'Node', name: node, apiVersion: 'v1' },
    reason: o.reason ?? 'RegisteredNode',
    source: { component: o.component ?? 'node-controller' },
    firstTimestamp: seconds(at),
    lastTimestamp: seconds(at),
    reportingComponent: 'node-controller',
    reportingInstance: '',
  };
}

describe("kube-controller-manager's RegisteredNode Events and its lock", () => {
  it('only RegisteredNode of source node-controller written by kube-controller-manager counts: not ours, not another reason or source, not junk', () => {
    const items = [
      event('a', T0),
      event('b', T0, { manager: 'node-lifecycle-controller' }),
      event('c', T0, { reason: 'RemovingNode' }),
      event('d', T0, { component: 'cloud-node-controller' }),
      { ...event('e', T0), metadata: { name: 'e' } },
      null,
      'x',
      { reason: 'RegisteredNode' },
    ];
    expect(kcmRegistrations(items)).toEqual([{ node: 'a', recordedAt: T0, createdAt: T0 }]);
  });

  it('the time it was recorded is the latest of its stamps (eventTime of the events.k8s.io recorder too)', () => {
    const e = { ...event('a', T0), eventTime: iso(T0 + 1500), lastTimestamp: seconds(T0 + 60_000) };
    expect(kcmRegistrations([e])[0]?.recordedAt).toBe(T0 + 60_000);
    const only = { ...event('a', T0), firstTimestamp: null, lastTimestamp: null, eventTime: iso(T0 + 1500) };
    expect(kcmRegistrations([only])[0]?.recordedAt).toBe(T0 + 1500);
  });

  it('the lock: its holder, acquireTime and renewTime; nobody without a holder', () => {
    const spec = { holderIdentity: 'kcm-a_1', acquireTime: '2026-12-04T11:00:00.250000Z', renewTime: 'r1' };
    expect(kcmLeader({ spec })).toEqual({
      holder: 'kcm-a_1',
      acquiredAt: Date.parse('2026-12-04T11:00:00.250Z'),
      renewTime: 'r1',
    });
    expect(kcmLeader({ spec: { ...spec, acquireTime: undefined } })?.acquiredAt).toBeUndefined();
    for (const nobody of [{ spec: { holderIdentity: '' } }, { spec: {} }, undefined, 'x']) {
      expect(kcmLeader(nobody)).toBeUndefined();
    }
  });

  it('with a leader: what it recorded since it took its lock, compared to the second (the Events have no finer grain); before, no evidence', () => {
    const acquiredAt = T0 + 250; // 12:00:00.250, its RegisteredNode at 12:00:00.900 shows as 12:00:00
    const leader = { holder: 'kcm-b_2', acquiredAt, renewTime: 'r' };
    const same: Registration = { node: 'a', recordedAt: T0, createdAt: T0 + 900 };
    const before: Registration = { node: 'b', recordedAt: T0 - 1000, createdAt: T0 - 1000 };
    expect(registeredEvidence([before, same], leader, T0 + 60_000, HOUR)).toEqual({
      node: 'a',
      ageMs: 59_100,
      leader,
    });
    expect(registeredEvidence([before], leader, T0 + 60_000, HOUR)).toBeUndefined();
    // A leader's evidence does not depend on the hour: it holds while that leader leads.
    const old: Registration = { node: 'c', recordedAt: T0, createdAt: T0 };
    expect(registeredEvidence([old], leader, T0 + 3 * HOUR, HOUR)?.node).toBe('c');
  });

  it('without a lock (or one without acquireTime): the newest created within the hour, on the API server clock', () => {
    const regs: Registration[] = [
      { node: 'old', recordedAt: T0, createdAt: T0 - HOUR - 1 },
      { node: 'edge', recordedAt: T0, createdAt: T0 - HOUR },
      { node: 'new', recordedAt: T0, createdAt: T0 - 60_000 },
      { node: 'undated', recordedAt: T0, createdAt: undefined },
    ];
    expect(registeredEvidence(regs, undefined, T0, HOUR)).toEqual({
      node: 'new',
      ageMs: 60_000,
      leader: undefined,
    });
    expect(registeredEvidence(regs.slice(0, 2), undefined, T0, HOUR)?.node).toBe('edge');
    const noAcquire = { holder: 'kcm', acquiredAt: undefined, renewTime: '' };
    expect(registeredEvidence(regs.slice(0, 1), noAcquire, T0, HOUR)).toBeUndefined();
  });
});
