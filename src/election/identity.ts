import { createHash } from 'node:crypto';
import { type Clock, timerDelay } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import { KubeApiError } from '../kube/client.js';
import type { Lease } from '../kube/types.js';
import type { Logger } from '../log/logger.js';
import type { Observable, Subscription } from '../rx/index.js';
import { COMPONENT_NAME } from './config.js';
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
export const LEADER_LABEL = 'node-lifecycle-controller.nlc.dev/leader';
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

interface Tracked {
  key: string;
  since: number;
}

/**
 * Publishes and renews this replica's identity lease and garbage-collects those of dead replicas.
 *
 * GC judges age by OUR observation, never by comparing a remote renewTime with our clock (upstream
 * kube-apiserver does compare renewTime + leaseDuration with its wall clock, which a skewed clock
 * breaks both ways). A lease is stale when its renewTime and holder have not changed for gcAge
 * while we were looking; at startup we know no history, so nothing is collected before we have
 * watched a lease for a full gcAge. The delete is preconditioned on the resourceVersion we last
 * read, so a renewal racing the delete wins. Every replica runs GC; deletes are idempotent.
 */
export class IdentityLeases {
  readonly leaseName: string;
  readonly component: string;
  readonly selector: string;
  private readonly api: LeaseApi;
  private readonly log: Logger;
  private readonly o: IdentityLeaseOptions;
  private readonly leaseDurationSeconds: number;
  private readonly renewIntervalMs: number;
  private readonly gcAgeMs: number;
  private readonly gcCheckIntervalMs: number;
  private readonly random: () => number;
  private cached: Lease | undefined;
  private leading = false;
  private running = false;
  private syncing = false;
  private dirty = false;
  private renewTimer: Subscription | undefined;
  private gcTimer: Subscription | undefined;
  private leadingSub: Subscription | undefined;
  private failures = 0;
  private readonly tracked = new Map<string, Tracked>();
  private acquiredAt: string | undefined;

  constructor(o: IdentityLeaseOptions) {
    this.o = o;
    this.component = o.component ?? COMPONENT_NAME;
    this.leaseName = identityLeaseName(this.component, o.hostname);
    this.selector = `${IDENTITY_LABEL}=${labelValue(this.component)}`;
    this.api = new LeaseApi(o.client, o.namespace);
    this.log = o.logger.with({ component: 'identity-lease', lease: `${o.namespace}/${this.leaseName}` });
    this.leaseDurationSeconds = o.leaseDurationSeconds ?? IDENTITY_DEFAULTS.leaseDurationSeconds;
    this.gcAgeMs = o.gcAgeMs ?? IDENTITY_DEFAULTS.gcAgeMs;
    // Every replica collects leases unchanged for gcAge, so a live replica must renew well within
    // it: with a short gcAge (--identity-lease-gc-age below ~10 s) the default interval would get
    // live replicas' leases deleted between renewals.
    this.renewIntervalMs = o.renewIntervalMs ?? Math.min(IDENTITY_DEFAULTS.renewIntervalMs, this.gcAgeMs / 4);
    this.gcCheckIntervalMs =
      o.gcCheckIntervalMs ?? Math.min(IDENTITY_DEFAULTS.gcCheckIntervalMs, this.gcAgeMs / 4);
    this.random = o.random ?? Math.random;
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
    this.scheduleGc(0);
  }

  /** Stops renewing and collecting; the lease stays (a restart with the same name takes it over). */
  stop(): void {
    this.running = false;
    this.renewTimer?.unsubscribe();
    this.gcTimer?.unsubscribe();
    this.leadingSub?.unsubscribe();
    this.renewTimer = this.gcTimer = this.leadingSub = undefined;
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
        leaseDurationSeconds: this.leaseDurationSeconds,
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
    const timeoutMs = Math.max(1000, Math.min(this.renewIntervalMs, 10_000));
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
      ? this.renewIntervalMs * (1 + 0.04 * this.random())
      : Math.min(this.renewIntervalMs, 200 * 2 ** Math.min(this.failures, 10));
    this.renewTimer = this.o.clock.scheduler.schedule(() => void this.sync(), timerDelay(base));
    return ok;
  }

  private scheduleGc(delay: number): void {
    this.gcTimer?.unsubscribe();
    this.gcTimer = this.o.clock.scheduler.schedule(() => {
      void this.collect().finally(() => {
        if (this.running) this.scheduleGc(this.gcCheckIntervalMs);
      });
    }, timerDelay(delay));
  }

  /**
   * One GC pass: lists identity leases, notes which changed, deletes those unchanged for gcAge
   * (ours excepted). While we lead, also resets a stale `leader=true` on replicas that are not
   * the lock holder (a leader that died keeps its label until collected otherwise).
   * Returns the names deleted.
   */
  async collect(): Promise<string[]> {
    const deleted: string[] = [];
    let items: Lease[];
    try {
      items = (await this.api.list(this.selector, { timeoutMs: 10_000 })).items;
    } catch (err) {
      this.log.warn('Failed to list identity leases', { err });
      return deleted;
    }
    const now = this.o.clock.scheduler.now();
    const present = new Set<string>();
    const stale: string[] = [];
    for (const lease of items) {
      const name = lease.metadata.name;
      if (name === this.leaseName) continue;
      present.add(name);
      const key = changeKey(lease);
      const t = this.tracked.get(name);
      if (!t || t.key !== key) this.tracked.set(name, { key, since: now });
      else if (now - t.since >= this.gcAgeMs) stale.push(name);
    }
    for (const name of this.tracked.keys()) if (!present.has(name)) this.tracked.delete(name);

    for (const name of stale) {
      try {
        const fresh = await this.api.get(name, { timeoutMs: 10_000 });
        const t = this.tracked.get(name);
        if (!fresh || !t) {
          this.tracked.delete(name);
          continue;
        }
        if (changeKey(fresh) !== t.key) {
          this.tracked.set(name, { key: changeKey(fresh), since: this.o.clock.scheduler.now() });
          continue;
        }
        const rv = fresh.metadata.resourceVersion;
        if (rv && (await this.api.deleteIfUnchanged(name, rv, { timeoutMs: 10_000 }))) {
          deleted.push(name);
          this.tracked.delete(name);
          this.o.metrics.identityCollected.inc();
          this.log.info('Deleted stale identity lease', {
            stale: name,
            holder: fresh.spec?.holderIdentity ?? '',
            unchangedFor: formatDuration(Math.round(this.o.clock.scheduler.now() - t.since)),
          });
        }
      } catch (err) {
        this.log.warn('Failed to collect identity lease', { stale: name, err });
      }
    }

    if (this.leading && this.o.elector) {
      const holder = this.o.elector.getLeader();
      for (const lease of items) {
        const name = lease.metadata.name;
        if (name === this.leaseName || deleted.includes(name)) continue;
        const rv = lease.metadata.resourceVersion;
        if (lease.metadata.labels?.[LEADER_LABEL] !== 'true' || lease.spec?.holderIdentity === holder || !rv)
          continue;
        try {
          await this.api.patchLabels(name, rv, { [LEADER_LABEL]: 'false' }, { timeoutMs: 10_000 });
          this.log.info('Reset stale leader label', { replica: name });
        } catch (err) {
          if (!isConflict(err)) this.log.warn('Failed to reset leader label', { replica: name, err });
        }
      }
    }
    return deleted;
  }
}

function changeKey(lease: Lease): string {
  return `${lease.spec?.renewTime ?? ''}|${lease.spec?.holderIdentity ?? ''}`;
}
