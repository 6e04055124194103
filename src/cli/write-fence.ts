import type { Fence } from '../apply/writer.js';

/** What the writer's fence asks of leader election (LeaderElector). */
export interface ElectionFence {
  canWrite(): boolean;
  isLeader(): boolean;
}

/**
 * The writer's fence (checked right before each write leaves the process): the first reason not to
 * write, in order: shutting down, leadership (without leader election this process acts alone),
 * another node-lifecycle controller seen (src/controller/concurrent-controller.ts). The last also
 * stops the reconciler from acting (run.ts), but a reconcile already past that check writes its
 * next step (taints, pods) through here.
 */
export function writeFence(o: {
  stopping: () => boolean;
  elector: ElectionFence | undefined;
  refusal: (() => string | undefined) | undefined;
}): Fence {
  return () => {
    if (o.stopping()) return 'shutting down';
    if (o.elector && !o.elector.canWrite()) {
      return o.elector.isLeader() ? 'leader lease not fresh enough' : 'not the leader';
    }
    return o.refusal?.();
  };
}
