import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { FLAGS } from '../../src/config/flags.js';
import { COMPONENT_NAME } from '../../src/election/config.js';
import { IDENTITY_LABEL } from '../../src/election/identity.js';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { paths } from '../../src/kube/client.js';
import type { Lease, List } from '../../src/kube/types.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import {
  type ControllerProcess,
  exitWithin,
  fastTestFlags,
  probe,
  runCli,
  samples,
  sampleValue,
  startController,
} from '../support/controller-process.js';
import { sleep, waitUntil } from '../support/wait.js';

/**
 * The built CLI (`node dist/main.js`) as a child process against a real kube-apiserver: metrics,
 * probes, signals, flag errors, kubeconfig errors and the `status` subcommand.
 */

const NS = 'nlc-e2e-cli';
const PACKAGE_VERSION = (
  JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;
const HEAD = execFileSync('git', ['rev-parse', 'HEAD'], {
  cwd: new URL('../..', import.meta.url),
  encoding: 'utf8',
}).trim();
const LOCK = COMPONENT_NAME;
const GRACE_MS = 5_000;
const MASTER = 'leader_election_master_status';

let cluster: TestCluster;
let fleet: SimulatedFleet;
const started: ControllerProcess[] = [];

async function startReplica(name: string): Promise<ControllerProcess> {
  const cp = await startController(fastTestFlags(cluster.cp.kubeconfigPath, GRACE_MS), {
    env: { POD_NAME: name, POD_NAMESPACE: NS },
    name,
  });
  started.push(cp);
  onTestFailed(() => console.log(`--- ${name} log summary:\n${cp.summary()}`));
  return cp;
}

async function getLock(): Promise<Lease | undefined> {
  const res = await cluster.admin.raw<Lease>({ method: 'GET', path: paths.lease(NS, LOCK) });
  return res.status === 200 ? res.body : undefined;
}

async function identityHolders(): Promise<string[]> {
  const list = await cluster.admin.request<List<Lease>>({
    method: 'GET',
    path: paths.leases(NS),
    query: { labelSelector: IDENTITY_LABEL },
  });
  return list.items.map((l) => l.spec?.holderIdentity ?? '').sort();
}

const bucketMap = (text: string) =>
  new Map(samples(text, 'nlc_detection_latency_seconds_bucket').map((s) => [s.labels.le!, s.value]));

beforeAll(async () => {
  cluster = await startCluster();
  await cluster.admin.request({ method: 'POST', path: paths.namespaces(), body: { metadata: { name: NS } } });
  fleet = await SimulatedFleet.start(cluster.admin, {
    nodes: 6,
    podsPerNode: 1,
    timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 1000 },
  });
});

afterAll(async () => {
  cluster?.cp.resumeApiServer();
  await Promise.all(started.map((cp) => cp.kill('SIGKILL')));
  fleet?.stop();
  await cluster?.stop();
});

describe('CLI errors (no API server needed)', () => {
  it('a bad flag value: exit 2, and stderr names the flag, the value and what is accepted', async () => {
    const r = await runCli(['--node-monitor-grace-period=abc']);
    console.log(`bad flag -> exit ${r.code}: ${r.stderr.trim()}`);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--node-monitor-grace-period');
    expect(r.stderr).toContain('"abc"');
    expect(r.stderr).toContain('accepted:');
    expect(r.stdout).toBe('');
  });

  it('a grace period too short for any silence threshold: exit 2, naming --node-monitor-grace-period in Go durations', async () => {
    const r = await runCli(['--node-monitor-grace-period=50ms']);
    console.log(`short grace -> exit ${r.code}: ${r.stderr.trim()}`);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('invalid value "50ms" for flag --node-monitor-grace-period');
    expect(r.stderr).toContain('> 1s');
    expect(r.stderr).not.toContain('--watch-silence-threshold');
  });

  it('a bad --node-pool-config file (invalid, or missing): exit 2, naming the flag, the file and the problem', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'nlc-pools-'));
    try {
      const invalid = path.join(dir, 'pools.json');
      writeFileSync(
        invalid,
        JSON.stringify({ pools: [{ name: 'gpu', selector: {}, nodeMonitorGracePeriod: '5 minutes' }] }),
      );
      const missing = path.join(dir, 'absent.json');
      // Grace bounds: above --watch-silence-threshold (45s here), at most 24h.
      const atThreshold = path.join(dir, 'at-threshold.json');
      writeFileSync(
        atThreshold,
        JSON.stringify({ pools: [{ name: 'edge', selector: {}, nodeMonitorGracePeriod: '45s' }] }),
      );
      const tooLong = path.join(dir, 'too-long.json');
      writeFileSync(
        tooLong,
        JSON.stringify({ pools: [{ name: 'off', selector: {}, nodeMonitorGracePeriod: '720h' }] }),
      );
      // Nested 100,000 levels deep (a RangeError escaped validation: exit 1, "Failed to start"),
      // and 2 MiB (read up to 1 MiB and a byte).
      const deep = path.join(dir, 'deep.json');
      writeFileSync(deep, `{"pools":[${'['.repeat(100_000)}${']'.repeat(100_000)}]}`);
      const huge = path.join(dir, 'huge.json');
      writeFileSync(huge, '{"pools":[]}'.padEnd(2 * 1024 * 1024, ' '));
      for (const [file, problem] of [
        [deep, 'nested deeper than 32 levels of objects and lists (at pools[0][0]'],
        [huge, 'too large: at least 1048577 bytes; a pool config may have at most 1048576 bytes'],
        [invalid, '"5 minutes"'],
        [missing, 'cannot read'],
        [atThreshold, 'pools[0] "edge": nodeMonitorGracePeriod: "45s": out of range; accepted: '],
        [atThreshold, 'above --watch-silence-threshold (45s) and at most 24h0m0s'],
        [tooLong, 'pools[0] "off": nodeMonitorGracePeriod: "720h": out of range; '],
      ] as const) {
        // The kubeconfig resolves (the file exists); the pool file is checked before any request.
        const r = await runCli([
          `--kubeconfig=${cluster.cp.kubeconfigPath}`,
          `--node-pool-config=${file}`,
          '--leader-elect=false',
          '--metrics-bind-address=0',
          '--health-probe-bind-address=0',
        ]);
        const line = (r.stdout + r.stderr).split('\n').find((l) => l.includes('"msg":"Invalid flag"'));
        console.log(`bad pool file -> exit ${r.code}: ${line}`);
        expect(r.code).toBe(2);
        const msg = String((JSON.parse(line ?? '{}') as { err?: unknown }).err);
        expect(msg).toContain(`invalid value ${JSON.stringify(file)} for flag --node-pool-config`);
        expect(msg).toContain('accepted: a readable JSON file of node pools');
        expect(msg).toContain(problem);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('--help: exit 0, every flag listed with its default', async () => {
    const r = await runCli(['--help']);
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    for (const f of FLAGS) {
      const at = lines.findIndex((l) => new RegExp(`^\\s+--${f.name}(\\s|$)`).test(l));
      expect(at, `--${f.name} in --help`).toBeGreaterThanOrEqual(0);
      if (f.default !== '') {
        const def = f.kind === 'string' ? JSON.stringify(f.default) : f.default;
        expect(lines[at + 1], `default of --${f.name}`).toContain(`(default ${def})`);
      }
    }
    expect(r.stdout).toContain('status');
  });

  it('a --kubeconfig that does not exist: non-zero exit, the message names --kubeconfig', async () => {
    const missing = path.join(os.tmpdir(), 'nlc-no-such-dir', 'kubeconfig');
    const r = await runCli([
      `--kubeconfig=${missing}`,
      '--metrics-bind-address=0',
      '--health-probe-bind-address=0',
    ]);
    const out = r.stdout + r.stderr;
    console.log(`missing kubeconfig -> exit ${r.code}: ${out.trim()}`);
    expect(r.code).not.toBe(0);
    expect(r.code).not.toBeNull();
    expect(out).toContain('--kubeconfig');
    expect(out).toContain(missing);
  });

  it('no kubeconfig anywhere: non-zero exit, and it says there is no localhost:8080 fallback', async () => {
    const home = mkdtempSync(path.join(os.tmpdir(), 'nlc-empty-home-'));
    try {
      // Only PATH and HOME: no KUBECONFIG, no KUBERNETES_SERVICE_HOST, and an empty home.
      const r = await runCli(['--metrics-bind-address=0', '--health-probe-bind-address=0'], {
        env: { PATH: process.env.PATH ?? '', HOME: home },
      });
      const out = r.stdout + r.stderr;
      console.log(`no kubeconfig -> exit ${r.code}: ${out.trim()}`);
      expect(r.code).not.toBe(0);
      expect(r.code).not.toBeNull();
      expect(out).toContain('no localhost:8080 fallback');
      expect(out).toContain(path.join(home, '.kube', 'config'));
    } finally {
      rmSync(home, { recursive: true, force: true });
    }
  });
});

describe('the controller process against a real API server (6 simulated nodes, grace 5 s)', () => {
  let leader: ControllerProcess;
  let standby: ControllerProcess;

  it('/metrics before and after a node failure: transitions, detection latency, API requests, node states, process metrics', async () => {
    leader = await startReplica('cli-0');
    await leader.waitForLog('Acting: watches healthy and leading', 20_000);
    await waitUntil(async () => (await leader.metric('nlc_nodes', { state: 'ready' })) === 6, {
      timeoutMs: 10_000,
      what: 'nlc_nodes{state="ready"} 6',
    });
    const before = await leader.metrics();
    const n = 'sim-zone-c-001';
    fleet.node(n).pauseHeartbeats();
    try {
      const after = await waitUntil(
        async () => {
          const t = await leader.metrics();
          return sampleValue(t, 'nlc_nodes', { state: 'unknown' }) === 1 &&
            sampleValue(t, 'nlc_detection_latency_seconds_count') >
              sampleValue(before, 'nlc_detection_latency_seconds_count')
            ? t
            : undefined;
        },
        { timeoutMs: GRACE_MS + 6_000, what: `${n} counted Unknown in /metrics` },
      );
      const v = (text: string, name: string, labels?: Record<string, string>) =>
        sampleValue(text, name, labels);
      console.log(
        `metrics: marked_unknown ${v(before, 'nlc_transitions_total', { kind: 'marked_unknown' })} -> ` +
          `${v(after, 'nlc_transitions_total', { kind: 'marked_unknown' })}; detection latency count ` +
          `${v(before, 'nlc_detection_latency_seconds_count')} -> ${v(after, 'nlc_detection_latency_seconds_count')}, ` +
          `sum ${v(after, 'nlc_detection_latency_seconds_sum').toFixed(3)} s; patch nodes/status ` +
          `${v(before, 'nlc_api_requests_total', { verb: 'patch', resource: 'nodes/status' })} -> ` +
          `${v(after, 'nlc_api_requests_total', { verb: 'patch', resource: 'nodes/status' })}`,
      );
      expect(v(after, 'nlc_transitions_total', { kind: 'marked_unknown' })).toBe(
        v(before, 'nlc_transitions_total', { kind: 'marked_unknown' }) + 1,
      );
      expect(v(after, 'nlc_detection_latency_seconds_count')).toBe(
        v(before, 'nlc_detection_latency_seconds_count') + 1,
      );
      // The histogram's buckets moved: +Inf by exactly one, at least one finite bucket too (the
      // latency is well under the largest bucket), and the buckets stay cumulative.
      const b0 = bucketMap(before);
      const b1 = bucketMap(after);
      expect(b1.size).toBeGreaterThan(1);
      expect(b1.get('+Inf')).toBe((b0.get('+Inf') ?? 0) + 1);
      const moved = [...b1].filter(([le, c]) => le !== '+Inf' && c > (b0.get(le) ?? 0));
      expect(moved.length).toBeGreaterThan(0);
      const counts = samples(after, 'nlc_detection_latency_seconds_bucket').map((s) => s.value);
      expect([...counts].sort((a, b) => a - b)).toEqual(counts);
      expect(v(after, 'nlc_api_requests_total', { verb: 'patch', resource: 'nodes/status' })).toBeGreaterThan(
        v(before, 'nlc_api_requests_total', { verb: 'patch', resource: 'nodes/status' }),
      );
      expect(v(before, 'nlc_nodes', { state: 'unknown' })).toBe(0);
      expect(v(after, 'nlc_nodes', { state: 'unknown' })).toBe(1);
      expect(v(after, 'nlc_nodes', { state: 'ready' })).toBe(5);
      // Default process metrics, and the node-lease watch is connected.
      expect(samples(after, 'process_cpu_seconds_total')).toHaveLength(1);
      expect(samples(after, 'process_cpu_seconds_total')[0]!.value).toBeGreaterThan(0);
      expect(samples(after, 'nodejs_heap_size_used_bytes')[0]?.value ?? 0).toBeGreaterThan(0);
      expect(samples(after, 'nlc_watch_connected').find((s) => s.labels.resource === 'leases')?.value).toBe(
        1,
      );
      expect(v(after, MASTER, { name: LOCK })).toBe(1);
      expect(v(after, 'nlc_leading')).toBe(1);
      // What the process is: in the Starting log line, and as Kubernetes components export
      // kubernetes_build_info.
      // The revision: the commit `npm run build` stamped (dist/build-stamp.json; --version in
      // test/e2e/cli-start.test.ts).
      const revision = expect.stringMatching(new RegExp(`^${HEAD}(-dirty)?$`));
      expect(samples(after, 'nlc_build_info')).toEqual([
        {
          name: 'nlc_build_info',
          labels: { version: PACKAGE_VERSION, revision, nodejs_version: process.version },
          value: 1,
        },
      ]);
      expect(leader.logs.find((l) => l.msg === 'Starting')).toMatchObject({
        version: PACKAGE_VERSION,
        revision,
        nodejs: process.version,
      });
    } finally {
      fleet.node(n).resumeHeartbeats();
    }
    await waitUntil(async () => (await leader.metric('nlc_nodes', { state: 'ready' })) === 6, {
      timeoutMs: 10_000,
      what: `${n} Ready again`,
    });
  });

  it('/healthz and /readyz answer 200 once synced (?verbose lists the checks); a standby replica is Ready too', async () => {
    expect(await probe(leader, '/healthz')).toEqual({ status: 200, body: 'ok' });
    expect(await probe(leader, '/readyz')).toEqual({ status: 200, body: 'ok' });
    const verbose = await probe(leader, '/readyz?verbose');
    expect(verbose.status).toBe(200);
    expect(verbose.body).toContain('[+]nodes-watch ok');
    expect(verbose.body).toContain('[+]leases-watch ok');
    expect(verbose.body).toContain('[+]lock-access ok');
    expect(verbose.body).toContain('readyz check passed');
    const health = await probe(leader, '/healthz?verbose');
    expect(health.body).toContain('[+]ping ok');
    expect(health.body).toContain('[+]api-access ok');
    expect(health.body).toContain('[+]leaderElection ok');

    standby = await startReplica('cli-1');
    const readyAfter = performance.now();
    await waitUntil(async () => (await probe(standby, '/readyz')).status === 200, {
      timeoutMs: 15_000,
      what: 'the standby Ready',
    });
    console.log(
      `standby Ready ${(performance.now() - readyAfter).toFixed(0)} ms after its /healthz first answered`,
    );
    const sv = await probe(standby, '/readyz?verbose');
    expect(sv.body).toContain('[+]nodes-watch ok');
    expect(sv.body).toContain('[+]leases-watch ok');
    expect(sv.body).toContain('[+]lock-access ok');
    expect((await probe(standby, '/healthz')).status).toBe(200);
    // It is Ready without leading.
    expect(await standby.metric(MASTER, { name: LOCK })).toBe(0);
    expect(await standby.metric('nlc_leading')).toBe(0);
    expect((await getLock())?.spec?.holderIdentity).toBe('cli-0');
    expect(
      standby.logs.filter(
        (l) => l.msg === 'Started leading: reconciling nodes' || String(l.msg).startsWith('Acting'),
      ),
    ).toEqual([]);
  });

  it('`status` prints the node table and the leader', async () => {
    await waitUntil(async () => (await identityHolders()).join() === 'cli-0,cli-1', {
      timeoutMs: 10_000,
      what: 'both identity leases',
    });
    const r = await runCli(['status', `--kubeconfig=${cluster.cp.kubeconfigPath}`], { timeoutMs: 30_000 });
    console.log(`status -> exit ${r.code}:\n${r.stdout}${r.stderr}`);
    expect(r.code).toBe(0);
    const lines = r.stdout.split('\n');
    expect(lines.some((l) => /^nodes: 6 \(6 Ready\)\s+leader: cli-0 \(lock nlc-e2e-cli/.test(l))).toBe(true);
    expect(lines.some((l) => /^replicas: cli-0\*, cli-1$/.test(l))).toBe(true);
    expect(lines.some((l) => /^NODE\s+ZONE\s+HEARTBEAT\s+READY\s+TAINTS/.test(l))).toBe(true);
    for (const n of fleet.names) {
      expect(
        lines.some((l) => new RegExp(`^${n}\\s+\\S+\\s+~?[\\d.]+s\\s+True`).test(l)),
        `row of ${n}`,
      ).toBe(true);
    }
  });

  it('SIGTERM: the standby and then the leader exit 0 within 10 s, log Stopped, and the lock lease is released', async () => {
    const transitions = (await getLock())?.spec?.leaseTransitions ?? 0;
    standby.child.kill('SIGTERM');
    const se = await exitWithin(standby, 10_000);
    expect(se.code).toBe(0);
    expect(standby.logs.find((l) => l.msg === 'Leader lease release')?.result).toBe('not-holder');
    expect(standby.logs.some((l) => l.msg === 'Stopped')).toBe(true);
    // The leader kept its lease.
    expect((await getLock())?.spec?.holderIdentity).toBe('cli-0');

    const t0 = performance.now();
    leader.child.kill('SIGTERM');
    const le = await exitWithin(leader, 10_000);
    console.log(
      `SIGTERM -> leader exited ${le.code} after ${(le.at - t0).toFixed(0)} ms ` +
        `(logged Stopped ${JSON.stringify(leader.logs.find((l) => l.msg === 'Stopped'))})`,
    );
    expect(le).toMatchObject({ code: 0, signal: null });
    expect(le.at - t0).toBeLessThan(10_000);
    expect(leader.logs.some((l) => l.msg === 'Stopped')).toBe(true);
    expect(leader.logs.find((l) => l.msg === 'Leader lease release')?.result).toBe('released');
    // src/election's release: no holder, leaseDurationSeconds 1, transitions unchanged.
    const lock = await getLock();
    expect(lock?.spec?.holderIdentity ?? '').toBe('');
    expect(lock?.spec?.leaseDurationSeconds).toBe(1);
    expect(lock?.spec?.leaseTransitions ?? 0).toBe(transitions);
    // Both removed their identity leases on the way out.
    expect(await identityHolders()).toEqual([]);
    expect([...leader.logs, ...standby.logs].filter((l) => l.level === 'error')).toEqual([]);
  });

  it('a second signal while shutting down exits at once (code 1), without waiting for the shutdown', async () => {
    const ctl = await startReplica('cli-2');
    await ctl.waitForLog('Started leading: reconciling nodes', 10_000);
    await sleep(500);
    // With kube-apiserver frozen, the graceful shutdown blocks on the lease release (up to the
    // renew deadline, 3 s) and the identity-lease delete (2 s), so it is certainly still running
    // when the second signal comes.
    cluster.cp.pauseApiServer();
    try {
      const t0 = performance.now();
      ctl.child.kill('SIGTERM');
      await ctl.waitForLog('Shutting down', 2_000);
      await sleep(300);
      expect(ctl.child.exitCode).toBeNull(); // still shutting down
      const t1 = performance.now();
      ctl.child.kill('SIGTERM');
      const e = await exitWithin(ctl, 1_000);
      console.log(
        `second SIGTERM ${(t1 - t0).toFixed(0)} ms into the shutdown -> exit ${e.code} ${(e.at - t1).toFixed(0)} ms later`,
      );
      expect(e).toMatchObject({ code: 1, signal: null });
      expect(ctl.logs.some((l) => l.msg === 'Second signal: exiting now')).toBe(true);
      expect(ctl.logs.some((l) => l.msg === 'Stopped')).toBe(false);
    } finally {
      cluster.cp.resumeApiServer();
    }
  });
});
