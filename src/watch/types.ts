import type { KubeObject, List } from '../kube/types.js';
import type { Observable } from '../rx/index.js';

/**
 * What a watch stream emits, shaped like kube-rs's `watcher::Event`:
 * - `Init` starts a (re)list. It can repeat before `InitDone` when a list is restarted after a
 *   failure: treat every `Init` as "start a fresh buffer".
 * - `InitApply(obj)` is one object of that list (pages are emitted as they arrive).
 * - `Delete(obj)` right before `InitDone`: an object known before the relist that the new list no
 *   longer has (it vanished while we were not watching). Also emitted for watch DELETED events.
 * - `InitDone` ends the list. A consumer may also treat it as "swap in the buffered set".
 * - `Apply(obj)` is a watch ADDED or MODIFIED.
 */
export type WatchEvent<T> =
  | { readonly type: 'Init' }
  | { readonly type: 'InitApply'; readonly object: T }
  | { readonly type: 'InitDone' }
  | { readonly type: 'Apply'; readonly object: T }
  | { readonly type: 'Delete'; readonly object: T };

export type WatchEventType = WatchEvent<unknown>['type'];

/**
 * One page of a list request. Without resourceVersion a list is a consistent read (most recent);
 * the watcher sets one only to ask whether the server has reached its resume point.
 */
export interface ListRequest {
  /** Page size (`limit`). */
  limit: number;
  /** `continue` token of the previous page. */
  continue?: string;
  /** With resourceVersionMatch=NotOlderThan: data at least as new as this. */
  resourceVersion?: string;
  resourceVersionMatch?: 'NotOlderThan';
  /** Deadline for this page, in ms (the watcher also enforces it through its scheduler). */
  timeoutMs: number;
}

export interface WatchRequest {
  /** Resume point: the list's resourceVersion or the last one seen (events and bookmarks). */
  resourceVersion: string;
  /** Server-side watch timeout (randomised 5-10 min by default, like client-go). */
  timeoutSeconds: number;
  allowWatchBookmarks: true;
}

/**
 * What the watcher needs from the API server. Implementations: `kubeTransport` (real server) and
 * `ScriptedTransport` (unit tests). Failures reject/error with `KubeApiError` (has a status),
 * `KubeTransportError` (network) or anything else (counted as `unknown`).
 */
export interface WatchTransport {
  /** One page of the list. Must stop (and settle or never settle) when `signal` aborts. */
  list(req: ListRequest, signal: AbortSignal): Promise<List<unknown>>;
  /**
   * Opens a watch. Resolves once the server accepted it (response headers) with the body as text
   * chunks, arbitrarily split (lines are JSON watch events separated by '\n'). The Observable
   * completes when the server ends the response cleanly and errors on a broken connection.
   * Aborting `signal` or unsubscribing must release the connection.
   */
  watch(req: WatchRequest, signal: AbortSignal): Promise<Observable<string>>;
}

/** Read access to what a consumer already holds, keyed like the watcher keys objects. */
export interface KnownObjects<T> {
  forEach(fn: (obj: T, key: string) => void): void;
}

/** A function turning a raw wire object into the stored shape, or undefined when it is unusable. */
export type StripFn<T extends KubeObject> = (raw: unknown) => T | undefined;

/** Health of one watch stream, as the reconciler gates on it. All times are `scheduler.now()` ms. */
export interface WatchHealth {
  readonly resource: string;
  /**
   * True from a successful list page or watch open until the next failure (error, idle timeout,
   * 410, refused request). A clean server-side close followed by an immediate resume stays true.
   */
  readonly connected: boolean;
  /** The first complete list has been delivered (`InitDone`). Never goes back to false. */
  readonly synced: boolean;
  /** A list (initial or relist) is in progress. */
  readonly listing: boolean;
  /** When data last arrived: a watch event (bookmarks included) or a list page. */
  readonly lastEventAt: number | undefined;
  /** When `connected` last changed (or when the stream started). */
  readonly since: number;
  /**
   * When the server last proved it is serving us: data arrived, or it accepted a watch from our
   * resourceVersion (it then replays everything after it, so we are caught up). A quiet but healthy
   * watch keeps this fresh through idle-timeout reconnects; a stalled one does not.
   */
  readonly lastContactAt: number | undefined;
  /** Watches re-established after the first one (clean closes, failures). */
  readonly reconnects: number;
  /** Lists after the first successful sync (410 Gone, failures during a relist). */
  readonly relists: number;
  /** Reason of the last failure (kept after recovery), e.g. `gone`, `network`, `idle_timeout`. */
  readonly lastError: string | undefined;
  readonly lastErrorAt: number | undefined;
}

/** Knobs of the watch loop. Defaults in `DEFAULT_TUNING`. */
export interface WatchTuning {
  /**
   * List page size (objects per page). Each page is read and parsed whole before its items are
   * stripped, so the page, not the store, sets the memory peak of a (re)list: a Node is 4 KB of JSON
   * bare and several times that with a kubelet's image list, and the parsed tree comes on top
   * (client-go pages by 500).
   */
  pageSize: number;
  /** Deadline per list page. */
  listTimeoutMs: number;
  /**
   * A watch that delivers nothing (no event, no bookmark) for this long is torn down and resumed.
   * The API server sends a bookmark about once a minute to watchers that ask for bookmarks, so
   * this sits above that interval. The timer also covers waiting for the watch response.
   */
  idleTimeoutMs: number;
  /** Server-side watch timeoutSeconds is drawn uniformly from [min, max]. */
  watchTimeoutSeconds: { min: number; max: number };
  backoff: BackoffOptions;
  /** Upper bound on a server's Retry-After. */
  maxRetryAfterMs: number;
  /** A watch ending cleanly within this time without a single event counts as a failure. */
  shortWatchMs: number;
  /** health$ re-emits on new data at most this often (state changes are emitted at once). */
  healthEmitIntervalMs: number;
  /** A watch line longer than this (characters) fails the connection. */
  maxLineLength: number;
}

export interface BackoffOptions {
  initialMs: number;
  factor: number;
  maxMs: number;
  /** Delays restart from `initialMs` after this long without a failure. */
  resetAfterMs: number;
  /** Relative jitter: delay * (1 ± jitter), never above maxMs. */
  jitter: number;
}

export const DEFAULT_BACKOFF: Readonly<BackoffOptions> = Object.freeze({
  initialMs: 800,
  factor: 2,
  maxMs: 30_000,
  resetAfterMs: 120_000,
  jitter: 0.2,
});

export const DEFAULT_TUNING: Readonly<WatchTuning> = Object.freeze({
  pageSize: 100,
  listTimeoutMs: 60_000,
  idleTimeoutMs: 90_000,
  watchTimeoutSeconds: Object.freeze({ min: 300, max: 600 }),
  backoff: DEFAULT_BACKOFF,
  maxRetryAfterMs: 300_000,
  shortWatchMs: 1000,
  healthEmitIntervalMs: 1000,
  maxLineLength: 64 * 1024 * 1024,
});

/** Overrides of `DEFAULT_TUNING`; nested objects may be partial too. */
export type WatchTuningOverrides = Partial<Omit<WatchTuning, 'backoff' | 'watchTimeoutSeconds'>> & {
  backoff?: Partial<BackoffOptions>;
  watchTimeoutSeconds?: Partial<WatchTuning['watchTimeoutSeconds']>;
};

export function resolveTuning(t: WatchTuningOverrides | undefined): WatchTuning {
  return {
    ...DEFAULT_TUNING,
    ...t,
    backoff: { ...DEFAULT_BACKOFF, ...t?.backoff },
    watchTimeoutSeconds: { ...DEFAULT_TUNING.watchTimeoutSeconds, ...t?.watchTimeoutSeconds },
  };
}

/** Store key of an object: `namespace/name` for namespaced objects, `name` otherwise. */
export function objectKey(obj: KubeObject): string {
  const m = obj.metadata;
  return m.namespace ? `${m.namespace}/${m.name}` : m.name;
}
