import type { Counter, Histogram } from 'prom-client';
import { timerDelay } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import { everyOnTicks, type Ticker } from '../clock/ticker.js';
import type { Logger } from '../log/logger.js';
import type { SchedulerLike, Subscription } from '../rx/index.js';
import { WorkQueue } from './queue.js';
import type { QueueMetrics } from './workqueue-metrics.js';

/** What one reconcile of a key asks for: undefined (done), or to run again after this many ms. */
export type ReconcileResult = number | undefined;

export interface ReconcileRunnerOptions<K> {
  scheduler: SchedulerLike;
  log: Logger;
  /** How a key is named in log lines: `{ [keyField]: key }` (e.g. node=<name>). */
  keyField: string;
  /** Brings one key in line. Throws to be retried with backoff (rate-limited requeue). */
  reconcile: (key: K) => Promise<ReconcileResult>;
  /**
   * Whether reconciles may run now (e.g. leading and seeing). A key taken while not is dropped (it
   * counts as a success: the caller queues every key again when it may act again); no deadline
   * timer is armed while not.
   */
  canAct: () => boolean;
  /** The deadline timer (wakeAt) fired. */
  onWake: () => void;
  /** A key's reconcile ended, however it ended. */
  onDone?: (key: K) => void;
  workers: number;
  /** Ordinary (not urgent) keys processed at once, at most (default: `workers`). */
  ordinaryWorkers?: number;
  metrics: {
    /** By result: success, requeue, error. */
    reconciles: Counter<'result'>;
    /** Seconds of one reconcile, whatever its result. */
    duration: Histogram;
    /** The queue's client-go workqueue_* series. */
    queue?: QueueMetrics<K>;
  };
  /** Backoff of a failed key: base doubling per failure, capped (defaults: the WorkQueue's). */
  baseDelayMs?: number;
  maxDelayMs?: number;
  /** A periodic tick to run `every` on instead of timers of its own (when not coarser than the period). */
  ticker?: Ticker;
}

/**
 * Runs reconciles of keys (controller-runtime's internal controller, kube-runtime's Controller):
 * a WorkQueue with client-go semantics, N workers that take keys from it, the handling of each
 * result (success: backoff forgotten; requeue after ms; error: rate-limited requeue, logged), ONE
 * deadline timer for the caller's earliest deadline, periodic work, and gating (`canAct`). It knows
 * nothing about what a key is or what a reconcile writes.
 */
export class ReconcileRunner<K> {
  private readonly queue: WorkQueue<K>;
  private readonly workerLoops: Promise<void>[] = [];
  private readonly subs: { unsubscribe(): void }[] = [];
  private wake: { at: number; sub: Subscription } | undefined;
  private stopping = false;

  constructor(private readonly o: ReconcileRunnerOptions<K>) {
    this.queue = new WorkQueue<K>(o.scheduler, {
      baseDelayMs: o.baseDelayMs,
      maxDelayMs: o.maxDelayMs,
      metrics: o.metrics.queue,
      ...(o.ordinaryWorkers !== undefined ? { maxOrdinary: o.ordinaryWorkers } : {}),
    });
  }

  private now(): number {
    return this.o.scheduler.now();
  }

  /** True once stop() was called. */
  get stopped(): boolean {
    return this.stopping;
  }

  /** Keys waiting (not being processed). */
  get queued(): number {
    return this.queue.length;
  }

  /** Starts the workers. */
  start(): void {
    for (let i = 0; i < this.o.workers; i++) this.workerLoops.push(this.worker());
  }

  /**
   * Stops periodic work and the deadline timer, drops waiting keys; resolves when the workers have
   * finished the keys they hold. Synchronous up to its first wait: `stopped` is true on return.
   */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    for (const s of this.subs.splice(0)) s.unsubscribe();
    this.cancelWake();
    this.queue.shutDown();
    await Promise.all(this.workerLoops);
  }

  add(key: K): void {
    this.queue.add(key);
  }

  /** Ahead of every ordinary key (see WorkQueue.addUrgent). */
  addUrgent(key: K): void {
    this.queue.addUrgent(key);
  }

  /**
   * Runs `fn` every `ms` until stop(): on the ticker's ticks when it has one at least as fine,
   * otherwise on a timer of its own.
   */
  every(ms: number, fn: () => void): void {
    const ticker = this.o.ticker;
    if (ticker && ticker.intervalMs <= ms) {
      this.subs.push({ unsubscribe: everyOnTicks(ticker, () => this.now(), ms, fn) });
      return;
    }
    this.subs.push(
      this.o.scheduler.schedule(function repeat(this: { schedule(state?: unknown, delay?: number): void }) {
        fn();
        this.schedule(undefined, timerDelay(ms));
      }, timerDelay(ms)),
    );
  }

  /**
   * The deadline timer: onWake at `at` (monotonic ms; undefined: no deadline, disarmed). Not armed
   * while stopped or while we may not act. A timer armed earlier than `at` is kept: it wakes, finds
   * nothing due and is armed again (deadlines mostly move later, so this saves a timer swap each).
   * A time beyond what a timer takes fires early and is armed again the same way.
   */
  wakeAt(at: number | undefined): void {
    if (this.stopping || !this.o.canAct()) return;
    if (at === undefined) {
      this.cancelWake();
      return;
    }
    if (this.wake && this.wake.at <= at) return;
    this.wake?.sub.unsubscribe();
    const sub = this.o.scheduler.schedule(
      () => {
        this.wake = undefined;
        this.o.onWake();
      },
      timerDelay(at - this.now()),
    );
    this.wake = { at, sub };
  }

  /** Disarms the deadline timer (we stopped acting). */
  cancelWake(): void {
    this.wake?.sub.unsubscribe();
    this.wake = undefined;
  }

  private async worker(): Promise<void> {
    for (;;) {
      const key = await this.queue.get();
      if (key === undefined) return;
      await this.process(key);
    }
  }

  private async process(key: K): Promise<void> {
    const { log, metrics } = this.o;
    const started = this.now();
    try {
      const requeueAfter = this.o.canAct() ? await this.o.reconcile(key) : undefined;
      this.queue.forget(key);
      if (requeueAfter !== undefined) this.queue.addAfter(key, requeueAfter);
      metrics.reconciles.inc({ result: requeueAfter === undefined ? 'success' : 'requeue' });
    } catch (err) {
      if (this.stopping) {
        // A read aborted by stop(), or a reconcile that failed on its way out: nothing to retry.
        log.debug(2, 'Reconcile ended by stop', { [this.o.keyField]: key, err });
        return;
      }
      const delay = this.queue.addRateLimited(key);
      metrics.reconciles.inc({ result: 'error' });
      log.error('Reconcile failed, will retry', {
        [this.o.keyField]: key,
        retryIn: formatDuration(delay),
        err,
      });
    } finally {
      this.queue.done(key);
      metrics.duration.observe((this.now() - started) / 1000);
      this.o.onDone?.(key);
    }
  }
}
