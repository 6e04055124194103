/**
 * Side-by-side benchmark: upstream kube-controller-manager's node lifecycle controller against ours,
 * on a fresh real control plane per controller, with the same simulated nodes, the same grace
 * periods, the same client rate limits and the same failures at known moments. The two never run
 * at the same time: both write the same nodes. bench/fair-set.ts runs the published set (several
 * runs of each, in alternating order).
 *
 *   flock /tmp/nlc-e2e.lock npx tsx bench/compare/run.ts --nodes 100 --fail 5 --controller both \
 *     --simulator fleet --grace 20s
 *
 * Options (defaults in brackets):
 *   --nodes N [100]            simulated nodes, round-robin over --zones zones [3]
 *   --fail K [5]               nodes failed per wave, spread across zones
 *   --waves W [1]              failure waves (each: fail K, wait for detection/taints/pods, recover)
 *   --controller kcm|ours|both [both]   (both: kcm first, then ours; --order ours,kcm to swap)
 *   --qps 20 --burst 30        --kube-api-qps / --kube-api-burst of BOTH controllers [kcm's defaults]
 *   --simulator fleet|kwok [fleet]
 *   --grace 20s                --node-monitor-grace-period for both controllers
 *   --startup-grace 60s        --node-startup-grace-period for both controllers
 *   --renew 10s                lease renew interval of the fleet (kwok: always 10 s)
 *   --pods P [2]               pods per node
 *   --steady 60s               steady-state window for CPU per renewal
 *   --no-recover               leave failed nodes failed (default: recover after each wave)
 *   --preclean                 before the controller starts, remove the admission not-ready taint and
 *                              add the beta os/arch labels (a controller restart, not a first start)
 *   --kubelet-endpoints        (fleet) each kubelet serves a TLS endpoint on loopback that the Node
 *                              reports, for --ours-flags=--second-opinion=kubelet; a failed node's
 *                              endpoint closes with its lease (the machine is down)
 *   --out DIR                  results folder [/tmp/nlc-compare/<stamp>]
 *   --json FILE                also write a small results record (bench/compare/record.ts) of the one
 *                              controller run (with --controller kcm or ours), e.g. into bench/results/
 *
 * Per controller it reports: detection overhead (observer's Ready=Unknown moment minus the node's last
 * heartbeat seen by the same observer plus grace), taint and pod-marking latency, time from controller
 * start to its first correct decision (a canary node stopped just before the controller starts), CPU
 * seconds and peak RSS of the controller process tree (/proc), CPU per lease renewal in a steady
 * window, and API writes from the audit log (per failed node, per kind, in total).
 */
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fleetSpecs } from '../../src/fleet/fleet.js';
import { type KubeClient, PatchType, paths } from '../../src/kube/client.js';
import { ETCD_VERSION, K8S_VERSION } from '../../src/localcluster/binaries.js';
import { killAndWait, LocalControlPlane } from '../../src/localcluster/control-plane.js';
import { imageNodeFlags } from '../../test/support/controller-process.js';
import { parseLongOptions } from '../options.js';
import { environment, loadAverage, recorder, writeResults } from '../results.js';
import { AuditTail, type AuditWrite, attributeToNode, countByKind, readWrites } from './audit.js';
import {
  type ControllerName,
  OURS_ENTRY,
  oursUsable,
  type RunningController,
  startController,
} from './controllers.js';
import { CONTROLLER_USER, controllerKubeconfig } from './identity.js';
import { hasTaint, Observer, UNREACHABLE } from './observer.js';
import { machineCpu, machineShare, nowMs, sampleTree, type TreeSample, TreeSampler } from './proc.js';
import { compareRecord } from './record.js';
import {
  FleetSimulator,
  forEachLimited,
  KwokSimulator,
  type PlannedNode,
  POD_NAMESPACE,
  type Simulator,
} from './simulators.js';
import { parseDurationMs, round, summarize } from './stats.js';
import {
  type ControllerResult,
  markdownTable,
  type NodeDetection,
  type Options,
  type WaveWindow,
} from './table.js';

// ------------------------------------------------------------------ memory timeline

interface Phase {
  at: number;
  label: string;
}

/**
 * The controller's memory through the run: one CSV row per sample (seconds since start, RSS and
 * high-water mark of the largest process, CPU seconds, phase), and where the high-water mark first
 * reached its final value.
 */
function memoryTimeline(
  series: readonly TreeSample[],
  phases: readonly Phase[],
  spawnAt: number,
): { csv: string; peak: { mib: number; seconds: number; phase: string } | undefined } {
  const phaseAt = (at: number) => {
    let label = phases[0]?.label ?? '';
    for (const p of phases) if (p.at <= at) label = p.label;
    return label;
  };
  const rows = ['seconds,rss_mib,hwm_mib,cpu_seconds,phase'];
  let peak: { mib: number; seconds: number; phase: string } | undefined;
  let top = 0;
  for (const s of series) {
    const seconds = round((s.at - spawnAt) / 1000, 1);
    const phase = phaseAt(s.at);
    rows.push(
      `${seconds},${round(s.rssKiB / 1024, 1)},${round(s.peakRssKiB / 1024, 1)},${round(s.cpuSeconds, 2)},${phase}`,
    );
    if (s.peakRssKiB > top) {
      top = s.peakRssKiB;
      peak = { mib: round(top / 1024, 1), seconds, phase };
    }
  }
  return { csv: `${rows.join('\n')}\n`, peak };
}

// ------------------------------------------------------------------ options

function parseArgs(argv: string[]): Options & { json: string | undefined } {
  const known = [
    'nodes',
    'fail',
    'waves',
    'controller',
    'order',
    'simulator',
    'grace',
    'startup-grace',
    'renew',
    'pods',
    'zones',
    'steady',
    'recover',
    'preclean',
    'kubelet-endpoints',
    'out',
    'ours-entry',
    'ours-node-flags',
    'ours-flags',
    'qps',
    'burst',
    'json',
    'wave-until',
  ];
  const m = parseLongOptions(argv, known, ['ours-node-flags', 'ours-flags']);
  const which = m.get('controller') ?? 'both';
  if (!['kcm', 'ours', 'both'].includes(which)) throw new Error('--controller is kcm, ours or both');
  const order = (m.get('order') ?? 'kcm,ours').split(',') as ControllerName[];
  if (order.length !== 2 || !order.includes('kcm') || !order.includes('ours'))
    throw new Error('--order is kcm,ours or ours,kcm');
  const controllers = which === 'both' ? order : [which as ControllerName];
  const simulator = m.get('simulator') ?? 'fleet';
  if (simulator !== 'fleet' && simulator !== 'kwok') throw new Error('--simulator is fleet or kwok');
  for (const k of ['nodes', 'fail', 'waves', 'pods', 'zones', 'qps', 'burst']) {
    const v = m.get(k);
    if (v !== undefined && !(Number.isInteger(Number(v)) && Number(v) >= 0))
      throw new Error(`--${k} needs a whole number`);
  }
  if (m.has('json') && controllers.length !== 1)
    throw new Error(
      '--json writes the record of ONE controller run: add --controller kcm or --controller ours',
    );
  if (m.get('json') === 'true') throw new Error('--json needs a file name');
  const until = m.get('wave-until') ?? 'noexecute';
  if (until !== 'noexecute' && until !== 'marked')
    throw new Error(
      '--wave-until is noexecute (every lost node evicting) or marked (Unknown, NoSchedule, pods)',
    );
  const stamp = new Date().toISOString().replace(/[:.]/g, '-').slice(0, 19);
  return {
    nodes: Number(m.get('nodes') ?? 100),
    fail: Number(m.get('fail') ?? 5),
    waves: Number(m.get('waves') ?? 1),
    controllers,
    simulator,
    graceMs: parseDurationMs(m.get('grace') ?? '20s'),
    startupGraceMs: parseDurationMs(m.get('startup-grace') ?? '60s'),
    renewMs: parseDurationMs(m.get('renew') ?? '10s'),
    pods: Number(m.get('pods') ?? 2),
    zones: Number(m.get('zones') ?? 3),
    steadyMs: parseDurationMs(m.get('steady') ?? '60s'),
    // kube-controller-manager's defaults; ours' own are 50/100.
    qps: Number(m.get('qps') ?? 20),
    burst: Number(m.get('burst') ?? 30),
    recover: m.get('recover') !== 'false',
    waveUntil: until,
    preclean: m.get('preclean') === 'true',
    kubeletEndpoints: m.get('kubelet-endpoints') === 'true',
    oursEntry: path.resolve(m.get('ours-entry') ?? OURS_ENTRY),
    // Default: the flags the image runs with (the Dockerfile's ENTRYPOINT); '' runs bare node.
    oursNodeFlags:
      m.get('ours-node-flags') === undefined
        ? imageNodeFlags()
        : m
            .get('ours-node-flags')!
            .split(' ')
            .filter((f) => f !== ''),
    oursFlags: (m.get('ours-flags') ?? '').split(' ').filter((f) => f !== ''),
    out: m.get('out') ?? path.join('/tmp/nlc-compare', `${stamp}-${simulator}-${m.get('nodes') ?? 100}`),
    json: m.has('json') ? path.resolve(m.get('json')!) : undefined,
  };
}

// ------------------------------------------------------------------ plan

const ZONE_NAMES = ['zone-a', 'zone-b', 'zone-c', 'zone-d', 'zone-e', 'zone-f'];

/**
 * Node names and failure groups: one canary (zone 0) and W waves of K nodes, round-robin over zones,
 * each picked evenly through its zone. Refuses plans where failures at one time would put a zone
 * into partial disruption (> 2 nodes and >= 55%) or every node down.
 */
export function makePlan(o: Options): PlannedNode[] {
  const zones = ZONE_NAMES.slice(0, o.zones);
  const specs = fleetSpecs({ nodes: o.nodes, zones, namePrefix: 'sim-' });
  const plan: PlannedNode[] = specs.map((s) => ({
    name: s.name,
    zone: s.zone,
    region: s.region,
    group: 'stable',
    pods: Array.from({ length: o.pods }, (_, i) => `${s.name}-pod-${i}`),
  }));
  const byZone = new Map<string, PlannedNode[]>();
  for (const n of plan) byZone.set(n.zone, [...(byZone.get(n.zone) ?? []), n]);
  const want = new Map<string, number>(); // failures per zone across all waves (+ canary)
  want.set(zones[0]!, 1);
  for (let w = 0; w < o.waves; w++)
    for (let i = 0; i < o.fail; i++) {
      const z = zones[i % zones.length]!;
      want.set(z, (want.get(z) ?? 0) + 1);
    }
  const picks = new Map<string, PlannedNode[]>();
  for (const [z, count] of want) {
    const members = byZone.get(z) ?? [];
    if (count > members.length) throw new Error(`zone ${z} has ${members.length} nodes, plan needs ${count}`);
    const step = members.length / count;
    picks.set(
      z,
      Array.from({ length: count }, (_, i) => members[Math.floor(i * step + step / 2)]!),
    );
  }
  const take = (z: string) => {
    const list = picks.get(z)!;
    return list.shift()!;
  };
  take(zones[0]!).group = 'canary';
  for (let w = 0; w < o.waves; w++)
    for (let i = 0; i < o.fail; i++) take(zones[i % zones.length]!).group = `wave-${w + 1}`;
  // Safety: the worst moment has the canary plus one wave down (plus earlier waves with --no-recover).
  for (let w = 1; w <= o.waves; w++) {
    const down = plan.filter(
      (n) => n.group === 'canary' || (o.recover ? n.group === `wave-${w}` : waveIndex(n.group) <= w),
    );
    if (down.length >= plan.length) throw new Error('the plan fails every node (master disruption)');
    for (const z of zones) {
      const d = down.filter((n) => n.zone === z).length;
      const size = byZone.get(z)?.length ?? 0;
      if (d > 2 && d / size >= 0.55)
        throw new Error(`zone ${z} would have ${d}/${size} nodes down (partial disruption): fail fewer`);
    }
  }
  return plan;
}

function waveIndex(group: string): number {
  return group.startsWith('wave-') ? Number(group.slice(5)) : 0;
}

// ------------------------------------------------------------------ helpers

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const log = (msg: string) => console.error(`[compare ${new Date().toISOString().slice(11, 19)}] ${msg}`);

function machine(oursEntry: string) {
  const { nodeFlags: _harness, ...env } = environment();
  return {
    ...env,
    oursBuiltAt: (() => {
      try {
        return statSync(oursEntry).mtime.toISOString();
      } catch {
        return 'not built';
      }
    })(),
    k8s: K8S_VERSION,
    etcd: ETCD_VERSION,
  };
}

async function waitHealthy(c: RunningController, timeoutMs: number): Promise<number | undefined> {
  const deadline = nowMs() + timeoutMs;
  while (nowMs() < deadline) {
    if (c.process.exitCode !== null) return undefined;
    if (await c.healthy()) return nowMs();
    await sleep(200);
  }
  return undefined;
}

function tail(file: string, lines = 30): string {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

/** Selected numbers from a Prometheus text page. */
function pickMetrics(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  const want = [
    /^node_collector_update_all_nodes_health_duration_seconds_(sum|count)\b/,
    /^node_collector_update_node_health_duration_seconds_(sum|count)\b/,
    /^node_collector_evictions_total\b/,
    /^process_resident_memory_bytes\b/,
    /^process_cpu_seconds_total\b/,
    /^nlc_/,
  ];
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || !want.some((r) => r.test(line))) continue;
    const sp = line.lastIndexOf(' ');
    const v = Number(line.slice(sp + 1));
    if (Number.isFinite(v)) out[line.slice(0, sp)] = v;
    if (Object.keys(out).length > 200) break;
  }
  return out;
}

// ------------------------------------------------------------------ one controller

/**
 * --preclean: put the nodes in the state a controller that ran while they registered leaves them in,
 * so that a large run measures a controller RESTART rather than the first controller on a fresh
 * cluster: remove the not-ready:NoSchedule taint that TaintNodesByCondition admission puts on every
 * new Node, and add the beta.kubernetes.io/os|arch labels kube-controller-manager reconciles.
 */
async function preclean(client: KubeClient, plan: PlannedNode[]): Promise<void> {
  await forEachLimited(plan, 32, async (n) => {
    const node = await client.request<{ spec?: { taints?: Array<{ key: string; effect: string }> } }>({
      method: 'GET',
      path: paths.node(n.name),
    });
    const taints = (node.spec?.taints ?? []).filter((t) => !t.key.startsWith('node.kubernetes.io/'));
    await client.request({
      method: 'PATCH',
      path: paths.node(n.name),
      contentType: PatchType.merge,
      body: {
        metadata: { labels: { 'beta.kubernetes.io/os': 'linux', 'beta.kubernetes.io/arch': 'amd64' } },
        spec: { taints: taints.length > 0 ? taints : null },
      },
    });
  });
}

async function runOne(
  name: ControllerName,
  o: Options,
  plan: PlannedNode[],
  runDir: string,
): Promise<ControllerResult> {
  const dir = path.join(runDir, name);
  mkdirSync(dir, { recursive: true });
  const notes: string[] = [];
  const loadAtStart = loadAverage();
  log(`${name}: starting control plane (${loadAtStart})`);
  const cp = await LocalControlPlane.start({ env: process.env, audit: true });
  const cleanups: Array<() => Promise<void> | void> = [];
  let admin: KubeClient | undefined;
  let simClient: KubeClient | undefined;
  try {
    admin = await cp.client();
    simClient = await cp.client({ maxSockets: 128, userAgent: 'nlc-bench-simulator' });
    const kubeconfig = await controllerKubeconfig(cp, admin);
    const caData = readFileSync(path.join(cp.dir, 'certs', 'apiserver.crt')).toString('base64');
    const observer = await Observer.start({ server: cp.server, caData, token: cp.adminToken });
    cleanups.push(() => observer.stop());

    const simOpts = {
      cp,
      client: simClient,
      plan,
      renewIntervalMs: o.renewMs,
      workDir: dir,
      ...(o.kubeletEndpoints ? { kubeletEndpoints: true } : {}),
    };
    const sim: Simulator = o.simulator === 'fleet' ? new FleetSimulator(simOpts) : new KwokSimulator(simOpts);
    cleanups.push(() => sim.stop());
    const t0 = nowMs();
    await sim.start();
    log(`${name}: ${plan.length} ${o.simulator} nodes registered in ${round((nowMs() - t0) / 1000, 1)} s`);
    const podTotal = plan.reduce((s, n) => s + n.pods.length, 0);
    await observer.until(
      () =>
        plan.every((n) => {
          const t = observer.nodes.get(n.name);
          return t?.ready === 'True' && t.beats > 0;
        }) && [...observer.pods.values()].filter((p) => p.ready === 'True').length >= podTotal,
      300_000,
      'all nodes Ready with a lease and all pods Ready',
    );
    log(
      `${name}: all nodes Ready after ${round((nowMs() - t0) / 1000, 1)} s; warming up ${(2 * o.renewMs) / 1000} s`,
    );
    if (o.preclean) {
      await preclean(simClient, plan);
      log(`${name}: pre-cleaned nodes (admission taint removed, beta os/arch labels added)`);
    }
    await sleep(2 * o.renewMs);

    // Canary: stopped just before the controller starts; marking it is the first correct decision.
    await sim.fail('canary');
    const canaryName = plan.find((n) => n.group === 'canary')!.name;
    await sleep(1000);

    const auditTail = cp.auditLogPath ? new AuditTail(cp.auditLogPath, CONTROLLER_USER) : undefined;
    const ctl = await startController(name, {
      kubeconfigPath: kubeconfig,
      graceMs: o.graceMs,
      startupGraceMs: o.startupGraceMs,
      qps: o.qps ?? 20,
      burst: o.burst ?? 30,
      logDir: dir,
      oursEntry: o.oursEntry,
      oursNodeFlags: o.oursNodeFlags,
      oursFlags: o.oursFlags,
    });
    const spawnAt = nowMs();
    const pid = ctl.process.pid;
    if (!pid) throw new Error(`${name} did not start: ${tail(ctl.logPath)}`);
    const sampler = new TreeSampler(pid, 1000);
    // Phases of the run, to tell which one the memory peak belongs to (rss.csv, peakRssPhase).
    const phases: Phase[] = [{ at: spawnAt, label: 'start-up' }];
    const apiSampler = cp.apiserverPid ? new TreeSampler(cp.apiserverPid, 5000) : undefined;
    let exited = false;
    ctl.process.once('exit', (code, sig) => {
      exited = true;
      log(`${name} exited (code ${code}, signal ${sig})`);
    });
    cleanups.push(async () => {
      sampler.stop();
      apiSampler?.stop();
      await killAndWait(ctl.process, 'SIGTERM', 10_000);
    });
    const alive = () => {
      if (exited) throw new Error(`${name} exited early; log tail:\n${tail(ctl.logPath)}`);
      return true;
    };

    const healthyAt = await waitHealthy(ctl, 60_000);
    if (healthyAt === undefined)
      notes.push(`${name} never answered its health endpoint with 200 within 60 s`);
    alive();
    const firstWait = o.graceMs + o.startupGraceMs + 60_000;
    await observer
      .until(
        () => alive() && observer.firstReady(canaryName, 'Unknown', spawnAt) !== undefined,
        firstWait,
        `${name} to mark the canary ${canaryName} Unknown`,
      )
      .catch((err: unknown) => notes.push(String(err)));
    const canaryUnknown = observer.firstReady(canaryName, 'Unknown', spawnAt);
    log(
      `${name}: first correct decision (canary Unknown) ${canaryUnknown ? round((canaryUnknown.at - spawnAt) / 1000, 2) : '-'} s after start`,
    );
    await observer
      .until(
        () =>
          alive() &&
          observer.firstTaints(canaryName, spawnAt, (t) => hasTaint(t, UNREACHABLE, 'NoExecute')) !==
            undefined,
        30_000,
        'canary NoExecute taint',
      )
      .catch((err: unknown) => notes.push(String(err)));

    // Converged: the controller's start-up work has drained (no write by it for 5 s in the audit log)
    // and no never-failed node carries a node.kubernetes.io taint (kube-apiserver's TaintNodesByCondition
    // admission gives every new Node not-ready:NoSchedule; a controller removes it). Only then the
    // steady window and the failures, so that they measure a running controller, not its start-up.
    const quietMs = 5000;
    const stableNodes = plan.filter((n) => n.group === 'stable').map((n) => n.name);
    let convergedAt: number | undefined;
    const convergeDeadline = nowMs() + 1_200_000;
    while (nowMs() < convergeDeadline) {
      alive();
      const now = nowMs();
      auditTail?.poll(now);
      const quiet = now - (auditTail?.lastWriteAt ?? spawnAt) >= quietMs;
      const clean = stableNodes.every(
        (n) => !(observer.nodes.get(n)?.taints ?? '').includes('node.kubernetes.io/'),
      );
      if (quiet && clean) {
        convergedAt = auditTail?.lastWriteAt ?? spawnAt;
        break;
      }
      await sleep(500);
    }
    if (convergedAt === undefined)
      notes.push(`${name} did not converge (quiet for 5 s, stable nodes untainted) within 20 min`);
    phases.push({ at: convergedAt ?? nowMs(), label: 'converged' });
    log(
      `${name}: converged ${convergedAt ? round((convergedAt - spawnAt) / 1000, 1) : '-'} s after start (${auditTail?.writes ?? 0} writes)`,
    );
    await sleep(2000);

    // Steady window: healthy nodes renewing, nothing to decide.
    const s0 = sampler.sample();
    const a0 = apiSampler?.sample();
    const h0 = process.cpuUsage();
    const simPids = sim.pids();
    const simCpu0 = simPids.map((p) => sampleTree(p)?.cpuSeconds ?? 0);
    const m0 = machineCpu();
    const steadyFrom = nowMs();
    phases.push({ at: steadyFrom, label: 'steady window' });
    log(`${name}: steady window ${o.steadyMs / 1000} s (${loadAverage()})`);
    await sleep(o.steadyMs);
    alive();
    const steadyTo = nowMs();
    const m1 = machineCpu();
    const s1 = sampler.sample();
    const a1 = apiSampler?.sample();
    const h1 = process.cpuUsage(h0);
    const simCpu =
      o.simulator === 'fleet'
        ? (h1.user + h1.system) / 1e6
        : simPids.reduce((s, p, i) => s + (sampleTree(p)?.cpuSeconds ?? 0) - simCpu0[i]!, 0);
    const beats = observer.beatsBetween(steadyFrom, steadyTo);
    const steadyCpu = s1 && s0 ? s1.cpuSeconds - s0.cpuSeconds : Number.NaN;

    // Failure waves.
    const detections: NodeDetection[] = [];
    const windows: WaveWindow[] = [];
    const zonesCount = new Set(plan.map((n) => n.zone)).size;
    for (let w = 1; w <= o.waves; w++) {
      const group = `wave-${w}`;
      const members = plan.filter((n) => n.group === group);
      const failAt = nowMs();
      phases.push({ at: failAt, label: `${group} failed` });
      await sim.fail(group);
      log(`${name}: ${group}: failed ${members.length} nodes (${loadAverage()})`);
      // What a wave waits for: every lost node evicting (NoExecute, at its zone's rate) or only
      // marked (Unknown, the NoSchedule taint, its pods not ready: the mass-loss figures).
      const awaited = o.waveUntil === 'marked' ? 'NoSchedule' : 'NoExecute';
      const perZone = Math.ceil(members.length / zonesCount);
      const deadline = o.graceMs + 15_000 + perZone * 12_000 + 30_000;
      await observer
        .until(
          () =>
            alive() &&
            members.every((n) => {
              const unk = observer.firstReady(n.name, 'Unknown', failAt);
              if (!unk) return false;
              const tainted = observer.firstTaints(n.name, failAt, (t) => hasTaint(t, UNREACHABLE, awaited));
              const pods = observer.podsOf(n.name);
              return tainted !== undefined && pods.every((p) => p.ready === 'False');
            }),
          deadline,
          `${group}: Unknown + ${awaited} taint + pods NotReady on all ${members.length} nodes`,
        )
        .catch((err: unknown) => notes.push(String(err)));
      await sleep(3000);
      const waveDetections = members.map((n): NodeDetection => {
        const unk = observer.firstReady(n.name, 'Unknown', failAt);
        const taint = observer.firstTaints(n.name, failAt, (t) => hasTaint(t, UNREACHABLE, 'NoExecute'));
        const noSchedule = observer.firstTaints(n.name, failAt, (t) =>
          hasTaint(t, UNREACHABLE, 'NoSchedule'),
        );
        const pods = n.pods.map((p) =>
          observer.pods
            .get(`${POD_NAMESPACE}/${p}`)
            ?.changes.find((c) => c.at >= failAt && c.ready === 'False'),
        );
        return {
          node: n.name,
          group,
          failAt,
          lastBeatAt: unk?.lastBeatAt,
          unknownAt: unk?.at,
          overheadMs: unk && unk.lastBeatAt !== undefined ? unk.at - (unk.lastBeatAt + o.graceMs) : undefined,
          taintAt: taint?.at,
          noScheduleAt: noSchedule?.at,
          podsNotReadyAt: pods.map((c) => c?.at),
        };
      });
      detections.push(...waveDetections);
      if (o.recover) {
        const recoverAt = nowMs();
        phases.push({ at: recoverAt, label: `${group} recovering` });
        await sim.recover(group);
        const recWait = 120_000;
        await observer
          .until(
            () =>
              alive() &&
              members.every((n) => {
                const t = observer.nodes.get(n.name);
                return t?.ready === 'True' && !t.taints.includes('node.kubernetes.io/');
              }),
            recWait,
            `${group}: Ready again and untainted`,
          )
          .catch((err: unknown) => notes.push(String(err)));
        for (const d of waveDetections) {
          d.recoverAt = recoverAt;
          d.readyAgainAt = observer.firstReady(d.node, 'True', recoverAt)?.at;
          d.taintsGoneAt = observer.firstTaints(
            d.node,
            recoverAt,
            (t) => !t.includes('node.kubernetes.io/'),
          )?.at;
        }
        await sleep(3000);
      }
      windows.push({ group, from: failAt, to: nowMs() });
      if (w < o.waves) await sleep(o.renewMs);
    }

    const endAt = nowMs();
    const m2 = machineCpu();
    const loadAtEnd = loadAverage();
    const metricsText = await ctl.metrics();
    writeFileSync(path.join(dir, 'metrics.txt'), metricsText);
    const final: TreeSample | undefined = sampler.stop();
    apiSampler?.stop();
    const memory = memoryTimeline(sampler.series, phases, spawnAt);
    writeFileSync(path.join(dir, 'rss.csv'), memory.csv);
    if (memory.peak)
      notes.push(
        `peak RSS ${memory.peak.mib} MiB first reached ${memory.peak.seconds} s after start (${memory.peak.phase})`,
      );
    await killAndWait(ctl.process, 'SIGTERM', 10_000);
    log(`${name}: done; reading the audit log`);

    // Writes.
    const writes = cp.auditLogPath ? await readWrites(cp.auditLogPath, CONTROLLER_USER) : [];
    const inRun = writes.filter((w) => w.at >= spawnAt - 1000 && w.at <= endAt + 1000);
    const nodeNames = new Set(plan.map((n) => n.name));
    const podNode = new Map<string, string>();
    for (const n of plan) for (const p of n.pods) podNode.set(`${POD_NAMESPACE}/${p}`, n.name);
    const groupOf = new Map(plan.map((n) => [n.name, n.group]));
    let attributed: AuditWrite[] = [];
    let unattributed = 0;
    for (const win of windows) {
      for (const w of inRun) {
        if (w.at < win.from - 1000 || w.at > win.to + 1000) continue;
        const node = attributeToNode(w, nodeNames, podNode);
        if (node && groupOf.get(node) === win.group) attributed.push(w);
        else if (!node) unattributed++;
      }
    }
    attributed = [...new Set(attributed)];
    const failedCount = detections.length;
    const perKind = countByKind(attributed);
    const onHealthy = inRun.filter((w) => {
      const node = attributeToNode(w, nodeNames, podNode);
      return node !== undefined && groupOf.get(node) === 'stable';
    }).length;
    const canaryWrites = inRun.filter((w) => attributeToNode(w, nodeNames, podNode) === canaryName).length;
    writeFileSync(path.join(dir, 'writes.json'), JSON.stringify(inRun, null, 1));

    // False positives: nodes that were never failed but went Unknown or False.
    const failedNames = new Set(plan.filter((n) => n.group !== 'stable').map((n) => n.name));
    const falsePositives = [...observer.nodes.values()]
      .filter(
        (t) => !failedNames.has(t.name) && t.readyChanges.some((c) => c.at >= spawnAt && c.to !== 'True'),
      )
      .map((t) => t.name);

    const canaryNode = plan.find((n) => n.group === 'canary')!;
    const canary: NodeDetection = {
      node: canaryName,
      group: 'canary',
      failAt: spawnAt,
      lastBeatAt: canaryUnknown?.lastBeatAt,
      unknownAt: canaryUnknown?.at,
      overheadMs: canaryUnknown ? canaryUnknown.at - (spawnAt + o.graceMs) : undefined,
      taintAt: observer.firstTaints(canaryName, spawnAt, (t) => hasTaint(t, UNREACHABLE, 'NoExecute'))?.at,
      noScheduleAt: observer.firstTaints(canaryName, spawnAt, (t) => hasTaint(t, UNREACHABLE, 'NoSchedule'))
        ?.at,
      podsNotReadyAt: canaryNode.pods.map(
        (p) =>
          observer.pods
            .get(`${POD_NAMESPACE}/${p}`)
            ?.changes.find((c) => c.at >= spawnAt && c.ready === 'False')?.at,
      ),
    };

    const defined = (xs: Array<number | undefined>) => xs.filter((x): x is number => x !== undefined);
    const result: ControllerResult = {
      controller: name,
      version: ctl.version,
      command: ctl.command,
      loadAtStart,
      loadAtEnd,
      machine: { steady: machineShare(m0, m1), waves: machineShare(m1, m2) },
      spawnAt,
      healthyAfterMs: healthyAt !== undefined ? healthyAt - spawnAt : undefined,
      firstDecisionMs: canaryUnknown ? canaryUnknown.at - spawnAt : undefined,
      convergedAfterMs: convergedAt !== undefined ? convergedAt - spawnAt : undefined,
      startupWrites: inRun.filter((w) => w.at <= (convergedAt ?? steadyFrom) + 1000).length,
      canary,
      detections,
      overheadMs: summarize(defined(detections.map((d) => d.overheadMs))),
      sinceFailMs: summarize(
        defined(detections.map((d) => (d.unknownAt ? d.unknownAt - d.failAt : undefined))),
      ),
      taintAfterUnknownMs: summarize(
        defined(detections.map((d) => (d.taintAt && d.unknownAt ? d.taintAt - d.unknownAt : undefined))),
      ),
      podNotReadyAfterUnknownMs: summarize(
        defined(
          detections.flatMap((d) =>
            d.podsNotReadyAt.map((p) => (p && d.unknownAt ? p - d.unknownAt : undefined)),
          ),
        ),
      ),
      noScheduleAfterUnknownMs: summarize(
        defined(
          detections.map((d) => (d.noScheduleAt && d.unknownAt ? d.noScheduleAt - d.unknownAt : undefined)),
        ),
      ),
      waveUntil: o.waveUntil,
      taintRemovalAfterReadyMs: summarize(
        defined(
          detections.map((d) =>
            d.taintsGoneAt && d.readyAgainAt ? d.taintsGoneAt - d.readyAgainAt : undefined,
          ),
        ),
      ),
      missed: {
        unknown: detections.filter((d) => d.unknownAt === undefined).length,
        taint: detections.filter((d) => (o.waveUntil === 'marked' ? d.noScheduleAt : d.taintAt) === undefined)
          .length,
        pods: detections.reduce((s, d) => s + d.podsNotReadyAt.filter((p) => p === undefined).length, 0),
      },
      falsePositives,
      cpuSeconds: final ? final.cpuSeconds : Number.NaN,
      peakRssMiB: round(sampler.peakRssKiB / 1024, 1),
      peakRssPhase: memory.peak?.phase,
      processes: final?.processes ?? 0,
      steady: {
        seconds: round((steadyTo - steadyFrom) / 1000, 1),
        beats,
        controllerCpuSeconds: round(steadyCpu, 2),
        cpuMicrosPerRenewal: round((steadyCpu * 1e6) / Math.max(1, beats)),
        apiserverCpuSeconds: a0 && a1 ? round(a1.cpuSeconds - a0.cpuSeconds, 2) : Number.NaN,
        simulatorCpuSeconds: round(simCpu, 2),
        writes: inRun.filter((w) => w.at >= steadyFrom && w.at <= steadyTo).length,
      },
      writes: {
        total: inRun.length,
        byKind: countByKind(inRun),
        perFailedNode: round(attributed.length / Math.max(1, failedCount), 2),
        perFailedNodeByKind: Object.fromEntries(
          Object.entries(perKind).map(([k, v]) => [k, round(v / Math.max(1, failedCount), 2)]),
        ),
        unattributedInWaves: unattributed,
        onHealthyNodes: onHealthy,
        canary: canaryWrites,
        // kube-apiserver's own time for the writes about the failed nodes: the floor under ours.
        serverMs: summarize(attributed.map((w) => w.serverMs).filter((x): x is number => x !== undefined)),
      },
      metrics: pickMetrics(metricsText),
      observerErrors: observer.errors.length,
      simulatorRenewErrors: sim instanceof FleetSimulator ? sim.renewErrors() : 0,
      notes,
    };
    if (observer.errors.length > 0)
      notes.push(`observer errors: ${JSON.stringify(observer.errors.slice(0, 5))}`);
    writeFileSync(path.join(dir, 'result.json'), JSON.stringify(result, null, 1));
    return result;
  } finally {
    for (const c of cleanups.reverse()) {
      try {
        await c();
      } catch (err) {
        console.error(`[compare] cleanup: ${String(err)}`);
      }
    }
    simClient?.close();
    admin?.close();
    await cp.stop();
  }
}

// ------------------------------------------------------------------ main

async function main(): Promise<void> {
  const o = parseArgs(process.argv.slice(2));
  const record = recorder('side-by-side');
  if (o.controllers.includes('ours')) {
    const u = oursUsable(o.oursEntry);
    if (!u.ok) throw new Error(`our controller is not usable yet: ${u.why} (run with --controller kcm)`);
  }
  const plan = makePlan(o);
  mkdirSync(o.out, { recursive: true });
  const cmd = `npx tsx bench/compare/run.ts ${process.argv.slice(2).join(' ')}`;
  const info = machine(o.oursEntry);
  log(`run folder ${o.out}; ${JSON.stringify(info)}`);
  const results: ControllerResult[] = [];
  for (const c of o.controllers) results.push(await runOne(c, o, plan, o.out));
  const table = markdownTable(results, o, cmd);
  const summary = {
    command: cmd,
    options: o,
    machine: info,
    simulator: o.simulator === 'kwok' ? 'kwok v0.8.0' : 'src/fleet',
    results,
  };
  writeFileSync(path.join(o.out, 'summary.json'), JSON.stringify(summary, null, 1));
  writeFileSync(path.join(o.out, 'summary.md'), table);
  if (o.json) {
    const software = { k8s: info.k8s, etcd: info.etcd, oursBuiltAt: info.oursBuiltAt };
    writeResults(o.json, compareRecord(record({}), results[0]!, o, software));
    log(`results record: ${o.json}`);
  }
  console.log(
    `- Machine: ${info.nproc} cores (${info.cpuModel}), ${info.memGiB} GiB; node ${info.node}; k8s ${info.k8s}, etcd ${info.etcd}; commit ${info.commit}; dist/main.js built ${info.oursBuiltAt}`,
  );
  console.log(table);
  for (const r of results) {
    if (r.notes.length) console.log(`Notes (${r.controller}):\n- ${r.notes.join('\n- ')}\n`);
  }
  console.log(`Details: ${o.out}/summary.json and per-controller logs in ${o.out}/<controller>/`);
}

const cleanupOnSignal = () => process.exit(130);
process.on('SIGINT', cleanupOnSignal);
process.on('SIGTERM', cleanupOnSignal);

main().catch((err: unknown) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
  process.exit(1);
});
