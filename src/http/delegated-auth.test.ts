import type http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import type { Clock } from '../clock/clock.js';
import { type LoopbackServer, loopbackServer } from '../kube/testing.js';
import { memoryLogger } from '../log/logger.js';
import { createRegistry } from '../metrics/registry.js';
import type { SchedulerLike } from '../rx/index.js';
import {
  bearerToken,
  createDelegatedAuthMetrics,
  DelegatedAuth,
  type DelegatedAuthOptions,
} from './delegated-auth.js';

/** A stand-in for the API server's review endpoints: tokens -> users, users -> allowed. */
interface FakeApi {
  tokens: Map<
    string,
    { username: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> }
  >;
  allowed: Set<string>;
  /** Requests received, by path. */
  reviews: { path: string; body: Record<string, unknown> }[];
  /** When set, answers review requests with this status (no body decision). */
  failWith?: number;
  /** When set, never answers. */
  hang?: boolean;
  /** TokenReviews of these tokens never answer. */
  hangTokens: Set<string>;
  hanging: http.ServerResponse[];
}

let api: LoopbackServer | undefined;
let fakeOfApi: FakeApi | undefined;
afterEach(async () => {
  for (const r of fakeOfApi?.hanging ?? []) r.destroy();
  fakeOfApi = undefined;
  await api?.close();
  api = undefined;
});

async function fakeApi(): Promise<{ fake: FakeApi; server: LoopbackServer }> {
  const fake: FakeApi = {
    tokens: new Map(),
    allowed: new Set(),
    reviews: [],
    hangTokens: new Set(),
    hanging: [],
  };
  const server = await loopbackServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => {
      raw += c.toString();
    });
    req.on('end', () => {
      const body = JSON.parse(raw || '{}') as Record<string, unknown>;
      fake.reviews.push({ path: req.url ?? '', body });
      const spec0 = (body.spec ?? {}) as Record<string, unknown>;
      if (fake.hang || fake.hangTokens.has(String(spec0.token))) {
        fake.hanging.push(res);
        return;
      }
      if (fake.failWith) {
        res.writeHead(fake.failWith, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ kind: 'Status', message: 'injected failure' }));
        return;
      }
      const spec = body.spec as Record<string, unknown>;
      let status: unknown;
      if (req.url === '/apis/authentication.k8s.io/v1/tokenreviews') {
        const user = fake.tokens.get(String(spec.token));
        status = user ? { authenticated: true, user } : { authenticated: false, error: 'token not known' };
      } else if (req.url === '/apis/authorization.k8s.io/v1/subjectaccessreviews') {
        const allowed = fake.allowed.has(String(spec.user));
        status = allowed ? { allowed: true, reason: 'bound' } : { allowed: false, reason: 'no binding' };
      } else {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(201, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ...body, status }));
    });
  });
  api = server;
  fakeOfApi = fake;
  return { fake, server };
}

/** A clock whose monotonic time the test moves. */
function manualClock(): Clock & { advance(ms: number): void } {
  let t = 1_000_000;
  const scheduler = { now: () => t, schedule: () => ({ unsubscribe() {} }) } as unknown as SchedulerLike;
  return { scheduler, wall: () => t, advance: (ms) => (t += ms) };
}

function setup(server: LoopbackServer, opts: Partial<DelegatedAuthOptions> = {}) {
  const registry = createRegistry({ defaultMetrics: false });
  const clock = manualClock();
  const auth = new DelegatedAuth({
    client: server.client,
    clock,
    logger: memoryLogger(),
    metrics: createDelegatedAuthMetrics(registry),
    ...opts,
  });
  const value = async (name: string, labels: Record<string, string>) => {
    const m = (await registry.getMetricsAsJSON()).find((x) => x.name === name);
    return (
      m?.values
        .filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))
        .reduce((a, v) => a + v.value, 0) ?? 0
    );
  };
  return { auth, clock, value };
}

const PROM = {
  username: 'system:serviceaccount:monitoring:prometheus',
  uid: 'u-1',
  groups: ['system:serviceaccounts'],
};

describe('bearerToken', () => {
  it('takes the token of a Bearer header (scheme in any case) and nothing else', () => {
    expect(bearerToken('Bearer abc.def')).toBe('abc.def');
    expect(bearerToken('bearer abc')).toBe('abc');
    expect(bearerToken('  BEARER   abc  ')).toBe('abc');
    expect(bearerToken(undefined)).toBeUndefined();
    expect(bearerToken('')).toBeUndefined();
    expect(bearerToken('Bearer')).toBeUndefined();
    expect(bearerToken('Bearer a b')).toBeUndefined();
    expect(bearerToken('Basic dXNlcjpwYXNz')).toBeUndefined();
    expect(bearerToken(`Bearer ${'x'.repeat(20_000)}`)).toBeUndefined();
  });
});

describe('DelegatedAuth', () => {
  it('sends a TokenReview, then a SubjectAccessReview for the non-resource URL and verb, with the whole user', async () => {
    const { fake, server } = await fakeApi();
    fake.tokens.set('tok', { ...PROM, extra: { 'authentication.kubernetes.io/pod-name': ['p-0'] } });
    fake.allowed.add(PROM.username);
    const { auth } = setup(server);
    const d = await auth.check('Bearer tok', '/metrics', 'get');
    expect(d).toMatchObject({ code: 200, user: PROM.username, source: 'review' });
    expect(fake.reviews.map((r) => r.path)).toEqual([
      '/apis/authentication.k8s.io/v1/tokenreviews',
      '/apis/authorization.k8s.io/v1/subjectaccessreviews',
    ]);
    expect(fake.reviews[0]!.body).toEqual({
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      spec: { token: 'tok' },
    });
    expect(fake.reviews[1]!.body).toEqual({
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: {
        user: PROM.username,
        uid: 'u-1',
        groups: ['system:serviceaccounts'],
        extra: { 'authentication.kubernetes.io/pod-name': ['p-0'] },
        nonResourceAttributes: { path: '/metrics', verb: 'get' },
      },
    });
  });

  it('401 without a usable bearer token, without asking the API server', async () => {
    const { fake, server } = await fakeApi();
    const { auth } = setup(server);
    for (const h of [undefined, '', 'Basic abc', 'Bearer ']) {
      expect((await auth.check(h, '/metrics')).code, String(h)).toBe(401);
    }
    expect(fake.reviews).toEqual([]);
  });

  it('401 for a token the API server does not authenticate; 403 for a user it does not allow', async () => {
    const { fake, server } = await fakeApi();
    fake.tokens.set('no-role', { username: 'system:serviceaccount:default:nobody' });
    const { auth, value } = setup(server);
    const bad = await auth.check('Bearer made-up', '/metrics');
    expect(bad.code).toBe(401);
    expect(bad.reason).toContain('token not known');
    const denied = await auth.check('Bearer no-role', '/metrics');
    expect(denied.code).toBe(403);
    expect(denied.reason).toBe(
      'user "system:serviceaccount:default:nobody" cannot get path "/metrics": no binding',
    );
    expect(await value('nlc_metrics_auth_reviews_total', { review: 'tokenreview', result: 'denied' })).toBe(
      1,
    );
    expect(await value('nlc_metrics_auth_reviews_total', { review: 'tokenreview', result: 'allowed' })).toBe(
      1,
    );
    expect(
      await value('nlc_metrics_auth_reviews_total', { review: 'subjectaccessreview', result: 'denied' }),
    ).toBe(1);
  });

  it('caches answers for 10 s (allowed, rejected and denied alike), then reviews again', async () => {
    const { fake, server } = await fakeApi();
    fake.tokens.set('tok', PROM);
    fake.tokens.set('no-role', { username: 'nobody' });
    fake.allowed.add(PROM.username);
    const { auth, clock, value } = setup(server);
    const all = async () => [
      (await auth.check('Bearer tok', '/metrics')).code,
      (await auth.check('Bearer no-role', '/metrics')).code,
      (await auth.check('Bearer made-up', '/metrics')).code,
    ];
    expect(await all()).toEqual([200, 403, 401]);
    expect(fake.reviews).toHaveLength(5);
    clock.advance(9_999);
    expect(await all()).toEqual([200, 403, 401]);
    expect(fake.reviews).toHaveLength(5);
    expect(await value('nlc_metrics_auth_cache_hits_total', {})).toBe(5);
    // The answers change on the server; the cache keeps the old ones until they expire.
    fake.allowed.delete(PROM.username);
    fake.allowed.add('nobody');
    fake.tokens.set('made-up', { username: 'nobody' });
    expect(await all()).toEqual([200, 403, 401]);
    clock.advance(1);
    expect(await all()).toEqual([403, 200, 200]);
    // Three TokenReviews, two SubjectAccessReviews: "made-up" now names the user that "no-role"
    // names, whose fresh answer is cached.
    expect(fake.reviews).toHaveLength(10);
  });

  it('concurrent requests with one token share one review', async () => {
    const { fake, server } = await fakeApi();
    fake.tokens.set('tok', PROM);
    fake.allowed.add(PROM.username);
    const { auth } = setup(server);
    const out = await Promise.all(Array.from({ length: 20 }, () => auth.check('Bearer tok', '/metrics')));
    expect(out.every((d) => d.code === 200)).toBe(true);
    expect(fake.reviews).toHaveLength(2);
  });

  it('a failed review is not cached: 503 now, reviewed again next time', async () => {
    const { fake, server } = await fakeApi();
    fake.tokens.set('tok', PROM);
    fake.allowed.add(PROM.username);
    const { auth, value } = setup(server, { staleIfErrorMs: 0 });
    fake.failWith = 500;
    const d = await auth.check('Bearer tok', '/metrics');
    expect(d.code).toBe(503);
    expect(d.reason).toContain('HTTP 500');
    fake.failWith = undefined;
    expect((await auth.check('Bearer tok', '/metrics')).code).toBe(200);
    expect(fake.reviews).toHaveLength(3);
    expect(await value('nlc_metrics_auth_reviews_total', { result: 'error' })).toBe(1);
  });

  it('without RBAC for the reviews (403 from the API server) it answers 503, never 200', async () => {
    const { fake, server } = await fakeApi();
    fake.tokens.set('tok', PROM);
    fake.failWith = 403;
    const { auth } = setup(server);
    const d = await auth.check('Bearer tok', '/metrics');
    expect(d.code).toBe(503);
    expect(d.reason).toContain('HTTP 403');
  });

  it('stale-if-error: an allowed token stays allowed while the API server cannot answer, for the grace only', async () => {
    const { fake, server } = await fakeApi();
    fake.tokens.set('tok', PROM);
    fake.tokens.set('no-role', { username: 'nobody' });
    fake.allowed.add(PROM.username);
    const { auth, clock, value } = setup(server, { staleIfErrorMs: 60_000 });
    expect((await auth.check('Bearer tok', '/metrics')).code).toBe(200);
    expect((await auth.check('Bearer no-role', '/metrics')).code).toBe(403);
    clock.advance(30_000);
    fake.failWith = 503;
    expect(await auth.check('Bearer tok', '/metrics')).toMatchObject({ code: 200, source: 'stale' });
    // A denied user and an unknown token get no grace.
    expect((await auth.check('Bearer no-role', '/metrics')).code).toBe(503);
    expect((await auth.check('Bearer other', '/metrics')).code).toBe(503);
    // "no-role" was authenticated (stale answer used) but its user was denied (no grace).
    expect(await value('nlc_metrics_auth_stale_total', { review: 'tokenreview' })).toBe(2);
    expect(await value('nlc_metrics_auth_stale_total', { review: 'subjectaccessreview' })).toBe(1);
    clock.advance(30_000);
    expect((await auth.check('Bearer tok', '/metrics')).code).toBe(503);
    // Back: reviewed and fresh again.
    fake.failWith = undefined;
    expect(await auth.check('Bearer tok', '/metrics')).toMatchObject({ code: 200, source: 'review' });
  });

  it('a hanging API server costs one review timeout per scrape at most: then stale answers at once, revalidated behind', async () => {
    const { fake, server } = await fakeApi();
    fake.tokens.set('tok', PROM);
    fake.allowed.add(PROM.username);
    const { auth, clock } = setup(server, { reviewTimeoutMs: 300, staleIfErrorMs: 60_000 });
    expect((await auth.check('Bearer tok', '/metrics')).code).toBe(200);
    clock.advance(10_001);
    fake.hang = true;
    const timed = async () => {
      const t0 = performance.now();
      const d = await auth.check('Bearer tok', '/metrics');
      return { d, ms: performance.now() - t0 };
    };
    // The TokenReview times out (300 ms); the SubjectAccessReview is not waited for again.
    const first = await timed();
    expect(first.d).toMatchObject({ code: 200, source: 'stale' });
    expect(first.ms).toBeGreaterThanOrEqual(290);
    expect(first.ms).toBeLessThan(550);
    const reviewsBefore = fake.reviews.length;
    const second = await timed();
    expect(second.d).toMatchObject({ code: 200, source: 'stale' });
    expect(second.ms).toBeLessThan(100);
    // ... while reviews go on behind it (both kinds).
    await new Promise((r) => setTimeout(r, 100));
    expect(fake.reviews.length).toBe(reviewsBefore + 2);
    // The API server answers again: the background review refreshes the cache.
    fake.hang = false;
    await new Promise((r) => setTimeout(r, 400)); // the hanging background reviews time out
    await auth.check('Bearer tok', '/metrics'); // starts a review that succeeds
    await new Promise((r) => setTimeout(r, 50));
    expect(await auth.check('Bearer tok', '/metrics')).toMatchObject({ code: 200, source: 'cache' });
  });

  it('bounds reviews in flight: a hanging API server gets at most maxInFlight, the rest 429 at once, all end by the timeout', async () => {
    const { fake, server } = await fakeApi();
    fake.hang = true;
    const { auth } = setup(server, { maxInFlight: 3, reviewTimeoutMs: 300, staleIfErrorMs: 0 });
    const started = performance.now();
    const calls = Array.from({ length: 10 }, (_, i) =>
      auth.check(`Bearer t${i}`, '/metrics').then((d) => ({ d, ms: performance.now() - started })),
    );
    const out = await Promise.all(calls);
    const codes = out.map((o) => o.d.code).sort();
    expect(codes).toEqual([429, 429, 429, 429, 429, 429, 429, 503, 503, 503]);
    // The refused ones were answered without waiting for the hanging reviews.
    for (const o of out.filter((x) => x.d.code === 429)) expect(o.ms).toBeLessThan(250);
    for (const o of out.filter((x) => x.d.code === 503)) expect(o.d.reason).toMatch(/timed out/);
    await new Promise((r) => setTimeout(r, 50));
    expect(auth.inFlight).toBe(0);
    expect(fake.reviews).toHaveLength(3);
  });
});

/** Lets the loopback API server's I/O run (the auth's own clock is the manual one). */
const io = () => new Promise((r) => setTimeout(r, 30));

describe('DelegatedAuth: a stale allow only while the API server is unreachable (issue 28, defect 2)', () => {
  it.each([
    {
      what: 'a token the API server no longer authenticates (its ServiceAccount deleted) gets 401',
      revoke: (f: FakeApi) => f.tokens.delete('tok'),
      code: 401,
    },
    {
      what: 'a user whose binding was removed gets 403',
      revoke: (f: FakeApi) => f.allowed.delete(PROM.username),
      code: 403,
    },
  ])(
    '$what once its answer expires, even with the review pool full of other tokens',
    async ({ revoke, code }) => {
      const { fake, server } = await fakeApi();
      fake.tokens.set('tok', PROM);
      fake.allowed.add(PROM.username);
      const { auth, clock } = setup(server, { maxInFlight: 2 });
      expect((await auth.check('Bearer tok', '/metrics')).code).toBe(200);
      // Two tokens whose reviews never end keep the pool full; the API server answers everything else.
      fake.hangTokens.add('junk-1');
      fake.hangTokens.add('junk-2');
      const junk = [auth.check('Bearer junk-1', '/metrics'), auth.check('Bearer junk-2', '/metrics')];
      await io();
      expect((await auth.check('Bearer junk-3', '/metrics')).code).toBe(429);
      revoke(fake);
      clock.advance(10_001);
      expect(await auth.check('Bearer tok', '/metrics')).toMatchObject({ code, source: 'review' });
      for (const r of fake.hanging.splice(0)) r.destroy();
      await Promise.all(junk);
    },
  );

  it('no review slot at all (the pool and its reserve busy) and the API server reachable: 429, not the stale allow', async () => {
    const { fake, server } = await fakeApi();
    for (const t of ['tok', 'known-1', 'known-2', 'known-3']) fake.tokens.set(t, { ...PROM, uid: t });
    fake.allowed.add(PROM.username);
    const { auth, clock } = setup(server, { maxInFlight: 1 });
    for (const t of ['tok', 'known-1', 'known-2', 'known-3']) {
      expect((await auth.check(`Bearer ${t}`, '/metrics')).code).toBe(200);
    }
    clock.advance(10_001);
    // Revalidations of tokens allowed before, hanging, fill the pool and its reserve.
    for (const t of ['known-1', 'known-2', 'known-3']) fake.hangTokens.add(t);
    const busy = ['known-1', 'known-2', 'known-3'].map((t) => auth.check(`Bearer ${t}`, '/metrics'));
    await io();
    expect(fake.hanging).toHaveLength(3);
    const d = await auth.check('Bearer tok', '/metrics');
    expect(d.code).toBe(429);
    expect(d.source).toBeUndefined();
    for (const r of fake.hanging.splice(0)) r.destroy();
    await Promise.all(busy);
  });

  it('429 from the API server is an answer, not an outage: the scrape gets 429, never the stale allow', async () => {
    const { fake, server } = await fakeApi();
    fake.tokens.set('tok', PROM);
    fake.allowed.add(PROM.username);
    const { auth, clock, value } = setup(server);
    expect((await auth.check('Bearer tok', '/metrics')).code).toBe(200);
    clock.advance(10_001);
    fake.failWith = 429;
    const d = await auth.check('Bearer tok', '/metrics');
    expect(d.code).toBe(429);
    expect(d.reason).toContain('HTTP 429');
    expect(await value('nlc_metrics_auth_stale_total', {})).toBe(0);
    // ... nor does it make the next request take the stale answer without asking.
    const again = await auth.check('Bearer tok', '/metrics');
    expect(again.code).toBe(429);
    fake.failWith = undefined;
    expect(await auth.check('Bearer tok', '/metrics')).toMatchObject({ code: 200, source: 'review' });
  });

  it('once the API server answers again, an expired allow is no longer used without asking', async () => {
    const { fake, server } = await fakeApi();
    fake.tokens.set('tok', PROM);
    fake.tokens.set('tok-2', { ...PROM, uid: 'u-2' });
    fake.allowed.add(PROM.username);
    const { auth, clock } = setup(server);
    expect((await auth.check('Bearer tok', '/metrics')).code).toBe(200);
    expect((await auth.check('Bearer tok-2', '/metrics')).code).toBe(200);
    clock.advance(10_001);
    fake.failWith = 503;
    expect(await auth.check('Bearer tok-2', '/metrics')).toMatchObject({ code: 200, source: 'stale' });
    await io(); // the background revalidation fails too
    // Back: another request's review is answered; then "tok" is revoked.
    fake.failWith = undefined;
    expect(await auth.check('Bearer tok-2', '/metrics')).toMatchObject({ code: 200, source: 'stale' });
    await io(); // its background revalidation is answered
    fake.tokens.delete('tok');
    expect(await auth.check('Bearer tok', '/metrics')).toMatchObject({ code: 401, source: 'review' });
  });

  it('a denial ends the stale grace even when denials are not cached (TTL 0)', async () => {
    const { fake, server } = await fakeApi();
    fake.tokens.set('tok', PROM);
    fake.allowed.add(PROM.username);
    const { auth, clock } = setup(server, { authzDenyTtlMs: 0, staleIfErrorMs: 600_000 });
    expect((await auth.check('Bearer tok', '/metrics')).code).toBe(200);
    clock.advance(10_001);
    fake.allowed.delete(PROM.username);
    expect((await auth.check('Bearer tok', '/metrics')).code).toBe(403);
    clock.advance(1);
    fake.failWith = 503;
    // The API server is down now, but it denied this user after it last allowed it.
    const d = await auth.check('Bearer tok', '/metrics');
    expect(d.code).toBe(503);
  });
});

describe('DelegatedAuth: reviews are rate-limited, rejections cached apart (issue 28, defect 4)', () => {
  it('distinct junk tokens: at most the burst of reviews at once (less the reserve), then the rate; the rest 429 at once', async () => {
    const { fake, server } = await fakeApi();
    const { auth, clock, value } = setup(server, { reviewQps: 20, reviewBurst: 40 });
    const codes: number[] = [];
    for (let i = 0; i < 100; i++) codes.push((await auth.check(`Bearer junk-${i}`, '/metrics')).code);
    // 40 tokens, 4 of them kept for tokens and users allowed before: 36 reviews, 64 refused.
    expect(fake.reviews).toHaveLength(36);
    expect(codes.filter((c) => c === 401)).toHaveLength(36);
    expect(codes.filter((c) => c === 429)).toHaveLength(64);
    expect(await value('nlc_metrics_auth_throttled_total', { review: 'tokenreview', limit: 'rate' })).toBe(
      64,
    );
    // One second later: 20 more.
    clock.advance(1000);
    for (let i = 100; i < 150; i++) await auth.check(`Bearer junk-${i}`, '/metrics');
    expect(fake.reviews).toHaveLength(56);
    // The defaults are upstream's delegated-auth client: 200 per second, burst 400.
    const d = setup(server);
    const before = fake.reviews.length;
    for (let i = 0; i < 450; i++) await d.auth.check(`Bearer other-${i}`, '/metrics');
    expect(fake.reviews.length - before).toBe(360);
  });

  it('a scraper allowed before is still reviewed while junk tokens use up the rate', async () => {
    const { fake, server } = await fakeApi();
    fake.tokens.set('tok', PROM);
    fake.allowed.add(PROM.username);
    const { auth, clock } = setup(server, { reviewQps: 20, reviewBurst: 40 });
    expect((await auth.check('Bearer tok', '/metrics')).code).toBe(200);
    clock.advance(10_001);
    for (let i = 0; i < 100; i++) await auth.check(`Bearer junk-${i}`, '/metrics');
    expect((await auth.check('Bearer junk-x', '/metrics')).code).toBe(429);
    expect(await auth.check('Bearer tok', '/metrics')).toMatchObject({ code: 200, source: 'review' });
  });

  it('rejected tokens are cached apart: a flood of them never pushes an allowed token out of the cache', async () => {
    const { fake, server } = await fakeApi();
    fake.tokens.set('tok', PROM);
    fake.allowed.add(PROM.username);
    const { auth, clock } = setup(server, { maxEntries: 8, staleIfErrorMs: 600_000 });
    expect((await auth.check('Bearer tok', '/metrics')).code).toBe(200);
    for (let i = 0; i < 50; i++) expect((await auth.check(`Bearer junk-${i}`, '/metrics')).code).toBe(401);
    // A rejected token is cached (10 s): asked again, no new review.
    const n = fake.reviews.length;
    expect((await auth.check('Bearer junk-49', '/metrics')).code).toBe(401);
    expect(fake.reviews).toHaveLength(n);
    clock.advance(10_001);
    fake.failWith = 503;
    expect(await auth.check('Bearer tok', '/metrics')).toMatchObject({ code: 200, source: 'stale' });
  });
});
