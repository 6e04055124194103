import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';
import { Gauge, type Registry } from 'prom-client';
import { timerDelay } from '../clock/clock.js';
import type { Ticker } from '../clock/ticker.js';

/**
 * How often nodejs_eventloop_lag_* samples the event loop (EventLoopSampler) when nothing else sets
 * the cadence. prom-client's default, 10 ms, is a timer that wakes the process 100 times a second
 * forever: about 200 epoll wake-ups per second, measured as the largest part of an idle
 * controller's CPU (docs/benchmarks.md, "Steady-state cost"). At 100 ms the histogram still catches
 * any stall longer than 100 ms (GC pauses, a large LIST decoded at once) and the process sleeps
 * between events.
 */
export const EVENT_LOOP_SAMPLE_MS = 100;

/** The event-loop series prom-client's default metrics would register; EventLoopSampler serves them. */
export const EVENT_LOOP_LAG_METRICS = [
  'nodejs_eventloop_lag_seconds',
  'nodejs_eventloop_lag_min_seconds',
  'nodejs_eventloop_lag_max_seconds',
  'nodejs_eventloop_lag_mean_seconds',
  'nodejs_eventloop_lag_stddev_seconds',
  'nodejs_eventloop_lag_p50_seconds',
  'nodejs_eventloop_lag_p90_seconds',
  'nodejs_eventloop_lag_p99_seconds',
] as const;

/**
 * The process's one periodic timer: it samples the event loop for the nodejs_eventloop_lag_* series
 * and drives whatever else must run on a cadence (the watch read pacer; the controller's sight
 * check and safety net, through everyOnTicks), so that all of them cost one wake-up per interval
 * instead of one each.
 *
 * The series mean what prom-client's do (it uses perf_hooks.monitorEventLoopDelay): the histogram
 * records the time between two consecutive ticks, so an idle loop shows about the interval and a
 * stall that spans a tick shows as a longer one; min/max/mean/stddev/p50/p90/p99 cover the ticks
 * since the previous scrape (the histogram is reset at each), and nodejs_eventloop_lag_seconds is
 * how long a setImmediate takes at scrape time.
 */
export class EventLoopSampler implements Ticker {
  private readonly histogram: RecordableHistogram = createHistogram();
  private readonly listeners: (() => void)[] = [];
  private timer: ReturnType<typeof setInterval> | undefined;
  /** hrtime (ns) of the last tick, or of start(); 0n before either. */
  private last = 0n;

  constructor(
    registry: Registry,
    readonly intervalMs: number,
  ) {
    if (!(Number.isInteger(intervalMs) && intervalMs > 0)) {
      throw new RangeError(`event-loop sample interval must be a whole number of ms > 0, got ${intervalMs}`);
    }
    const registers = [registry];
    const h = this.histogram;
    const gauges: [Gauge, () => number][] = [];
    // Registered first: a registry collects in order, and this one's collect sets the others.
    new Gauge({
      name: EVENT_LOOP_LAG_METRICS[0],
      help: 'Lag of event loop in seconds: how long a setImmediate took at scrape time.',
      registers,
      async collect() {
        // The histogram's figures cover the ticks since the last scrape; none yet keeps the last ones.
        if (h.count > 0) {
          for (const [g, read] of gauges) g.set(read() / 1e9);
          h.reset();
        }
        const start = process.hrtime.bigint();
        await new Promise<void>((resolve) => setImmediate(resolve));
        this.set(Number(process.hrtime.bigint() - start) / 1e9);
      },
    });
    for (const [name, help, read] of [
      [EVENT_LOOP_LAG_METRICS[1], 'The minimum recorded event loop delay', () => h.min],
      [EVENT_LOOP_LAG_METRICS[2], 'The maximum recorded event loop delay', () => h.max],
      [EVENT_LOOP_LAG_METRICS[3], 'The mean of the recorded event loop delays', () => h.mean],
      [EVENT_LOOP_LAG_METRICS[4], 'The standard deviation of the recorded event loop delays', () => h.stddev],
      [
        EVENT_LOOP_LAG_METRICS[5],
        'The 50th percentile of the recorded event loop delays',
        () => h.percentile(50),
      ],
      [
        EVENT_LOOP_LAG_METRICS[6],
        'The 90th percentile of the recorded event loop delays',
        () => h.percentile(90),
      ],
      [
        EVENT_LOOP_LAG_METRICS[7],
        'The 99th percentile of the recorded event loop delays',
        () => h.percentile(99),
      ],
    ] as const) {
      const gauge = new Gauge({ name, help: `${help}: time between two ${intervalMs} ms ticks.`, registers });
      gauges.push([gauge, read]);
    }
  }

  /** Runs `fn` on every tick, after the sample is taken; the function returned stops that. */
  onTick(fn: () => void): () => void {
    this.listeners.push(fn);
    return () => {
      const i = this.listeners.indexOf(fn);
      if (i >= 0) this.listeners.splice(i, 1);
    };
  }

  start(): void {
    if (this.timer) return;
    this.last = process.hrtime.bigint(); // the first interval starts here
    this.timer = setInterval(() => this.tick(), timerDelay(this.intervalMs));
    // It must not keep the process alive by itself.
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** One tick (the timer calls it; tests may too). */
  tick(): void {
    // Not recordDelta(): the histogram's reset at each scrape would drop the interval spanning it.
    const now = process.hrtime.bigint();
    if (this.last > 0n) this.histogram.record(now > this.last ? now - this.last : 1n);
    this.last = now;
    // A copy: a listener may stop itself (or another) while this runs.
    for (const fn of [...this.listeners]) fn();
  }
}
