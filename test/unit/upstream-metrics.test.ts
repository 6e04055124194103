/**
 * Upstream metric parity: the families that kube-controller-manager exports for its node lifecycle
 * controller, its API client and its work queue, which dashboards and alerts built for KCM query.
 * The list below is written from upstream's source (Kubernetes v1.37):
 *   k8s.io/component-base/metrics/prometheus/restclient/metrics.go      rest_client_*
 *   k8s.io/component-base/metrics/prometheus/workqueue/metrics.go       workqueue_*
 *   k8s.io/kubernetes/pkg/controller/nodelifecycle/metrics.go           node_collector_*
 *   k8s.io/component-base/metrics/prometheus/clientgo/leaderelection/metrics.go  leader_election_*
 * and each entry is compared with what the controller's own metric factories register: same
 * name, same type, same label names, and for histograms the same buckets.
 */
import type { Histogram } from 'prom-client';
import { afterAll, describe, expect, it } from 'vitest';
import { WORK_QUEUE_NAME } from '../../src/controller/node-lifecycle.js';
import { controllerRegistry } from './manifests.support.js';

interface UpstreamMetric {
  name: string;
  type: 'counter' | 'gauge' | 'histogram';
  labels: string[];
  buckets?: number[];
}

/** prometheus.ExponentialBuckets(start, factor, count). */
const exponential = (start: number, factor: number, count: number) =>
  Array.from({ length: count }, (_, i) => start * factor ** i);

const UPSTREAM: UpstreamMetric[] = [
  // restclient: requestResult, requestLatency, rateLimiterLatency.
  { name: 'rest_client_requests_total', type: 'counter', labels: ['code', 'method', 'host'] },
  {
    name: 'rest_client_request_duration_seconds',
    type: 'histogram',
    labels: ['verb', 'host'],
    buckets: [0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0],
  },
  {
    name: 'rest_client_rate_limiter_duration_seconds',
    type: 'histogram',
    labels: ['verb', 'host'],
    buckets: [0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0],
  },
  // workqueue: subsystem "workqueue", label "name".
  { name: 'workqueue_depth', type: 'gauge', labels: ['name'] },
  { name: 'workqueue_adds_total', type: 'counter', labels: ['name'] },
  {
    name: 'workqueue_queue_duration_seconds',
    type: 'histogram',
    labels: ['name'],
    buckets: exponential(10e-9, 10, 10),
  },
  {
    name: 'workqueue_work_duration_seconds',
    type: 'histogram',
    labels: ['name'],
    buckets: exponential(10e-9, 10, 10),
  },
  { name: 'workqueue_unfinished_work_seconds', type: 'gauge', labels: ['name'] },
  { name: 'workqueue_longest_running_processor_seconds', type: 'gauge', labels: ['name'] },
  { name: 'workqueue_retries_total', type: 'counter', labels: ['name'] },
  // nodelifecycle: subsystem "node_collector".
  { name: 'node_collector_zone_health', type: 'gauge', labels: ['zone'] },
  { name: 'node_collector_zone_size', type: 'gauge', labels: ['zone'] },
  { name: 'node_collector_unhealthy_nodes_in_zone', type: 'gauge', labels: ['zone'] },
  { name: 'node_collector_evictions_total', type: 'counter', labels: ['zone'] },
  {
    name: 'node_collector_update_node_health_duration_seconds',
    type: 'histogram',
    labels: [],
    buckets: exponential(0.001, 4, 8),
  },
  {
    name: 'node_collector_update_all_nodes_health_duration_seconds',
    type: 'histogram',
    labels: [],
    buckets: exponential(0.01, 4, 8),
  },
  // leader election (client-go's metrics provider).
  { name: 'leader_election_master_status', type: 'gauge', labels: ['name'] },
  { name: 'leader_election_slowpath_total', type: 'counter', labels: ['name'] },
];

const { registry, dispose } = controllerRegistry();
afterAll(() => dispose());

describe('upstream metric parity (names, types, label names, buckets)', () => {
  it.each(UPSTREAM.map((m) => [m.name, m]))('%s', async (_, want) => {
    const m = registry.getSingleMetric(want.name);
    expect(m, `${want.name} is registered`).toBeDefined();
    const json = (await registry.getMetricsAsJSON()).find((x) => x.name === want.name)!;
    expect(String(json.type)).toBe(want.type);
    const labelNames = (m as unknown as { labelNames: string[] }).labelNames;
    expect([...labelNames].sort()).toEqual([...want.labels].sort());
    if (want.buckets) {
      const bounds = (m as unknown as Histogram & { upperBounds: number[] }).upperBounds;
      expect(bounds.length).toBe(want.buckets.length);
      for (const [i, b] of bounds.entries()) {
        const w = want.buckets[i]!;
        expect(Math.abs(b - w), `bucket ${i}: ${b} vs ${w}`).toBeLessThanOrEqual(w * 1e-9);
      }
    }
  });

  it('the reconciler work queue is named as upstream names its node queue', async () => {
    expect(WORK_QUEUE_NAME).toBe('node_lifecycle_controller');
    const depth = (await registry.getMetricsAsJSON()).find((x) => x.name === 'workqueue_depth')!;
    expect(depth.values.map((v) => v.labels.name)).toEqual(['node_lifecycle_controller']);
  });

  it('the check is real: a wrong label set or type is caught', () => {
    const labels = (n: string) =>
      (registry.getSingleMetric(n) as unknown as { labelNames: string[] }).labelNames.slice().sort();
    expect(labels('rest_client_requests_total')).not.toEqual(['code', 'resource', 'verb']);
    expect(labels('nlc_api_requests_total')).toEqual(['code', 'resource', 'verb']);
  });
});
