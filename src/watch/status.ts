import { BehaviorSubject, type Observable, type SchedulerLike } from '../rx/index.js';
import { isolateConsumers } from './isolate.js';
import type { WatchHealth } from './types.js';

/** Raw watch event counts (plain numbers: the hot path only does `++`). */
export interface WatchEventCounts {
  ADDED: number;
  MODIFIED: number;
  DELETED: number;
  BOOKMARK: number;
  ERROR: number;
}

/**
 * Live state and counters of one watch stream (one resource). The watcher writes it, health$ and
 * the metrics read it. Methods other than the getters are for the watch layer only.
 */
export class WatchStatus {
  readonly resource: string;
  readonly events: WatchEventCounts = { ADDED: 0, MODIFIED: 0, DELETED: 0, BOOKMARK: 0, ERROR: 0 };
  /** Failures and skipped data by reason. */
  readonly errors = new Map<string, number>();
  /** Objects received through lists. */
  listedObjects = 0;
  /** Size of the attached store, if any (for the metrics). */
  objects: (() => number) | undefined;

  private readonly scheduler: SchedulerLike;
  private readonly emitIntervalMs: number;
  private readonly subject: BehaviorSubject<WatchHealth>;
  /** The state health$ publishes (a copy of it, with the resource, on each emit). */
  private readonly state: { -readonly [K in keyof Omit<WatchHealth, 'resource'>]: WatchHealth[K] };
  private lastEmitAt: number;
  private readonly startedAt: number;

  /** Emits on every state change, and on new data at most every `emitIntervalMs`. */
  readonly health$: Observable<WatchHealth>;

  constructor(resource: string, scheduler: SchedulerLike, opts: { emitIntervalMs?: number } = {}) {
    this.resource = resource;
    this.scheduler = scheduler;
    this.emitIntervalMs = opts.emitIntervalMs ?? 1000;
    const now = scheduler.now();
    this.startedAt = now;
    this.state = {
      connected: false,
      synced: false,
      listing: false,
      lastEventAt: undefined,
      since: now,
      lastContactAt: undefined,
      reconnects: 0,
      relists: 0,
      lastError: undefined,
      lastErrorAt: undefined,
    };
    this.lastEmitAt = now;
    this.subject = new BehaviorSubject<WatchHealth>(this.snapshot());
    this.health$ = isolateConsumers(this.subject.asObservable(), () => this.countError('subscriber'));
  }

  snapshot(): WatchHealth {
    return { resource: this.resource, ...this.state };
  }

  get connected(): boolean {
    return this.state.connected;
  }
  get synced(): boolean {
    return this.state.synced;
  }
  get lastEventAt(): number | undefined {
    return this.state.lastEventAt;
  }
  get reconnects(): number {
    return this.state.reconnects;
  }
  get relists(): number {
    return this.state.relists;
  }
  /** Seconds since the last data (or since the stream started, before any). */
  secondsSinceLastEvent(now = this.scheduler.now()): number {
    return Math.max(0, (now - (this.state.lastEventAt ?? this.startedAt)) / 1000);
  }
  errorCount(reason: string): number {
    return this.errors.get(reason) ?? 0;
  }

  // ---- written by the watch layer ----

  /** Data arrived (watch events or a list page). Cheap: called once per chunk. */
  noteData(now: number): void {
    this.state.lastEventAt = now;
    this.state.lastContactAt = now;
    if (now - this.lastEmitAt >= this.emitIntervalMs) this.emit(now);
  }

  /** The server accepted a watch (response headers): caught up as of now. */
  noteContact(now: number): void {
    this.state.lastContactAt = now;
  }

  setConnected(connected: boolean, now: number): void {
    if (this.state.connected === connected) return;
    this.state.connected = connected;
    this.state.since = now;
    this.emit(now);
  }

  setListing(listing: boolean, now: number): void {
    if (this.state.listing === listing) return;
    this.state.listing = listing;
    this.emit(now);
  }

  setSynced(now: number): void {
    if (this.state.synced) return;
    this.state.synced = true;
    this.emit(now);
  }

  countReconnect(now: number): void {
    this.state.reconnects++;
    this.emit(now);
  }

  countRelist(now: number): void {
    this.state.relists++;
    this.emit(now);
  }

  /** Counts a failure of the stream: not connected any more until the next success. */
  failed(reason: string, now: number): void {
    this.countError(reason);
    this.state.lastError = reason;
    this.state.lastErrorAt = now;
    if (this.state.connected) {
      this.state.connected = false;
      this.state.since = now;
    }
    this.emit(now);
  }

  /** Counts skipped data or a consumer error (the stream goes on). */
  countError(reason: string): void {
    this.errors.set(reason, (this.errors.get(reason) ?? 0) + 1);
  }

  private emit(now: number): void {
    this.lastEmitAt = now;
    this.subject.next(this.snapshot());
  }
}

/** Why a stream cannot be trusted right now; undefined when it can. */
export type WatchBlindness = 'unsynced' | 'disconnected' | 'silent';

/**
 * The gate the reconciler uses before judging staleness from this stream: synced, connected, and
 * in contact with the server within `silenceThresholdMs` of `now` (data, or a watch the server
 * accepted from our resourceVersion). All times are monotonic ms from the same scheduler.
 */
export function watchBlindness(
  h: WatchHealth,
  now: number,
  silenceThresholdMs: number,
): WatchBlindness | undefined {
  if (!h.synced) return 'unsynced';
  if (!h.connected) return 'disconnected';
  const contact = h.lastContactAt ?? h.lastEventAt;
  if (contact === undefined || now - contact > silenceThresholdMs) return 'silent';
  return undefined;
}

export function isHealthy(h: WatchHealth, now: number, silenceThresholdMs: number): boolean {
  return watchBlindness(h, now, silenceThresholdMs) === undefined;
}
