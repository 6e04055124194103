import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { fastTestFlags, probe, startController } from '../support/controller-process.js';
import { ClusterObserver } from '../support/observer.js';
import { waitUntil } from '../support/wait.js';

const GRACE_MS = 5000;

let cluster: TestCluster;
let fleet: SimulatedFleet;
let observer: ClusterObserver;

beforeAll(async () => {
  // No ::1 on this machine fails here (claiming a port on ::1), loudly: this test never skips.
  cluster = await startCluster({ ipv6: true });
  fleet = await SimulatedFleet.start(cluster.admin, {
    nodes: 4,
    namePrefix: 'v6-',
    timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 1000 },
  });
  observer = await ClusterObserver.start(cluster.admin);
});

afterAll(async () => {
  observer?.stop();
  fleet?.stop();
  await cluster?.stop();
});

describe('an API server on https://[::1]:PORT (IPv6 loopback)', () => {
  it('the built controller reaches it directly (HTTPS_PROXY set: loopback is never proxied), is ready, and marks a node that stops renewing', async () => {
    const { cp } = cluster;
    const port = new URL(cp.server).port;
    expect(cp.server).toBe(`https://[::1]:${port}`);
    const ctl = await startController(fastTestFlags(cp.kubeconfigPath, GRACE_MS), {
      // A proxy that does not exist: a request sent to it fails, so nothing works unless the
      // bracketed host is recognised as loopback and reached directly.
      env: { HTTPS_PROXY: 'http://127.0.0.1:9', NO_PROXY: '' },
    });
    onTestFailed(() => console.log(`controller log summary:\n${ctl.summary()}`));
    try {
      const using = await ctl.waitForLog('Using kubeconfig', 10_000);
      expect(using).toMatchObject({ server: cp.server, proxy: 'none' });
      await ctl.waitForLog('Acting: watches healthy and leading', 30_000);
      await waitUntil(async () => (await probe(ctl, '/readyz')).status === 200, {
        timeoutMs: 10_000,
        what: 'controller /readyz 200',
      });

      const silent = 'v6-zone-a-001';
      const pausedAt = performance.now();
      fleet.node(silent).pauseHeartbeats();
      await waitUntil(() => observer.readyAt(silent, 'Unknown', pausedAt), {
        timeoutMs: GRACE_MS + 10_000,
        what: `${silent} marked Ready=Unknown`,
      });
      for (const n of fleet.names.filter((x) => x !== silent)) expect(observer.readyStatus(n)).toBe('True');
      expect((await probe(ctl, '/readyz')).status).toBe(200);
      // client-go's host label is the URL's host: brackets included.
      expect(await ctl.metric('rest_client_requests_total', { host: `[::1]:${port}` })).toBeGreaterThan(0);
    } finally {
      await ctl.kill();
    }
  });
});
