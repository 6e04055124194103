/**
 * Graceful leader handover on a real local control plane (etcd + kube-apiserver on loopback): a
 * simulated fleet of kubelet-like nodes (10 s lease renewals, phases spread over one interval) and
 * several processes of the BUILT controller (dist/main.js) under leader election, with the flags
 * the Deployment in manifests/base ships (all timings at their defaults: lease 15 s, renew deadline
 * 10 s, retry 2 s, shutdown grace 10 s, node grace 50 s).
 *
 * Each round: wait until one replica leads and acts (and every replica's watches have synced),
 * SIGTERM the leader, and measure from the SIGTERM:
 *   (a) the lock Lease's holderIdentity changes to another replica, seen on an independent watch;
 *   (b) the new leader reports that it leads: its "Started leading: reconciling nodes" log line
 *       (its own timestamp), and its leader_election_master_status 1 (polled, an upper bound);
 *   (c) the old process exits (its exit code must be 0).
 * Then a new replica is started as a standby (a pod replaced by its Deployment) for the next round.
 * No node may be marked (Ready other than True, or a node.kubernetes.io/* taint) once the fleet
 * has converged: the run fails (exit 1) if one is.
 *
 *   npm run bench:handover -- [--nodes=100] [--replicas=2] [--rounds=10] [--pods=0] [--main=dist/main.js]
 *   flock /tmp/nlc-e2e.lock npx tsx bench/handover.ts ...     (it starts a control plane: take the lock)
 *   --json=FILE also writes the figures of a successful run as a results record (bench/results.ts).
 */
import { execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { COMPONENT_NAME } from '../src/election/config.js';
import { SimulatedFleet } from '../src/fleet/fleet.js';
import { paths } from '../src/kube/client.js';
import type { Lease, List, Node } from '../src/kube/types.js';
import { startCluster, type TestCluster } from '../test/support/cluster.js';
import {
  type ControllerProcess,
  exitWithin,
  sampleValue,
  startController,
} from '../test/support/controller-process.js';
import { rawWatch } from '../test/support/raw-watch.js';
import { sleep, waitUntil } from '../test/support/wait.js';
import type { HandoverRecord } from './records.js';
import { jsonOption, publicPath, recorder, writeResults } from './results.js';

function arg(name: string, dflt: string): string {
  const hit = process.argv.find((a) => a.startsWith(`--${name}=`));
  return hit ? hit.slice(name.length + 3) : dflt;
}
const NODES = Number(arg('nodes', '100'));
const REPLICAS = Number(arg('replicas', '2'));
const ROUNDS = Number(arg('rounds', '10'));
const PODS = Number(arg('pods', '0'));
const MAIN = path.resolve(arg('main', 'dist/main.js'));
if (
  !(Number.isInteger(NODES) && NODES >= 0) ||
  !(Number.isInteger(REPLICAS) && REPLICAS >= 2) ||
  !(Number.isInteger(ROUNDS) && ROUNDS >= 1) ||
  !(Number.isInteger(PODS) && PODS >= 0)
) {
  console.error('usage: --nodes=N (>= 0) --replicas=R (>= 2) --rounds=K (>= 1) --pods=P (>= 0, per node)');
  process.exit(2);
}

const JSON_FILE = jsonOption();
const record = recorder('handover');

const NS = 'nlc-system';
const LOCK = COMPONENT_NAME; // --leader-elect-resource-name default
const MASTER = 'leader_election_master_status';
const RENEW_MS = 10_000; // kubelet default: leaseDurationSeconds 40 / 4
/** Between "one replica leads and acts" and the SIGTERM: 3 s plus a random part of one retry period. */
const SETTLE_MS = 3_000;
const RETRY_MS = 2_000; // --leader-elect-retry-period default
const POLL_MS = 20;
/** Node taints a controller sets (and kube-apiserver's admission, at registration). */
const NODE_TAINT_PREFIX = 'node.kubernetes.io/';

process.setMaxListeners(ROUNDS + REPLICAS + 16); // each controller process adds an 'exit' hook

// ---------------------------------------------------------------------------------------------
// Small helpers

function sh(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return '?';
  }
}
const load = () => sh('uptime', []).replace(/^.*load average/, 'load average');
const T_START = performance.now();
/** Seconds since the run started, to prefix progress lines. */
const el = () => `[${((performance.now() - T_START) / 1000).toFixed(1)}s]`;

/** Nearest-rank percentile of an unsorted list. */
function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.max(0, Math.ceil(p * s.length) - 1)] ?? Number.NaN;
}
const f0 = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? '-' : x.toFixed(0));

// ---------------------------------------------------------------------------------------------
// State

interface Replica {
  name: string;
  cp: ControllerProcess;
}

interface LockEvent {
  /** performance.now() when our watch delivered it. */
  at: number;
  holder: string;
  transitions: number;
}

interface Marking {
  node: string;
  at: number;
  ready: string;
  taints: string[];
}

let cluster: TestCluster | undefined;
let fleet: SimulatedFleet | undefined;
const stops: (() => void)[] = [];
const lockEvents: LockEvent[] = [];
const nodeState = new Map<string, { ready: string; taints: string[] }>();
/** performance.now() after which any not-Ready node or node.kubernetes.io taint is a failure. */
let baselineAt = Number.POSITIVE_INFINITY;
const markings: Marking[] = [];
const replicas = new Map<string, Replica>();
let live: Replica[] = [];
let nextIndex = 0;

function onNode(type: string, n: Node, at: number): void {
  const name = n.metadata.name;
  if (type === 'DELETED') {
    nodeState.delete(name);
    return;
  }
  const ready = n.status?.conditions?.find((c) => c.type === 'Ready')?.status ?? '-';
  const taints = (n.spec?.taints ?? []).map((t) => `${t.key}:${t.effect}`).sort();
  nodeState.set(name, { ready, taints });
  if (at >= baselineAt && (ready !== 'True' || taints.some((t) => t.startsWith(NODE_TAINT_PREFIX)))) {
    markings.push({ node: name, at, ready, taints });
  }
}

function converged(): boolean {
  if (nodeState.size !== NODES) return false;
  for (const s of nodeState.values()) {
    if (s.ready !== 'True' || s.taints.some((t) => t.startsWith(NODE_TAINT_PREFIX))) return false;
  }
  return true;
}

async function startReplica(): Promise<Replica> {
  const name = `nlc-${nextIndex++}`;
  // The Deployment's args (--leader-elect=true and its bind addresses), every timing at its default.
  // The helper adds loopback bind addresses on free ports, --metrics-secure=false and JSON logs.
  const cp = await startController([`--kubeconfig=${cluster!.cp.kubeconfigPath}`, '--leader-elect=true'], {
    env: { POD_NAME: name, POD_NAMESPACE: NS },
    name,
    install: { node: process.execPath, main: MAIN, cwd: process.cwd() },
  });
  const r = { name, cp };
  replicas.set(name, r);
  live.push(r);
  return r;
}

async function getLock(): Promise<Lease | undefined> {
  const res = await cluster!.admin.raw<Lease>({ method: 'GET', path: paths.lease(NS, LOCK) });
  return res.status === 200 ? res.body : undefined;
}

async function ready(r: Replica): Promise<boolean> {
  const res = await fetch(`http://127.0.0.1:${r.cp.probesPort}/readyz`).catch(() => undefined);
  return res?.status === 200;
}

/** Index of the last log line with this message (and predicate), -1 if none. */
function lastLog(r: Replica, msg: string, pred?: (l: Record<string, unknown>) => boolean): number {
  for (let i = r.cp.logs.length - 1; i >= 0; i--) {
    const l = r.cp.logs[i]!;
    if (l.msg === msg && (!pred || pred(l))) return i;
  }
  return -1;
}

/**
 * The leader once everything agrees: the lock names a live replica that alone reports
 * leader_election_master_status 1 and nlc_leading 1, has logged "Acting" since it started leading,
 * and every live replica's /readyz is 200 (its watches see, so it may take the lease).
 */
async function settledLeader(timeoutMs: number): Promise<Replica> {
  return await waitUntil(
    async () => {
      const holder = (await getLock())?.spec?.holderIdentity ?? '';
      const leader = live.find((r) => r.name === holder);
      if (!leader) return undefined;
      const started = lastLog(leader, 'Started leading: reconciling nodes');
      if (started < 0 || lastLog(leader, 'Acting: watches healthy and leading') < started) return undefined;
      for (const r of live) {
        const text = await r.cp.metrics();
        const want = r === leader ? 1 : 0;
        if (sampleValue(text, MASTER, { name: LOCK }) !== want || sampleValue(text, 'nlc_leading') !== want) {
          return undefined;
        }
        if (!(await ready(r))) return undefined;
        if (r !== leader && lastLog(r, 'New leader observed', (l) => l.leader === leader.name) < 0) {
          return undefined;
        }
      }
      return leader;
    },
    { timeoutMs, intervalMs: 100, what: `one settled leader among ${live.map((r) => r.name).join(', ')}` },
  );
}

/** Wall time (ms) of the first log line of `r` at or after index `from` matching msg (+ predicate). */
function logAt(
  r: Replica,
  from: number,
  msg: string,
  pred?: (l: Record<string, unknown>) => boolean,
): number | undefined {
  const l = r.cp.logs.slice(from).find((x) => x.msg === msg && (!pred || pred(x)));
  return l ? Date.parse(String(l.ts)) : undefined;
}

function checkMarkings(when: string): void {
  if (markings.length === 0) return;
  const first = markings
    .slice(0, 10)
    .map((m) => `${m.node} Ready=${m.ready} taints=[${m.taints.join(', ')}]`);
  throw new Error(
    `FAIL: ${markings.length} node change(s) marking a healthy node (${when}):\n  ${first.join('\n  ')}`,
  );
}

// ---------------------------------------------------------------------------------------------
// One round

interface Round {
  old: string;
  next: string;
  /** (a) our watch saw the lock held by another replica. */
  a: number;
  /** (b) the new leader's "Started leading: reconciling nodes" (its own timestamp). */
  b: number;
  /** (b') its leader_election_master_status 1, polled every 20 ms (time of the answer). */
  bMetric: number | undefined;
  /** The new leader's "Acting: watches healthy and leading" (its own timestamp). */
  acting: number | undefined;
  /** (c) the old process exited. */
  c: number;
  code: number | null;
  /** Milestones, ms after the SIGTERM, from the two processes' logs and our lock watch. */
  steps: Record<string, number | undefined>;
  lease: unknown;
  drained: unknown;
}

async function round(i: number): Promise<Round> {
  const old = await settledLeader(60_000 + NODES * 60);
  await sleep(SETTLE_MS + Math.random() * RETRY_MS);
  const others = live.filter((r) => r !== old);
  const fromEvent = lockEvents.length;
  const fromLog = new Map(live.map((r) => [r, r.cp.logs.length]));
  const transitionsBefore = lockEvents.at(-1)?.transitions ?? 0;

  // Poll the standbys' leader_election_master_status while the handover runs.
  const poll: { on: boolean; flipped?: { r: Replica; at: number } } = { on: true };
  const poller = (async () => {
    while (poll.on && !poll.flipped) {
      for (const r of others) {
        const v = await r.cp.metric(MASTER, { name: LOCK }).catch(() => 0);
        if (v === 1 && !poll.flipped) poll.flipped = { r, at: performance.now() };
      }
      await sleep(POLL_MS);
    }
  })();

  // Stamp the exit when it happens (exitWithin stamps it when it is called, which may be later),
  // and wait for 'close' (every log line read) before reading the old process's logs.
  const exitedAt = new Promise<number>((resolve) =>
    old.cp.child.once('exit', () => resolve(performance.now())),
  );
  const closed = new Promise<void>((resolve) => old.cp.child.once('close', () => resolve()));
  const t0wall = Date.now();
  const t0 = performance.now();
  old.cp.child.kill('SIGTERM');
  try {
    const ev = await waitUntil(
      () => lockEvents.slice(fromEvent).find((e) => e.holder !== '' && e.holder !== old.name),
      { timeoutMs: 30_000, intervalMs: 2, what: `the lock to move away from ${old.name}` },
    );
    const next = replicas.get(ev.holder);
    if (!next || !others.includes(next)) throw new Error(`the lock went to ${ev.holder}, not a live standby`);
    const nFrom = fromLog.get(next)!;
    await next.cp.waitForLog(
      'Started leading: reconciling nodes',
      10_000,
      (l) => next.cp.logs.indexOf(l) >= nFrom,
    );
    await next.cp
      .waitForLog('Acting: watches healthy and leading', 10_000, (l) => next.cp.logs.indexOf(l) >= nFrom)
      .catch(() => undefined);
    await waitUntil(() => poll.flipped, {
      timeoutMs: 5_000,
      intervalMs: 5,
      what: `${MASTER} 1 on a standby`,
    }).catch(() => undefined);
    const exit = { ...(await exitWithin(old.cp, 20_000)), at: await exitedAt };
    await closed;
    poll.on = false;
    await poller;
    live = live.filter((r) => r !== old);

    const oFrom = fromLog.get(old)!;
    const rel = (wall: number | undefined) => (wall === undefined ? undefined : wall - t0wall);
    const o = (msg: string, pred?: (l: Record<string, unknown>) => boolean) =>
      rel(logAt(old, oFrom, msg, pred));
    const n = (msg: string, pred?: (l: Record<string, unknown>) => boolean) =>
      rel(logAt(next, nFrom, msg, pred));
    const stopped = old.cp.logs.slice(oFrom).find((l) => l.msg === 'Stopped');
    const releasedSeen = lockEvents.slice(fromEvent).find((e) => e.holder === '');
    const r: Round = {
      old: old.name,
      next: next.name,
      a: ev.at - t0,
      b: n('Started leading: reconciling nodes')!,
      bMetric: poll.flipped?.r === next ? poll.flipped.at - t0 : undefined,
      acting: n('Acting: watches healthy and leading'),
      c: exit.at - t0,
      code: exit.code,
      steps: {
        'old: Shutting down': o('Shutting down'),
        'old: stopped leading (drain done, release sent)': o(
          'Stopped leading',
          (l) => l.component === 'leader-election',
        ),
        'old: Released leader lease (answer)': o('Released leader lease'),
        'watch: lock released': releasedSeen ? releasedSeen.at - t0 : undefined,
        'new: New leader observed <none>': n('New leader observed', (l) => l.leader === '<none>'),
        'new: Successfully acquired lease': n('Successfully acquired lease'),
        'watch: lock held by new (a)': ev.at - t0,
        'new: Started leading (b)': n('Started leading: reconciling nodes'),
        'new: Acting': n('Acting: watches healthy and leading'),
        'old: Stopped': o('Stopped'),
        'old: exit (c)': exit.at - t0,
      },
      lease: stopped?.lease,
      drained: stopped?.drained,
    };
    if (ev.transitions !== transitionsBefore + 1) {
      console.log(`  note: leaseTransitions ${transitionsBefore} -> ${ev.transitions}`);
    }
    console.log(
      `${el()} round ${i + 1}: ${r.old} -> ${r.next}  (a) lock ${f0(r.a)} ms  (b) started leading ${f0(r.b)} ms ` +
        `(metric ${f0(r.bMetric)} ms, acting ${f0(r.acting)} ms)  (c) exit ${f0(r.c)} ms, code ${r.code}; ` +
        `lease ${String(r.lease)}, drained ${String(r.drained)}`,
    );
    console.log(
      `  steps (ms after SIGTERM): ${Object.entries(r.steps)
        .map(([k, v]) => `${k} ${f0(v)}`)
        .join('; ')}`,
    );
    if (exit.code !== 0 || exit.signal !== null) {
      throw new Error(`FAIL: ${old.name} exited with code ${exit.code}, signal ${exit.signal}`);
    }
    return r;
  } finally {
    poll.on = false;
    await poller;
  }
}

// ---------------------------------------------------------------------------------------------
// Main

/** Samples every LOOP_RES_MS; each sample is the time between two samples, so less LOOP_RES_MS is the lag. */
const LOOP_RES_MS = 10;
const loopDelay = monitorEventLoopDelay({ resolution: LOOP_RES_MS });
const lag = (ns: number) => Math.max(0, ns / 1e6 - LOOP_RES_MS).toFixed(1);
const mainBuilt = statSync(MAIN).mtime.toISOString();
const commit = `${sh('git', ['rev-parse', '--short', 'HEAD'])}${sh('git', ['status', '--porcelain', '--untracked-files=no']) === '' ? '' : ' (uncommitted changes in tree)'}`;
const loadAtStart = load();
console.log(
  `machine: ${os.cpus().length} cores (${os.cpus()[0]?.model ?? '?'}), ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB; ` +
    `node ${process.version}; commit ${commit}; ${path.relative(process.cwd(), MAIN) || MAIN} built ${mainBuilt}`,
);
console.log(
  `run: --nodes=${NODES} --replicas=${REPLICAS} --rounds=${ROUNDS} --pods=${PODS}; controller flags: ` +
    "the Deployment's (--leader-elect=true, every timing at its default)",
);
console.log(`start (${new Date().toISOString()}): ${loadAtStart}`);

let failed = false;
const rounds: Round[] = [];
try {
  cluster = await startCluster();
  const admin = cluster.admin;
  await admin.request({ method: 'POST', path: paths.namespaces(), body: { metadata: { name: NS } } });
  stops.push(
    await rawWatch<Node>(admin, paths.nodes(), (e) => onNode(e.type, e.object, e.at)),
    await rawWatch<Lease>(
      admin,
      paths.leases(NS),
      (e) => {
        if (e.type !== 'ADDED' && e.type !== 'MODIFIED') return;
        const s = e.object.spec;
        lockEvents.push({ at: e.at, holder: s?.holderIdentity ?? '', transitions: s?.leaseTransitions ?? 0 });
      },
      { fieldSelector: `metadata.name=${LOCK}` },
    ),
  );

  let t = performance.now();
  fleet = await SimulatedFleet.start(admin, {
    nodes: NODES,
    podsPerNode: PODS,
    timing: { renewIntervalMs: RENEW_MS },
    startConcurrency: 32,
  });
  // Registered within seconds, the kubelets would renew in lock-step: spread their phases.
  await fleet.spreadPhases();
  console.log(
    `fleet: ${NODES} nodes (${PODS} pods each) up in ${((performance.now() - t) / 1000).toFixed(1)} s`,
  );

  t = performance.now();
  await Promise.all(Array.from({ length: REPLICAS }, () => startReplica()));
  await settledLeader(120_000 + NODES * 100);
  // The first leader removes the not-ready taint kube-apiserver's admission put on every new node.
  await waitUntil(converged, {
    timeoutMs: 120_000 + NODES * 200,
    what: 'every node Ready=True without node.kubernetes.io taints',
  });
  baselineAt = performance.now();
  console.log(
    `${el()} controllers: ${REPLICAS} replicas, one leading, every node Ready and untainted after ` +
      `${((performance.now() - t) / 1000).toFixed(1)} s`,
  );

  loopDelay.enable();
  for (let i = 0; i < ROUNDS; i++) {
    rounds.push(await round(i));
    checkMarkings(`round ${i + 1}`);
    await startReplica(); // the replaced pod: a standby for the next round
  }
  // The last replica started must come up as a standby too, without marking anything.
  await settledLeader(60_000 + NODES * 60);
  loopDelay.disable();

  // The watch could have ended on its own: check the stored nodes as well.
  const list = await admin.request<List<Node>>({ method: 'GET', path: paths.nodes() });
  for (const n of list.items) onNode('MODIFIED', n, performance.now());
  if (list.items.length !== NODES) throw new Error(`FAIL: ${list.items.length} nodes listed, want ${NODES}`);
  checkMarkings('end of run');
  const errors = [...replicas.values()].flatMap((r) =>
    r.cp.logs.filter((l) => l.level === 'error').map((l) => `${r.name}: ${JSON.stringify(l)}`),
  );
  if (errors.length > 0) console.log(`error log lines:\n  ${errors.join('\n  ')}`);
  const notReleased = rounds.filter((r) => r.lease !== 'released' || r.drained !== true);
  if (notReleased.length > 0) {
    throw new Error(
      `FAIL: lease not released after a clean drain in round(s) of ${notReleased.map((r) => r.old)}`,
    );
  }

  console.log('');
  console.log(
    `summary: ${NODES} nodes, ${REPLICAS} replicas, ${rounds.length} rounds; ms after SIGTERM, ` +
      'median / p90 / max (nearest rank)',
  );
  const row = (label: string, xs: (number | undefined)[]) => {
    const v = xs.filter((x): x is number => x !== undefined);
    console.log(
      `| ${label} | ${f0(pct(v, 0.5))} | ${f0(pct(v, 0.9))} | ${f0(Math.max(...v))} |${v.length < xs.length ? ` (${v.length} of ${xs.length} rounds)` : ''}`,
    );
  };
  console.log('| from SIGTERM to | median | p90 | max |');
  console.log('| --- | ---: | ---: | ---: |');
  row(
    '(a) lock held by another replica (our watch)',
    rounds.map((r) => r.a),
  );
  row(
    '(b) new leader logs "Started leading"',
    rounds.map((r) => r.b),
  );
  row(
    `(b) new leader's ${MASTER} 1 (polled)`,
    rounds.map((r) => r.bMetric),
  );
  row(
    'new leader logs "Acting"',
    rounds.map((r) => r.acting),
  );
  row(
    '(c) old process exited (code 0)',
    rounds.map((r) => r.c),
  );
  console.log('');
  console.log('steps, median (min-max) ms after SIGTERM:');
  for (const k of Object.keys(rounds[0]!.steps)) {
    const v = rounds.map((r) => r.steps[k]).filter((x): x is number => x !== undefined);
    console.log(`  ${k}: ${f0(pct(v, 0.5))} (${f0(Math.min(...v))}-${f0(Math.max(...v))})`);
  }
  console.log(
    `no node marked: ${NODES} nodes Ready=True without node.kubernetes.io taints throughout ` +
      `(${markings.length} marking changes seen)`,
  );
  console.log(
    `bench process event-loop lag during the rounds: p99 ${lag(loopDelay.percentile(99))} ms, ` +
      `max ${lag(loopDelay.max)} ms (the watch-stamped times can be as late as that)`,
  );
  if (JSON_FILE) {
    const ms = (x: number | undefined) => (x === undefined ? null : Math.round(x * 10) / 10);
    writeResults(
      JSON_FILE,
      record({
        options: { nodes: NODES, replicas: REPLICAS, rounds: ROUNDS, pods: PODS, main: publicPath(MAIN) },
        mainBuiltAt: mainBuilt,
        benchEventLoopLagMs: { p99: Number(lag(loopDelay.percentile(99))), max: Number(lag(loopDelay.max)) },
        markings: markings.length,
        rounds: rounds.map((r) => ({
          lockMovedMs: ms(r.a),
          startedLeadingMs: ms(r.b),
          masterStatusMs: ms(r.bMetric),
          actingMs: ms(r.acting),
          oldExitedMs: ms(r.c),
          exitCode: r.code,
          released: r.lease === 'released' && r.drained === true,
          steps: Object.fromEntries(Object.entries(r.steps).map(([k, v]) => [k, ms(v)])),
        })),
      }) satisfies HandoverRecord,
    );
    console.log(`results: ${JSON_FILE}`);
  }
} catch (err) {
  failed = true;
  console.error(err instanceof Error ? err.message : String(err));
  for (const r of replicas.values()) {
    console.error(`--- ${r.name} (exit ${r.cp.child.exitCode ?? 'running'}):\n${r.cp.summary()}`);
  }
} finally {
  console.log(`end (${new Date().toISOString()}, ${el()}): ${load()}`);
  await Promise.all(live.map((r) => r.cp.kill('SIGTERM')));
  for (const s of stops) s();
  fleet?.stop();
  await cluster?.stop();
}
process.exit(failed ? 1 : 0);
