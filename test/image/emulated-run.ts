/**
 * The controller's image for another platform (linux/arm64 on an amd64 machine), run under qemu's
 * emulation against a real kube-apiserver on loopback: it must start, lead, and mark a node whose
 * kubelet stopped, as judged by this script's own watch. Built by scripts/build-image.sh; qemu's
 * binfmt handler registered by `test/kind/offline/provision.sh bases-arm64`. Not part of `./dev test`
 * (RELEASE.md step 3 runs it); it prints a PASS line with its figures and exits 1 on any failure.
 *
 *   ./dev exec -- tsx test/image/emulated-run.ts [--image NAME:TAG] [--platform linux/arm64]
 *
 * What it measures: `--version` in the image (one emulated Node.js start), the start-up of the
 * controller until it serves its probes and until it acts (leading, both watches synced), and the
 * time from the node's last renewal to Ready=Unknown, both seen by this script's watch.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { type ControllerProcess, fastTestFlags, startController } from '../support/controller-process.js';
import { ClusterObserver } from '../support/observer.js';
import { waitUntil } from '../support/wait.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const DOCKER = process.env.DOCKER ?? 'docker';
const GRACE_MS = 10_000;
/**
 * Marking may come this much after the grace period under emulation (natively the claim is 250 ms,
 * test/e2e/node-marking.test.ts): qemu runs the controller several times slower.
 */
const EMULATED_OVERHEAD_MS = 5000;
const UR_NS = 'node.kubernetes.io/unreachable:NoSchedule';
const UR_NE = 'node.kubernetes.io/unreachable:NoExecute';

function arg(name: string, dflt: string): string {
  const i = process.argv.indexOf(`--${name}`);
  const inline = process.argv.find((a) => a.startsWith(`--${name}=`));
  return inline?.slice(name.length + 3) ?? (i >= 0 ? process.argv[i + 1] : undefined) ?? dflt;
}
const docker = (args: string[]) =>
  execFileSync(DOCKER, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
const secs = (ms: number) => `${(ms / 1000).toFixed(1)}s`;
const nodeArch = { amd64: 'x64', arm64: 'arm64' } as Record<string, string>;

async function main(): Promise<void> {
  const version = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string })
    .version;
  const platform = arg('platform', 'linux/arm64');
  const arch = platform.replace(/^linux\//, '');
  const image = arg('image', `node-lifecycle-controller:${version}-${arch}`);
  const figures: string[] = [];

  const actual = docker(['image', 'inspect', '--format', '{{.Os}}/{{.Architecture}}', image]);
  if (actual !== platform) throw new Error(`${image} is ${actual}, not ${platform}`);

  let t = performance.now();
  const printed = docker(['run', '--rm', '--platform', platform, image, '--version']);
  figures.push(`--version ${secs(performance.now() - t)}`);
  if (!printed.includes(version)) throw new Error(`${image} --version printed ${JSON.stringify(printed)}`);

  let cluster: TestCluster | undefined;
  let fleet: SimulatedFleet | undefined;
  let observer: ClusterObserver | undefined;
  let ctl: ControllerProcess | undefined;
  const name = `nlc-emulated-${process.pid}`;
  const dir = mkdtempSync(path.join(tmpdir(), 'nlc-emulated-'));
  try {
    cluster = await startCluster();
    fleet = await SimulatedFleet.start(cluster.admin, {
      nodes: 3,
      podsPerNode: 1,
      timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 1000 },
    });
    observer = await ClusterObserver.start(cluster.admin);
    // The container runs as 65532: it reads a copy of the admin kubeconfig (token, CA, the loopback
    // server, reached through the host's network).
    // mkdtemp makes the folder 0700 (root's): 65532 could not reach the file in it.
    chmodSync(dir, 0o755);
    writeFileSync(path.join(dir, 'config'), readFileSync(cluster.cp.kubeconfigPath), { mode: 0o644 });

    t = performance.now();
    ctl = await startController(fastTestFlags('/kube/config', GRACE_MS), {
      name: `${image} (${platform})`,
      command: {
        file: DOCKER,
        args: [
          'run',
          '--rm',
          '--name',
          name,
          '--network',
          'host',
          '--platform',
          platform,
          '-v',
          `${dir}:/kube:ro`,
          image,
        ],
      },
      startTimeoutMs: 180_000,
    });
    figures.push(`serving probes ${secs(performance.now() - t)}`);
    // The controller's process on this machine: qemu's when the platform is not this machine's.
    const pid = docker(['inspect', '--format', '{{.State.Pid}}', name]);
    const exe = readlinkSync(`/proc/${pid}/exe`);
    const emulated = nodeArch[arch] !== process.arch;
    if (emulated !== exe.includes(`qemu-${arch === 'arm64' ? 'aarch64' : 'x86_64'}`))
      throw new Error(`the controller's process runs ${exe}: ${emulated ? 'not' : ''} emulated`);
    figures.push(`process ${exe}`);
    await ctl.waitForLog('Acting: watches healthy and leading', 180_000);
    figures.push(`acting ${secs(performance.now() - t)}`);
    const started = ctl.logs.find((l) => l.msg === 'Starting');
    if (started?.version !== version)
      throw new Error(`it says it is ${String(started?.version)}, not ${version}`);

    // One node's kubelet stops posting; the others go on.
    const [lost, ...alive] = fleet.names as [string, ...string[]];
    fleet.node(lost).pauseHeartbeats();
    const stoppedAt = performance.now();
    const unknownAt = await waitUntil(() => observer?.readyAt(lost, 'Unknown', stoppedAt), {
      timeoutMs: GRACE_MS + 60_000,
      what: `${lost} Ready=Unknown`,
    });
    // The last renewal this watch saw before the pause (one may be on the wire as it is paused).
    const renewals = (observer.renewals.get(lost) ?? []).filter((r) => r <= stoppedAt + 1000);
    if (renewals.length === 0) throw new Error(`no renewal of ${lost} was seen`);
    const lastRenewal = Math.max(...renewals);
    const markMs = unknownAt - lastRenewal;
    figures.push(`marked ${markMs.toFixed(0)} ms after the last renewal (grace ${GRACE_MS} ms)`);
    if (markMs < GRACE_MS)
      throw new Error(`${lost} was marked ${markMs.toFixed(0)} ms after its last renewal`);
    if (markMs > GRACE_MS + EMULATED_OVERHEAD_MS)
      throw new Error(
        `${lost} was marked ${markMs.toFixed(0)} ms after its last renewal (bound ${GRACE_MS + EMULATED_OVERHEAD_MS})`,
      );
    await waitUntil(() => observer?.taintsAt(lost, [UR_NS, UR_NE], stoppedAt), {
      timeoutMs: 30_000,
      what: `${lost} tainted ${UR_NS} and ${UR_NE}`,
    });
    for (const n of alive)
      if (observer.readyStatus(n) !== 'True') throw new Error(`${n} is Ready=${observer.readyStatus(n)}`);
    console.log(`PASS: ${image} (${platform}) under emulation: ${figures.join('; ')}`);
  } catch (err) {
    if (ctl) console.error(`controller log summary:\n${ctl.summary()}`);
    throw err;
  } finally {
    await ctl?.kill();
    try {
      docker(['rm', '-f', name]);
    } catch {
      // already removed (--rm)
    }
    observer?.stop();
    fleet?.stop();
    await cluster?.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(`FAIL: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
