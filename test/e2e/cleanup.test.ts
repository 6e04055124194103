import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedFleet } from '../../src/fleet/fleet.js';
import { PatchType, paths } from '../../src/kube/client.js';
import type { Node } from '../../src/kube/types.js';
import { APPLIED_ANNOTATION, FENCED_ANNOTATION } from '../../src/remediation/index.js';
import { startCluster, type TestCluster } from '../support/cluster.js';
import { runCli } from '../support/controller-process.js';

/**
 * `cleanup` against the real API server: what an uninstall leaves on the nodes, marked here as the
 * controller marks them (no controller runs). The dry run writes nothing; `--yes` takes off only
 * what is ours (the companion taint and condition, our out-of-service taint and its annotation,
 * stale unreachable taints on a Ready node), leaves everything else (an operator's taint and fence
 * annotation, the unreachable taints of a node that is not Ready), and a second run finds nothing.
 */
const COMPANION_KEY = 'node-lifecycle-controller.io/unreachable';
const UR = 'node.kubernetes.io/unreachable';
const OOS = 'node.kubernetes.io/out-of-service';

let cluster: TestCluster;
let fleet: SimulatedFleet;

beforeAll(async () => {
  cluster = await startCluster();
  fleet = await SimulatedFleet.start(cluster.admin, {
    nodes: 4,
    podsPerNode: 0,
    timing: { renewIntervalMs: 1000, statusUpdateIntervalMs: 1000 },
  });
});

afterAll(async () => {
  fleet?.stop();
  await cluster?.stop();
});

const get = (name: string) =>
  cluster.admin.request({ method: 'GET', path: paths.node(name) }) as Promise<Node>;
const taints = async (name: string) =>
  ((await get(name)).spec?.taints ?? []).map((t) => `${t.key}:${t.effect}`);
const patch = (name: string, body: unknown, status = false) =>
  cluster.admin.request({
    method: 'PATCH',
    path: status ? paths.nodeStatus(name) : paths.node(name),
    contentType: PatchType.strategic,
    body,
  });
const cli = (...args: string[]) =>
  runCli(['cleanup', `--kubeconfig=${cluster.cp.kubeconfigPath}`, ...args], { timeoutMs: 30_000 });

describe('cleanup (real API server, 4 nodes marked as the controller marks them)', () => {
  it('a dry run by default; --yes takes off only what is ours; a second run finds nothing', async () => {
    const [stale, companion, fenced, down] = fleet.names as [string, string, string, string];
    // Stale unreachable taints on a Ready node, beside an operator's taint.
    await patch(stale, {
      spec: {
        taints: [
          { key: UR, effect: 'NoSchedule' },
          { key: UR, effect: 'NoExecute' },
          { key: 'dedicated', value: 'db', effect: 'NoSchedule' },
        ],
      },
    });
    // Companion mode's taint and condition.
    await patch(companion, {
      spec: { taints: [{ key: COMPANION_KEY, value: 'evicting', effect: 'NoSchedule' }] },
    });
    await patch(
      companion,
      {
        status: {
          conditions: [{ type: 'NodeLeaseExpired', status: 'True', reason: 'LeaseExpired', message: 'x' }],
        },
      },
      true,
    );
    // Our out-of-service taint and its annotation; the operator's fence annotation.
    await patch(fenced, {
      metadata: { annotations: { [APPLIED_ANNOTATION]: 'fence-annotation', [FENCED_ANNOTATION]: 'true' } },
      spec: { taints: [{ key: OOS, value: 'nodeshutdown', effect: 'NoExecute' }] },
    });
    // A node that is down: its kubelet silent, Ready Unknown, tainted unreachable.
    fleet.node(down).pauseHeartbeats();
    await patch(
      down,
      { status: { conditions: [{ type: 'Ready', status: 'Unknown', reason: 'NodeStatusUnknown' }] } },
      true,
    );
    await patch(down, { spec: { taints: [{ key: UR, effect: 'NoSchedule' }] } });
    const before = await Promise.all(fleet.names.map(get));

    const dry = await cli();
    console.log(`cleanup -> exit ${dry.code}:\n${dry.stdout}${dry.stderr}`);
    expect(dry.code).toBe(0);
    expect(dry.stdout).toContain(`${stale}: would remove taint ${UR}:NoSchedule, taint ${UR}:NoExecute\n`);
    expect(dry.stdout).toContain(
      `${companion}: would remove taint ${COMPANION_KEY}:NoSchedule, condition NodeLeaseExpired\n`,
    );
    expect(dry.stdout).toContain(
      `${fenced}: would remove taint ${OOS}:NoExecute, annotation ${APPLIED_ANNOTATION}\n`,
    );
    expect(dry.stdout).toContain(`${down}: left as is: ${UR}:NoSchedule (the node is not Ready)\n`);
    expect(dry.stdout).toContain(
      '4 nodes, 3 with something of ours to remove (dry run: nothing written; --yes to write)',
    );
    // Nothing written.
    const after = await Promise.all(fleet.names.map(get));
    expect(after.map((n) => n.metadata.resourceVersion)).toEqual(
      before.map((n) => n.metadata.resourceVersion),
    );

    const yes = await cli('--yes');
    console.log(`cleanup --yes -> exit ${yes.code}:\n${yes.stdout}${yes.stderr}`);
    expect(yes.code).toBe(0);
    expect(await taints(stale)).toEqual(['dedicated:NoSchedule']);
    expect(await taints(companion)).toEqual([]);
    expect((await get(companion)).status?.conditions?.map((c) => c.type)).not.toContain('NodeLeaseExpired');
    const f = await get(fenced);
    expect(f.spec?.taints ?? []).toEqual([]);
    expect(f.metadata.annotations?.[APPLIED_ANNOTATION]).toBeUndefined();
    expect(f.metadata.annotations?.[FENCED_ANNOTATION]).toBe('true');
    expect(await taints(down)).toEqual([`${UR}:NoSchedule`]);

    const again = await cli('--yes');
    expect(again.code).toBe(0);
    expect(again.stdout).toContain('4 nodes, 0 with something of ours to remove');
    fleet.node(down).resumeHeartbeats();
  });

  it('a bad flag or kubeconfig is named, exit 2', async () => {
    const bad = await cli('--kube-api-qps=0');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--kube-api-qps/);
    const gone = await runCli(['cleanup', '--kubeconfig=/nonexistent/kubeconfig'], { timeoutMs: 30_000 });
    expect(gone.code).toBe(2);
    expect(gone.stderr).toMatch(/nonexistent/);
  });
});
