import { type Clock, timerDelay } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import type { Lease } from '../kube/types.js';
import type { Logger } from '../log/logger.js';
import type { Subscription } from '../rx/index.js';
import { isConflict, type LeaseApi } from './lease-api.js';
import type { LeaderElectionMetrics } from './metrics.js';

/** The label that names the leader among the identity leases (see identity.ts). */
export const LEADER_LABEL = 'node-lifecycle-controller.nlc.dev/leader';

interface Tracked {
  key: string;
  since: number;
}

export interface IdentityLeaseCollectorOptions {
  api: LeaseApi;
  clock: Clock;
  log: Logger;
  metrics: LeaderElectionMetrics;
  /** Our own lease: never collected. */
  ownLease: string;
  /** The label selector of the identity leases of our component. */
  selector: string;
  gcAgeMs: number;
  gcCheckIntervalMs: number;
  /** Whether we lead now, and the lock's holder (to reset a stale `leader=true` label). */
  leadership: () => { leading: boolean; holder: string | undefined };
}

/**
 * Garbage collection of the identity leases of dead replicas, judged by OUR observation: a lease
 * is stale when its renewTime and holder have not changed for gcAge while we were looking (never
 * by comparing a remote renewTime with our clock). The delete is preconditioned on the
 * resourceVersion we last read, so a renewal racing the delete wins. Every replica runs it;
 * deletes are idempotent. While we lead, also resets a stale `leader=true` on other replicas.
 */
export class IdentityLeaseCollector {
  private readonly o: IdentityLeaseCollectorOptions;
  private readonly tracked = new Map<string, Tracked>();
  private timer: Subscription | undefined;
  private running = false;

  constructor(o: IdentityLeaseCollectorOptions) {
    this.o = o;
  }

  /** A pass now, then one every gcCheckInterval until stop(). */
  start(): void {
    this.running = true;
    this.schedule(0);
  }

  stop(): void {
    this.running = false;
    this.timer?.unsubscribe();
    this.timer = undefined;
  }

  private schedule(delay: number): void {
    this.timer?.unsubscribe();
    this.timer = this.o.clock.scheduler.schedule(() => {
      void this.collect().finally(() => {
        if (this.running) this.schedule(this.o.gcCheckIntervalMs);
      });
    }, timerDelay(delay));
  }

  /**
   * One GC pass: lists identity leases, notes which changed, deletes those unchanged for gcAge
   * (ours excepted); while we lead, resets stale leader labels. Returns the names deleted.
   */
  async collect(): Promise<string[]> {
    let items: Lease[];
    try {
      items = (await this.o.api.list(this.o.selector, { timeoutMs: 10_000 })).items;
    } catch (err) {
      this.o.log.warn('Failed to list identity leases', { err });
      return [];
    }
    const deleted: string[] = [];
    for (const name of this.track(items)) {
      if (await this.deleteIfStill(name)) deleted.push(name);
    }
    await this.resetLeaderLabels(items, deleted);
    return deleted;
  }

  /** Notes which leases changed since the last pass; returns those unchanged for gcAge. */
  private track(items: readonly Lease[]): string[] {
    const now = this.o.clock.scheduler.now();
    const present = new Set<string>();
    const stale: string[] = [];
    for (const lease of items) {
      const name = lease.metadata.name;
      if (name === this.o.ownLease) continue;
      present.add(name);
      const key = changeKey(lease);
      const t = this.tracked.get(name);
      if (!t || t.key !== key) this.tracked.set(name, { key, since: now });
      else if (now - t.since >= this.o.gcAgeMs) stale.push(name);
    }
    for (const name of this.tracked.keys()) if (!present.has(name)) this.tracked.delete(name);
    return stale;
  }

  /** Reads a stale lease again and deletes it if it is still unchanged (preconditioned). */
  private async deleteIfStill(name: string): Promise<boolean> {
    const { api, clock, log, metrics } = this.o;
    try {
      const fresh = await api.get(name, { timeoutMs: 10_000 });
      const t = this.tracked.get(name);
      if (!fresh || !t) {
        this.tracked.delete(name);
        return false;
      }
      if (changeKey(fresh) !== t.key) {
        this.tracked.set(name, { key: changeKey(fresh), since: clock.scheduler.now() });
        return false;
      }
      const rv = fresh.metadata.resourceVersion;
      if (!rv || !(await api.deleteIfUnchanged(name, rv, { timeoutMs: 10_000 }))) return false;
      this.tracked.delete(name);
      metrics.identityCollected.inc();
      log.info('Deleted stale identity lease', {
        stale: name,
        holder: fresh.spec?.holderIdentity ?? '',
        unchangedFor: formatDuration(Math.round(clock.scheduler.now() - t.since)),
      });
      return true;
    } catch (err) {
      log.warn('Failed to collect identity lease', { stale: name, err });
      return false;
    }
  }

  /**
   * While we lead: a replica other than the lock's holder still labelled `leader=true` (a leader
   * that died keeps its label until collected otherwise) gets `leader=false`.
   */
  private async resetLeaderLabels(items: readonly Lease[], deleted: readonly string[]): Promise<void> {
    const { leading, holder } = this.o.leadership();
    if (!leading || holder === undefined) return;
    for (const lease of items) {
      const name = lease.metadata.name;
      if (name === this.o.ownLease || deleted.includes(name)) continue;
      const rv = lease.metadata.resourceVersion;
      if (lease.metadata.labels?.[LEADER_LABEL] !== 'true' || lease.spec?.holderIdentity === holder || !rv)
        continue;
      try {
        await this.o.api.patchLabels(name, rv, { [LEADER_LABEL]: 'false' }, { timeoutMs: 10_000 });
        this.o.log.info('Reset stale leader label', { replica: name });
      } catch (err) {
        if (!isConflict(err)) this.o.log.warn('Failed to reset leader label', { replica: name, err });
      }
    }
  }
}

function changeKey(lease: Lease): string {
  return `${lease.spec?.renewTime ?? ''}|${lease.spec?.holderIdentity ?? ''}`;
}
