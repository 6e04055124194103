import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/**
 * client-go's work queue metrics (k8s.io/component-base/metrics/prometheus/workqueue), with their
 * names, `name` label, buckets and meaning, for one queue:
 *   workqueue_adds_total               keys added that were not already waiting
 *   workqueue_depth                    keys added and not yet taken by a worker
 *   workqueue_queue_duration_seconds   time from add to a worker taking the key
 *   workqueue_work_duration_seconds    time a worker spent on the key
 *   workqueue_unfinished_work_seconds  sum of the ages of the keys being worked on
 *   workqueue_longest_running_processor_seconds   age of the oldest of them
 *   workqueue_retries_total            keys re-added with backoff after a failure
 * client-go refreshes the two "unfinished" gauges every 500 ms; here they are computed when
 * scraped.
 */
export interface QueueMetrics<K> {
  /** A key went from "not waiting" to "waiting" (client-go: Add of a key not in its dirty set). */
  add(key: K): void;
  /** A worker took the key. */
  get(key: K): void;
  /** The worker finished the key. */
  done(key: K): void;
  /** The key was re-added with backoff (rate-limited). */
  retry(): void;
}

/** ExponentialBuckets(10e-9, 10, 10), as client-go's queue and work duration histograms. */
const QUEUE_BUCKETS = Array.from({ length: 10 }, (_, i) => Number((1e-8 * 10 ** i).toPrecision(1)));

/** The seven families, registered once per registry; a queue gets its series with `forQueue`. */
export function createWorkQueueMetrics(registry: Registry) {
  const inProgress = new Map<string, { now: () => number; started: Map<unknown, number> }>();
  const ages = (name: string) => {
    const q = inProgress.get(name);
    if (!q) return [];
    const now = q.now();
    return [...q.started.values()].map((t) => (now - t) / 1000);
  };
  const depth = new Gauge({
    name: 'workqueue_depth',
    help: 'Current depth of workqueue',
    labelNames: ['name'] as const,
    registers: [registry],
  });
  const adds = new Counter({
    name: 'workqueue_adds_total',
    help: 'Total number of adds handled by workqueue',
    labelNames: ['name'] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'workqueue_queue_duration_seconds',
    help: 'How long in seconds an item stays in workqueue before being requested.',
    labelNames: ['name'] as const,
    buckets: QUEUE_BUCKETS,
    registers: [registry],
  });
  const workDuration = new Histogram({
    name: 'workqueue_work_duration_seconds',
    help: 'How long in seconds processing an item from workqueue takes.',
    labelNames: ['name'] as const,
    buckets: QUEUE_BUCKETS,
    registers: [registry],
  });
  new Gauge({
    name: 'workqueue_unfinished_work_seconds',
    help: "How many seconds of work has done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
    labelNames: ['name'] as const,
    registers: [registry],
    collect() {
      for (const name of inProgress.keys())
        this.set(
          { name },
          ages(name).reduce((a, b) => a + b, 0),
        );
    },
  });
  new Gauge({
    name: 'workqueue_longest_running_processor_seconds',
    help: 'How many seconds has the longest running processor for workqueue been running.',
    labelNames: ['name'] as const,
    registers: [registry],
    collect() {
      for (const name of inProgress.keys()) this.set({ name }, Math.max(0, ...ages(name)));
    },
  });
  const retries = new Counter({
    name: 'workqueue_retries_total',
    help: 'Total number of retries handled by workqueue',
    labelNames: ['name'] as const,
    registers: [registry],
  });

  return {
    /** Hooks for the queue `name`; `now` is monotonic milliseconds (the queue's scheduler). */
    forQueue<K>(name: string, now: () => number): QueueMetrics<K> {
      const addTimes = new Map<K, number>();
      const started = new Map<K, number>();
      inProgress.set(name, { now, started: started as Map<unknown, number> });
      const labels = { name };
      // Series exist from the start (0), as client-go's do once the queue is created.
      depth.set(labels, 0);
      adds.inc(labels, 0);
      retries.inc(labels, 0);
      latency.zero(labels);
      workDuration.zero(labels);
      return {
        add(key) {
          adds.inc(labels);
          depth.inc(labels);
          if (!addTimes.has(key)) addTimes.set(key, now());
        },
        get(key) {
          depth.dec(labels);
          const t = now();
          started.set(key, t);
          const added = addTimes.get(key);
          if (added !== undefined) {
            latency.observe(labels, (t - added) / 1000);
            addTimes.delete(key);
          }
        },
        done(key) {
          const s = started.get(key);
          if (s !== undefined) {
            workDuration.observe(labels, (now() - s) / 1000);
            started.delete(key);
          }
        },
        retry() {
          retries.inc(labels);
        },
      };
    },
  };
}
