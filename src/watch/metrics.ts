import { Counter, Gauge, type Registry } from 'prom-client';
import type { WatchEventCounts, WatchStatus } from './status.js';

/** Registers watch streams for scraping. One per Registry (createWatchMetrics is idempotent). */
export interface WatchMetrics {
  /** Exposes this stream's counters and gauges until the returned function is called. */
  track(status: WatchStatus): () => void;
}

const EVENT_TYPES: ReadonlyArray<keyof WatchEventCounts> = [
  'ADDED',
  'MODIFIED',
  'DELETED',
  'BOOKMARK',
  'ERROR',
];

const byRegistry = new WeakMap<Registry, WatchMetrics>();

/**
 * Watch metrics, all labelled `resource`. The hot path only bumps plain numbers in WatchStatus;
 * values are copied into prom-client at scrape time (collect), so ingest never pays for labels.
 *
 * - nlc_watch_events_total{resource,type}         watch events by type (ADDED ... BOOKMARK, ERROR)
 * - nlc_watch_list_objects_total{resource}        objects received through lists
 * - nlc_watch_reconnects_total{resource}          watches re-established
 * - nlc_watch_relists_total{resource}             lists after the first sync
 * - nlc_watch_errors_total{resource,reason}       failures and skipped data by reason
 * - nlc_watch_seconds_since_last_event{resource}  silence, computed at scrape time
 * - nlc_watch_connected{resource}, nlc_watch_synced{resource}  0/1
 * - nlc_watch_store_objects{resource}             objects held by the store
 */
export function createWatchMetrics(registry: Registry): WatchMetrics {
  const existing = byRegistry.get(registry);
  if (existing) return existing;
  const tracked = new Set<WatchStatus>();
  const registers = [registry];

  new Counter({
    name: 'nlc_watch_events_total',
    help: 'Watch events received, by type (bookmarks and errors included).',
    labelNames: ['resource', 'type'],
    registers,
    collect() {
      this.reset();
      for (const s of tracked)
        for (const type of EVENT_TYPES) this.inc({ resource: s.resource, type }, s.events[type]);
    },
  });
  new Counter({
    name: 'nlc_watch_list_objects_total',
    help: 'Objects received through list requests (initial list and relists).',
    labelNames: ['resource'],
    registers,
    collect() {
      this.reset();
      for (const s of tracked) this.inc({ resource: s.resource }, s.listedObjects);
    },
  });
  new Counter({
    name: 'nlc_watch_reconnects_total',
    help: 'Watch requests re-established after the first one (server timeouts, failures).',
    labelNames: ['resource'],
    registers,
    collect() {
      this.reset();
      for (const s of tracked) this.inc({ resource: s.resource }, s.reconnects);
    },
  });
  new Counter({
    name: 'nlc_watch_relists_total',
    help: 'List operations after the first successful sync (410 Gone, failed relists).',
    labelNames: ['resource'],
    registers,
    collect() {
      this.reset();
      for (const s of tracked) this.inc({ resource: s.resource }, s.relists);
    },
  });
  new Counter({
    name: 'nlc_watch_errors_total',
    help: 'Watch failures and skipped data, by reason.',
    labelNames: ['resource', 'reason'],
    registers,
    collect() {
      this.reset();
      for (const s of tracked)
        for (const [reason, n] of s.errors) this.inc({ resource: s.resource, reason }, n);
    },
  });
  new Gauge({
    name: 'nlc_watch_seconds_since_last_event',
    help: 'Seconds since the watch last delivered data (events, bookmarks, list pages).',
    labelNames: ['resource'],
    registers,
    collect() {
      this.reset();
      for (const s of tracked) this.set({ resource: s.resource }, s.secondsSinceLastEvent());
    },
  });
  new Gauge({
    name: 'nlc_watch_connected',
    help: '1 while the watch is connected (no failure since the last successful request).',
    labelNames: ['resource'],
    registers,
    collect() {
      this.reset();
      for (const s of tracked) this.set({ resource: s.resource }, s.connected ? 1 : 0);
    },
  });
  new Gauge({
    name: 'nlc_watch_synced',
    help: '1 once the first full list has been delivered.',
    labelNames: ['resource'],
    registers,
    collect() {
      this.reset();
      for (const s of tracked) this.set({ resource: s.resource }, s.synced ? 1 : 0);
    },
  });
  new Gauge({
    name: 'nlc_watch_store_objects',
    help: 'Objects held in the watch store.',
    labelNames: ['resource'],
    registers,
    collect() {
      this.reset();
      for (const s of tracked) if (s.objects) this.set({ resource: s.resource }, s.objects());
    },
  });

  const metrics: WatchMetrics = {
    track(status) {
      tracked.add(status);
      return () => {
        tracked.delete(status);
      };
    },
  };
  byRegistry.set(registry, metrics);
  return metrics;
}
