/**
 * Ours in --mode=upstream (the default install) beside a kube-controller-manager v1.37.2 whose own
 * node-lifecycle-controller was left on: the two would mark the same nodes. Ours must see it, write
 * nothing, and say what to do (src/controller/concurrent-controller.ts): before it marks anything,
 * from the RegisteredNode Events it recorded for the nodes (src/controller/kcm-registered.ts; it
 * runs here without leader election, so those of the last hour count); while running, from a node
 * kube-controller-manager marks Unknown; at start, from a node it marked within the hour. Real
 * kube-apiserver + etcd on loopback, simulated kubelets; kube-controller-manager at a 5 s grace so
 * that it marks first (ours at 20 s), as it does whenever its grace is the shorter one.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { type RunningController, startKcm } from '../../bench/compare/controllers.js';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { type ControllerProcess, probe, startController } from '../support/controller-process.js';
import { auditWrites, ClusterObserver } from '../support/observer.js';
import { sleep, waitUntil } from '../support/wait.js';

const KCM_GRACE_MS = 5_000;
const KCM_PERIOD_MS = 5_000;
const OURS_UA = 'node-lifecycle-controller/';
const REFUSING = "Another node-lifecycle controller sets the nodes' Ready condition: refusing to write";
const REGISTERED_REFUSING =
  "kube-controller-manager's node-lifecycle-controller is on (it records RegisteredNode): refusing to write";

let cluster: TestCluster;
let fleet: SimulatedFleet;
let observer: ClusterObserver;
let kcm: RunningController | undefined;
let logDir: string;
const started: ControllerProcess[] = [];

async function startOurs(graceS: number, extra: string[] = []): Promise<ControllerProcess> {
  const ctl = await startController([
    `--kubeconfig=${cluster.cp.kubeconfigPath}`,
    '--leader-elect=false',
    `--node-monitor-grace-period=${graceS}s`,
    '--node-startup-grace-period=30s',
    '--watch-silence-threshold=3s',
    ...extra,
  ]);
  started.push(ctl);
  onTestFailed(() => console.log(`controller log summary:\n${ctl.summary()}`));
  return ctl;
}

/** Our writes (nodes, pods, events, leases) in the audit log after `since` (an ISO time). */
const oursWritesSince = (since: string) =>
  auditWrites(cluster.cp.auditLogPath!, OURS_UA).filter((e) => (e.stageTimestamp ?? '') > since);

beforeAll(async () => {
  cluster = await startCluster({ audit: true });
  fleet = await SimulatedFleet.start(cluster.admin, {
    nodes: 6,
    podsPerNode: 1,
    timing: { renewIntervalMs: 1000 },
  });
  observer = await ClusterObserver.start(cluster.admin);
  logDir = mkdtempSync(path.join(os.tmpdir(), 'nlc-concurrent-e2e-'));
  kcm = await startKcm({
    kubeconfigPath: cluster.cp.kubeconfigPath,
    kcmControllers: ['node-lifecycle-controller'],
    graceMs: KCM_GRACE_MS,
    startupGraceMs: 10_000,
    qps: 20,
    burst: 30,
    logDir,
  });
  await waitUntil(() => kcm!.healthy(), { timeoutMs: 30_000, what: 'kube-controller-manager healthy' });
}, 120_000);

afterAll(async () => {
  kcm?.process.kill('SIGKILL');
  await Promise.all(started.map((c) => c.kill('SIGKILL')));
  observer?.stop();
  fleet?.stop();
  await cluster?.stop();
  if (logDir) rmSync(logDir, { recursive: true, force: true });
});

describe("upstream mode beside kube-controller-manager's node-lifecycle-controller (real API server, 6 nodes)", () => {
  const first = 'sim-zone-a-000';
  const second = 'sim-zone-b-001';

  it('before it marks anything, from its RegisteredNode Events, and while running, from a node it marks: ours refuses from the start, says the fix, fails /readyz; a node lost later is not marked by it', async () => {
    const ctl = await startOurs(20);
    // kube-controller-manager registered the 6 nodes when it started (beforeAll): no node marked yet.
    const early = await ctl.waitForLog(REGISTERED_REFUSING, 20_000);
    expect(early).toMatchObject({
      level: 'error',
      manager: 'kube-controller-manager',
      seenIn: 'the RegisteredNode Events',
    });
    expect(String(early.fix)).toContain('--controllers=*,-node-lifecycle-controller');
    expect(
      await ctl.waitForLog('Checked the nodes for another node-lifecycle controller', 20_000),
    ).toMatchObject({
      nodes: 6,
      found: 'none',
    });
    const before = await probe(ctl, '/readyz?verbose');
    expect(before.status).toBe(500);
    expect(before.body).toContain(
      "[-]concurrent-node-lifecycle failed: another node-lifecycle controller is running: kube-controller-manager's node-lifecycle-controller recorded RegisteredNode for node",
    );
    expect(ctl.logs.some((l) => String(l.msg).startsWith('Acting'))).toBe(false);

    const paused = performance.now();
    fleet.node(first).pauseHeartbeats();
    await waitUntil(() => observer.readyAt(first, 'Unknown', paused), {
      timeoutMs: KCM_GRACE_MS + KCM_PERIOD_MS + 10_000,
      what: `${first} marked Unknown by kube-controller-manager`,
    });
    const marked = observer.readyAt(first, 'Unknown', paused)!;
    const refused = await ctl.waitForLog(REFUSING, 10_000);
    const seenAfter = performance.now() - marked;
    console.log(
      `kube-controller-manager marked ${first}; ours refused ${seenAfter.toFixed(0)} ms later: ${JSON.stringify(refused)}`,
    );
    expect(refused).toMatchObject({
      level: 'error',
      node: first,
      manager: 'kube-controller-manager',
      seenIn: 'the node watch',
    });
    expect(String(refused.fix)).toContain('--controllers=*,-node-lifecycle-controller');
    expect(String(refused.fix)).toContain('--mode=companion');
    const detectedAt = new Date().toISOString();

    const ready = await probe(ctl, '/readyz?verbose');
    console.log(`/readyz -> ${ready.status}: ${ready.body}`);
    expect(ready.status).toBe(500);
    expect(ready.body).toContain(
      '[-]concurrent-node-lifecycle failed: another node-lifecycle controller is running: kube-controller-manager set node',
    );
    expect(ready.body).toContain('-node-lifecycle-controller');
    expect(await ctl.metric('nlc_conflicting_controller', { manager: 'kube-controller-manager' })).toBe(1);
    expect(await ctl.metric('nlc_leading')).toBe(0);

    // kube-controller-manager goes; a second node is lost. Ours still refuses: past its grace, the
    // node is not marked, and ours wrote nothing since it refused.
    kcm!.process.kill('SIGKILL');
    kcm = undefined;
    const lost = performance.now();
    fleet.node(second).pauseHeartbeats();
    await sleep(20_000 + 5_000);
    expect(observer.readyAt(second, 'Unknown', lost)).toBeUndefined();
    expect(observer.readyStatus(second)).toBe('True');
    expect(oursWritesSince(detectedAt).map((e) => `${e.verb} ${e.requestURI}`)).toEqual([]);
    expect(ctl.logs.filter((l) => l.msg === REFUSING)).toHaveLength(1);
    await ctl.kill();
  });

  it('at start: a node kube-controller-manager marked within the hour; ours refuses from the start and marks nothing', async () => {
    const before = new Date().toISOString();
    const ctl = await startOurs(5);
    const refused = await ctl.waitForLog(REFUSING, 20_000);
    console.log(`at start: ${JSON.stringify(refused)}`);
    expect(refused).toMatchObject({
      node: first,
      manager: 'kube-controller-manager',
      seenIn: 'the node list at start',
    });
    expect(
      ctl.logs.find((l) => l.msg === 'Checked the nodes for another node-lifecycle controller'),
    ).toMatchObject({
      found: 'kube-controller-manager',
    });
    await waitUntil(async () => (await probe(ctl, '/readyz')).status === 500, {
      timeoutMs: 10_000,
      what: '/readyz failing',
    });
    // The second node has been silent for half a minute, past this replica's 5 s grace: not marked.
    await sleep(5_000 + 3_000);
    expect(observer.readyStatus(second)).toBe('True');
    expect(ctl.logs.some((l) => String(l.msg).startsWith('Acting'))).toBe(false);
    expect(oursWritesSince(before)).toEqual([]);
    await ctl.kill();
  });

  it('--allow-concurrent-node-lifecycle-controller: the same is a warning and a metric, and ours acts (marks the second node)', async () => {
    const ctl = await startOurs(5, ['--allow-concurrent-node-lifecycle-controller']);
    const warned = await ctl.waitForLog(
      "Another node-lifecycle controller sets the nodes' Ready condition: acting anyway (--allow-concurrent-node-lifecycle-controller)",
      20_000,
    );
    expect(warned).toMatchObject({ level: 'warn', node: first, manager: 'kube-controller-manager' });
    await ctl.waitForLog('Acting: watches healthy and leading', 20_000);
    expect(await ctl.metric('nlc_conflicting_controller', { manager: 'kube-controller-manager' })).toBe(1);
    const acting = performance.now();
    await waitUntil(() => observer.readyAt(second, 'Unknown', acting), {
      timeoutMs: 5_000 + 5_000,
      what: `${second} marked by ours`,
    });
    expect((await probe(ctl, '/readyz')).status).toBe(200);
    expect(ctl.logs.filter((l) => l.level === 'error')).toEqual([]);
    await ctl.kill();
  });
});
