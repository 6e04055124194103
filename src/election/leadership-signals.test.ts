import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { memoryLogger } from '../log/logger.js';
import { type ElectionEvent, type LeaderCallbacks, LeadershipSignals } from './leadership-signals.js';
import { createLeaderElectionMetrics } from './metrics.js';

function signals(callbacks?: LeaderCallbacks) {
  const registry = new Registry();
  const log = memoryLogger(10);
  const s = new LeadershipSignals({
    name: 'lock',
    identity: 'me',
    log,
    metrics: createLeaderElectionMetrics(registry),
    callbacks,
  });
  const events: ElectionEvent[] = [];
  const leading: boolean[] = [];
  const lost: unknown[] = [];
  s.events$.subscribe((e) => events.push(e));
  s.leading$.subscribe((v) => leading.push(v));
  s.lost$.subscribe((l) => lost.push(l));
  const metric = async (name: string) => (await registry.getSingleMetric(name)?.get())?.values ?? [];
  return { s, log, events, leading, lost, metric };
}

describe('LeadershipSignals: what an elector says about leadership', () => {
  it('a new holder is said once; the first one seen is not a transition, later ones are', async () => {
    const t = signals();
    expect(await t.metric('nlc_leader_election_transitions_total')).toMatchObject([{ value: 0 }]);
    t.s.observedLeader('a', 1);
    t.s.observedLeader('a', 2);
    t.s.observedLeader('', 3);
    t.s.observedLeader('b', 4);
    expect(t.events).toEqual([
      { type: 'new-leader', identity: 'a', at: 1 },
      { type: 'new-leader', identity: '', at: 3 },
      { type: 'new-leader', identity: 'b', at: 4 },
    ]);
    expect(t.s.currentLeader()).toBe('b');
    expect(await t.metric('nlc_leader_election_transitions_total')).toMatchObject([{ value: 1 }]);
    expect(t.log.lines.filter((l) => l.msg === 'New leader observed').map((l) => l.leader)).toEqual([
      'a',
      '<none>',
      'b',
    ]);
  });

  it('leading edges: master status, leading$, events; lost$ only for a loss, after the elector ended its term', async () => {
    const order: string[] = [];
    const t = signals({ onStoppedLeading: (reason) => order.push(`callback ${reason}`) });
    t.s.startedLeading(10, 3);
    expect(await t.metric('leader_election_master_status')).toMatchObject([{ value: 1 }]);
    t.s.stoppedLeading('released', 'released', 20, () => order.push('ended'));
    expect(t.lost).toEqual([]);
    t.s.startedLeading(30, 4);
    t.s.lost$.subscribe(() => order.push('lost$'));
    t.s.stoppedLeading('lost', 'renew deadline passed', 40, () => order.push('ended'));
    expect(order).toEqual(['callback released', 'ended', 'lost$', 'callback lost']);
    expect(t.lost).toEqual([{ reason: 'renew deadline passed', at: 40 }]);
    expect(t.leading).toEqual([false, true, false, true, false]);
    expect(t.events.map((e) => e.type)).toEqual([
      'started-leading',
      'stopped-leading',
      'started-leading',
      'stopped-leading',
    ]);
    expect(await t.metric('leader_election_master_status')).toMatchObject([{ value: 0 }]);
    expect(t.log.lines.filter((l) => l.level === 'error').map((l) => l.msg)).toEqual([
      'Leader election lost',
    ]);
  });

  it('a callback that throws is logged; the streams and later callbacks go on', () => {
    const said: string[] = [];
    const t = signals({
      onNewLeader: () => {
        throw new Error('boom');
      },
      onStartedLeading: () => said.push('started'),
    });
    t.s.observedLeader('me', 1);
    t.s.startedLeading(2, 0);
    expect(t.events.map((e) => e.type)).toEqual(['new-leader', 'started-leading']);
    expect(said).toEqual(['started']);
    expect(t.log.lines.filter((l) => l.msg === 'Leader election callback threw')).toHaveLength(1);
  });

  it('the lock info metric follows the lock: one series, the old one removed when it changes', async () => {
    const t = signals();
    t.s.lockSeen({ strategy: 'OldestEmulationVersion', preferredHolder: '' });
    t.s.lockSeen({ strategy: 'OldestEmulationVersion', preferredHolder: 'b' });
    expect(await t.metric('nlc_leader_election_lock_info')).toEqual([
      { labels: { name: 'lock', strategy: 'OldestEmulationVersion', preferred_holder: 'b' }, value: 1 },
    ]);
    t.s.lockSeen(undefined);
    expect(await t.metric('nlc_leader_election_lock_info')).toEqual([]);
  });
});
