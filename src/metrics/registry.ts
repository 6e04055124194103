import { Counter, collectDefaultMetrics, Histogram, Registry } from 'prom-client';
import type { RequestObserver } from '../kube/client.js';
import { EVENT_LOOP_LAG_METRICS } from './event-loop.js';

/**
 * prom-client's own event-loop monitor is given an interval it never reaches (about 24 days) and its
 * series are taken out: EventLoopSampler serves them from the process's one periodic timer.
 */
const PROM_CLIENT_MONITOR_OFF_MS = 2 ** 31 - 1;

/**
 * The one Registry of the process, created in main and passed to every module. With the default
 * metrics it holds prom-client's, except nodejs_eventloop_lag_*: create an EventLoopSampler on it.
 */
export function createRegistry(opts: { defaultMetrics?: boolean } = {}): Registry {
  const registry = new Registry();
  if (opts.defaultMetrics !== false) {
    collectDefaultMetrics({ register: registry, eventLoopMonitoringPrecision: PROM_CLIENT_MONITOR_OFF_MS });
    for (const name of EVENT_LOOP_LAG_METRICS) registry.removeSingleMetric(name);
  }
  return registry;
}

/**
 * API requests by Kubernetes verb, resource and code (nlc_api_*), and the same requests as
 * client-go counts them (rest_client_*).
 */
export function createApiRequestMetrics(registry: Registry): RequestObserver {
  const total = new Counter({
    name: 'nlc_api_requests_total',
    help: 'Requests to kube-apiserver by verb, resource and HTTP code (<error:...> for transport failures).',
    labelNames: ['verb', 'resource', 'code'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'nlc_api_request_duration_seconds',
    help: 'Latency of requests to kube-apiserver until response headers (watches) or body (others).',
    labelNames: ['verb', 'resource'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  const rest = createRestClientMetrics(registry);
  // Deprecated in 0.2.0, removed in 0.3.0 (CHANGELOG.md): rest_client_rate_limiter_duration_seconds
  // is client-go's name for the same waits. One limiter serves every verb, so the Kubernetes verb
  // this one adds says little; it stays one release so that queries can move.
  const limiter = new Histogram({
    name: 'nlc_api_rate_limiter_duration_seconds',
    help: 'DEPRECATED (removed in 0.3.0): use rest_client_rate_limiter_duration_seconds. Time requests waited for the client-side rate limiter (--kube-api-qps/--kube-api-burst) by Kubernetes verb.',
    labelNames: ['verb'] as const,
    buckets: [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  return (o) => {
    total.inc({ verb: o.verb, resource: o.resource, code: o.code });
    if (o.verb !== 'watch') duration.observe({ verb: o.verb, resource: o.resource }, o.durationSeconds);
    if (o.rateLimiterSeconds !== undefined) limiter.observe({ verb: o.verb }, o.rateLimiterSeconds);
    rest(o);
  };
}

/**
 * client-go's rest_client_requests_total, rest_client_request_duration_seconds and
 * rest_client_rate_limiter_duration_seconds (k8s.io/component-base/metrics/prometheus/restclient),
 * with their names, labels, buckets and meaning: `code` is the HTTP status or "<error>", `method`
 * and `verb` the HTTP method, `host` the API server's host:port; like client-go, watches count in
 * requests_total but not in the duration, and only requests that went through the client-side rate
 * limiter (all but watches) in the limiter's histogram. nlc_api_requests_total adds what these
 * lack: the Kubernetes verb and resource.
 */
function createRestClientMetrics(registry: Registry): RequestObserver {
  const requests = new Counter({
    name: 'rest_client_requests_total',
    help: 'Number of HTTP requests, partitioned by status code, method, and host.',
    labelNames: ['code', 'method', 'host'] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'rest_client_request_duration_seconds',
    help: 'Request latency in seconds. Broken down by verb, and host.',
    labelNames: ['verb', 'host'] as const,
    buckets: [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60],
    registers: [registry],
  });
  const limiterLatency = new Histogram({
    name: 'rest_client_rate_limiter_duration_seconds',
    help: 'Client side rate limiter latency in seconds. Broken down by verb, and host.',
    labelNames: ['verb', 'host'] as const,
    buckets: [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60],
    registers: [registry],
  });
  return (o) => {
    const code = o.code.startsWith('<error') ? '<error>' : o.code;
    requests.inc({ code, method: o.method, host: o.host });
    if (o.verb !== 'watch') latency.observe({ verb: o.method, host: o.host }, o.durationSeconds);
    if (o.rateLimiterSeconds !== undefined)
      limiterLatency.observe({ verb: o.method, host: o.host }, o.rateLimiterSeconds);
  };
}
