import type { Gauge } from 'prom-client';
import { readyStatus } from '../health/index.js';
import type { Node } from '../kube/types.js';

type NodeState = 'ready' | 'not_ready' | 'unknown' | 'no_condition';

/** Node ready state as exported in nlc_nodes. */
function stateOf(node: Node): NodeState {
  switch (readyStatus(node)) {
    case 'True':
      return 'ready';
    case 'False':
      return 'not_ready';
    case undefined:
      return 'no_condition';
    default:
      return 'unknown';
  }
}

/** nlc_nodes{state}: nodes by Ready condition as last seen. */
export class NodeStateGauge {
  private readonly states = new Map<string, NodeState>();

  constructor(private readonly gauge: Gauge<'state'>) {}

  /** The node as the watch shows it now (undefined: deleted). */
  set(name: string, node: Node | undefined): void {
    const state = node ? stateOf(node) : undefined;
    const prev = this.states.get(name);
    if (prev === state) return;
    if (prev) this.gauge.dec({ state: prev });
    if (state) {
      this.gauge.inc({ state });
      this.states.set(name, state);
    } else this.states.delete(name);
  }
}
