import { asyncScheduler } from 'rxjs';
import { describe, expect, it } from 'vitest';
import type { Clock } from '../clock/clock.js';
import type { KubeClient, KubeRequest } from '../kube/client.js';
import type { Lease, Node } from '../kube/types.js';
import { Subject } from '../rx/index.js';
import type { Reflector } from '../watch/index.js';
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

/** A FleetView over no nodes, reading the identity leases and the lock from `lock`. */
async function viewWith(lock: Lease['spec']): Promise<string> {
  const empty = { events$: new Subject(), store: { values: () => [], getByName: () => undefined } };
  const view = new FleetView(
    { scheduler: asyncScheduler, wall: () => Date.now() },
    empty as unknown as Reflector<Node>,
    empty as unknown as Reflector<Lease>,
  );
  const client = {
    request: async (req: KubeRequest) =>
      req.path.endsWith('/leases')
        ? {
            items: [
              {
                metadata: { name: 'node-lifecycle-controller-x', namespace: 'nlc' },
                spec: { holderIdentity: 'a_1' },
              },
            ],
          }
        : { metadata: { name: 'node-lifecycle-controller' }, spec: lock },
  } as unknown as KubeClient;
  await view.refreshReplicas(client, 'node-lifecycle-controller');
  return view.render({ title: 't' }).split('\n')[1] ?? '';
}

describe('FleetView: the leader-election lock', () => {
  it('shows the lock holder, and with coordinated leader election the strategy and the preferred holder', async () => {
    expect(await viewWith({ holderIdentity: 'a_1', renewTime: '2026-01-01T00:00:00.000000Z' })).toMatch(
      /leader: a_1 \(lock nlc, renewal seen 0\.0s ago\)$/,
    );
    expect(
      await viewWith({ holderIdentity: 'a_1', strategy: 'OldestEmulationVersion', preferredHolder: 'b_2' }),
    ).toMatch(
      /leader: a_1 \(lock nlc, renewal seen 0\.0s ago, strategy OldestEmulationVersion, preferred holder b_2\)$/,
    );
    // A third-party strategy: the coordinator leaves the holder to another controller.
    expect(await viewWith({ strategy: 'example.com/custom' })).toMatch(
      /leader: none \(lock nlc, strategy example\.com\/custom\)$/,
    );
  });
});
