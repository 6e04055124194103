import { createHmac, randomBytes } from 'node:crypto';
import { Counter, Histogram, type Registry } from 'prom-client';
import type { Clock } from '../clock/clock.js';
import { formatDuration } from '../disruption/duration.js';
import type { KubeClient } from '../kube/client.js';
import type { Logger } from '../log/logger.js';

/**
 * Delegated authentication and authorization for /metrics, as kube-controller-manager does it on
 * its secure port (k8s.io/apiserver's delegating authenticator and authorizer): the bearer token
 * is checked with a TokenReview, the user it names with a SubjectAccessReview for the non-resource
 * URL and verb. Answers are cached for a short time (the apiserver's defaults: 10 s for
 * authenticated and rejected tokens, 10 s for allowed and denied reviews; failed reviews are not
 * cached), concurrent lookups of the same token share one review, and the number of reviews in
 * flight is bounded.
 *
 * One addition to upstream: when the API server cannot be asked (timeout, transport error, 5xx),
 * an answer that ALLOWED the same token and user within `staleIfErrorMs` is used again. The
 * controller's own metrics matter most exactly when the API server is unreachable (it is blind
 * then), and a scraper that was allowed a moment ago is still allowed; a token never seen, or
 * rejected, gets no such grace. 0 turns this off (fail closed, as upstream).
 */

export type ReviewKind = 'tokenreview' | 'subjectaccessreview';

export interface DelegatedAuthMetrics {
  reviews: Counter<'review' | 'result'>;
  reviewDuration: Histogram<'review'>;
  cacheHits: Counter<'review'>;
  stale: Counter<'review'>;
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
  };
}

export interface UserInfo {
  username: string;
  uid?: string;
  groups?: string[];
  extra?: Record<string, string[]>;
}

export interface AuthDecision {
  /** 200 allowed; 401 no or bad token; 403 authenticated but not allowed; 429 too many reviews in flight; 503 could not review. */
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
  /** Reviews in flight at once (distinct tokens or users); beyond it requests get 429. */
  maxInFlight?: number;
  /** Entries per cache. */
  maxEntries?: number;
}

interface Entry<T> {
  value: T;
  /** Monotonic ms after which the entry is no longer fresh. */
  freshUntil: number;
  /** Monotonic ms until which an allowing entry may be used when the API server cannot be asked. */
  staleUntil: number;
}

type Authn = { ok: true; user: UserInfo } | { ok: false; reason: string };
type Authz = { allowed: boolean; reason: string };

class ReviewError extends Error {}

/** Longest bearer token considered at all (projected service-account tokens are ~1 KiB). */
const MAX_TOKEN_BYTES = 16 * 1024;

class TtlCache<T> {
  private readonly map = new Map<string, Entry<T>>();
  constructor(private readonly maxEntries: number) {}

  get(key: string): Entry<T> | undefined {
    return this.map.get(key);
  }

  set(key: string, e: Entry<T>, now: number): void {
    this.map.delete(key);
    if (this.map.size >= this.maxEntries) {
      for (const [k, v] of this.map) if (v.staleUntil <= now && v.freshUntil <= now) this.map.delete(k);
      // Still full: drop the oldest (insertion order).
      for (const k of this.map.keys()) {
        if (this.map.size < this.maxEntries) break;
        this.map.delete(k);
      }
    }
    this.map.set(key, e);
  }

  get size(): number {
    return this.map.size;
  }
}

export class DelegatedAuth {
  private readonly o: Required<Omit<DelegatedAuthOptions, 'client' | 'clock' | 'logger' | 'metrics'>>;
  private readonly hmacKey = randomBytes(32);
  private readonly authn: TtlCache<Authn>;
  private readonly authz: TtlCache<Authz>;
  private readonly pending = new Map<string, Promise<unknown>>();
  private lastErrorLog = Number.NEGATIVE_INFINITY;
  /** The last review that ended failed (no answer from the API server). */
  private failing = false;

  constructor(private readonly d: DelegatedAuthOptions) {
    this.o = {
      authnTtlMs: d.authnTtlMs ?? 10_000,
      authzAllowTtlMs: d.authzAllowTtlMs ?? 10_000,
      authzDenyTtlMs: d.authzDenyTtlMs ?? 10_000,
      staleIfErrorMs: d.staleIfErrorMs ?? 600_000,
      reviewTimeoutMs: d.reviewTimeoutMs ?? 5_000,
      maxInFlight: d.maxInFlight ?? 8,
      maxEntries: d.maxEntries ?? 4096,
    };
    this.authn = new TtlCache(this.o.maxEntries);
    this.authz = new TtlCache(this.o.maxEntries);
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
   * A cached answer, or one review shared by concurrent callers. Errors are not cached; an
   * allowing answer may be reused after it expired while reviews fail (stale-if-error). While the
   * last review failed, such an answer is used at once and a review runs in the background, so a
   * hanging API server costs a scrape at most one review timeout, not one per review kind.
   */
  private async lookup<T>(
    review: ReviewKind,
    cache: TtlCache<T>,
    key: string,
    fetch: () => Promise<T>,
    ttl: (v: T) => number,
    allows: (v: T) => boolean,
  ): Promise<{ value: T; source: 'cache' | 'review' | 'stale' } | AuthDecision> {
    const m = this.d.metrics;
    const now = this.now();
    const cached = cache.get(key);
    if (cached && cached.freshUntil > now) {
      m.cacheHits.inc({ review });
      return { value: cached.value, source: 'cache' };
    }
    const stale = () => {
      const e = cache.get(key);
      if (e && allows(e.value) && e.staleUntil > this.now()) {
        m.stale.inc({ review });
        return { value: e.value, source: 'stale' as const };
      }
      return undefined;
    };
    const pendingKey = `${review}\u0000${key}`;
    const reviewing = (): Promise<T> | undefined => {
      const running = this.pending.get(pendingKey) as Promise<T> | undefined;
      if (running) return running;
      if (this.pending.size >= this.o.maxInFlight) return undefined;
      const started = this.now();
      const p = fetch()
        .then((v) => {
          const t = this.now();
          this.failing = false;
          const fresh = ttl(v);
          if (fresh > 0) {
            cache.set(
              key,
              { value: v, freshUntil: t + fresh, staleUntil: allows(v) ? t + this.o.staleIfErrorMs : t },
              t,
            );
          }
          m.reviews.inc({ review, result: allows(v) ? 'allowed' : 'denied' });
          return v;
        })
        .catch((err: unknown) => {
          this.failing = true;
          m.reviews.inc({ review, result: 'error' });
          this.logError(review, err);
          throw err;
        })
        .finally(() => {
          m.reviewDuration.observe({ review }, (this.now() - started) / 1000);
          this.pending.delete(pendingKey);
        });
      this.pending.set(pendingKey, p);
      return p;
    };
    if (this.failing) {
      const s = stale();
      if (s) {
        // Revalidate in the background; its outcome is for the next request.
        reviewing()?.catch(() => undefined);
        return s;
      }
    }
    const p = reviewing();
    if (!p) return stale() ?? { code: 429, reason: `too many ${review}s in flight (${this.o.maxInFlight})` };
    try {
      return { value: await p, source: 'review' };
    } catch (err) {
      return stale() ?? { code: 503, reason: `${review} failed: ${(err as Error).message}` };
    }
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
    throw new ReviewError(`${kind}: HTTP ${res.status}${msg ? `: ${msg}` : ''}`);
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
