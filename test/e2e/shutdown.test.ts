import { readFileSync } from 'node:fs';
import path from 'node:path';
import { load } from 'js-yaml';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { FLAGS, parseFlagValue } from '../../src/config/flags.js';
import type { SimulatedFleet } from '../../src/fleet/fleet.js';
import { paths } from '../../src/kube/client.js';
import type { Lease } from '../../src/kube/types.js';
import { shutdownBudget } from '../../src/manager/shutdown.js';
import type { TestCluster } from '../support/cluster.js';
import { sigtermAndExit, startController } from '../support/controller-process.js';
import type { FlakyTcpProxy } from '../support/flaky-tcp-proxy.js';
import type { ClusterObserver } from '../support/observer.js';
import { type ProxiedCluster, startProxiedCluster } from '../support/proxied-cluster.js';
import { sleep, waitUntil } from '../support/wait.js';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..', '..');
const NS = 'kube-system';
const LOCK = 'node-lifecycle-controller';

/** terminationGracePeriodSeconds of the Deployment the manifests install, in ms. */
function terminationGraceMs(): number {
  const dep = load(readFileSync(path.join(ROOT, 'manifests/base/deployment.yaml'), 'utf8')) as {
    spec: { template: { spec: { terminationGracePeriodSeconds: number } } };
  };
  return dep.spec.template.spec.terminationGracePeriodSeconds * 1000;
}

let env: ProxiedCluster;
let cluster: TestCluster;
let fleet: SimulatedFleet;
let observer: ClusterObserver;
let proxy: FlakyTcpProxy;

beforeAll(async () => {
  env = await startProxiedCluster({
    nodes: 3,
    podsPerNode: 30,
    namePrefix: 'shut-',
    timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 10_000 },
  });
  ({ cluster, fleet, observer, proxy } = env);
});

afterAll(async () => {
  await env?.stop();
});

describe('SIGTERM (real kube-apiserver, default leader-election and shutdown flags)', () => {
  it('a write hung on the wire: exits within its shutdown budget, inside terminationGracePeriodSeconds, lease not released', async () => {
    const budget = shutdownBudget(
      parseFlagValue(FLAGS.find((f) => f.name === 'shutdown-grace-period')!, '10s') as number,
    );
    const kubeconfig = env.kubeconfig;
    // One write a second, so that the node's 30 pods take half a minute to mark.
    const ctl = await startController(
      [
        `--kubeconfig=${kubeconfig}`,
        '--node-monitor-grace-period=5s',
        '--node-startup-grace-period=10s',
        '--watch-silence-threshold=3s',
        '--kube-api-qps=1',
        '--kube-api-burst=1',
      ],
      { env: { POD_NAME: 'nlc-shutdown-0', POD_NAMESPACE: NS }, name: 'leader' },
    );
    onTestFailed(() => console.log(`controller log summary:\n${ctl.summary()}`));
    await ctl.waitForLog('Acting: watches healthy and leading', 30_000);
    const dead = fleet.names[0]!;
    fleet.node(dead).kill();
    const podsMarked = () =>
      Array.from({ length: 30 }, (_, i) => observer.podReadyStatus(`default/${dead}-pod-${i}`)).filter(
        (s) => s === 'False',
      ).length;
    await waitUntil(() => podsMarked() >= 2, {
      timeoutMs: 30_000,
      what: 'the pods of the dead node being marked',
    });
    // The network to the API server turns into a black hole; the next write (one a second) hangs.
    proxy.stall(true);
    await sleep(1500);
    const exit = await sigtermAndExit(ctl);
    const { took, stopped } = exit;
    console.log(
      `exit ${exit.code} ${(took / 1000).toFixed(2)} s after SIGTERM (budget ${budget.totalMs / 1000} s, ` +
        `terminationGracePeriodSeconds ${terminationGraceMs() / 1000}); ${JSON.stringify(stopped)}; ` +
        `${JSON.stringify(ctl.logs.find((l) => String(l.msg).startsWith('In-flight writes')))}`,
    );
    expect(exit.code).toBe(0);
    // The budget plus the process exit itself.
    expect(took).toBeLessThan(budget.totalMs + 1_000);
    expect(took).toBeLessThan(terminationGraceMs());
    // Nothing was released through the black hole: the lock still names us (it expires on its own).
    proxy.stall(false);
    const lock = await cluster.admin.request<Lease>({ method: 'GET', path: paths.lease(NS, LOCK) });
    expect(lock.spec?.holderIdentity).toBe('nlc-shutdown-0');
  });
});
