import { Counter } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../log/logger.js';
import { createRegistry } from '../metrics/registry.js';
import { type HttpServers, startHttpServers } from './server.js';

let servers: HttpServers | undefined;
afterEach(async () => {
  await servers?.close();
  servers = undefined;
});

describe('http servers', () => {
  it('serves /metrics from the injected registry and healthz/readyz in the Kubernetes format', async () => {
    const registry = createRegistry({ defaultMetrics: false });
    new Counter({ name: 'nlc_test_total', help: 'test', registers: [registry] }).inc(3);
    let leaderHealthy: string | undefined;
    servers = await startHttpServers({
      metrics: { address: { host: '127.0.0.1', port: 0 }, registry },
      probes: {
        address: { host: '127.0.0.1', port: 0 },
        healthz: () => [{ name: 'leader-election', check: () => leaderHealthy }],
        readyz: () => [{ name: 'informer-sync', check: () => undefined }],
      },
      logger: silentLogger,
    });
    const base = (p: number) => `http://127.0.0.1:${p}`;
    const metrics = await fetch(`${base(servers.metrics!.port)}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('nlc_test_total 3');
    // Probes are not on the metrics port and vice versa.
    expect((await fetch(`${base(servers.metrics!.port)}/healthz`)).status).toBe(404);
    expect((await fetch(`${base(servers.probes!.port)}/metrics`)).status).toBe(404);

    const ok = await fetch(`${base(servers.probes!.port)}/healthz`);
    expect(ok.status).toBe(200);
    expect(await ok.text()).toBe('ok');
    const verbose = await (await fetch(`${base(servers.probes!.port)}/readyz?verbose`)).text();
    expect(verbose).toContain('[+]informer-sync ok');

    leaderHealthy = 'not renewed for 40s';
    const bad = await fetch(`${base(servers.probes!.port)}/healthz`);
    expect(bad.status).toBe(500);
    expect(await bad.text()).toContain('[-]leader-election failed: not renewed for 40s');
  });
});
