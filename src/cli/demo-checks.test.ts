import { describe, expect, it } from 'vitest';
import {
  DemoChecks,
  type DemoSnapshot,
  formatResults,
  handoverExpectation,
  lostExpectation,
  NOT_READY_NOSCHEDULE,
  type NodeState,
  notReadyExpectation,
  recoveredExpectation,
  UNREACHABLE_NOEXECUTE,
  UNREACHABLE_NOSCHEDULE,
} from './demo-checks.js';

const ready = (name: string): NodeState => ({ name, ready: 'True', taints: [] });
const lost = (name: string, ...extra: string[]): NodeState => ({
  name,
  ready: 'Unknown',
  taints: [UNREACHABLE_NOSCHEDULE, ...extra],
});
const snap = (nodes: NodeState[], leader?: string): DemoSnapshot => ({ nodes, leader });

describe('DemoChecks', () => {
  it('passes an expectation the first time it holds within its time, and says after how long', () => {
    const c = new DemoChecks();
    c.silence(['a0', 'a1']);
    c.expect(lostExpectation(['a0', 'a1'], 5_000, 20_000));
    c.observe(6_000, snap([ready('a0'), ready('a1'), ready('b0')]));
    // One of the two is not enough.
    c.observe(19_000, snap([lost('a0'), ready('a1'), ready('b0')]));
    expect(c.results(19_000)[0]).toMatchObject({ status: 'pending', afterMs: 14_000 });
    c.observe(20_500, snap([lost('a0'), lost('a1'), ready('b0')]));
    // Later snapshots do not change when it passed.
    c.observe(40_000, snap([ready('a0'), ready('a1'), ready('b0')]));
    const [r, invariant] = c.results(60_000);
    expect(r).toMatchObject({ status: 'passed', afterMs: 15_500, withinMs: 20_000 });
    expect(invariant).toMatchObject({ status: 'passed', label: 'no heartbeating node marked lost' });
    expect(c.failed(60_000)).toBe(false);
  });

  it('fails an expectation whose time ran out without it holding, even if it holds later', () => {
    const c = new DemoChecks();
    c.silence(['a0']);
    c.expect(lostExpectation(['a0'], 0, 10_000));
    // Unknown without the taint does not count.
    c.observe(5_000, snap([{ name: 'a0', ready: 'Unknown', taints: [] }]));
    expect(c.failed(10_000)).toBe(false);
    expect(c.results(10_001)[0]).toMatchObject({ status: 'failed', afterMs: 10_001 });
    expect(c.failed(10_001)).toBe(true);
    // Holding only now is too late: judged at the time it was first seen.
    c.observe(12_000, snap([lost('a0')]));
    expect(c.results(12_000)[0]).toMatchObject({ status: 'failed', afterMs: 12_000, late: true });
    expect(c.failed(12_000)).toBe(true);
    expect(formatResults(c.results(12_000))[0]).toBe(
      `  FAILED   a0 marked lost (Ready=Unknown, ${UNREACHABLE_NOSCHEDULE}): seen only after 12.0s (allowed 10.0s)`,
    );
  });

  it('ignores snapshots from before the step that set the expectation', () => {
    const c = new DemoChecks();
    c.expect(recoveredExpectation(30_000, 5_000));
    c.observe(29_000, snap([ready('a0')]));
    expect(c.results(29_000)[0]?.status).toBe('pending');
    c.observe(31_000, snap([ready('a0')]));
    expect(c.results(31_000)[0]).toMatchObject({ status: 'passed', afterMs: 1_000 });
  });

  it('counts a node marked lost that the demo never silenced as a failure, naming it', () => {
    const c = new DemoChecks();
    c.silence(['a0']);
    c.observe(1_000, snap([lost('a0'), ready('b1')]));
    expect(c.failed(1_000)).toBe(false);
    // An unreachable taint alone is enough to be wrong.
    c.observe(2_000, snap([lost('a0'), { name: 'b1', ready: 'True', taints: [UNREACHABLE_NOEXECUTE] }]));
    c.observe(3_000, snap([lost('a0'), lost('c0')]));
    expect(c.falsePositives).toEqual(['b1', 'c0']);
    const invariant = c.results(3_000).at(-1);
    expect(invariant).toMatchObject({ status: 'failed', detail: 'b1, c0' });
    expect(c.failed(3_000)).toBe(true);
    // A Ready=False node (it still renews) is not lost.
    const d = new DemoChecks();
    d.observe(1_000, snap([{ name: 'b1', ready: 'False', taints: [NOT_READY_NOSCHEDULE] }]));
    expect(d.failed(1_000)).toBe(false);
  });

  it('records which nodes got the NoExecute taint, without judging it', () => {
    const c = new DemoChecks();
    c.silence(['a0', 'a1']);
    c.observe(1_000, snap([lost('a1', UNREACHABLE_NOEXECUTE), lost('a0')]));
    expect(c.noExecuteTainted).toEqual(['a1']);
    expect(c.failed(1_000)).toBe(false);
  });
});

describe('expectations', () => {
  it('not ready: Ready=False with the not-ready NoSchedule taint', () => {
    const e = notReadyExpectation('b1', 0, 1);
    expect(e.holds(snap([{ name: 'b1', ready: 'False', taints: [NOT_READY_NOSCHEDULE] }]))).toBe(true);
    expect(e.holds(snap([{ name: 'b1', ready: 'False', taints: [] }]))).toBe(false);
    expect(e.holds(snap([{ name: 'b1', ready: 'Unknown', taints: [NOT_READY_NOSCHEDULE] }]))).toBe(false);
    expect(e.holds(snap([]))).toBe(false);
  });

  it('handover: a holder, and not the one shut down', () => {
    const e = handoverExpectation('replica-a', 0, 1);
    expect(e.holds(snap([], 'replica-b'))).toBe(true);
    expect(e.holds(snap([], 'replica-a'))).toBe(false);
    expect(e.holds(snap([], ''))).toBe(false);
    expect(e.holds(snap([], undefined))).toBe(false);
  });

  it("recovered: every node Ready=True and none of the controller's taints; other taints allowed", () => {
    const e = recoveredExpectation(0, 1);
    expect(
      e.holds(snap([ready('a0'), { name: 'a1', ready: 'True', taints: ['dedicated=gpu:NoSchedule'] }])),
    ).toBe(true);
    expect(
      e.holds(snap([ready('a0'), { name: 'a1', ready: 'True', taints: [UNREACHABLE_NOSCHEDULE] }])),
    ).toBe(false);
    expect(e.holds(snap([ready('a0'), { name: 'a1', ready: 'True', taints: [NOT_READY_NOSCHEDULE] }]))).toBe(
      false,
    );
    expect(e.holds(snap([ready('a0'), { name: 'a1', ready: 'Unknown', taints: [] }]))).toBe(false);
    expect(e.holds(snap([]))).toBe(false);
  });
});

describe('formatResults', () => {
  it('one line per check: ok with its time, FAILED with what was waited, waiting, and the invariant', () => {
    const c = new DemoChecks();
    c.silence(['a0']);
    c.expect(lostExpectation(['a0'], 0, 20_000));
    c.expect(handoverExpectation('r1', 0, 5_000));
    c.expect(recoveredExpectation(10_000, 15_000));
    c.observe(16_200, snap([lost('a0'), lost('b0')], 'r1'));
    const lines = formatResults(c.results(16_200));
    expect(lines).toEqual([
      `  ok       a0 marked lost (Ready=Unknown, ${UNREACHABLE_NOSCHEDULE}), after 16.2s (allowed 20.0s)`,
      '  FAILED   leadership handed over from r1: not seen in 16.2s (allowed 5.0s)',
      '  waiting  every node Ready=True and untainted again: 6.2s of 15.0s so far',
      '  FAILED   no heartbeating node marked lost: b0',
    ]);
  });
});
