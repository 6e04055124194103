import type { Registry } from 'prom-client';
import type { Config } from '../../config/index.js';
import type { Runnable } from '../../manager/manager.js';
import { EVENT_LOOP_SAMPLE_MS, EventLoopSampler } from '../../metrics/event-loop.js';

/**
 * The process's one periodic timer: it samples the event loop, and paces the watch reads
 * (--watch-read-interval, its period when set) and the reconciler's periodic checks. Group process:
 * ticks from the manager's start to the end of its stop.
 */
export function processTicker(
  registry: Registry,
  config: Pick<Config, 'health'>,
  /** The tick when --watch-read-interval is not set (default EVENT_LOOP_SAMPLE_MS). */
  defaultIntervalMs = EVENT_LOOP_SAMPLE_MS,
): { ticker: EventLoopSampler; runnable: Runnable } {
  const ticker = new EventLoopSampler(registry, config.health.watchReadIntervalMs || defaultIntervalMs);
  const runnable: Runnable = {
    name: 'process-ticker',
    group: 'process',
    start: () => ticker.start(),
    stop: { close: () => ticker.stop() },
  };
  return { ticker, runnable };
}
