import { createHash } from 'node:crypto';
import { type Clock, timerDelay } from '../clock/clock.js';
import { KubeApiError } from '../kube/client.js';
import type { Lease } from '../kube/types.js';
import type { Logger } from '../log/logger.js';
import type { Observable, Subscription } from '../rx/index.js';
import { COMPONENT_NAME } from './config.js';
import { IdentityLeaseCollector, LEADER_LABEL } from './identity-gc.js';
import { isConflict, type KubeRequester, LeaseApi } from './lease-api.js';
import type { LeaderElectionMetrics } from './metrics.js';
import { microTime } from './record.js';

/**
 * Identity leases, the way kube-apiserver publishes `apiserver-<hash>` leases: every replica keeps
 * its own Lease in the controller's namespace, so
 *
 *   kubectl -n <ns> get lease -l node-lifecycle-controller.nlc.dev/identity=node-lifecycle-controller -L node-lifecycle-controller.nlc.dev/leader
 *
 * lists the running replicas (HOLDER = the replica's election identity) and who leads.
 */
export const IDENTITY_LABEL = 'node-lifecycle-controller.nlc.dev/identity';
export { LEADER_LABEL };
/** Upstream's well-known label (kube-apiserver sets it on its identity leases too). */
export const HOSTNAME_LABEL = 'kubernetes.io/hostname';
/** The full host/pod name (a label value is limited to 63 characters). */
export const HOSTNAME_ANNOTATION = 'node-lifecycle-controller.nlc.dev/hostname';

export const IDENTITY_DEFAULTS = {
  /** kube-apiserver: IdentityLeaseDurationSeconds. Informational: GC does not trust it. */
  leaseDurationSeconds: 3600,
  /** kube-apiserver: IdentityLeaseRenewIntervalPeriod. */
  renewIntervalMs: 10_000,
  /** kube-apiserver collects leases expired for 1 h. */
  gcAgeMs: 3_600_000,
  gcCheckIntervalMs: 60_000,
} as const;

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

function base32NoPad(bytes: Uint8Array): string {
  let out = '';
  let buffer = 0;
  let bits = 0;
  for (const b of bytes) {
    buffer = (buffer << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += BASE32[(buffer >>> (bits - 5)) & 31];
      bits -= 5;
    }
    buffer &= (1 << bits) - 1;
  }
  if (bits > 0) out += BASE32[(buffer << (5 - bits)) & 31];
  return out;
}

function lengthPrefixed(s: string): Buffer {
  const body = Buffer.from(s, 'utf8');
  const len = Buffer.alloc(2);
  len.writeUInt16BE(Math.min(body.length, 0xffff));
  return Buffer.concat([len, body]);
}

/**
 * `<component>-<hash>`, the hash computed like kube-apiserver's identity: SHA-256 over the
 * uint16-length-prefixed host name and component name, first 16 bytes, lower-case base32 without
 * padding (26 characters). The same host/pod name always gives the same lease.
 */
export function identityLeaseName(component: string, hostname: string): string {
  const digest = createHash('sha256')
    .update(Buffer.concat([lengthPrefixed(hostname), lengthPrefixed(component)]))
    .digest();
  return `${component}-${base32NoPad(digest.subarray(0, 16))}`;
}

/** A valid label value (<= 63 chars, alphanumeric at both ends) derived from any string. */
export function labelValue(v: string): string {
  return v
    .slice(0, 63)
    .replace(/[^A-Za-z0-9_.-]/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '')
    .replace(/[^A-Za-z0-9]+$/, '');
}

export interface IdentityLeaseOptions {
  client: KubeRequester;
  clock: Clock;
  logger: Logger;
  metrics: LeaderElectionMetrics;
  namespace: string;
  /** Host or pod name of this replica (the caller reads it; this module reads no env). */
  hostname: string;
  /** Written as holderIdentity: the replica's election identity. */
  holderIdentity: string;
  component?: string;
  leaseDurationSeconds?: number;
  /** Default: 10 s (kube-apiserver's), or gcAge / 4 when that is shorter. */
  renewIntervalMs?: number;
  /** A lease whose renewTime we saw unchanged for this long is deleted. */
  gcAgeMs?: number;
  gcCheckIntervalMs?: number;
  /** The elector, to keep the leader label current (and fix stale `leader=true` of dead replicas). */
  elector?: { leading$: Observable<boolean>; getLeader(): string };
  random?: () => number;
}

/**
 * Publishes and renews this replica's identity lease (its `leader` label following the elector)
 * and garbage-collects those of dead replicas (IdentityLeaseCollector: by our own observation of
 * their renewals, never by comparing a remote renewTime with our clock; upstream kube-apiserver
 * does, which a skewed clock breaks both ways).
 */
export class IdentityLeases {
  readonly leaseName: string;
  private readonly api: LeaseApi;
  private readonly log: Logger;
  private readonly o: IdentityLeaseOptions;
  /** leaseDurationSeconds written, the renew interval, jitter. */
  private readonly renewal: { leaseDurationSeconds: number; intervalMs: number; random: () => number };
  private readonly collector: IdentityLeaseCollector;
  private cached: Lease | undefined;
  private leading = false;
  private running = false;
  private syncing = false;
  private dirty = false;
  private renewTimer: Subscription | undefined;
  private leadingSub: Subscription | undefined;
  private failures = 0;
  private acquiredAt: string | undefined;

  constructor(o: IdentityLeaseOptions) {
    this.o = o;
    this.leaseName = identityLeaseName(this.component, o.hostname);
    this.api = new LeaseApi(o.client, o.namespace);
    this.log = o.logger.with({ component: 'identity-lease', lease: `${o.namespace}/${this.leaseName}` });
    const gcAgeMs = o.gcAgeMs ?? IDENTITY_DEFAULTS.gcAgeMs;
    this.renewal = {
      leaseDurationSeconds: o.leaseDurationSeconds ?? IDENTITY_DEFAULTS.leaseDurationSeconds,
      // Every replica collects leases unchanged for gcAge, so a live replica must renew well within
      // it: with a short gcAge (--identity-lease-gc-age below ~10 s) the default interval would get
      // live replicas' leases deleted between renewals.
      intervalMs: o.renewIntervalMs ?? Math.min(IDENTITY_DEFAULTS.renewIntervalMs, gcAgeMs / 4),
      random: o.random ?? Math.random,
    };
    this.collector = new IdentityLeaseCollector({
      api: this.api,
      clock: o.clock,
      log: this.log,
      metrics: o.metrics,
      ownLease: this.leaseName,
      selector: this.selector,
      gcAgeMs,
      gcCheckIntervalMs: o.gcCheckIntervalMs ?? Math.min(IDENTITY_DEFAULTS.gcCheckIntervalMs, gcAgeMs / 4),
      leadership: () => ({ leading: this.leading, holder: this.o.elector?.getLeader() }),
    });
  }

  get component(): string {
    return this.o.component ?? COMPONENT_NAME;
  }

  /** The label selector of our component's identity leases. */
  get selector(): string {
    return `${IDENTITY_LABEL}=${labelValue(this.component)}`;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.leadingSub = this.o.elector?.leading$.subscribe((leading) => {
      if (leading === this.leading) return;
      this.leading = leading;
      if (this.running) void this.sync();
    });
    void this.sync();
    this.collector.start();
  }

  /** Stops renewing and collecting; the lease stays (a restart with the same name takes it over). */
  stop(): void {
    this.running = false;
    this.renewTimer?.unsubscribe();
    this.collector.stop();
    this.leadingSub?.unsubscribe();
    this.renewTimer = this.leadingSub = undefined;
  }

  /** Graceful shutdown: stop, then delete our lease unless it changed hands meanwhile. */
  async shutdown(timeoutMs = 5000): Promise<void> {
    this.stop();
    try {
      const current = await this.api.get(this.leaseName, { timeoutMs });
      if (!current?.metadata.resourceVersion || current.spec?.holderIdentity !== this.o.holderIdentity)
        return;
      if (await this.api.deleteIfUnchanged(this.leaseName, current.metadata.resourceVersion, { timeoutMs })) {
        this.log.info('Deleted identity lease on shutdown');
      }
    } catch (err) {
      this.log.warn('Failed to delete identity lease on shutdown', { err });
    }
  }

  private desired(base: Lease | undefined): Lease {
    const now = microTime(this.o.clock.wall());
    const ours = base?.spec?.holderIdentity === this.o.holderIdentity;
    this.acquiredAt ??= ours && typeof base?.spec?.acquireTime === 'string' ? base.spec.acquireTime : now;
    return {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        ...(base?.metadata ?? {}),
        name: this.leaseName,
        namespace: this.o.namespace,
        labels: {
          ...(base?.metadata.labels ?? {}),
          [IDENTITY_LABEL]: labelValue(this.component),
          [HOSTNAME_LABEL]: labelValue(this.o.hostname),
          [LEADER_LABEL]: this.leading ? 'true' : 'false',
        },
        annotations: { ...(base?.metadata.annotations ?? {}), [HOSTNAME_ANNOTATION]: this.o.hostname },
      },
      spec: {
        holderIdentity: this.o.holderIdentity,
        leaseDurationSeconds: this.renewal.leaseDurationSeconds,
        acquireTime: this.acquiredAt,
        renewTime: now,
      },
    };
  }

  /** Renews (or creates, or takes over) our lease now. Resolves true on success. */
  async sync(): Promise<boolean> {
    if (this.syncing) {
      this.dirty = true;
      return false;
    }
    this.syncing = true;
    this.renewTimer?.unsubscribe();
    const timeoutMs = Math.max(1000, Math.min(this.renewal.intervalMs, 10_000));
    let ok = false;
    try {
      if (this.cached) {
        try {
          this.cached = await this.api.update(this.desired(this.cached), { timeoutMs });
          ok = true;
        } catch (err) {
          if (!(isConflict(err) || (err instanceof KubeApiError && err.isNotFound))) throw err;
          this.cached = undefined;
        }
      }
      if (!ok) {
        const current = await this.api.get(this.leaseName, { timeoutMs });
        this.cached = current
          ? await this.api.update(this.desired(current), { timeoutMs })
          : await this.api.create(this.desired(undefined), { timeoutMs });
        if (current && current.spec?.holderIdentity !== this.o.holderIdentity) {
          this.log.info('Took over identity lease', { previousHolder: current.spec?.holderIdentity ?? '' });
        }
        ok = true;
      }
      this.failures = 0;
    } catch (err) {
      this.failures++;
      this.o.metrics.identityRenewErrors.inc();
      this.log.warn('Failed to renew identity lease', { err, failures: this.failures });
    } finally {
      this.syncing = false;
    }
    if (!this.running) return ok;
    if (this.dirty) {
      this.dirty = false;
      return await this.sync();
    }
    const base = ok
      ? this.renewal.intervalMs * (1 + 0.04 * this.renewal.random())
      : Math.min(this.renewal.intervalMs, 200 * 2 ** Math.min(this.failures, 10));
    this.renewTimer = this.o.clock.scheduler.schedule(() => void this.sync(), timerDelay(base));
    return ok;
  }

  /**
   * One GC pass now (see IdentityLeaseCollector): deletes the leases of other replicas unchanged
   * for gcAge while we watched; while we lead, resets stale leader labels. Returns the names deleted.
   */
  async collect(): Promise<string[]> {
    return await this.collector.collect();
  }
}
