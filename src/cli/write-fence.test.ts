import { describe, expect, it } from 'vitest';
import { writeFence } from './write-fence.js';

describe('the writer fence', () => {
  const elector = (canWrite: boolean, isLeader = canWrite) => ({
    canWrite: () => canWrite,
    isLeader: () => isLeader,
  });

  it('leading and nothing else: writes', () => {
    expect(
      writeFence({ stopping: () => false, elector: elector(true), refusal: () => undefined })(),
    ).toBeUndefined();
    expect(writeFence({ stopping: () => false, elector: undefined, refusal: undefined })()).toBeUndefined();
  });

  it('shutting down, then leadership, then another node-lifecycle controller, in that order', () => {
    const other = () => 'another node-lifecycle controller is running: kube-controller-manager set node n1';
    expect(writeFence({ stopping: () => true, elector: elector(true), refusal: other })()).toBe(
      'shutting down',
    );
    expect(writeFence({ stopping: () => false, elector: elector(false), refusal: other })()).toBe(
      'not the leader',
    );
    expect(writeFence({ stopping: () => false, elector: elector(false, true), refusal: other })()).toBe(
      'leader lease not fresh enough',
    );
    // Leading, with the lease fresh: another controller still closes it (a reconcile already past
    // the controller's own check must not write its next step).
    expect(writeFence({ stopping: () => false, elector: elector(true), refusal: other })()).toBe(other());
    expect(writeFence({ stopping: () => false, elector: undefined, refusal: other })()).toBe(other());
  });
});
