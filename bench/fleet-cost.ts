/**
 * Measures what the simulated fleet costs: CPU seconds and RSS of this process while N simulated
 * kubelets renew their leases (default: 1,000 nodes at the kubelet's 10 s interval for 60 s) against a
 * real local control plane.
 *
 *   npx tsx bench/fleet-cost.ts [nodes=1000] [seconds=60] [renewMs=10000]
 */
import { SimulatedFleet } from '../src/fleet/fleet.js';
import { LocalControlPlane } from '../src/localcluster/control-plane.js';

const nodes = Number(process.argv[2] ?? 1000);
const seconds = Number(process.argv[3] ?? 60);
const renewMs = Number(process.argv[4] ?? 10_000);

const cp = await LocalControlPlane.start({ env: process.env });
const client = await cp.client({ maxSockets: 128 });
try {
  const t0 = performance.now();
  const fleet = await SimulatedFleet.start(client, {
    nodes,
    timing: { renewIntervalMs: renewMs },
    startConcurrency: 32,
  });
  const startSecs = (performance.now() - t0) / 1000;
  const cpu0 = process.cpuUsage();
  const r0 = fleet.names.reduce((s, n) => s + fleet.node(n).stats.renewals, 0);
  let peakRss = 0;
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
  }, 500);
  await new Promise((r) => setTimeout(r, seconds * 1000));
  clearInterval(sampler);
  const cpu = process.cpuUsage(cpu0);
  const renewals = fleet.names.reduce((s, n) => s + fleet.node(n).stats.renewals, 0) - r0;
  const errors = fleet.names.reduce((s, n) => s + fleet.node(n).stats.renewErrors, 0);
  fleet.stop();
  const cpuSecs = (cpu.user + cpu.system) / 1e6;
  console.log(
    JSON.stringify({
      nodes,
      seconds,
      renewMs,
      startSeconds: Number(startSecs.toFixed(1)),
      renewals,
      renewErrors: errors,
      renewalsPerSecond: Number((renewals / seconds).toFixed(1)),
      cpuSeconds: Number(cpuSecs.toFixed(2)),
      cpuPercentOfOneCore: Number(((cpuSecs / seconds) * 100).toFixed(1)),
      cpuMicrosPerRenewal: Math.round((cpuSecs * 1e6) / Math.max(1, renewals)),
      peakRssMiB: Math.round(peakRss / 2 ** 20),
    }),
  );
} finally {
  client.close();
  await cp.stop();
}
