import { Counter, Gauge, type Registry } from 'prom-client';

/**
 * Metrics of the disruption core. Upstream names keep upstream's name, label and meaning
 * (kubernetes pkg/controller/nodelifecycle/metrics.go); ours start with `nlc_`.
 *
 * - `node_collector_zone_health{zone}`: percent of counted nodes in the zone whose Ready is True
 *   (100 when the zone has no counted nodes any more).
 * - `node_collector_zone_size{zone}`: counted nodes (nodes labelled
 *   node.kubernetes.io/exclude-disruption are not counted, like upstream).
 * - `node_collector_unhealthy_nodes_in_zone{zone}`: counted nodes whose Ready is not True.
 * - `node_collector_evictions_total{zone}`: upstream increments it each time the controller
 *   successfully ADDS a NoExecute not-ready/unreachable taint (taint-based eviction mode), not
 *   per deleted pod. We do the same: it increments when the caller reports the taint written
 *   (`DisruptionController.settle(name, 'applied')`). Initialised to 0 for each new zone.
 *   The `zone` label is upstream's zone key, `region + ":\0:" + zone` (NUL included), or "".
 */
export interface DisruptionMetrics {
  zoneHealth: Gauge<'zone'>;
  zoneSize: Gauge<'zone'>;
  unhealthyNodes: Gauge<'zone'>;
  evictionsTotal: Counter<'zone'>;
  /** nlc_zone_state{zone,state}: 1 for the zone's current state, 0 for the others. */
  zoneState: Gauge<'zone' | 'state'>;
  /** nlc_noexecute_held_back{reason}: NoExecute additions waiting, by reason. */
  heldBack: Gauge<'reason'>;
  /** nlc_noexecute_cap_holds_total: nodes newly held back by the blast-radius cap. */
  capHolds: Counter<string>;
  /** nlc_noexecute_cap_used: additions counted in the current cap window. */
  capUsed: Gauge<string>;
  /** nlc_master_disruption_active: 1 while every zone is fully disrupted. */
  masterDisruption: Gauge<string>;
  /** nlc_master_disruption_transitions_total{direction="enter"|"exit"}. */
  masterDisruptionTransitions: Counter<'direction'>;
  /** nlc_pool_nodes{pool}: tracked nodes per node pool ("default" = matched no pool). */
  poolNodes: Gauge<'pool'>;
  /** nlc_pool_config_reloads_total{result="applied"|"unchanged"|"invalid"}. */
  poolConfigReloads: Counter<'result'>;
}

export const HELD_BACK_REASONS = ['rate-limit', 'cap', 'master-disruption'] as const;
export type HeldBackReason = (typeof HELD_BACK_REASONS)[number];

export function createDisruptionMetrics(registry: Registry): DisruptionMetrics {
  const registers = [registry];
  const m: DisruptionMetrics = {
    zoneHealth: new Gauge({
      name: 'node_collector_zone_health',
      help: 'Gauge measuring percentage of healthy nodes per zone.',
      labelNames: ['zone'],
      registers,
    }),
    zoneSize: new Gauge({
      name: 'node_collector_zone_size',
      help: 'Gauge measuring number of registered Nodes per zones.',
      labelNames: ['zone'],
      registers,
    }),
    unhealthyNodes: new Gauge({
      name: 'node_collector_unhealthy_nodes_in_zone',
      help: 'Gauge measuring number of not Ready Nodes per zones.',
      labelNames: ['zone'],
      registers,
    }),
    evictionsTotal: new Counter({
      name: 'node_collector_evictions_total',
      help: 'Number of Node evictions that happened since current instance of NodeController started.',
      labelNames: ['zone'],
      registers,
    }),
    zoneState: new Gauge({
      name: 'nlc_zone_state',
      help: 'Disruption state of each zone: 1 for the current state (Initial, Normal, PartialDisruption, FullDisruption).',
      labelNames: ['zone', 'state'],
      registers,
    }),
    heldBack: new Gauge({
      name: 'nlc_noexecute_held_back',
      help: 'New NoExecute taints waiting to be added, by what holds them (rate-limit, cap, master-disruption).',
      labelNames: ['reason'],
      registers,
    }),
    capHolds: new Counter({
      name: 'nlc_noexecute_cap_holds_total',
      help: 'Nodes whose new NoExecute taint was held back by the blast-radius cap (counted once per request).',
      registers,
    }),
    capUsed: new Gauge({
      name: 'nlc_noexecute_cap_used',
      help: 'NoExecute taints added within the current blast-radius cap window.',
      registers,
    }),
    masterDisruption: new Gauge({
      name: 'nlc_master_disruption_active',
      help: '1 while every zone is fully disrupted and NoExecute tainting is stopped.',
      registers,
    }),
    masterDisruptionTransitions: new Counter({
      name: 'nlc_master_disruption_transitions_total',
      help: 'Entries into and exits from master disruption mode.',
      labelNames: ['direction'],
      registers,
    }),
    poolNodes: new Gauge({
      name: 'nlc_pool_nodes',
      help: 'Nodes per node pool of the pool config ("default" for nodes matching no pool).',
      labelNames: ['pool'],
      registers,
    }),
    poolConfigReloads: new Counter({
      name: 'nlc_pool_config_reloads_total',
      help: 'Pool config reload attempts by result (applied, unchanged, invalid).',
      labelNames: ['result'],
      registers,
    }),
  };
  for (const reason of HELD_BACK_REASONS) m.heldBack.labels({ reason }).set(0);
  m.masterDisruption.set(0);
  return m;
}
