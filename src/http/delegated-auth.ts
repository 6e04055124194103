import { createHmac, randomBytes } from 'node:crypto';
import { Counter, Histogram, type Registry } from 'prom-client';
import type { Clock } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import type { KubeClient } from '../kube/client.js';
import type { Logger } from '../log/logger.js';

/**
 * Delegated authentication and authorization for /metrics, as kube-controller-manager does it on
 * its secure port (k8s.io/apiserver's delegating authenticator and authorizer): the bearer token
 * is checked with a TokenReview, the user it names with a SubjectAccessReview for the non-resource
 * URL and verb. Answers are cached for a short time (the apiserver's defaults: 10 s for
 * authenticated and rejected tokens, 10 s for allowed and denied reviews; failed reviews are not
 * cached), concurrent lookups of the same token share one review, and reviews are bounded: at most
 * `maxInFlight` at once and upstream's delegated-auth client rate (200 per second, burst 400).
 * Beyond either bound a request gets 429 at once (upstream's client waits for the rate limiter
 * instead; here a flood of junk tokens would make that queue grow without bound).
 *
 * Tokens and users the API server allowed before are "known": their revalidations have slots and
 * tokens of their own (2 reviews in flight beyond `maxInFlight`, the last tenth of the burst) that
 * unknown tokens cannot take, and rejections are cached apart from allowing answers, so a flood of
 * junk tokens neither shuts out a scraper already allowed nor pushes its answer out of the cache.
 *
 * One addition to upstream: while the API server is unreachable (no answer: timeout, transport
 * error, or 5xx), an answer that ALLOWED the same token and user within `staleIfErrorMs` is used
 * again. The controller's own metrics matter most exactly when the API server is unreachable (it is
 * blind then), and a scraper that was allowed a moment ago is still allowed. Never otherwise: not
 * when our own bounds refuse a review (429), not when the API server answers 429 or 4xx (it is
 * reachable; it throttles or refuses us), and never for a token or user it has denied since it last
 * allowed them. A token never seen, or rejected, gets no such grace. 0 turns this off (fail closed,
 * as upstream).
 */

export type ReviewKind = 'tokenreview' | 'subjectaccessreview';

export interface DelegatedAuthMetrics {
  reviews: Counter<'review' | 'result'>;
  reviewDuration: Histogram<'review'>;
  cacheHits: Counter<'review'>;
  stale: Counter<'review'>;
  throttled: Counter<'review' | 'limit'>;
}

export function createDelegatedAuthMetrics(registry: Registry): DelegatedAuthMetrics {
  return {
    reviews: new Counter({
      name: 'nlc_metrics_auth_reviews_total',
      help: 'TokenReviews and SubjectAccessReviews sent to the API server for /metrics requests (review: tokenreview, subjectaccessreview), by result (allowed, denied, error).',
      labelNames: ['review', 'result'] as const,
      registers: [registry],
    }),
    reviewDuration: new Histogram({
      name: 'nlc_metrics_auth_review_duration_seconds',
      help: 'Time for one TokenReview or SubjectAccessReview (cache misses only), errors included.',
      labelNames: ['review'] as const,
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers: [registry],
    }),
    cacheHits: new Counter({
      name: 'nlc_metrics_auth_cache_hits_total',
      help: 'Authentication and authorization answers for /metrics taken from the cache, by review.',
      labelNames: ['review'] as const,
      registers: [registry],
    }),
    stale: new Counter({
      name: 'nlc_metrics_auth_stale_total',
      help: 'Requests allowed on an expired answer because the API server could not be asked (stale-if-error), by review.',
      labelNames: ['review'] as const,
      registers: [registry],
    }),
    throttled: new Counter({
      name: 'nlc_metrics_auth_throttled_total',
      help: 'Requests answered 429 because a review could not be sent, by review and limit: rate (200 reviews per second, burst 400), in_flight (too many reviews in flight), api_server (the API server answered the review with 429).',
      labelNames: ['review', 'limit'] as const,
      registers: [registry],
    }),
  };
}

export interface UserInfo {
  username: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

export interface AuthDecision {
  /** 200 allowed; 401 no or bad token; 403 authenticated but not allowed; 429 too many reviews (ours or the API server's limit); 503 could not review. */
  code: 200 | 401 | 403 | 429 | 503;
  reason: string;
  user?: string;
  /** How the answer was reached (for logs and tests). */
  source?: 'cache' | 'review' | 'stale';
}

export interface DelegatedAuthOptions {
  /** A client used only for the reviews (its own sockets: a slow review never holds the controller's). */
  client: Pick<KubeClient, 'raw'>;
  clock: Clock;
  logger: Logger;
  metrics: DelegatedAuthMetrics;
  authnTtlMs?: number;
  authzAllowTtlMs?: number;
  authzDenyTtlMs?: number;
  staleIfErrorMs?: number;
  reviewTimeoutMs?: number;
  /**
   * Reviews in flight at once (distinct tokens or users); beyond it requests get 429. Revalidations
   * of tokens and users allowed before may use KNOWN_IN_FLIGHT_RESERVE more.
   */
  maxInFlight?: number;
  /** Reviews per second and burst (upstream's delegated-auth client: 200, 400); beyond them 429. */
  reviewQps?: number;
  reviewBurst?: number;
  /** Entries per cache (allowing and refusing answers are cached apart). */
  maxEntries?: number;
}

interface Entry<T> {
  value: T;
  /** Monotonic ms after which the entry is no longer fresh. */
  freshUntil: number;
  /** Monotonic ms until which an allowing entry may be used while the API server is unreachable. */
  staleUntil: number;
  /** Monotonic ms until which the entry is kept (an allowing one: its key stays "known"). */
  keepUntil: number;
}

type Authn = { ok: true; user: UserInfo } | { ok: false; reason: string };
type Authz = { allowed: boolean; reason: string };

class ReviewError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

/**
 * Whether a failed review means the API server is unreachable: no answer at all (timeout, transport
 * error) or a 5xx. A 4xx is an answer from a reachable server (our RBAC, our credentials, its 429).
 */
function unreachable(err: unknown): boolean {
  return !(err instanceof ReviewError) || err.status >= 500 || err.status < 200;
}

/** Longest bearer token considered at all (projected service-account tokens are ~1 KiB). */
const MAX_TOKEN_BYTES = 16 * 1024;

/** Reviews in flight at once by default (maxInFlight). */
const MAX_IN_FLIGHT = 8;

/** Reviews in flight that only revalidations of known tokens and users may use. */
const KNOWN_IN_FLIGHT_RESERVE = 2;

/** Sockets the review client needs so that no review in flight waits for one (default bounds). */
export const REVIEW_SOCKETS = MAX_IN_FLIGHT + KNOWN_IN_FLIGHT_RESERVE;

/** How long a token or user allowed once stays known (its revalidations take the reserve). */
const KNOWN_FOR_MS = 600_000;

class TtlCache<T> {
  private readonly map = new Map<string, Entry<T>>();
  constructor(private readonly maxEntries: number) {}

  get(key: string, now: number): Entry<T> | undefined {
    const e = this.map.get(key);
    if (e && e.keepUntil <= now) {
      this.map.delete(key);
      return undefined;
    }
    return e;
  }

  set(key: string, e: Entry<T>, now: number): void {
    this.map.delete(key);
    if (this.map.size >= this.maxEntries) {
      for (const [k, v] of this.map) if (v.keepUntil <= now) this.map.delete(k);
      // Still full: drop the oldest (insertion order).
      for (const k of this.map.keys()) {
        if (this.map.size < this.maxEntries) break;
        this.map.delete(k);
      }
    }
    this.map.set(key, e);
  }

  delete(key: string): void {
    this.map.delete(key);
  }
}

/**
 * A token bucket (client-go's QPS/burst: starts full, refills at `qps` per second) whose last
 * `reserve` tokens only known keys may take.
 */
class ReviewBudget {
  private tokens: number;
  private at: number | undefined;

  constructor(
    private readonly qps: number,
    private readonly burst: number,
    private readonly reserve: number,
  ) {
    this.tokens = burst;
  }

  take(now: number, known: boolean): boolean {
    if (this.at !== undefined)
      this.tokens = Math.min(this.burst, this.tokens + ((now - this.at) * this.qps) / 1000);
    this.at = now;
    if (this.tokens < (known ? 1 : 1 + this.reserve)) return false;
    this.tokens -= 1;
    return true;
  }
}

/** The caches of one review kind: allowing answers, and refusing ones apart. */
interface Caches<T> {
  allows: TtlCache<T>;
  refusals: TtlCache<T>;
}

export class DelegatedAuth {
  private readonly o: Required<Omit<DelegatedAuthOptions, 'client' | 'clock' | 'logger' | 'metrics'>>;
  private readonly hmacKey = randomBytes(32);
  private readonly authn: Caches<Authn>;
  private readonly authz: Caches<Authz>;
  private readonly budget: ReviewBudget;
  private readonly pending = new Map<string, Promise<unknown>>();
  /** Reviews in flight for keys that are not known (bounded by maxInFlight). */
  private pendingUnknown = 0;
  private lastErrorLog = Number.NEGATIVE_INFINITY;
  /**
   * The API server did not answer the last review that ended (timeout, transport error, 5xx). Any
   * answer clears it, a 429 or another 4xx included: the server is reachable then.
   */
  private unreachable = false;

  constructor(private readonly d: DelegatedAuthOptions) {
    this.o = {
      authnTtlMs: d.authnTtlMs ?? 10_000,
      authzAllowTtlMs: d.authzAllowTtlMs ?? 10_000,
      authzDenyTtlMs: d.authzDenyTtlMs ?? 10_000,
      staleIfErrorMs: d.staleIfErrorMs ?? 600_000,
      reviewTimeoutMs: d.reviewTimeoutMs ?? 5_000,
      maxInFlight: d.maxInFlight ?? MAX_IN_FLIGHT,
      reviewQps: d.reviewQps ?? 200,
      reviewBurst: d.reviewBurst ?? 400,
      maxEntries: d.maxEntries ?? 4096,
    };
    const caches = <T>(): Caches<T> => ({
      allows: new TtlCache<T>(this.o.maxEntries),
      refusals: new TtlCache<T>(this.o.maxEntries),
    });
    this.authn = caches();
    this.authz = caches();
    this.budget = new ReviewBudget(this.o.reviewQps, this.o.reviewBurst, Math.floor(this.o.reviewBurst / 10));
  }

  private now(): number {
    return this.d.clock.scheduler.now();
  }

  /** Reviews in flight now (tests, metrics). */
  get inFlight(): number {
    return this.pending.size;
  }

  /** Authenticates the Authorization header and authorizes `verb` on the non-resource `path`. */
  async check(authorization: string | undefined, path: string, verb = 'get'): Promise<AuthDecision> {
    const token = bearerToken(authorization);
    if (token === undefined) return { code: 401, reason: 'a bearer token is required' };

    const who = await this.lookup<Authn>(
      'tokenreview',
      this.authn,
      createHmac('sha256', this.hmacKey).update(token).digest('base64'),
      () => this.tokenReview(token),
      () => this.o.authnTtlMs,
      (a) => a.ok,
    );
    if ('code' in who) return who;
    const authn = who.value;
    if (!authn.ok) return { code: 401, reason: authn.reason, source: who.source };
    const user = authn.user;

    const key = JSON.stringify([
      user.username,
      user.uid ?? '',
      user.groups ?? [],
      user.extra ?? {},
      path,
      verb,
    ]);
    const may = await this.lookup<Authz>(
      'subjectaccessreview',
      this.authz,
      key,
      () => this.subjectAccessReview(user, path, verb),
      (a) => (a.allowed ? this.o.authzAllowTtlMs : this.o.authzDenyTtlMs),
      (a) => a.allowed,
    );
    if ('code' in may) return { ...may, user: user.username };
    const source = who.source === 'stale' || may.source === 'stale' ? 'stale' : may.source;
    if (!may.value.allowed) {
      return {
        code: 403,
        reason: `user "${user.username}" cannot ${verb} path "${path}"${may.value.reason ? `: ${may.value.reason}` : ''}`,
        user: user.username,
        source,
      };
    }
    return { code: 200, reason: 'allowed', user: user.username, source };
  }

  /**
   * A cached answer, or one review shared by concurrent callers. Errors are not cached. An allowing
   * answer may be reused after it expired only while the API server is unreachable
   * (stale-if-error); then it is used at once and a review runs in the background, so a hanging
   * API server costs a scrape at most one review timeout, not one per review kind. A refused review
   * (our bounds, or the API server's 429) is a 429, never a stale answer.
   */
  private async lookup<T>(
    review: ReviewKind,
    caches: Caches<T>,
    key: string,
    fetch: () => Promise<T>,
    ttl: (v: T) => number,
    allows: (v: T) => boolean,
  ): Promise<{ value: T; source: 'cache' | 'review' | 'stale' } | AuthDecision> {
    const m = this.d.metrics;
    const now = this.now();
    const allowed = caches.allows.get(key, now);
    const cached = allowed && allowed.freshUntil > now ? allowed : caches.refusals.get(key, now);
    if (cached && cached.freshUntil > now) {
      m.cacheHits.inc({ review });
      return { value: cached.value, source: 'cache' };
    }
    const known = allowed !== undefined;
    const stale = () => {
      const e = caches.allows.get(key, this.now());
      if (e && e.staleUntil > this.now()) {
        m.stale.inc({ review });
        return { value: e.value, source: 'stale' as const };
      }
      return undefined;
    };
    const reviewing = () => this.review(review, caches, key, fetch, ttl, allows, known);
    if (this.unreachable) {
      const s = stale();
      if (s) {
        // Revalidate in the background; its outcome is for the next request.
        const p = reviewing();
        if (typeof p !== 'string') p.catch(() => undefined);
        return s;
      }
    }
    const p = reviewing();
    if (typeof p === 'string') {
      m.throttled.inc({ review, limit: p });
      return {
        code: 429,
        reason:
          p === 'rate'
            ? `too many ${review}s (${this.o.reviewQps} per second, burst ${this.o.reviewBurst})`
            : `too many ${review}s in flight (${this.o.maxInFlight})`,
      };
    }
    try {
      return { value: await p, source: 'review' };
    } catch (err) {
      if (unreachable(err)) {
        return stale() ?? { code: 503, reason: `${review} failed: ${(err as Error).message}` };
      }
      if ((err as ReviewError).status === 429) {
        m.throttled.inc({ review, limit: 'api_server' });
        return { code: 429, reason: `${review} throttled by the API server: ${(err as Error).message}` };
      }
      return { code: 503, reason: `${review} failed: ${(err as Error).message}` };
    }
  }

  /**
   * The review of `key` running now (shared by concurrent callers), a new one, or why none may
   * start: 'in_flight' (too many running; answers we know have a reserve) or 'rate' (the budget).
   */
  private review<T>(
    review: ReviewKind,
    caches: Caches<T>,
    key: string,
    fetch: () => Promise<T>,
    ttl: (v: T) => number,
    allows: (v: T) => boolean,
    known: boolean,
  ): Promise<T> | 'rate' | 'in_flight' {
    const m = this.d.metrics;
    const pendingKey = `${review}\u0000${key}`;
    const running = this.pending.get(pendingKey) as Promise<T> | undefined;
    if (running) return running;
    const inFlightOk = known
      ? this.pending.size < this.o.maxInFlight + KNOWN_IN_FLIGHT_RESERVE
      : this.pendingUnknown < this.o.maxInFlight;
    if (!inFlightOk) return 'in_flight';
    if (!this.budget.take(this.now(), known)) return 'rate';
    const started = this.now();
    if (!known) this.pendingUnknown++;
    const p = fetch()
      .then((v) => {
        this.answered(caches, key, v, ttl(v), allows(v));
        m.reviews.inc({ review, result: allows(v) ? 'allowed' : 'denied' });
        return v;
      })
      .catch((err: unknown) => {
        this.unreachable = unreachable(err);
        m.reviews.inc({ review, result: 'error' });
        this.logError(review, err);
        throw err;
      })
      .finally(() => {
        m.reviewDuration.observe({ review }, (this.now() - started) / 1000);
        this.pending.delete(pendingKey);
        if (!known) this.pendingUnknown--;
      });
    this.pending.set(pendingKey, p);
    return p;
  }

  /**
   * Caches an answer. A refusal removes the allowing answer of the same key at once, whatever the
   * refusal TTL: no stale grace for a token or user the API server has refused since.
   */
  private answered<T>(caches: Caches<T>, key: string, v: T, fresh: number, allows: boolean): void {
    const t = this.now();
    this.unreachable = false;
    if (allows) {
      const staleUntil = t + this.o.staleIfErrorMs;
      caches.refusals.delete(key);
      caches.allows.set(
        key,
        {
          value: v,
          freshUntil: t + fresh,
          staleUntil,
          keepUntil: Math.max(t + fresh, staleUntil, t + KNOWN_FOR_MS),
        },
        t,
      );
      return;
    }
    caches.allows.delete(key);
    if (fresh > 0)
      caches.refusals.set(key, { value: v, freshUntil: t + fresh, staleUntil: t, keepUntil: t + fresh }, t);
  }

  private logError(review: ReviewKind, err: unknown): void {
    const now = this.now();
    if (now - this.lastErrorLog < 30_000) return;
    this.lastErrorLog = now;
    this.d.logger.warn('Cannot review a /metrics request with the API server', {
      review,
      err,
      staleIfError: formatDuration(this.o.staleIfErrorMs),
    });
  }

  private async tokenReview(token: string): Promise<Authn> {
    const res = await this.d.client.raw<{
      status?: { authenticated?: boolean; user?: UserInfo; error?: string };
    }>({
      method: 'POST',
      path: '/apis/authentication.k8s.io/v1/tokenreviews',
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } },
      timeoutMs: this.o.reviewTimeoutMs,
    });
    const st = reviewStatus(res, 'TokenReview');
    if (st.authenticated === true && st.user?.username) return { ok: true, user: st.user };
    return { ok: false, reason: st.error ? `invalid bearer token: ${st.error}` : 'invalid bearer token' };
  }

  private async subjectAccessReview(user: UserInfo, path: string, verb: string): Promise<Authz> {
    const res = await this.d.client.raw<{
      status?: { allowed?: boolean; denied?: boolean; reason?: string; evaluationError?: string };
    }>({
      method: 'POST',
      path: '/apis/authorization.k8s.io/v1/subjectaccessreviews',
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: {
          user: user.username,
          uid: user.uid,
          groups: user.groups,
          extra: user.extra,
          nonResourceAttributes: { path, verb },
        },
      },
      timeoutMs: this.o.reviewTimeoutMs,
    });
    const st = reviewStatus(res, 'SubjectAccessReview');
    return { allowed: st.allowed === true, reason: st.reason ?? st.evaluationError ?? '' };
  }
}

/** The review's status, or a ReviewError when the API server did not answer the review. */
function reviewStatus<S>(res: { status: number; body: { status?: S } }, kind: string): S {
  if (res.status < 200 || res.status >= 300 || typeof res.body !== 'object' || res.body === null) {
    const msg = (res.body as { message?: string } | null)?.message;
    throw new ReviewError(`${kind}: HTTP ${res.status}${msg ? `: ${msg}` : ''}`, res.status);
  }
  return res.body.status ?? ({} as S);
}

/** The token of an `Authorization: Bearer <token>` header (scheme case-insensitive, as the apiserver). */
export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^\s*bearer\s+(\S+)\s*$/i.exec(header);
  const token = m?.[1];
  if (!token || token.length > MAX_TOKEN_BYTES) return undefined;
  return token;
}
