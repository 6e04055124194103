import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type FleetOptions, SimulatedFleet } from '../../src/fleet/fleet.js';
import { startCluster, type TestCluster } from './cluster.js';
import { FlakyTcpProxy } from './flaky-tcp-proxy.js';
import { ClusterObserver } from './observer.js';

/**
 * A real control plane with simulated kubelets and an observer, and a FlakyTcpProxy in front of the
 * API server for the controller under test only (the kubelets talk to the API server directly):
 * `kubeconfig` is the admin kubeconfig pointed at the proxy.
 */
export interface ProxiedCluster {
  cluster: TestCluster;
  fleet: SimulatedFleet;
  observer: ClusterObserver;
  proxy: FlakyTcpProxy;
  kubeconfig: string;
  stop(): Promise<void>;
}

export async function startProxiedCluster(fleetOptions: FleetOptions): Promise<ProxiedCluster> {
  const cluster = await startCluster();
  const fleet = await SimulatedFleet.start(cluster.admin, fleetOptions);
  const observer = await ClusterObserver.start(cluster.admin);
  const proxy = await FlakyTcpProxy.start({
    host: '127.0.0.1',
    port: Number(new URL(cluster.cp.server).port),
  });
  const dir = mkdtempSync(path.join(tmpdir(), 'nlc-proxied-'));
  const kubeconfig = path.join(dir, 'via-proxy.kubeconfig');
  proxy.writeKubeconfig(cluster.cp.kubeconfigPath, kubeconfig);
  return {
    cluster,
    fleet,
    observer,
    proxy,
    kubeconfig,
    async stop() {
      observer.stop();
      fleet.stop();
      await proxy.close();
      await cluster.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
