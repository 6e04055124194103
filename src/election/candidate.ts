import { type Clock, timerDelay } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import { KubeApiError } from '../kube/client.js';
import type { KubeObject } from '../kube/types.js';
import type { Logger } from '../log/logger.js';
import type { Observable, Subscription } from '../rx/index.js';
import type { Reflector, ResourceWatchDeps } from '../watch/index.js';
import { isConflict, type KubeRequester } from './lease-api.js';
import { watchNamed } from './lock-watch.js';
import type { LeaderElectionMetrics } from './metrics.js';
import { microTime, microTimeAfter } from './record.js';

/**
 * The LeaseCandidate of coordinated leader election (KEP-4355): each replica publishes one, named
 * by its election identity (the coordinator writes that name into the lock as holderIdentity), in
 * the lock's namespace, and keeps it renewed. The coordinator in kube-apiserver pings candidates
 * (a new spec.pingTime) before it elects and counts those that renewed within 5 s after the ping.
 *
 * coordination.k8s.io/v1beta1 is the only version kube-apiserver 1.33-1.37 serves (v1.37.2 answers
 * every call with `299 - "coordination.k8s.io/v1beta1 LeaseCandidate is deprecated in v1.36+,
 * unavailable in v1.39+"`); it is served only with --runtime-config=coordination.k8s.io/v1beta1=true.
 */
export const LEASE_CANDIDATE_GROUP_VERSION = 'coordination.k8s.io/v1beta1';
/** The strategy kube-apiserver's coordinator implements: the oldest emulation version leads. */
export const OLDEST_EMULATION_VERSION = 'OldestEmulationVersion';

export const CANDIDATE_DEFAULTS = {
  /** client-go's LeaseCandidate requeueInterval: a renewal every 5 minutes besides the pings. */
  renewIntervalMs: 5 * 60_000,
  requestTimeoutMs: 5_000,
  /**
   * The withdrawal before the fall-back to ordinary election (CoordinationWatchdog): the deletion
   * is given this long, and the replica campaigns no earlier than this after it stopped answering
   * pings, deleted or not. kube-apiserver's coordinator elects only candidates whose renewTime is
   * within its 5 s election duration: twice that leaves an election it ran on our last answer
   * time to land (we then lead, named) and up to 5 s of clock skew.
   */
  withdrawMs: 10_000,
} as const;

export interface LeaseCandidateSpec {
  leaseName?: string;
  binaryVersion?: string;
  emulationVersion?: string;
  strategy?: string;
  pingTime?: string | null;
  renewTime?: string | null;
}

export interface LeaseCandidate extends KubeObject {
  spec?: LeaseCandidateSpec;
}

export const candidatePaths = {
  group: '/apis/coordination.k8s.io/v1beta1',
  list: (ns: string) =>
    `/apis/coordination.k8s.io/v1beta1/namespaces/${encodeURIComponent(ns)}/leasecandidates`,
  one: (ns: string, name: string) =>
    `/apis/coordination.k8s.io/v1beta1/namespaces/${encodeURIComponent(ns)}/leasecandidates/${encodeURIComponent(name)}`,
};

const SEMVER =
  /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$/;

/**
 * The versions a candidate publishes, as kube-controller-manager does: the binary version without
 * pre-release or build parts (semver's FinalizeVersion: "0.2.0-dev" -> "0.2.0"), and the emulation
 * version `<major>.<minor>.0`, from --emulated-version (major.minor, not above the binary's) or the
 * binary's own. Throws an Error naming the flag when they cannot be made.
 */
export function candidateVersions(
  buildVersion: string,
  emulated: string | undefined,
): { binaryVersion: string; emulationVersion: string } {
  const m = SEMVER.exec(buildVersion);
  if (!m) {
    throw new Error(
      `coordinated leader election needs a semantic version (MAJOR.MINOR.PATCH), and this build is ${JSON.stringify(buildVersion)}`,
    );
  }
  const [major, minor, patch] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const binaryVersion = `${major}.${minor}.${patch}`;
  if (emulated === undefined || emulated === '') {
    return { binaryVersion, emulationVersion: `${major}.${minor}.0` };
  }
  const e = /^(0|[1-9]\d*)\.(0|[1-9]\d*)$/.exec(emulated);
  if (!e) {
    throw new Error(
      `invalid value ${JSON.stringify(emulated)} for flag --emulated-version: accepted: MAJOR.MINOR, at most the binary's ${major}.${minor}`,
    );
  }
  const [emMajor, emMinor] = [Number(e[1]), Number(e[2])];
  if (emMajor > major || (emMajor === major && emMinor > minor)) {
    throw new Error(
      `invalid value ${JSON.stringify(emulated)} for flag --emulated-version: it must not be above the binary's version ${major}.${minor}`,
    );
  }
  return { binaryVersion, emulationVersion: `${emMajor}.${emMinor}.0` };
}

/**
 * A watch of our own LeaseCandidate alone (resource label "candidate" in the watch metrics). Not
 * started. Its events feed the publisher through namedUpdates().
 */
export function watchCandidate(
  deps: ResourceWatchDeps,
  namespace: string,
  name: string,
): Reflector<LeaseCandidate> {
  return watchNamed(deps, {
    resource: 'candidate',
    path: candidatePaths.list(namespace),
    name,
    strip: stripCandidate,
  });
}

function stripCandidate(raw: unknown): LeaseCandidate | undefined {
  const o = raw as LeaseCandidate | undefined;
  const m = o?.metadata;
  if (!m || typeof m.name !== 'string') return undefined;
  const spec = o.spec && typeof o.spec === 'object' ? o.spec : undefined;
  return {
    metadata: {
      name: m.name,
      namespace: m.namespace,
      uid: m.uid,
      resourceVersion: m.resourceVersion,
      creationTimestamp: m.creationTimestamp,
    },
    spec,
  };
}

export interface LeaseCandidateOptions {
  client: KubeRequester;
  clock: Clock;
  logger: Logger;
  metrics: LeaderElectionMetrics;
  namespace: string;
  /** The election identity: the coordinator writes it into the lock as holderIdentity. */
  name: string;
  /** The lock Lease this replica is a candidate for. */
  leaseName: string;
  binaryVersion: string;
  emulationVersion: string;
  strategy?: string;
  /** Our candidate as a watch sees it (undefined: deleted). Pings arrive through it. */
  updates$?: Observable<LeaseCandidate | undefined>;
  renewIntervalMs?: number;
  requestTimeoutMs?: number;
}

/**
 * Publishes this replica's LeaseCandidate, renews it every 5 minutes (client-go's interval) and
 * answers each ping at once. A ping is judged the way this project judges every remote time: by a
 * CHANGE of spec.pingTime, never by comparing it with our clock (client-go answers while
 * pingTime is after renewTime, which mixes two clocks and, with ours behind, renews in a loop). The
 * answer's renewTime is our wall clock, but never before the ping (1 µs after it): the coordinator
 * counts a candidate as answering when renewTime is after pingTime, both as written.
 *
 * A replica that cannot see (setEligible(false)) writes nothing: it does not answer pings, so the
 * coordinator does not elect it. A candidate deleted by someone else (the coordinator collects
 * those not renewed for 30 minutes) is created again. shutdown() deletes it (client-go leaves it
 * for that garbage collection).
 */
export class LeaseCandidatePublisher {
  readonly name: string;
  private readonly o: LeaseCandidateOptions;
  private readonly log: Logger;
  private readonly renewIntervalMs: number;
  private readonly timeoutMs: number;
  private cached: LeaseCandidate | undefined;
  /** The pingTime our last successful write answered ('' before any ping). */
  private answered: string | undefined;
  /** The latest pingTime seen on our candidate. */
  private ping: string | undefined;
  private eligible = true;
  private running = false;
  private syncing = false;
  private dirty = false;
  private failures = 0;
  private timer: Subscription | undefined;
  private sub: Subscription | undefined;

  constructor(o: LeaseCandidateOptions) {
    this.o = o;
    this.name = o.name;
    this.renewIntervalMs = o.renewIntervalMs ?? CANDIDATE_DEFAULTS.renewIntervalMs;
    this.timeoutMs = o.requestTimeoutMs ?? CANDIDATE_DEFAULTS.requestTimeoutMs;
    this.log = o.logger.with({ component: 'lease-candidate', candidate: `${o.namespace}/${o.name}` });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.log.info('Publishing lease candidate', {
      lease: this.o.leaseName,
      binaryVersion: this.o.binaryVersion,
      emulationVersion: this.o.emulationVersion,
      strategy: this.strategy(),
    });
    this.sub = this.o.updates$?.subscribe({
      next: (c) => this.onUpdate(c),
      error: (err: unknown) =>
        this.log.warn('Lease candidate watch failed; pings answered at the next renewal', { err }),
    });
    void this.sync('start');
  }

  /** A replica that cannot see does not answer pings (nor renews), so it is not elected. */
  setEligible(eligible: boolean): void {
    if (eligible === this.eligible) return;
    this.eligible = eligible;
    if (eligible && this.running && (this.cached === undefined || this.unanswered()))
      void this.sync('eligible');
  }

  stop(): void {
    this.running = false;
    this.timer?.unsubscribe();
    this.sub?.unsubscribe();
    this.timer = this.sub = undefined;
  }

  /**
   * Graceful shutdown (and the withdrawal before a fall-back to ordinary election): stop (no
   * renewal, no ping answered from here on), then delete our candidate unless someone replaced it
   * meanwhile. true when it is gone (deleted, missing, or replaced); false when the deletion
   * failed (logged). Each of its two requests is bounded by timeoutMs.
   */
  async shutdown(timeoutMs: number = this.timeoutMs): Promise<boolean> {
    this.stop();
    try {
      const current = await this.get(timeoutMs);
      const uid = current?.metadata.uid;
      if (!current || !uid) return true;
      await this.o.client.request({
        method: 'DELETE',
        path: candidatePaths.one(this.o.namespace, this.name),
        body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid } },
        timeoutMs,
      });
      this.log.info('Deleted lease candidate on shutdown');
      return true;
    } catch (err) {
      if (err instanceof KubeApiError && (err.isNotFound || err.isConflict)) return true;
      this.o.metrics.candidateErrors.inc();
      this.log.warn('Failed to delete lease candidate on shutdown', { err });
      return false;
    }
  }

  private strategy(): string {
    return this.o.strategy ?? OLDEST_EMULATION_VERSION;
  }

  private unanswered(): boolean {
    return this.ping !== undefined && this.ping !== '' && this.ping !== this.answered;
  }

  private onUpdate(c: LeaseCandidate | undefined): void {
    if (!this.running) return;
    if (c === undefined) {
      this.cached = undefined;
      if (!this.syncing) {
        this.log.info('Lease candidate deleted by someone else; creating it again');
        if (this.eligible) void this.sync('deleted');
      }
      return;
    }
    if (c.metadata.name !== this.name) return;
    this.cached = c;
    this.ping = typeof c.spec?.pingTime === 'string' ? c.spec.pingTime : '';
    if (this.unanswered() && this.eligible) void this.sync('ping');
  }

  private get(timeoutMs: number): Promise<LeaseCandidate | undefined> {
    return this.o.client
      .request<LeaseCandidate>({
        method: 'GET',
        path: candidatePaths.one(this.o.namespace, this.name),
        timeoutMs,
      })
      .catch((err: unknown) => {
        if (err instanceof KubeApiError && err.isNotFound) return undefined;
        throw err;
      });
  }

  /** renewTime for an answer: our wall clock, but 1 µs after the ping when our clock is behind it. */
  private renewStamp(ping: string | null | undefined): string {
    const wall = this.o.clock.wall();
    return typeof ping === 'string' && ping !== '' ? microTimeAfter(wall, ping) : microTime(wall);
  }

  private desired(base: LeaseCandidate | undefined): LeaseCandidate {
    return {
      apiVersion: LEASE_CANDIDATE_GROUP_VERSION,
      kind: 'LeaseCandidate',
      metadata: base ? { ...base.metadata } : { name: this.name, namespace: this.o.namespace },
      spec: {
        ...(base?.spec ?? {}),
        leaseName: this.o.leaseName,
        binaryVersion: this.o.binaryVersion,
        emulationVersion: this.o.emulationVersion,
        strategy: this.strategy(),
        renewTime: this.renewStamp(base?.spec?.pingTime),
      },
    };
  }

  /** Creates or renews our candidate now; serialized (a request during one runs right after it). */
  async sync(why: string): Promise<boolean> {
    if (this.syncing) {
      // A ping seen meanwhile is answered after this write if this one did not answer it (the
      // check below). Not marked dirty: the watch may show this very write, with the ping it
      // answers, before its response arrives, and a second write would answer that ping again.
      if (why !== 'ping') this.dirty = true;
      return false;
    }
    this.syncing = true;
    this.timer?.unsubscribe();
    let ok = false;
    try {
      // Nothing is written while we cannot see (but the first publication is).
      ok = !this.eligible && why !== 'start' ? true : await this.write(why);
      this.failures = 0;
    } catch (err) {
      this.failures++;
      this.o.metrics.candidateErrors.inc();
      this.log.warn('Failed to renew lease candidate', { err, why, failures: this.failures });
    } finally {
      this.syncing = false;
    }
    if (!this.running) return ok;
    if (this.dirty || (ok && this.eligible && this.unanswered())) {
      this.dirty = false;
      return await this.sync('ping');
    }
    const delay = ok
      ? this.renewIntervalMs
      : Math.min(this.renewIntervalMs, 200 * 2 ** Math.min(this.failures, 8));
    this.timer = this.o.clock.scheduler.schedule(
      () => void this.sync(ok ? 'renew' : 'retry'),
      timerDelay(delay),
    );
    if (!ok) this.log.debug(2, 'Retrying lease candidate', { retryIn: formatDuration(Math.round(delay)) });
    return ok;
  }

  /** One create or renewal (conflicts and a vanished object re-read, a few times). */
  private async write(why: string): Promise<boolean> {
    const timeoutMs = this.timeoutMs;
    let base = this.cached;
    for (let round = 0; round < 3; round++) {
      if (base === undefined) base = await this.get(timeoutMs);
      try {
        if (base === undefined) {
          this.cached = await this.send('POST', this.desired(undefined), timeoutMs);
          this.log.info('Created lease candidate', { why });
        } else if (base.spec?.leaseName !== this.o.leaseName) {
          // leaseName is immutable: a candidate left for another lock (same identity) is replaced.
          await this.o.client.request({
            method: 'DELETE',
            path: candidatePaths.one(this.o.namespace, this.name),
            body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { uid: base.metadata.uid } },
            timeoutMs,
          });
          base = undefined;
          continue;
        } else {
          this.cached = await this.send('PUT', this.desired(base), timeoutMs);
        }
      } catch (err) {
        if (isConflict(err) || (err instanceof KubeApiError && err.isNotFound)) {
          base = undefined;
          continue;
        }
        throw err;
      }
      // Our write carried the pingTime it answers (a newer ping would have made it a conflict).
      const pinged = typeof this.cached?.spec?.pingTime === 'string' ? this.cached.spec.pingTime : '';
      if (pinged !== '' && pinged !== this.answered) {
        this.o.metrics.candidatePings.inc();
        this.log.debug(2, "Answered the coordinator's ping", { pingTime: pinged });
      } else if (base !== undefined) {
        this.log.debug(4, 'Renewed lease candidate', { why });
      }
      this.answered = pinged;
      return true;
    }
    throw new Error('lease candidate kept changing under us (3 conflicts in a row)');
  }

  private async send(
    method: 'POST' | 'PUT',
    body: LeaseCandidate,
    timeoutMs: number,
  ): Promise<LeaseCandidate> {
    return await this.o.client.request<LeaseCandidate>({
      method,
      path:
        method === 'POST'
          ? candidatePaths.list(this.o.namespace)
          : candidatePaths.one(this.o.namespace, this.name),
      body,
      timeoutMs,
    });
  }
}

/** The lease kube-apiserver's coordinator ("leader-election-controller") holds while it runs. */
export const COORDINATOR_LEASE = { namespace: 'kube-system', name: 'leader-election-controller' } as const;

export type CoordinationSupport =
  | { readonly ok: true; readonly note?: string }
  | { readonly ok: false; readonly reason: string };

export interface CoordinationCheckOptions {
  client: KubeRequester;
  clock: Clock;
  logger: Logger;
  /**
   * The wait after the first request that brought no answer (5xx, 429, a transport failure or a
   * timeout: the API server did not say whether it serves the API or runs a coordinator); it
   * doubles with each such failure in a row, up to maxRetryMs (a 429's Retry-After, if longer).
   */
  retryMs?: number;
  /** The longest wait between retries: it also bounds the warnings, one per failure. */
  maxRetryMs?: number;
  /**
   * How long the coordinator's lease must be seen unchanged (or missing), between two real answers,
   * before we say there is no coordinator.
   */
  coordinatorWaitMs?: number;
  /** Between reads of the coordinator's lease. */
  pollMs?: number;
  /** Ends the check early (shutdown): resolves { ok: false, reason: 'stopped' }. */
  signal?: AbortSignal;
  /** Each request that brought no answer, with its cause (for probes: what keeps us undecided). */
  onFailure?: (cause: string) => void;
}

export const COORDINATION_CHECK_DEFAULTS = {
  retryMs: 2_000,
  maxRetryMs: 30_000,
  /** 2 x kube-apiserver's --coordinated-leadership-lease-duration (15 s): a restarted server has acquired it by then. */
  coordinatorWaitMs: 30_000,
  pollMs: 1_000,
} as const;

/** The result of checkCoordinatedElection when its signal ended it: decides nothing. */
export const CHECK_STOPPED = 'stopped';

/**
 * Whether coordinated leader election can work against this API server, decided only from real
 * answers:
 * 1. discovery of coordination.k8s.io/v1beta1 lists leasecandidates (404, or no entry: it cannot);
 * 2. a coordinator runs: kube-system/leader-election-controller, the lease kube-apiserver's
 *    coordinator holds, is seen RENEWED (its holder or renewTime changes between two reads, or it
 *    appears, never compared with our clock). It runs none when two real answers (the lease, or a
 *    404) at least coordinatorWaitMs apart show it unchanged or missing. kube-apiserver serves the
 *    API with --runtime-config=coordination.k8s.io/v1beta1=true alone, but runs the coordinator
 *    only with the CoordinatedLeaderElection feature gate too: candidates would then wait for ever.
 * A lease we may not read (403) is not held against the mode: it is used, with a note.
 * Nothing else is an answer: a 5xx, a 429, a 401, a transport failure or a timeout says nothing
 * about the API or the coordinator. While requests only fail the check stays undecided, however
 * long: it retries with a backoff (retryMs doubling to maxRetryMs) and logs each failure as a
 * warning with its cause. It never decides "coordinated" for want of an answer (a replica that
 * did would wait for a coordinator that may not exist, and no replica would lead).
 */
export async function checkCoordinatedElection(o: CoordinationCheckOptions): Promise<CoordinationSupport> {
  const run = new CheckRetries(o);
  const served = await servesLeaseCandidates(o, run);
  if (served !== undefined) return served;
  return await coordinatorRuns(o, run);
}

/** The check's waits and retries: stops early on the abort signal; one backoff over all requests. */
class CheckRetries {
  private readonly o: CoordinationCheckOptions;
  private readonly retryMs: number;
  private readonly maxRetryMs: number;
  /** Failed requests in a row (any request): the backoff. */
  private failures = 0;

  constructor(o: CoordinationCheckOptions) {
    this.o = o;
    this.retryMs = o.retryMs ?? COORDINATION_CHECK_DEFAULTS.retryMs;
    this.maxRetryMs = Math.max(this.retryMs, o.maxRetryMs ?? COORDINATION_CHECK_DEFAULTS.maxRetryMs);
  }

  stopped(): boolean {
    return this.o.signal?.aborted === true;
  }

  now(): number {
    return this.o.clock.scheduler.now();
  }

  /** A real answer came: the backoff starts over. */
  answered(): void {
    this.failures = 0;
  }

  /** A request failed: warn with its cause, then wait (Retry-After, else the doubling backoff). */
  async retry(what: string, err: unknown): Promise<void> {
    this.failures++;
    const asked = err instanceof KubeApiError ? (err.retryAfterSeconds ?? 0) * 1000 : 0;
    const backoff = this.retryMs * 2 ** Math.min(this.failures - 1, 20);
    const delay = Math.min(this.maxRetryMs, Math.max(asked, backoff));
    const cause = err instanceof Error ? err.message : String(err);
    this.o.onFailure?.(cause);
    this.o.logger.warn(`Cannot ask the API server ${what}; undecided, retrying`, {
      err,
      failures: this.failures,
      retryIn: formatDuration(delay),
    });
    await this.sleep(delay);
  }

  sleep(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const signal = this.o.signal;
      const done = () => {
        timer.unsubscribe();
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = this.o.clock.scheduler.schedule(done, timerDelay(ms));
      signal?.addEventListener('abort', done, { once: true });
    });
  }
}

const statusOf = (err: unknown) => (err instanceof KubeApiError ? err.status : undefined);

/** Step 1, discovery: undefined when LeaseCandidates are served, else the decision (or a stop). */
async function servesLeaseCandidates(
  o: CoordinationCheckOptions,
  run: CheckRetries,
): Promise<CoordinationSupport | undefined> {
  for (;;) {
    if (run.stopped()) return { ok: false, reason: CHECK_STOPPED };
    try {
      const list = await o.client.request<{ resources?: { name?: string }[] }>({
        method: 'GET',
        path: candidatePaths.group,
        timeoutMs: CANDIDATE_DEFAULTS.requestTimeoutMs,
      });
      if (run.stopped()) return { ok: false, reason: CHECK_STOPPED };
      if (!(list.resources ?? []).some((r) => r.name === 'leasecandidates')) {
        return {
          ok: false,
          reason: `the API server's ${LEASE_CANDIDATE_GROUP_VERSION} has no leasecandidates`,
        };
      }
      run.answered();
      return undefined;
    } catch (err) {
      if (run.stopped()) return { ok: false, reason: CHECK_STOPPED };
      if (statusOf(err) === 404) {
        return { ok: false, reason: `the API server does not serve ${LEASE_CANDIDATE_GROUP_VERSION} (404)` };
      }
      await run.retry('whether it serves LeaseCandidates', err);
    }
  }
}

const MISSING = '\u0000missing';

/** Step 2: whether the coordinator's lease is seen renewed, from real answers only. */
async function coordinatorRuns(o: CoordinationCheckOptions, run: CheckRetries): Promise<CoordinationSupport> {
  const pollMs = o.pollMs ?? COORDINATION_CHECK_DEFAULTS.pollMs;
  const waitMs = o.coordinatorWaitMs ?? COORDINATION_CHECK_DEFAULTS.coordinatorWaitMs;
  const what = `${COORDINATOR_LEASE.namespace}/${COORDINATOR_LEASE.name}`;
  /** The first real answer of the current window: the lease's holder and renewTime, or MISSING. */
  let first: { seen: string; at: number } | undefined;
  for (;;) {
    if (run.stopped()) return { ok: false, reason: CHECK_STOPPED };
    const answer = await readCoordinatorLease(o, run, what);
    if (answer === 'retry') continue;
    if ('ok' in answer) return answer;
    const { seen } = answer;
    run.answered();
    const t = run.now();
    if (first === undefined) first = { seen, at: t };
    else if (seen !== first.seen) {
      // Renewed, or created: a coordinator runs. Deleted: none renews it; watch it anew.
      if (seen !== MISSING) return { ok: true };
      first = { seen, at: t };
    }
    const left = first.at + waitMs - t;
    if (left <= 0) {
      const span = Math.max(waitMs, Math.floor((t - first.at) / 1000) * 1000);
      return {
        ok: false,
        reason:
          `no coordinator: ${what} was ${first.seen === MISSING ? 'missing' : 'not renewed'} for ${formatDuration(span)} ` +
          '(kube-apiserver runs it only with --feature-gates=CoordinatedLeaderElection=true)',
      };
    }
    await run.sleep(Math.min(pollMs, left));
  }
}

/**
 * One read of the coordinator's lease: its holder and renewTime (MISSING for a 404), 'retry' after
 * a failure that is no answer (waited for), or a decision (403: used with a note; a stop).
 */
async function readCoordinatorLease(
  o: CoordinationCheckOptions,
  run: CheckRetries,
  what: string,
): Promise<{ seen: string } | 'retry' | CoordinationSupport> {
  try {
    const lease = await o.client.request<{
      spec?: { renewTime?: string | null; holderIdentity?: string | null };
    }>({
      method: 'GET',
      path: `/apis/coordination.k8s.io/v1/namespaces/${COORDINATOR_LEASE.namespace}/leases/${COORDINATOR_LEASE.name}`,
      timeoutMs: CANDIDATE_DEFAULTS.requestTimeoutMs,
    });
    if (run.stopped()) return { ok: false, reason: CHECK_STOPPED };
    return { seen: `${lease.spec?.holderIdentity ?? ''}|${lease.spec?.renewTime ?? ''}` };
  } catch (err) {
    if (run.stopped()) return { ok: false, reason: CHECK_STOPPED };
    if (statusOf(err) === 403)
      return { ok: true, note: `cannot read ${what} (403): not checked whether a coordinator runs` };
    if (statusOf(err) !== 404) {
      await run.retry(`for ${what} (whether a coordinator runs)`, err);
      return 'retry';
    }
    return { seen: MISSING };
  }
}

/** What the watchdog needs from the elector (LeaderElector implements it). */
export interface CoordinatedElectorView {
  /** Whether the elector still runs coordinated leader election. */
  readonly coordinated: boolean;
  /** How long nobody has led the lock as this replica observes it (undefined: someone leads, or it cannot tell). */
  leaderlessFor(): number | undefined;
  /** Switches a campaigning candidate to ordinary leader election; false when it leads or has ended. */
  useOrdinaryElection(): boolean;
}

export interface CoordinationWatchdogOptions {
  elector: CoordinatedElectorView;
  clock: Clock;
  logger: Logger;
  /** Re-check the coordinator once nobody has led the lock for this long (coordinatedRecheckMs). */
  recheckAfterMs: number;
  /** The re-check: checkCoordinatedElection with the given signal (aborted by stop()). */
  check: (signal: AbortSignal) => Promise<CoordinationSupport>;
  /**
   * Withdraws this replica's candidacy before the elector falls back: stops answering pings at
   * once, then deletes its LeaseCandidate (and stops its watch), within timeoutMs; true once it
   * is gone, false (or a rejection) when the deletion failed. Failures are the callee's to log.
   */
  withdraw?: (timeoutMs: number) => Promise<boolean | undefined>;
  /** Publishes the candidate again: the coordinator named this replica while it was withdrawn. */
  reinstate?: () => void;
  /** The withdrawal's bound and the wait before ordinary election (CANDIDATE_DEFAULTS.withdrawMs). */
  withdrawMs?: number;
  /** How often the elector is asked how long nobody has led (no request). Default 1 s. */
  intervalMs?: number;
}

/**
 * The fall-back after the decision: a replica that decided "coordinated" waits for the coordinator
 * to name a holder. When nobody has led the lock for recheckAfterMs (as the elector observes it:
 * every read shows no holder, or one whose lease ran out), it checks again whether the coordinator
 * is there (checkCoordinatedElection: the LeaseCandidate API served, the coordinator's lease
 * renewed). Absent (a real answer says so), the replica withdraws its LeaseCandidate FIRST (it
 * stops answering pings and deletes it) and runs ordinary leader election only withdrawMs (10 s)
 * after it stopped answering, deleted or not (a deletion that fails or hangs is given that long
 * and logged), so that the coordinator never names a replica that campaigns on its own. Named
 * meanwhile (an election the coordinator ran on our last answer), it leads as named, publishes its
 * candidate again and keeps watching. Present, it says so and checks again
 * after another recheckAfterMs without a leader; the liveness check (the elector's
 * checkLeaderless) restarts a replica that nobody has led for longer still.
 */
export class CoordinationWatchdog {
  private readonly o: CoordinationWatchdogOptions;
  private readonly log: Logger;
  private timer: Subscription | undefined;
  private abort: AbortController | undefined;
  private running = false;
  private checking = false;
  /** No re-check before this (monotonic): one after each re-check that found the coordinator. */
  private notBefore = Number.NEGATIVE_INFINITY;
  /** Re-checks run so far (tests, diagnostics). */
  rechecks = 0;

  constructor(o: CoordinationWatchdogOptions) {
    this.o = o;
    this.log = o.logger.with({ component: 'leader-election' });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.arm();
  }

  stop(): void {
    this.running = false;
    this.timer?.unsubscribe();
    this.timer = undefined;
    this.abort?.abort();
    this.abort = undefined;
  }

  private arm(): void {
    this.timer?.unsubscribe();
    if (!this.running) return;
    this.timer = this.o.clock.scheduler.schedule(
      () => {
        this.timer = undefined;
        this.tick();
      },
      timerDelay(this.o.intervalMs ?? 1_000),
    );
  }

  private tick(): void {
    if (!this.running) return;
    if (!this.o.elector.coordinated) {
      this.stop();
      return;
    }
    const idle = this.o.elector.leaderlessFor();
    if (this.checking || idle === undefined || idle < this.o.recheckAfterMs) {
      this.arm();
      return;
    }
    if (this.o.clock.scheduler.now() < this.notBefore) {
      this.arm();
      return;
    }
    void this.recheck(idle);
  }

  private async recheck(idle: number): Promise<void> {
    this.checking = true;
    this.rechecks++;
    const ac = new AbortController();
    this.abort = ac;
    this.log.warn(
      'Nobody has led the lock under coordinated leader election: checking whether the coordinator is still there',
      { leaderlessFor: formatDuration(Math.round(idle)), after: formatDuration(this.o.recheckAfterMs) },
    );
    let support: CoordinationSupport;
    try {
      support = await this.o.check(ac.signal);
    } catch (err) {
      support = {
        ok: true,
        note: `the re-check failed: ${err instanceof Error ? err.message : String(err)}`,
      };
    } finally {
      this.checking = false;
    }
    // this.abort stays ac until the next re-check: stop() also ends a withdrawal's wait.
    if (!this.running || ac.signal.aborted) return;
    if (support.ok) {
      this.notBefore = this.o.clock.scheduler.now() + this.o.recheckAfterMs;
      this.log.warn('The coordinator is there but names no leader; checking again if nobody leads', {
        ...(support.note ? { note: support.note } : {}),
        recheckIn: formatDuration(this.o.recheckAfterMs),
      });
      this.arm();
      return;
    }
    if (this.o.elector.leaderlessFor() === undefined) {
      this.notFallingBack(support.reason);
      return;
    }
    await this.fallBack(support.reason, ac.signal);
  }

  /** Named meanwhile (or ended): the coordinator answered after all; keep watching. */
  private notFallingBack(reason: string): void {
    this.log.info('Not falling back: this replica leads, or leader election has ended', { reason });
    this.notBefore = this.o.clock.scheduler.now() + this.o.recheckAfterMs;
    this.arm();
  }

  /** Withdraw first (bounded), campaign withdrawMs after we stopped answering pings. */
  private async fallBack(reason: string, signal: AbortSignal): Promise<void> {
    const withdrawMs = this.o.withdrawMs ?? CANDIDATE_DEFAULTS.withdrawMs;
    this.log.warn(
      'Coordinated leader election: the coordinator is gone; withdrawing the lease candidate before ordinary leader election',
      { reason, campaignIn: formatDuration(withdrawMs) },
    );
    const waited = this.sleep(withdrawMs, signal);
    const withdrawal = Promise.resolve()
      .then(() => this.o.withdraw?.(withdrawMs) ?? true)
      .then(
        (ok) => ok !== false,
        (err: unknown) => {
          this.log.warn('Failed to withdraw the lease candidate', { err });
          return false;
        },
      );
    const gone = await Promise.race([withdrawal, waited.then(() => false)]);
    await waited;
    if (!this.running || signal.aborted) return;
    if (!gone) {
      this.log.warn(
        'Lease candidate not confirmed deleted: it is no longer renewed and answers no ping, so the coordinator does not elect it; using ordinary leader election',
        { after: formatDuration(withdrawMs) },
      );
    }
    if (!this.o.elector.useOrdinaryElection()) {
      this.o.reinstate?.();
      this.notFallingBack(reason);
      return;
    }
    this.running = false;
    this.log.warn('Coordinated leader election: the coordinator is gone; using ordinary leader election', {
      reason,
    });
  }

  /** Resolves after ms, or at once when the signal aborts (stop()). */
  private sleep(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        timer.unsubscribe();
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = this.o.clock.scheduler.schedule(done, timerDelay(ms));
      signal.addEventListener('abort', done, { once: true });
    });
  }
}
