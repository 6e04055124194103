import { EventEmitter } from 'node:events';
import { copyFileSync, createWriteStream, type WriteStream } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { systemClock } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import { DEMO_FLAGS, helpText, loadConfig, parseArgs } from '../config/index.js';
import { SimulatedFleet } from '../fleet/fleet.js';
import { readyStatus } from '../health/index.js';
import type { KubeClient } from '../kube/client.js';
import { LocalControlPlane } from '../localcluster/control-plane.js';
import { createLogger } from '../log/logger.js';
import { COMPONENT_NAME } from '../names/index.js';
import { watchNodeLeases, watchNodes } from '../watch/index.js';
import { buildInfo } from './build-info.js';
import {
  DemoChecks,
  type DemoSnapshot,
  formatResults,
  handoverExpectation,
  lostExpectation,
  notReadyExpectation,
  recoveredExpectation,
  UNREACHABLE_NOEXECUTE,
} from './demo-checks.js';
import { type RunningController, runController } from './run.js';
import { FleetView } from './view.js';

interface Step {
  at: number;
  note: string;
  /** Runs the step at `now` (ms since the script's start) and says what the controller must do next. */
  run: (now: number) => void | Promise<void>;
}

/** How long, past what the controller itself waits for, the demo allows each outcome to show. */
const SLACK_MS = 10_000;

/** What one demo run is given: the flags' values and where to write. */
interface DemoSettings {
  nodeCount: number;
  durationMs: number;
  graceMs: number;
  say: (s: string) => void;
}

/** The running parts of a demo: the control plane, its fleet, the two replicas and our own view. */
interface DemoRig {
  cp: LocalControlPlane;
  admin: KubeClient;
  fleet: SimulatedFleet;
  replicas: DemoReplica[];
  nodes: ReturnType<typeof watchNodes>;
  leases: ReturnType<typeof watchNodeLeases>;
  view: FleetView;
  logPath: string;
  logFile: WriteStream;
}

interface DemoReplica {
  name: string;
  ctl: RunningController;
  signals: EventEmitter;
}

/**
 * `demo`: starts a real local control plane (etcd + kube-apiserver, built once from the Go module
 * proxy), a simulated kubelet fleet across three zones, and two replicas of the controller under
 * leader election; kills some heartbeats on a schedule; and shows the fleet live. At the end it
 * says whether the controller did what each step calls for (demo-checks.ts) and exits 1 if not.
 */
export async function runDemo(argv: string[], env: NodeJS.ProcessEnv): Promise<number> {
  let args: ReturnType<typeof parseArgs>;
  try {
    args = parseArgs(argv, DEMO_FLAGS);
  } catch (err) {
    console.error(`error: ${(err as Error).message}`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(`${helpText('Usage: node-lifecycle-controller demo [flags]', DEMO_FLAGS)}\n`);
    return 0;
  }
  const settings: DemoSettings = {
    nodeCount: args.values.nodes as number,
    durationMs: args.values.duration as number,
    graceMs: args.values.grace as number,
    say: (s: string) => process.stdout.write(`${s}\n`),
  };
  const rig = await startRig(settings, env);
  const checks = new DemoChecks();
  // A node is created tainted not-ready (the API server's TaintNodesByCondition admission); the
  // controller lifts the taint once the node is Ready.
  checks.expect(
    recoveredExpectation(
      0,
      SLACK_MS + 5_000,
      "new nodes' not-ready taints lifted: every node Ready=True and untainted",
    ),
  );
  const end = await showUntilDone(settings, rig, checks, demoSteps(settings.graceMs, rig, checks));
  const failed = checks.failed(end);
  const { say } = settings;
  say(`\nWhat the controller was expected to do (t+${Math.round(end / 1000)}s):`);
  for (const line of formatResults(checks.results(end))) say(line);
  const noExecute = checks.noExecuteTainted;
  say(
    `  (${UNREACHABLE_NOEXECUTE} on ${noExecute.length ? noExecute.join(', ') : 'no node'}: admitted per zone by the eviction rate limits, not checked)`,
  );
  say(failed ? 'Demo FAILED.' : 'Demo checks passed.');
  say('Stopping...');
  // The control plane's folder (the log's) goes with it: a failed run's log is kept outside it.
  const kept = failed
    ? path.join(
        os.tmpdir(),
        `node-lifecycle-controller-demo-${new Date().toISOString().replace(/[:.]/g, '-')}.log`,
      )
    : undefined;
  await stopRig(rig, kept);
  if (kept) say(`The controller logs of the failed run: ${kept}`);
  return failed ? 1 : 0;
}

/** The control plane, the fleet (renewing every grace / 8), two replicas and the view's watches. */
async function startRig(settings: DemoSettings, env: NodeJS.ProcessEnv): Promise<DemoRig> {
  const { say, graceMs } = settings;
  say(
    'Starting a local control plane (first run builds etcd and kube-apiserver from the Go module proxy: several minutes)...',
  );
  const cp = await LocalControlPlane.start({ env });
  const logPath = path.join(cp.dir, 'controller.log');
  say(
    `kube-apiserver ${cp.version} at ${cp.server}; controller logs: ${logPath}; kubeconfig: ${cp.kubeconfigPath}`,
  );
  const admin = await cp.client({ maxSockets: 64 });
  await admin.request({
    method: 'POST',
    path: '/api/v1/namespaces',
    body: { metadata: { name: 'nlc-system' } },
  });

  const renewMs = Math.max(500, Math.round(graceMs / 8));
  const fleet = await SimulatedFleet.start(admin, {
    nodes: settings.nodeCount,
    namePrefix: 'node-',
    podsPerNode: 1,
    timing: { renewIntervalMs: renewMs, statusUpdateIntervalMs: Math.max(1000, renewMs * 2) },
  });

  // Two replicas of the controller in this process, each with its own client, metrics and lease identity.
  const logFile = createWriteStream(logPath, { flags: 'a' });
  const replicas = [
    await startReplica('replica-a', 18080, cp, graceMs, logFile),
    await startReplica('replica-b', 18090, cp, graceMs, logFile),
  ];

  const clock = systemClock;
  const nodes = watchNodes({ client: admin, clock });
  const leases = watchNodeLeases({ client: admin, clock });
  const view = new FleetView(clock, nodes, leases);
  nodes.start();
  leases.start();
  return { cp, admin, fleet, replicas, nodes, leases, view, logPath, logFile };
}

/** One replica of the controller in this process: its own flags, client, metrics, identity and log. */
async function startReplica(
  name: string,
  port: number,
  cp: LocalControlPlane,
  graceMs: number,
  logFile: WriteStream,
): Promise<DemoReplica> {
  const flags = [
    `--kubeconfig=${cp.kubeconfigPath}`,
    `--node-monitor-grace-period=${formatDuration(graceMs)}`,
    `--node-startup-grace-period=${formatDuration(graceMs * 2)}`,
    `--watch-silence-threshold=${formatDuration(Math.floor((graceMs * 2) / 3))}`,
    '--leader-elect-resource-namespace=nlc-system',
    '--leader-elect-lease-duration=6s',
    '--leader-elect-renew-deadline=4s',
    '--leader-elect-retry-period=1s',
    `--metrics-bind-address=127.0.0.1:${port}`,
    // Local use: plain HTTP without authentication, so `curl` can read it.
    '--metrics-secure=false',
    `--health-probe-bind-address=127.0.0.1:${port + 1}`,
  ];
  const { config } = loadConfig(flags, { POD_NAME: name, POD_NAMESPACE: 'nlc-system' }, name);
  const logger = createLogger({ format: 'json', write: (l) => logFile.write(`${l}\n`) }).with({
    replica: name,
  });
  const signals = new EventEmitter();
  const ctl = await runController({
    config,
    logger,
    env: {},
    build: buildInfo(),
    exit: (code) => logger.info('Replica would exit', { code }),
    signals,
  });
  return { name, ctl, signals };
}

/** The script: which heartbeats stop when, and what each step expects of the controller. */
function demoSteps(graceMs: number, rig: DemoRig, checks: DemoChecks): Step[] {
  const zoneA = rig.fleet.inZone('zone-a');
  const zoneB = rig.fleet.inZone('zone-b');
  const [a0, a1] = [zoneA[0]!, zoneA[1]!];
  const [b0, b1] = [zoneB[0]!, zoneB[1]!];
  const s = (sec: number) => sec * 1000;
  return [
    {
      at: s(5),
      note: `stop heartbeats of ${a0.name} and ${a1.name} (zone-a)`,
      run: (now) => {
        checks.silence([a0.name, a1.name]);
        a0.pauseHeartbeats();
        a1.pauseHeartbeats();
        checks.expect(lostExpectation([a0.name, a1.name], now, graceMs + SLACK_MS));
      },
    },
    {
      at: s(12),
      note: `stop heartbeats of ${b0.name} (zone-b)`,
      run: (now) => {
        checks.silence([b0.name]);
        b0.pauseHeartbeats();
        checks.expect(lostExpectation([b0.name], now, graceMs + SLACK_MS));
      },
    },
    {
      at: s(20),
      note: `${b1.name} reports Ready=False while still renewing`,
      run: (now) => {
        b1.reportNotReady();
        checks.expect(notReadyExpectation(b1.name, now, SLACK_MS));
      },
    },
    {
      at: s(12) + graceMs * 3,
      note: `the leader shuts down; the other replica takes over`,
      run: async (now) => {
        const leader = rig.view.lock?.holder;
        const r = rig.replicas.find((x) => x.name === leader) ?? rig.replicas[0];
        if (!r) return;
        r.signals.emit('SIGTERM');
        // A clean release hands over at once; otherwise the lease must expire first.
        checks.expect(handoverExpectation(r.name, now, 6_000 + SLACK_MS));
      },
    },
    {
      at: s(20) + graceMs * 3,
      note: 'heartbeats resume everywhere: nodes recover, taints go',
      run: (now) => {
        for (const k of [a0, a1, b0]) k.resumeHeartbeats();
        b1.reportReady();
        checks.expect(recoveredExpectation(now, SLACK_MS + 5_000));
      },
    },
  ];
}

/**
 * Runs the steps on time and shows the fleet every second (redrawn on a terminal, every 5 s
 * otherwise) until --duration or Ctrl-C; returns the time it stopped (ms since it began).
 */
async function showUntilDone(
  settings: DemoSettings,
  rig: DemoRig,
  checks: DemoChecks,
  steps: Step[],
): Promise<number> {
  const { nodeCount, graceMs, durationMs } = settings;
  const { view, nodes, admin } = rig;
  const snapshot = (): DemoSnapshot => ({
    nodes: [...nodes.store.values()].map((n) => ({
      name: n.metadata.name,
      ready: readyStatus(n) ?? '-',
      taints: (n.spec?.taints ?? []).map((t) => `${t.key}:${t.effect}`),
    })),
    leader: view.lock?.holder,
  });
  const t0 = performance.now();
  const notes: string[] = [];
  const tty = process.stdout.isTTY === true;
  let stop = false;
  const onSig = () => {
    stop = true;
  };
  process.once('SIGINT', onSig);
  process.once('SIGTERM', onSig);
  let last = 0;
  let tick = 0;
  while (!stop) {
    const elapsed = performance.now() - t0;
    while (steps.length > 0 && (steps[0]?.at ?? Number.POSITIVE_INFINITY) <= elapsed) {
      const step = steps.shift()!;
      notes.push(`t+${Math.round(elapsed / 1000)}s: ${step.note}`);
      await step.run(elapsed);
    }
    if (tick++ % 2 === 0) await view.refreshReplicas(admin, COMPONENT_NAME).catch(() => undefined);
    const now = performance.now() - t0;
    checks.observe(now, snapshot());
    const text = view.render({
      title: `node-lifecycle-controller demo: ${nodeCount} simulated nodes, grace ${graceMs / 1000}s, t+${Math.round(elapsed / 1000)}s (Ctrl-C to stop)`,
      // Room for the header, the last steps and one line per check.
      maxRows: tty ? Math.max(10, (process.stdout.rows ?? 40) - 22) : nodeCount,
      colour: tty,
      notes: ['', ...notes.slice(-6), '', 'checks:', ...formatResults(checks.results(now))],
    });
    if (tty) process.stdout.write(`\x1b[H\x1b[2J${text}\n`);
    else if (elapsed - last >= 5000) {
      process.stdout.write(`${text}\n\n`);
      last = elapsed;
    }
    if (durationMs > 0 && elapsed >= durationMs) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
  process.off('SIGINT', onSig);
  process.off('SIGTERM', onSig);
  return performance.now() - t0;
}

/** Stops everything; `keepLogAs`: the controller log is copied there first (the control plane's folder is removed). */
export async function stopRig(
  rig: Pick<DemoRig, 'nodes' | 'leases' | 'fleet' | 'replicas' | 'admin' | 'logFile' | 'logPath' | 'cp'>,
  keepLogAs?: string,
): Promise<void> {
  rig.nodes.stop();
  rig.leases.stop();
  rig.fleet.stop();
  await Promise.all(rig.replicas.map((r) => r.ctl.shutdown('demo over')));
  rig.admin.close();
  await new Promise<void>((resolve) => rig.logFile.end(resolve));
  if (keepLogAs) copyFileSync(rig.logPath, keepLogAs);
  await rig.cp.stop();
}
