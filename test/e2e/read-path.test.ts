import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { paths } from '../../src/kube/client.js';
import type { Lease } from '../../src/kube/types.js';
import { ApiHttpProxy } from '../support/api-http-proxy.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { fastTestFlags, sigtermAndExit, startController } from '../support/controller-process.js';
import { ClusterObserver } from '../support/observer.js';
import { sleep, waitUntil } from '../support/wait.js';

/**
 * The controller's reads against the real API server, through an HTTP proxy that can hold back
 * one node's watch events or make chosen requests slow (the kubelets and the test's observer talk
 * to the API server directly).
 */

const GRACE_MS = 5000;
const LAG_LOG = 'Lease was renewed but the watch had not shown it; not marking';
const NS = 'kube-system';
const LOCK = 'node-lifecycle-controller';

let cluster: TestCluster;
let fleet: SimulatedFleet;
let observer: ClusterObserver;
let proxy: ApiHttpProxy;
let dir: string;
let kubeconfig: string;

beforeAll(async () => {
  cluster = await startCluster();
  // Renewals every second; node status only every 5 minutes when unchanged (kubelet defaults).
  fleet = await SimulatedFleet.start(cluster.admin, {
    nodes: 6,
    podsPerNode: 2,
    namePrefix: 'rp-',
    timing: { renewIntervalMs: 1000 },
  });
  observer = await ClusterObserver.start(cluster.admin);
  proxy = await ApiHttpProxy.start(cluster.cp);
  dir = mkdtempSync(path.join(tmpdir(), 'nlc-read-path-'));
  kubeconfig = path.join(dir, 'via-http-proxy.kubeconfig');
  proxy.writeKubeconfig(cluster.cp, kubeconfig);
});

afterAll(async () => {
  observer?.stop();
  fleet?.stop();
  await proxy?.close();
  await cluster?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('the lease re-read before marking (real API server)', () => {
  it("a lease watch that stops showing one node's renewals while its kubelet renews: the node is not marked, the lag is counted and logged", async () => {
    const lagging = fleet.names[1]!;
    const startedAt = performance.now();
    const ctl = await startController([...fastTestFlags(kubeconfig, GRACE_MS), '--leader-elect=false']);
    onTestFailed(() => console.log(`controller log summary:\n${ctl.summary()}`));
    try {
      await ctl.waitForLog('Acting: watches healthy and leading', 20_000);
      await sleep(1000);
      // From now on the controller's watches do not show this node's Lease (nor Node) changes;
      // every other event and bookmark still flows, so its watches stay healthy.
      proxy.hold(lagging);
      const heldAt = performance.now();
      const logsAtHold = ctl.logs.length;
      await waitUntil(async () => (await ctl.metric('nlc_watch_lag_detected_total')) >= 2, {
        timeoutMs: 3 * GRACE_MS + 5000,
        what: 'the lag detected twice',
      });
      const lagged = await ctl.metric('nlc_watch_lag_detected_total');
      console.log(
        `lag detected ${lagged} times in ${Math.round(performance.now() - heldAt)} ms; ` +
          `${proxy.dropped.get(lagging) ?? 0} watch events held back`,
      );
      // The kubelet kept renewing, and the watch really did not show it.
      expect(observer.lastRenewalAt(lagging)).toBeGreaterThan(heldAt + GRACE_MS);
      expect(proxy.dropped.get(lagging) ?? 0).toBeGreaterThan(GRACE_MS / 1000);
      const lines = ctl.logs.filter((l) => l.msg === LAG_LOG);
      expect(lines.length).toBe(lagged);
      expect(lines.every((l) => l.node === lagging && l.level === 'warn')).toBe(true);
      // Judged on the test's own watch of the Nodes: nothing was marked, this node or another.
      for (const n of fleet.names) expect(observer.readyAt(n, 'Unknown', startedAt), n).toBeUndefined();
      expect(await ctl.metric('nlc_transitions_total', { kind: 'marked_unknown' })).toBe(0);
      // The held node's lag never made the controller blind (at start-up it may or may not have been,
      // depending on whether its watches synced before it could act).
      expect(
        ctl.logs
          .slice(logsAtHold)
          .filter((l) => l.msg === 'Blind: the lease watch is not healthy, marking nothing').length,
      ).toBe(0);
    } finally {
      proxy.hold(lagging, false);
      await ctl.kill();
    }
  });
});

describe('SIGTERM with a slow API server for reads (real API server)', () => {
  it('a pod list hanging on the wire: the shutdown does not wait for it, the lock is released at once', async () => {
    const dead = fleet.names[3]!;
    // Pod lists take a minute to be answered; everything else is prompt.
    const clear = proxy.delay((r) => r.method === 'GET' && r.url.startsWith('/api/v1/pods?'), 60_000);
    const ctl = await startController(fastTestFlags(kubeconfig, GRACE_MS), {
      env: { POD_NAME: 'nlc-read-path-0', POD_NAMESPACE: NS },
      name: 'leader',
    });
    onTestFailed(() => console.log(`controller log summary:\n${ctl.summary()}`));
    try {
      await ctl.waitForLog('Acting: watches healthy and leading', 30_000);
      fleet.node(dead).pauseHeartbeats();
      // Marked Unknown (the write goes through), then its pods are listed: that read hangs.
      await waitUntil(() => observer.readyStatus(dead) === 'Unknown', {
        timeoutMs: GRACE_MS + 10_000,
        what: `${dead} marked Unknown`,
      });
      await waitUntil(() => proxy.delayed.length > 0, { timeoutMs: 5000, what: 'a pod list on the wire' });
      await sleep(500);
      const reads = proxy.delayed.length;
      const exit = await sigtermAndExit(ctl);
      const { took, stopped } = exit;
      console.log(
        `exit ${exit.code} ${Math.round(took)} ms after SIGTERM with ${reads} read(s) on the wire; ` +
          `${JSON.stringify(stopped)}`,
      );
      expect(exit.code).toBe(0);
      expect(stopped).toMatchObject({ drained: true, lease: 'released' });
      expect(ctl.logs.some((l) => String(l.msg).startsWith('In-flight writes did not finish'))).toBe(false);
      // Released: the lock names nobody (another replica could take it at once).
      const lock = await cluster.admin.request<Lease>({ method: 'GET', path: paths.lease(NS, LOCK) });
      expect(lock.spec?.holderIdentity ?? '').toBe('');
      // Well inside the drain budget (7 s of 10 s): nothing waited for the read.
      expect(took).toBeLessThan(3000);
    } finally {
      clear();
      fleet.node(dead).resumeHeartbeats();
      await ctl.kill();
    }
  });
});
