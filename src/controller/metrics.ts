import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

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
  reconciles: Counter<'result'>;
  reconcileDuration: Histogram;
  queueDepth: Gauge;
  leading: Gauge;
}

export function createControllerMetrics(registry: Registry): ControllerMetrics {
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
      help: 'Node deadlines that passed while the controller was blind or not leading, so nothing was marked.',
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
    reconciles: new Counter({
      name: 'nlc_reconcile_total',
      help: 'Node reconciles by result (success, requeue, error).',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    reconcileDuration: new Histogram({
      name: 'nlc_reconcile_duration_seconds',
      help: 'Time to reconcile one node, writes included.',
      buckets: [0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30],
      registers: [registry],
    }),
    queueDepth: new Gauge({
      name: 'nlc_reconcile_queue_depth',
      help: 'Nodes waiting to be reconciled.',
      registers: [registry],
    }),
    leading: new Gauge({
      name: 'nlc_leading',
      help: '1 while this replica leads and its reconciler runs.',
      registers: [registry],
    }),
  };
}
