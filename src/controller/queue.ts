import { timerDelay } from '../clock/clock.js';
import type { SchedulerLike, Subscription } from '../rx/index.js';
import type { QueueMetrics } from './workqueue-metrics.js';

/**
 * A work queue of keys with client-go's semantics: a key waiting is stored once however often it
 * is added; a key being processed is never handed to a second worker; a key added while it is
 * processed is processed again afterwards. Failed keys are retried with per-key exponential backoff
 * (controller-runtime's 5 ms doubling, capped). Delays run on an injected scheduler.
 *
 * Beyond client-go: `addUrgent` puts a key ahead of every ordinary one (FIFO among urgent keys), so a
 * lost node's mark does not wait behind a thousand start-up writes through a 20 QPS client; and
 * `maxOrdinary` bounds how many ordinary keys are processed at once (start-up, resyncs), so that
 * many workers can stand ready for urgent keys without a thousand ordinary ones in flight at once.
 */
export class WorkQueue<K = string> {
  private readonly queue: K[] = [];
  private head = 0;
  /** Keys added urgently, served before `queue`; `urgentWaiting` holds the same keys, for lookups. */
  private readonly urgent: K[] = [];
  private readonly urgentWaiting = new Set<K>();
  /** Keys moved from `queue` to `urgent`: how many of their entries in `queue` to skip. */
  private readonly moved = new Map<K, number>();
  private movedCount = 0;
  private readonly waiting = new Set<K>();
  private readonly processing = new Set<K>();
  private readonly dirty = new Set<K>();
  /** Keys re-added urgently while processed: they go back urgently. */
  private readonly dirtyUrgent = new Set<K>();
  private readonly delayed = new Map<K, { at: number; sub: Subscription }>();
  private readonly failures = new Map<K, number>();
  private readonly takers: ((k: K | undefined) => void)[] = [];
  /** Keys processed that were taken as ordinary ones (at most opts.maxOrdinary). */
  private readonly ordinary = new Set<K>();
  private shuttingDown = false;

  constructor(
    private readonly scheduler: SchedulerLike,
    private readonly opts: {
      baseDelayMs?: number;
      maxDelayMs?: number;
      metrics?: QueueMetrics<K>;
      /** Ordinary keys processed at once, at most (default: no bound but the workers). */
      maxOrdinary?: number;
    } = {},
  ) {}

  /** Whether another ordinary key may be processed now. */
  private ordinaryRoom(): boolean {
    return this.opts.maxOrdinary === undefined || this.ordinary.size < this.opts.maxOrdinary;
  }

  get length(): number {
    return this.queue.length - this.head - this.movedCount + this.urgent.length;
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

  /**
   * As `add`, but ahead of every ordinary key: a key already waiting in the ordinary queue moves
   * ahead; a key being processed is processed again at once afterwards.
   */
  addUrgent(key: K): void {
    if (this.shuttingDown) return;
    if (this.processing.has(key)) {
      this.add(key);
      this.dirtyUrgent.add(key);
      return;
    }
    if (this.waiting.has(key)) {
      if (this.urgentWaiting.has(key)) return;
      // Its entry in the ordinary queue stays where it is and is skipped when reached.
      this.moved.set(key, (this.moved.get(key) ?? 0) + 1);
      this.movedCount++;
      this.pushUrgent(key);
      return;
    }
    this.opts.metrics?.add(key);
    this.enqueue(key, true);
  }

  private enqueue(key: K, urgent = false): void {
    this.waiting.add(key);
    if (!urgent) {
      // Behind the ordinary keys already waiting (they may wait for room while workers wait).
      this.queue.push(key);
      this.feed();
      return;
    }
    const taker = this.takers.shift();
    if (taker) this.hand(taker, key, true);
    else this.pushUrgent(key);
  }

  /** Ordinary keys to waiting workers, first come first served, while there is room. */
  private feed(): void {
    while (this.takers.length > 0 && this.ordinaryRoom()) {
      const next = this.nextOrdinary();
      if (next === undefined) return;
      this.hand(this.takers.shift()!, next, false);
    }
  }

  /** Gives a waiting key to a worker. */
  private hand(taker: (k: K | undefined) => void, key: K, urgent: boolean): void {
    this.waiting.delete(key);
    this.processing.add(key);
    if (!urgent) this.ordinary.add(key);
    this.opts.metrics?.get(key);
    taker(key);
  }

  private pushUrgent(key: K): void {
    this.urgent.push(key);
    this.urgentWaiting.add(key);
  }

  /**
   * The next waiting key, urgent ones first, and whether it was urgent; undefined when none waits
   * (or only ordinary ones while maxOrdinary of them are processed).
   */
  private next(): { key: K; urgent: boolean } | undefined {
    const urgent = this.urgent.shift();
    if (urgent !== undefined) {
      this.urgentWaiting.delete(urgent);
      return { key: urgent, urgent: true };
    }
    if (!this.ordinaryRoom()) return undefined;
    const key = this.nextOrdinary();
    return key === undefined ? undefined : { key, urgent: false };
  }

  private nextOrdinary(): K | undefined {
    while (this.head < this.queue.length) {
      const key = this.queue[this.head++] as K;
      if (this.head > 1024 && this.head * 2 > this.queue.length) {
        this.queue.splice(0, this.head);
        this.head = 0;
      }
      const skip = this.moved.get(key);
      if (skip === undefined) return key;
      // An entry left behind by addUrgent: the key was (or will be) served from the urgent queue.
      this.movedCount--;
      if (skip > 1) this.moved.set(key, skip - 1);
      else this.moved.delete(key);
    }
    return undefined;
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
    const next = this.next();
    if (next !== undefined) {
      return new Promise((resolve) => this.hand(resolve, next.key, next.urgent));
    }
    if (this.shuttingDown) return Promise.resolve(undefined);
    return new Promise((resolve) => this.takers.push(resolve));
  }

  /** Marks the key processed; a key added meanwhile goes back in the queue. */
  done(key: K): void {
    this.opts.metrics?.done(key);
    this.processing.delete(key);
    const wasOrdinary = this.ordinary.delete(key);
    // Counted as an add when it was re-added during processing.
    const urgent = this.dirtyUrgent.delete(key);
    if (this.dirty.delete(key) && !this.shuttingDown) this.enqueue(key, urgent);
    // Its room for an ordinary key: to a worker waiting, if one waits.
    if (wasOrdinary) this.feed();
  }

  /** Drops pending and delayed keys (processing ones finish); wakes idle workers with undefined. */
  shutDown(): void {
    this.shuttingDown = true;
    for (const d of this.delayed.values()) d.sub.unsubscribe();
    this.delayed.clear();
    this.queue.length = 0;
    this.head = 0;
    this.urgent.length = 0;
    this.urgentWaiting.clear();
    this.moved.clear();
    this.movedCount = 0;
    this.waiting.clear();
    this.dirty.clear();
    this.dirtyUrgent.clear();
    for (const t of this.takers.splice(0)) t(undefined);
  }
}
