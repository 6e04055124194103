import type { KubeClient } from '../../src/kube/client.js';
import { type ControlPlaneOptions, LocalControlPlane } from '../../src/localcluster/control-plane.js';

export interface TestCluster {
  cp: LocalControlPlane;
  admin: KubeClient;
  stop(): Promise<void>;
}

/** Starts a real control plane for one test file. */
export async function startCluster(opts: Omit<ControlPlaneOptions, 'env'> = {}): Promise<TestCluster> {
  const t = performance.now();
  // NLC_KEEP_CONTROL_PLANE_DIR=1 keeps logs and the audit log of a failing run.
  const cp = await LocalControlPlane.start({
    env: process.env,
    keepDir: process.env.NLC_KEEP_CONTROL_PLANE_DIR === '1',
    ...opts,
  });
  const admin = await cp.client();
  console.log(
    `control plane ${cp.version} ready in ${((performance.now() - t) / 1000).toFixed(1)}s at ${cp.server}`,
  );
  return {
    cp,
    admin,
    async stop() {
      admin.close();
      await cp.stop();
    },
  };
}
