/**
 * What TokenReview + SubjectAccessReview cost on the /metrics request path: one controller process
 * (the built dist/main.js, --leader-elect=false, no fleet) serving /metrics securely and one serving
 * plain HTTP, against a real local control plane. Sequential scrapes, one at a time:
 *
 *   plain        HTTP, no authentication (--metrics-secure=false), keep-alive
 *   cached       HTTPS, the same token each time (answers cached 10 s), keep-alive
 *   uncached     HTTPS, a new ServiceAccount's token each time: a TokenReview and a
 *                SubjectAccessReview per scrape, keep-alive
 *   handshake    HTTPS, the same token, a new TLS connection each time
 *
 * and the controller's own timing of each review (nlc_metrics_auth_review_duration_seconds).
 *
 *   npm run build && npx tsx bench/metrics-auth.ts [scrapes=200]
 */
import http from 'node:http';
import https from 'node:https';
import { paths } from '../src/kube/client.js';
import { LocalControlPlane } from '../src/localcluster/control-plane.js';
import { startController } from '../test/support/controller-process.js';

const N = Number(process.argv[2] ?? 200);
const NS = 'bench-scrapers';

function get(
  url: string,
  opts: { token?: string; agent: http.Agent | false },
): Promise<{ status: number; ms: number; bytes: number }> {
  const t0 = performance.now();
  const mod = url.startsWith('https:') ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.request(
      url,
      {
        headers: opts.token ? { authorization: `Bearer ${opts.token}` } : {},
        agent: opts.agent,
        rejectUnauthorized: false,
      },
      (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => {
          bytes += c.length;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: performance.now() - t0, bytes }));
      },
    );
    req.on('error', reject);
    req.end();
  });
}

function stats(ms: number[]): string {
  const s = [...ms].sort((a, b) => a - b);
  const q = (p: number) => s[Math.min(s.length - 1, Math.floor(p * s.length))]!.toFixed(2);
  return `p50 ${q(0.5)} ms  p90 ${q(0.9)} ms  p99 ${q(0.99)} ms  (n=${s.length})`;
}

async function run(
  label: string,
  n: number,
  one: (i: number) => Promise<{ status: number; ms: number }>,
): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const r = await one(i);
    if (r.status !== 200) throw new Error(`${label}: scrape ${i} got ${r.status}`);
    out.push(r.ms);
  }
  console.log(`${label.padEnd(10)} ${stats(out)}`);
  return out;
}

const cp = await LocalControlPlane.start({ env: process.env });
const admin = await cp.client();
try {
  // The metrics-reader role, bound to every ServiceAccount of one namespace.
  await admin.request({ method: 'POST', path: paths.namespaces(), body: { metadata: { name: NS } } });
  await admin.request({
    method: 'POST',
    path: '/apis/rbac.authorization.k8s.io/v1/clusterroles',
    body: {
      metadata: { name: 'bench-metrics-reader' },
      rules: [{ nonResourceURLs: ['/metrics'], verbs: ['get'] }],
    },
  });
  await admin.request({
    method: 'POST',
    path: '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings',
    body: {
      metadata: { name: 'bench-metrics-reader' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'bench-metrics-reader' },
      subjects: [
        { kind: 'Group', apiGroup: 'rbac.authorization.k8s.io', name: `system:serviceaccounts:${NS}` },
      ],
    },
  });
  const tokens: string[] = [];
  for (let i = 0; i <= N; i++) {
    await admin.request({
      method: 'POST',
      path: `/api/v1/namespaces/${NS}/serviceaccounts`,
      body: { metadata: { name: `scraper-${i}` } },
    });
    const tr = await admin.request<{ status: { token: string } }>({
      method: 'POST',
      path: `/api/v1/namespaces/${NS}/serviceaccounts/scraper-${i}/token`,
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 3600 },
      },
    });
    tokens.push(tr.status.token);
  }
  const flags = [`--kubeconfig=${cp.kubeconfigPath}`, '--leader-elect=false'];
  const secure = await startController(flags, { name: 'secure', secureMetrics: { token: tokens[0]! } });
  const plain = await startController(flags, { name: 'plain' });
  try {
    const s = `https://127.0.0.1:${secure.metricsPort}/metrics`;
    const p = `http://127.0.0.1:${plain.metricsPort}/metrics`;
    const keep = new https.Agent({ keepAlive: true, maxSockets: 1 });
    const keepPlain = new http.Agent({ keepAlive: true, maxSockets: 1 });
    // Warm up both (JIT, first connection, first review).
    for (let i = 0; i < 20; i++) {
      await get(p, { agent: keepPlain });
      await get(s, { token: tokens[0], agent: keep });
    }
    const size = (await get(p, { agent: keepPlain })).bytes;
    console.log(`/metrics body: ${size} bytes; ${N} sequential scrapes each`);
    const plainMs = await run('plain', N, () => get(p, { agent: keepPlain }));
    const cachedMs = await run('cached', N, () => get(s, { token: tokens[0], agent: keep }));
    const uncachedMs = await run('uncached', N, (i) => get(s, { token: tokens[i + 1], agent: keep }));
    const handshakeMs = await run('handshake', N, () => get(s, { token: tokens[0], agent: false }));
    const med = (a: number[]) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)]!;
    console.log(
      `median added: https+cached vs plain ${(med(cachedMs) - med(plainMs)).toFixed(2)} ms; ` +
        `uncached vs cached ${(med(uncachedMs) - med(cachedMs)).toFixed(2)} ms; ` +
        `new TLS connection vs keep-alive ${(med(handshakeMs) - med(cachedMs)).toFixed(2)} ms`,
    );
    // The controller's own view of each review (cache misses only).
    const text = await secure.metrics();
    for (const review of ['tokenreview', 'subjectaccessreview']) {
      const v = (suffix: string) =>
        Number(
          new RegExp(
            `^nlc_metrics_auth_review_duration_seconds_${suffix}\\{review="${review}"\\} (\\S+)$`,
            'm',
          ).exec(text)?.[1] ?? Number.NaN,
        );
      const count = v('count');
      console.log(
        `${review}: ${count} reviews, mean ${((v('sum') / count) * 1000).toFixed(2)} ms (nlc_metrics_auth_review_duration_seconds)`,
      );
    }
    const hits = /^nlc_metrics_auth_cache_hits_total\{review="tokenreview"\} (\S+)$/m.exec(text)?.[1];
    console.log(`tokenreview cache hits: ${hits}`);
    keep.destroy();
    keepPlain.destroy();
  } finally {
    await secure.kill();
    await plain.kill();
  }
} finally {
  admin.close();
  await cp.stop();
}
