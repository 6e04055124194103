import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import type { SimulatedFleet } from '../../src/fleet/fleet.js';
import { startController } from '../support/controller-process.js';
import type { FlakyTcpProxy } from '../support/flaky-tcp-proxy.js';
import type { ClusterObserver } from '../support/observer.js';
import { type ProxiedCluster, startProxiedCluster } from '../support/proxied-cluster.js';
import { sleep, waitUntil } from '../support/wait.js';

/**
 * A load balancer between the controller and kube-apiserver that drops every connection every 45 s
 * and refuses new ones for the next 6 s (the kubelets talk to the API server directly). The
 * controller's watches back off 0.8 s x 2^n up to 30 s (+-20 %), reset only after 120 s without a
 * failure, so they never reset here: from the 3rd cut on each blind spell lasts 20-30 s, and the
 * controller sees for at most 24.5 s between spells, less than the 25 s grace period. Before, each
 * spell gave every node a fresh grace period, so a node that died after the 3rd cut was never
 * marked; now its deadline moves by the blind time and it is marked in the 4th or 5th cycle.
 */
const GRACE_MS = 25_000;
const CUT_EVERY_MS = 45_000;
const REFUSE_MS = 6_000;
/**
 * Marking needs a quorum GET of the lease and a PATCH, both through the same proxy: one refusal
 * window and the writer's retry backoff may come between the deadline and the write landing. It
 * also covers the controller's 1 s sight check, which ends each blind spell on its next tick.
 */
const WRITE_SLACK_MS = REFUSE_MS + 3_000;
/**
 * The blind time is judged outside the controller, by the proxy: the time fewer than two
 * connections through it streamed at once (chunks at most this far apart on one connection). The
 * controller sees only while BOTH its watches are up (docs/architecture.md "When it refuses to
 * act"), and each watch backs off on its own: in one CI run the lease watch was back 12.6 s into a
 * spell and the node watch 28 s in, and a bound from "no connection streamed" (the lease watch
 * alone) was 19 s short of the spells the controller really had. So both watches stream here: the
 * live kubelets renew AND post status every second (on this 2-core machine under a load of 22 a
 * healthy stream showed gaps of 0.5-1.5 s, none of 2 s), and the proxy counts as dark every moment
 * one of them is down, whichever. An answer to a request is one or two chunks and lights next to
 * nothing. The controller's own count of its blindness is logged, never used for the bound.
 */
const WATCHES = 2;
const DARK_GAP_MS = 2_000;

let env: ProxiedCluster;
let fleet: SimulatedFleet;
let observer: ClusterObserver;
let proxy: FlakyTcpProxy;

beforeAll(async () => {
  env = await startProxiedCluster({
    nodes: 6,
    namePrefix: 'flap-',
    timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 1000, statusReportIntervalMs: 1000 },
  });
  ({ fleet, observer, proxy } = env);
});

afterAll(async () => {
  await env?.stop();
});

describe('a flapping connection to the API server (real kube-apiserver behind a cutting TCP proxy)', () => {
  it('marks a dead node within grace + the blind time, and no live node', { timeout: 330_000 }, async () => {
    const kubeconfig = env.kubeconfig;
    const ctl = await startController(
      [
        `--kubeconfig=${kubeconfig}`,
        '--leader-elect=false',
        `--node-monitor-grace-period=${GRACE_MS / 1000}s`,
        '--node-startup-grace-period=30s',
        '--watch-silence-threshold=3s',
      ],
      { name: 'behind-proxy' },
    );
    onTestFailed(() => console.log(`controller log summary:\n${ctl.summary()}`));
    let stopFlapping = () => {};
    await ctl.waitForLog('Acting: watches healthy and leading', 30_000);
    stopFlapping = proxy.flap(CUT_EVERY_MS, REFUSE_MS);
    try {
      // The node dies 1 s into the 3rd blind spell.
      await waitUntil(() => proxy.counts.cuts >= 3, { timeoutMs: 2 * CUT_EVERY_MS + 10_000, what: '3 cuts' });
      await sleep(1000);
      const dead = fleet.names[2]!;
      const blindBefore = await ctl.metric('nlc_blind_seconds_total');
      fleet.node(dead).kill();
      await sleep(300); // a renewal already in flight may still land
      const lastRenewal = observer.lastRenewalAt(dead)!;
      const unknownAt = await waitUntil(() => observer.readyAt(dead, 'Unknown', lastRenewal), {
        timeoutMs: 150_000,
        intervalMs: 200,
        what: `${dead} marked Unknown while the connection flaps`,
      });
      const dark = proxy.darkMs(lastRenewal, unknownAt, DARK_GAP_MS, WATCHES);
      const blind = (await ctl.metric('nlc_blind_seconds_total')) - blindBefore;
      const took = unknownAt - lastRenewal;
      console.log(
        `${dead}: Unknown ${(took / 1000).toFixed(1)} s after its last renewal; in between one of ` +
          `the two watches was down at the proxy for ${(dark / 1000).toFixed(1)} s (the controller counted ${blind.toFixed(1)} s ` +
          `blind); proxy ${JSON.stringify(proxy.counts)}`,
      );
      // The spells were real and long: each would have restarted every grace period before.
      expect(dark).toBeGreaterThanOrEqual(REFUSE_MS);
      expect(took).toBeGreaterThanOrEqual(GRACE_MS);
      // The bound comes from the proxy's record, not from the controller's own count of its blindness.
      expect(took).toBeLessThanOrEqual(GRACE_MS + dark + WRITE_SLACK_MS);
      // Every live node stayed Ready all along.
      for (const n of fleet.names) {
        if (n !== dead) expect(observer.everSawReady(n, 'Unknown'), n).toBe(false);
      }
    } finally {
      stopFlapping();
      await ctl.kill();
    }
  });
});
