import { describe, expect, it } from 'vitest';
import type { Clock } from '../clock/clock.js';
import type { Lease, Node } from '../kube/types.js';
import { Subject } from '../rx/index.js';
import type { Reflector } from '../watch/reflector.js';
import { FleetView } from './view.js';

const clock = { scheduler: { now: () => 0 }, wall: () => 0 } as unknown as Clock;

function view(nodes: Node[], companionKey?: string): FleetView {
  const nodeReflector = { store: { values: () => nodes.values() } } as unknown as Reflector<Node>;
  const leaseReflector = {
    events$: new Subject(),
    store: { getByName: () => undefined },
  } as unknown as Reflector<Lease>;
  return new FleetView(clock, nodeReflector, leaseReflector, companionKey);
}

describe('FleetView', () => {
  const node: Node = {
    metadata: { name: 'n1' },
    spec: {
      taints: [
        { key: 'node.kubernetes.io/unreachable', effect: 'NoSchedule' },
        { key: 'example.com/lost', value: 'evicting', effect: 'NoSchedule' },
        { key: 'team/x', effect: 'NoSchedule' },
      ],
    },
    status: { conditions: [{ type: 'Ready', status: 'True' }] },
  };

  it("shows node.kubernetes.io taints shortened and the companion mode's taint in full, with its value", () => {
    expect(view([node], 'example.com/lost').rows()[0]?.taints).toEqual([
      'unreachable:NoSchedule',
      'example.com/lost=evicting:NoSchedule',
    ]);
    // Another key configured: that one is shown, not this.
    expect(view([node]).rows()[0]?.taints).toEqual(['unreachable:NoSchedule']);
  });
});
