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
  private connectedFlag = false;
  private syncedFlag = false;
  private listingFlag = false;
  private lastEvent: number | undefined;
  private lastContact: number | undefined;
  private sinceAt: number;
  private reconnectCount = 0;
  private relistCount = 0;
  private lastErrorReason: string | undefined;
  private lastErrorTime: number | undefined;
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
    this.sinceAt = now;
    this.lastEmitAt = now;
    this.subject = new BehaviorSubject<WatchHealth>(this.snapshot());
    this.health$ = isolateConsumers(this.subject.asObservable(), () => this.countError('subscriber'));
  }

  snapshot(): WatchHealth {
    return {
      resource: this.resource,
      connected: this.connectedFlag,
      synced: this.syncedFlag,
      listing: this.listingFlag,
      lastEventAt: this.lastEvent,
      since: this.sinceAt,
      lastContactAt: this.lastContact,
      reconnects: this.reconnectCount,
      relists: this.relistCount,
      lastError: this.lastErrorReason,
      lastErrorAt: this.lastErrorTime,
    };
  }

  get connected(): boolean {
    return this.connectedFlag;
  }
  get synced(): boolean {
    return this.syncedFlag;
  }
  get lastEventAt(): number | undefined {
    return this.lastEvent;
  }
  get reconnects(): number {
    return this.reconnectCount;
  }
  get relists(): number {
    return this.relistCount;
  }
  /** Seconds since the last data (or since the stream started, before any). */
  secondsSinceLastEvent(now = this.scheduler.now()): number {
    return Math.max(0, (now - (this.lastEvent ?? this.startedAt)) / 1000);
  }
  errorCount(reason: string): number {
    return this.errors.get(reason) ?? 0;
  }

  // ---- written by the watch layer ----

  /** Data arrived (watch events or a list page). Cheap: called once per chunk. */
  noteData(now: number): void {
    this.lastEvent = now;
    this.lastContact = now;
    if (now - this.lastEmitAt >= this.emitIntervalMs) this.emit(now);
  }

  /** The server accepted a watch (response headers): caught up as of now. */
  noteContact(now: number): void {
    this.lastContact = now;
  }

  setConnected(connected: boolean, now: number): void {
    if (this.connectedFlag === connected) return;
    this.connectedFlag = connected;
    this.sinceAt = now;
    this.emit(now);
  }

  setListing(listing: boolean, now: number): void {
    if (this.listingFlag === listing) return;
    this.listingFlag = listing;
    this.emit(now);
  }

  setSynced(now: number): void {
    if (this.syncedFlag) return;
    this.syncedFlag = true;
    this.emit(now);
  }

  countReconnect(now: number): void {
    this.reconnectCount++;
    this.emit(now);
  }

  countRelist(now: number): void {
    this.relistCount++;
    this.emit(now);
  }

  /** Counts a failure of the stream: not connected any more until the next success. */
  failed(reason: string, now: number): void {
    this.countError(reason);
    this.lastErrorReason = reason;
    this.lastErrorTime = now;
    if (this.connectedFlag) {
      this.connectedFlag = false;
      this.sinceAt = now;
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
