import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { ProbeOutcome } from '../second-opinion/index.js';
import { createWorkQueueMetrics } from './workqueue-metrics.js';

/** Metrics of the node-lifecycle reconciler (the wiring of health, disruption and writer). */
export interface ControllerMetrics {
  nodes: Gauge<'state'>;
  detectionLatency: Histogram;
  transitions: Counter<'kind'>;
  blind: Gauge<'reason'>;
  blindSkipped: Counter;
  blindSeconds: Counter;
  stepDowns: Counter<'reason'>;
  anomalies: Counter<'kind'>;
  watchLagDetected: Counter;
  storageOutageSeconds: Counter;
  /** Fleet-wide silences of lease writes found by a prompt re-read (judgement held 8 s). */
  fleetSilences: Counter;
  /** Pod writes (marks, evictions) left undone because the node renewed or we stopped acting. */
  podWritesWithdrawn: Counter;
  reconciles: Counter<'result'>;
  /** One node's reconcile (judge, conditions, taints, pods): upstream's per-node health update. */
  updateNodeHealthDuration: Histogram;
  /** One pass over every node (see createControllerMetrics). */
  updateAllNodesHealthDuration: Histogram;
  leading: Gauge;
  /** The out-of-service taint (src/controller/out-of-service.ts): decisions, and fenced -> tainted. */
  outOfService: { decisions: Counter<'decision' | 'signal'>; delay: Histogram };
  /** The second opinion (--second-opinion): probes by outcome, nodes confirmed down, nodes held. */
  secondOpinion: {
    probes: Counter<'outcome'>;
    confirmedDown: Counter;
    held: Gauge;
    cutOffZones: Gauge<'zone'>;
  };
  /** client-go's workqueue_* families; the reconciler's queue is named node_lifecycle_controller. */
  workqueue: ReturnType<typeof createWorkQueueMetrics>;
}

/** prometheus ExponentialBuckets(start, factor, count). */
const exponentialBuckets = (start: number, factor: number, count: number) =>
  Array.from({ length: count }, (_, i) => Number((start * factor ** i).toPrecision(6)));

/** The `kind`s of nlc_transitions_total (node-lifecycle.ts counts exactly these). */
export const TRANSITION_KINDS = [
  'marked_unknown',
  'noschedule_taint_added',
  'noexecute_taint_added',
  'taint_removed',
  'pods_marked_not_ready',
  'marked_lost',
  'lost_cleared',
  'pods_evicted',
] as const;

/** The `outcome`s of nlc_second_opinion_probes_total (src/second-opinion/kubelet-probe.ts). */
const PROBE_OUTCOMES: readonly ProbeOutcome[] = ['answers', 'refused', 'unreachable', 'timeout'];

export function createControllerMetrics(registry: Registry): ControllerMetrics {
  const m = build(registry);
  // Every kind exists from the start at 0: an alert on increase() or rate() then sees the first
  // transition after a restart too (a series that first appears at 1 shows no increase).
  for (const kind of TRANSITION_KINDS) m.transitions.inc({ kind }, 0);
  for (const outcome of PROBE_OUTCOMES) m.secondOpinion.probes.inc({ outcome }, 0);
  return m;
}

function build(registry: Registry): ControllerMetrics {
  return {
    nodes: new Gauge({
      name: 'nlc_nodes',
      help: 'Nodes by Ready condition as last seen (ready, not_ready, unknown, no_condition).',
      labelNames: ['state'] as const,
      registers: [registry],
    }),
    detectionLatency: new Histogram({
      name: 'nlc_detection_latency_seconds',
      help: "Time from a node's deadline (last observed heartbeat + grace) until the API server accepted its Unknown status.",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers: [registry],
    }),
    transitions: new Counter({
      name: 'nlc_transitions_total',
      help: 'Changes this controller made (or in dry-run would have made), by kind.',
      labelNames: ['kind'] as const,
      registers: [registry],
    }),
    blind: new Gauge({
      name: 'nlc_blind',
      help: '1 while the controller refuses to mark nodes because it cannot see (reason: disconnected, unsynced, silent, not_leader).',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    blindSkipped: new Counter({
      name: 'nlc_blind_skipped_total',
      help: 'Times the deadline timer fired and found the controller blind or not leading (sight lost since the last 1 s check), so nothing was marked. No deadline timer is armed while blind: the deadlines of a spell are moved by its length when sight returns (nlc_blind_seconds_total).',
      registers: [registry],
    }),
    blindSeconds: new Counter({
      name: 'nlc_blind_seconds_total',
      help: 'Seconds of blind spells the leader came back from (watch disconnected or silent); every node deadline was moved later by the spell.',
      registers: [registry],
    }),
    stepDowns: new Counter({
      name: 'nlc_blind_step_downs_total',
      help: 'Times this replica gave up leadership because its watches had been blind for --blind-step-down-after (reason: disconnected, unsynced, silent).',
      labelNames: ['reason'] as const,
      registers: [registry],
    }),
    anomalies: new Counter({
      name: 'nlc_bad_objects_total',
      help: 'Malformed or inconsistent Leases and Nodes seen, by kind: counted every time, logged once per object; some are skipped, others still used (holder_mismatch, holder_missing: renewals still count).',
      labelNames: ['kind'] as const,
      registers: [registry],
    }),
    watchLagDetected: new Counter({
      name: 'nlc_watch_lag_detected_total',
      help: 'Nodes about to be marked whose lease, re-read from the API server, had in fact been renewed: the watch was behind, nothing was marked.',
      registers: [registry],
    }),
    storageOutageSeconds: new Counter({
      name: 'nlc_storage_outage_seconds_total',
      help: "Seconds the API server could not reach its storage, as this controller saw it (lease re-reads failed or answered slowly, no lease write arrived; or no lease written by a renewing fleet for over 1.5 renew intervals): kubelets could not renew either, so every node deadline was moved later by each outage (and the kubelets' reconnect allowance, 8 s).",
      registers: [registry],
    }),
    fleetSilences: new Counter({
      name: 'nlc_fleet_silences_total',
      help: "Times a lease re-read at a deadline was answered promptly while no node had renewed its lease for over 1.5 renew intervals (etcd just back, or every node gone): no node was judged for 8 s, the kubelets' reconnect back-off.",
      registers: [registry],
    }),
    podWritesWithdrawn: new Counter({
      name: 'nlc_pod_writes_withdrawn_total',
      help: 'Pod writes (Ready=False, evictions) decided for a lost node and left undone because the node renewed (or this replica stopped acting) before they were sent.',
      registers: [registry],
    }),
    reconciles: new Counter({
      name: 'nlc_reconcile_total',
      help: 'Node reconciles by result (success, requeue, error).',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    // Upstream's node_collector_update_node_health_duration_seconds: the time to update one node's
    // health, writes included. Here: one reconcile of one node from the work queue (the Unknown
    // conditions after a lease re-read, its taints, its pods' Ready=False).
    updateNodeHealthDuration: new Histogram({
      name: 'node_collector_update_node_health_duration_seconds',
      help: 'Duration in seconds for NodeController to update the health of a single node.',
      buckets: exponentialBuckets(0.001, 4, 8), // 1ms -> ~15s
      registers: [registry],
    }),
    // Upstream's node_collector_update_all_nodes_health_duration_seconds times one monitorNodeHealth
    // pass (every --node-monitor-period) over every node, writes included. This controller detects
    // lost nodes from events and deadlines, not from passes; its closest equivalent is the
    // safety-net pass (--node-monitor-period, also when sight returns or pools reload): it judges
    // every node against its deadline and queues the timed-out ones. A pass is timed from its
    // start until every node it queued has been reconciled (so writes are included, as upstream);
    // a pass that finds nothing due is just the judging. Passes are measured one at a time.
    updateAllNodesHealthDuration: new Histogram({
      name: 'node_collector_update_all_nodes_health_duration_seconds',
      help: 'Duration in seconds for NodeController to update the health of all nodes.',
      buckets: exponentialBuckets(0.01, 4, 8), // 10ms -> ~3m
      registers: [registry],
    }),
    workqueue: createWorkQueueMetrics(registry),
    outOfService: {
      decisions: new Counter({
        name: 'nlc_out_of_service_decisions_total',
        help: "Out-of-service taint decisions (--out-of-service) by decision (requested: a fenced node's delay is over and the zone pass was asked; applied; dry_run: would have been applied; removed: the node renewed and is Ready; withdrawn: dropped after a wait because the node renewed, the lease re-read showed a renewal or we stopped acting; cancelled: the fence signal went before the taint) and the fence signal that allowed it.",
        labelNames: ['decision', 'signal'] as const,
        registers: [registry],
      }),
      delay: new Histogram({
        name: 'nlc_out_of_service_delay_seconds',
        help: 'Time from when a node was first seen marked, silent and fenced until its out-of-service taint was applied (the delay, the zone rates and the cap).',
        buckets: [1, 5, 10, 30, 60, 120, 300, 600, 1800],
        registers: [registry],
      }),
    },
    secondOpinion: {
      probes: new Counter({
        name: 'nlc_second_opinion_probes_total',
        help: "Kubelet probes (--second-opinion=kubelet: TCP connect + TLS handshake to the Node's kubelet endpoint) by outcome: answers, refused, unreachable, timeout.",
        labelNames: ['outcome'] as const,
        registers: [registry],
      }),
      confirmedDown: new Counter({
        name: 'nlc_second_opinion_confirmed_down_total',
        help: 'Silent nodes whose kubelet failed two probes in a row: timed out before their grace (--confirm-after), or their NoExecute hold ended.',
        registers: [registry],
      }),
      held: new Gauge({
        name: 'nlc_second_opinion_held_nodes',
        help: 'Nodes past their grace whose kubelet still answers: NoExecute held (at most --cut-off-hold).',
        registers: [registry],
      }),
      cutOffZones: new Gauge({
        name: 'nlc_second_opinion_cut_off_zones',
        help: 'Zones cut off from the control plane, not lost (1 per zone): two or more nodes past their grace, and the kubelets of all of them answer.',
        labelNames: ['zone'] as const,
        registers: [registry],
      }),
    },
    leading: new Gauge({
      name: 'nlc_leading',
      help: '1 while this replica leads and its reconciler runs.',
      registers: [registry],
    }),
  };
}
