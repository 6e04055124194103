import { afterEach, describe, expect, it } from 'vitest';
import { KubeClient } from '../kube/client.js';
import { type LoopbackServer, loopbackServer } from '../kube/testing.js';
import { createApiRequestMetrics, createRegistry } from './registry.js';

let api: LoopbackServer | undefined;
afterEach(async () => {
  await api?.close();
  api = undefined;
});

describe('API request metrics', () => {
  it('count each request as client-go does (rest_client_*) and by Kubernetes verb and resource (nlc_api_*)', async () => {
    const registry = createRegistry({ defaultMetrics: false });
    const observer = createApiRequestMetrics(registry);
    api = await loopbackServer(
      (req, res) => {
        if (req.url?.includes('watch=true')) {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end();
          return;
        }
        const code = req.method === 'POST' ? 201 : req.url?.includes('missing') ? 404 : 200;
        res.writeHead(code, { 'content-type': 'application/json' }).end('{}');
      },
      { client: { observer } },
    );
    const c = api.client;
    await c.raw({ method: 'GET', path: '/api/v1/nodes' });
    await c.raw({ method: 'GET', path: '/api/v1/nodes/missing' });
    await c.raw({ method: 'POST', path: '/apis/authentication.k8s.io/v1/tokenreviews', body: {} });
    const stream = await c.stream({ path: '/api/v1/nodes', query: { watch: 'true' } });
    stream.destroy();
    // A server that refuses connections: a transport error.
    const dead = await KubeClient.fromCredentials(
      {
        server: new URL('http://127.0.0.1:1'),
        tls: {},
        auth: async () => ({ headers: {} }),
        unauthorized: async () => false,
      },
      { observer },
    );
    await expect(dead.raw({ method: 'PATCH', path: '/api/v1/nodes/n1', body: {} })).rejects.toThrow();
    dead.close();

    const host = new URL(c.server).host;
    const json = await registry.getMetricsAsJSON();
    const series = (name: string) =>
      json
        .find((m) => m.name === name)!
        .values.filter(
          (v) => !('metricName' in v) || (v as { metricName: string }).metricName.endsWith('_count'),
        )
        .map(
          (v) =>
            `${Object.entries(v.labels)
              .map(([k, l]) => `${k}=${l}`)
              .sort()
              .join(',')} ${v.value}`,
        )
        .sort();
    expect(series('rest_client_requests_total')).toEqual(
      [
        `code=200,host=${host},method=GET 2`, // the list and the watch
        `code=404,host=${host},method=GET 1`,
        `code=201,host=${host},method=POST 1`,
        'code=<error>,host=127.0.0.1:1,method=PATCH 1',
      ].sort(),
    );
    // Durations of everything but watches, by HTTP method (client-go's `verb`).
    expect(series('rest_client_request_duration_seconds')).toEqual(
      [`host=${host},verb=GET 2`, `host=${host},verb=POST 1`, 'host=127.0.0.1:1,verb=PATCH 1'].sort(),
    );
    expect(series('nlc_api_requests_total')).toEqual(
      [
        'code=200,resource=nodes,verb=list 1',
        'code=200,resource=nodes,verb=watch 1',
        'code=404,resource=nodes,verb=get 1',
        'code=201,resource=tokenreviews,verb=create 1',
        'code=<error:ECONNREFUSED>,resource=nodes,verb=patch 1',
      ].sort(),
    );
  });

  it('rate-limiter waits as client-go counts them (rest_client_rate_limiter_duration_seconds), and the deprecated nlc_ one', async () => {
    const registry = createRegistry({ defaultMetrics: false });
    const observe = createApiRequestMetrics(registry);
    const base = { resource: 'nodes', code: '200', host: 'api:6443', durationSeconds: 0.01 };
    observe({ ...base, verb: 'list', method: 'GET', rateLimiterSeconds: 0.03 });
    observe({ ...base, verb: 'patch', method: 'PATCH', rateLimiterSeconds: 2 });
    // A watch does not wait for the limiter: no observation.
    observe({ ...base, verb: 'watch', method: 'GET' });
    const text = await registry.metrics();
    expect(text).toContain('rest_client_rate_limiter_duration_seconds_count{verb="GET",host="api:6443"} 1');
    expect(text).toContain('rest_client_rate_limiter_duration_seconds_count{verb="PATCH",host="api:6443"} 1');
    expect(text).toContain(
      'rest_client_rate_limiter_duration_seconds_bucket{le="0.025",verb="GET",host="api:6443"} 0',
    );
    expect(text).toContain(
      'rest_client_rate_limiter_duration_seconds_bucket{le="0.1",verb="GET",host="api:6443"} 1',
    );
    expect(text).toContain('rest_client_rate_limiter_duration_seconds_sum{verb="PATCH",host="api:6443"} 2');
    expect(text).toContain('nlc_api_rate_limiter_duration_seconds_count{verb="list"} 1');
    expect(text).toMatch(/# HELP nlc_api_rate_limiter_duration_seconds DEPRECATED/);
  });
});
