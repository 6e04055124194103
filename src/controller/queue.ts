import { timerDelay } from '../clock/clock.js';
import type { SchedulerLike, Subscription } from '../rx/index.js';
import type { QueueMetrics } from './workqueue-metrics.js';

/**
 * A work queue of keys with client-go's semantics: a key waiting is stored once however often it
 * is added; a key being processed is never handed to a second worker; a key added while it is
 * processed is processed again afterwards. Failed keys are retried with per-key exponential backoff
 * (controller-runtime's 5 ms doubling, capped). Delays run on an injected scheduler.
 */
export class WorkQueue<K = string> {
  private readonly queue: K[] = [];
  private head = 0;
  private readonly waiting = new Set<K>();
  private readonly processing = new Set<K>();
  private readonly dirty = new Set<K>();
  private readonly delayed = new Map<K, { at: number; sub: Subscription }>();
  private readonly failures = new Map<K, number>();
  private readonly takers: ((k: K | undefined) => void)[] = [];
  private shuttingDown = false;

  constructor(
    private readonly scheduler: SchedulerLike,
    private readonly opts: { baseDelayMs?: number; maxDelayMs?: number; metrics?: QueueMetrics<K> } = {},
  ) {}

  get length(): number {
    return this.queue.length - this.head;
  }
  get inFlight(): number {
    return this.processing.size;
  }
  get delayedCount(): number {
    return this.delayed.size;
  }

  add(key: K): void {
    if (this.shuttingDown) return;
    if (this.processing.has(key)) {
      if (!this.dirty.has(key)) {
        this.dirty.add(key);
        this.opts.metrics?.add(key);
      }
      return;
    }
    if (this.waiting.has(key)) return;
    this.opts.metrics?.add(key);
    this.enqueue(key);
  }

  private enqueue(key: K): void {
    this.waiting.add(key);
    const taker = this.takers.shift();
    if (taker) {
      this.waiting.delete(key);
      this.processing.add(key);
      this.opts.metrics?.get(key);
      taker(key);
      return;
    }
    this.queue.push(key);
  }

  /** Adds the key after `ms`; an earlier pending delayed add for the same key wins. */
  addAfter(key: K, ms: number): void {
    if (this.shuttingDown) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const at = this.scheduler.now() + ms;
    const prev = this.delayed.get(key);
    if (prev && prev.at <= at) return;
    prev?.sub.unsubscribe();
    const sub = this.scheduler.schedule(() => {
      this.delayed.delete(key);
      this.add(key);
    }, timerDelay(ms));
    this.delayed.set(key, { at, sub });
  }

  /** Re-adds a failed key with exponential backoff; returns the delay used. */
  addRateLimited(key: K): number {
    const n = this.failures.get(key) ?? 0;
    this.failures.set(key, n + 1);
    const delay = Math.min((this.opts.baseDelayMs ?? 5) * 2 ** n, this.opts.maxDelayMs ?? 300_000);
    this.opts.metrics?.retry();
    this.addAfter(key, delay);
    return delay;
  }

  /** Clears the key's failure history (after a success). */
  forget(key: K): void {
    this.failures.delete(key);
  }

  /** Resolves with the next key, or undefined once shut down. */
  get(): Promise<K | undefined> {
    if (this.head < this.queue.length) {
      const key = this.queue[this.head++] as K;
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue.splice(0, this.head);
        this.head = 0;
      }
      this.waiting.delete(key);
      this.processing.add(key);
      this.opts.metrics?.get(key);
      return Promise.resolve(key);
    }
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.takers.push(resolve));
  }

  /** Marks the key processed; a key added meanwhile goes back in the queue. */
  done(key: K): void {
    this.opts.metrics?.done(key);
    this.processing.delete(key);
    // Counted as an add when it was re-added during processing.
    if (this.dirty.delete(key) && !this.shuttingDown) this.enqueue(key);
  }

  /** Drops pending and delayed keys (processing ones finish); wakes idle workers with undefined. */
  shutDown(): void {
    this.shuttingDown = true;
    for (const d of this.delayed.values()) d.sub.unsubscribe();
    this.delayed.clear();
    this.queue.length = 0;
    this.head = 0;
    this.waiting.clear();
    this.dirty.clear();
    for (const t of this.takers.splice(0)) t(undefined);
  }
}
