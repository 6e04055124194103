import type { Clock } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import {
  type Anomaly,
  AnomalyKind,
  NODE_LEASE_NAMESPACE,
  type NodeHealthTracker,
  parseMicros,
} from '../health/index.js';
import { KubeApiError, type KubeClient, KubeTransportError, paths } from '../kube/client.js';
import type { Lease } from '../kube/types.js';
import type { Logger } from '../log/logger.js';
import type { ControllerMetrics } from './metrics.js';
import { type ReadVerdict, StorageSight } from './storage-sight.js';

/**
 * A lease re-read slower than this, with no lease write seen while it waited, shows that the API
 * server's storage was slow or away while it waited (a GET of one Lease takes milliseconds otherwise).
 */
const SLOW_QUORUM_READ_MS = 1_000;

/**
 * What is forgiven after an outage of the API server's storage, besides the outage itself: a
 * kubelet whose renewals failed through it backs off (client-go's lease controller: up to 7 s
 * between attempts), so its first renewal after the storage is back may come this much later.
 */
export const KUBELET_RECONNECT_MS = 8_000;

/**
 * The reconnect back-off a kubelet can be in after renewals failed for `outageMs`: its retries
 * double from 200 ms, so the wait after the outage is at most about as long as the outage, and
 * never over KUBELET_RECONNECT_MS.
 */
export function reconnectAllowance(outageMs: number): number {
  return Math.min(KUBELET_RECONNECT_MS, Math.max(0, outageMs));
}

/** The kubelet renews its Lease every quarter of leaseDurationSeconds (default 40 s: every 10 s). */
const RENEW_INTERVAL_FRACTION = 0.25;
const DEFAULT_LEASE_DURATION_S = 40;
/** Shorter renew intervals are taken as this (two writes of a lease close together are not its rhythm). */
const MIN_RENEW_INTERVAL_MS = 1_000;

/**
 * The renew interval of the kubelet that holds `lease`: the time between this renewal and the one
 * before (`previousRenewTime`), both on the kubelet's own clock (a duration, so clock skew does not
 * enter, and a batch of writes replayed at once still shows the rhythm they were written at); at
 * most a quarter of leaseDurationSeconds, at least 1 s.
 */
export function renewIntervalOf(lease: Lease, previousRenewTime: string | undefined): number {
  const d = lease.spec?.leaseDurationSeconds;
  const seconds = typeof d === 'number' && Number.isFinite(d) && d > 0 ? d : DEFAULT_LEASE_DURATION_S;
  const most = seconds * 1000 * RENEW_INTERVAL_FRACTION;
  const gapMs = renewGapOf(lease, previousRenewTime);
  return gapMs === undefined ? most : Math.min(most, Math.max(MIN_RENEW_INTERVAL_MS, gapMs));
}

/**
 * How long after its renewal before (`previousRenewTime`) the kubelet wrote this one (ms), both on
 * its own clock (skew does not enter); undefined when either does not parse or this one is not later.
 */
export function renewGapOf(lease: Lease, previousRenewTime: string | undefined): number | undefined {
  const now = parseMicros(lease.spec?.renewTime);
  const before = parseMicros(previousRenewTime);
  if (now === undefined || before === undefined || now <= before) return undefined;
  return (now - before) / 1000;
}

/** A re-read that failed because the API server or its storage did not answer (not a refusal). */
function storageUnavailable(err: unknown): boolean {
  if (err instanceof KubeApiError) return err.status >= 500;
  return err instanceof KubeTransportError && err.code !== 'ABORTED';
}

export interface LeaseRecheckOptions {
  clock: Clock;
  log: Logger;
  metrics: ControllerMetrics;
  client: KubeClient;
  tracker: NodeHealthTracker;
  /** Aborted on stop: a re-read in flight ends at once. */
  reads: AbortSignal;
  /** Whether the controller sees and leads now: only then do failures and answers count as outages. */
  acting: () => boolean;
  stopped: () => boolean;
  noteAnomalies: (anomalies: readonly Anomaly[]) => void;
  /** A deadline moved (an outage counted, a renewal found): the caller re-arms its timer. */
  deadlinesMoved: () => void;
}

/**
 * The last look before a node is marked, and what it shows about the API server's storage: the
 * node's lease re-read from the API server (a quorum read), and the outages of etcd under a running
 * kube-apiserver (StorageSight) that move every deadline.
 */
export class LeaseRecheck {
  /** Whether the API server could accept renewals (its storage up), from writes and re-reads. */
  private readonly storage = new StorageSight(SLOW_QUORUM_READ_MS);

  constructor(private readonly o: LeaseRecheckOptions) {}

  private now(): number {
    return this.o.clock.scheduler.now();
  }

  /**
   * A lease write arrived on the watch: the storage accepted it, it works (again). It may end an
   * outage a re-read showed, or a fleet-wide silence of renewals that no re-read fell into.
   */
  writeSeen(lease: Lease): void {
    const name = lease.metadata.name;
    const previous = this.o.tracker.health(name)?.lastSeenRenewTime;
    const outageMs = this.storage.writeSeen(this.now(), {
      lease: name,
      renewIntervalMs: renewIntervalOf(lease, previous),
      renewGapMs: renewGapOf(lease, previous),
    });
    if (outageMs !== undefined) this.outageEnded(outageMs, `lease ${name} renewed`);
  }

  /** The lease watch lost sight: its silence is not the fleet's. */
  leaseWatchLost(): void {
    this.storage.leaseWatchLost();
  }

  /** The lease watch sees again after a blind spell (whose time moved deadlines already). */
  leaseWatchSees(): void {
    this.storage.leaseWatchSees(this.now());
  }

  /** A blind spell began at `since`: an outage of the storage in progress ends where it begins. */
  spellBegan(since: number, reason: string): void {
    const outageMs = this.storage.watchBlind(since);
    if (outageMs !== undefined) this.outageEnded(outageMs, `blind (${reason})`);
  }

  /**
   * Before marking, re-read the node's lease from the API server. If it was renewed after all, our
   * watch is behind: feed the fresh lease, count it, mark nothing. If we cannot read it, we cannot
   * see: mark nothing now and retry (throws). An answer that is not that Lease (a proxy's HTML
   * page, another object) shows nothing either: counted and logged as bad data, not marked, read
   * again on the next safety-net pass. True: the node may be marked.
   */
  async confirmStale(name: string): Promise<boolean> {
    const { client, tracker, log, acting } = this.o;
    let lease: unknown;
    // Timed from when it leaves the process: a wait for a client-side token is not the storage's.
    let sentAt: number | undefined;
    try {
      lease = await client.request<unknown>({
        method: 'GET',
        path: paths.lease(NODE_LEASE_NAMESPACE, name),
        timeoutMs: 5_000,
        // The mark waits for it: first in the client's limiter, as the mark itself. One GET per
        // node, never a LIST of the namespace: a LIST may be served from kube-apiserver's watch
        // cache, which after an etcd restore under it still holds renewals etcd no longer has.
        priority: 'critical',
        signal: this.o.reads,
        onSend: () => {
          sentAt = this.now();
        },
      });
    } catch (err) {
      if (err instanceof KubeApiError && err.isNotFound) return true; // judged on node status alone
      if (!this.o.stopped()) log.warn('Cannot confirm a stale lease; not marking', { node: name, err });
      // While blind, the spell moves deadlines, not the storage's outage.
      if (acting() && sentAt !== undefined && storageUnavailable(err) && this.storage.readFailed(sentAt)) {
        log.warn(
          'The API server cannot serve a quorum read: no node is judged on the time until it can (kubelets cannot renew through it either)',
          { node: name },
        );
      }
      throw err;
    }
    // What the answer shows about the API server's storage (an outage it ends, its own slowness, a
    // fleet-wide silence): every deadline moves by it first, and this node is judged against its
    // new one (below).
    if (acting() && sentAt !== undefined)
      this.storageShown(this.storage.readAnswered(sentAt, this.now()), name);
    const r = tracker.observeLeaseRead(name, lease, this.now());
    this.o.noteAnomalies(r.anomalies);
    if (!r.valid) return false;
    // A renewTime we saw before, older than the latest: the API server's storage is behind what the
    // watch already showed (etcd restored from a backup under it). It shows nothing about the node
    // now: mark nothing, read again on the next safety-net pass.
    if (r.anomalies.some((a) => a.kind === AnomalyKind.RenewTimeReplayed)) {
      log.warn('The API server answered with an older renewal than the watch showed; not marking', {
        node: name,
      });
      return false;
    }
    if (r.refreshed) {
      this.o.metrics.watchLagDetected.inc();
      log.warn('Lease was renewed but the watch had not shown it; not marking', { node: name });
      this.o.deadlinesMoved();
      return false;
    }
    // Its deadline moved while we read (an outage counted: by this read, another one, or a write).
    const deadline = tracker.health(name)?.deadline;
    if (deadline !== undefined && deadline > this.now()) {
      this.o.deadlinesMoved();
      return false;
    }
    return true;
  }

  /** What the answer to node `name`'s re-read showed about the storage, carried out. */
  private storageShown(v: ReadVerdict, name: string): void {
    const endedBy = `re-read of lease ${name}`;
    if (v.outageMs !== undefined) this.outageEnded(v.outageMs, endedBy);
    // Its own wait only, and no reconnect allowance: repeated slow answers to the re-reads of a dead
    // fleet must not move deadlines faster than time passes.
    if (v.slowMs !== undefined) this.outageEnded(v.slowMs, `slow ${endedBy}`, 0);
    if (v.silentMs !== undefined) this.silenceAnswered(v.silentMs, name);
  }

  /**
   * A re-read found the whole fleet silent (no lease written for 1.5 renew intervals): the storage
   * works now (it answered), and either it was away until now (kubelets are in their back-off) or
   * the fleet died. No node is judged before the kubelets could reconnect; then each on its own.
   */
  private silenceAnswered(silentMs: number, name: string): void {
    const now = this.now();
    this.o.tracker.holdAll(now + KUBELET_RECONNECT_MS, now);
    this.o.metrics.fleetSilences.inc();
    this.o.log.warn(
      'No lease written by any node for longer than they renew: no node is judged until the kubelets could reconnect',
      {
        silentFor: formatDuration(Math.round(silentMs)),
        heldFor: formatDuration(KUBELET_RECONNECT_MS),
        node: name,
      },
    );
    this.o.deadlinesMoved();
  }

  /**
   * An outage of the API server's storage ended (`endedBy`): no node is judged on its time, nor on
   * the kubelets' reconnect back-off after it (at most a fresh grace from now, and in all at most a
   * node's grace past its last observation: the tracker caps both).
   */
  private outageEnded(outageMs: number, endedBy: string, allowanceMs = reconnectAllowance(outageMs)): void {
    if (outageMs <= 0) return;
    this.o.tracker.forgiveOutage(outageMs + allowanceMs, this.now());
    this.o.metrics.storageOutageSeconds.inc(outageMs / 1000);
    this.o.log.warn('The API server could not reach its storage: every deadline moved by the outage', {
      outage: formatDuration(Math.round(outageMs)),
      reconnectAllowance: formatDuration(allowanceMs),
      endedBy,
    });
    this.o.deadlinesMoved();
  }
}
