import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { readyStatus } from '../../src/health/index.js';
import { KubeClient } from '../../src/kube/client.js';
import type { List, Node } from '../../src/kube/types.js';
import { MAIN } from '../support/controller-process.js';
import { sleep, waitUntil } from '../support/wait.js';

/**
 * The README's first command, `./dev demo`, as the built CLI runs it (`node dist/main.js demo`):
 * its own local control plane, simulated fleet and two controller replicas, its script of stopped
 * heartbeats, a not-ready node, a leader shutdown and recovery, and at the end its own verdict on
 * what the controller did. The verdict is not taken on trust: this test reads the demo's
 * kubeconfig from its output and watches the nodes itself, and what it sees must agree.
 */

const GRACE_S = 5;
// The script's last step is at 20 s + 3 x grace; recovery is allowed 15 s after it.
const DURATION_S = 20 + 3 * GRACE_S + 20;
const UNREACHABLE = 'node.kubernetes.io/unreachable';
const NOT_READY = 'node.kubernetes.io/not-ready';

interface Seen {
  unknown: boolean;
  unreachable: boolean;
  readyFalse: boolean;
  /** The not-ready taint while Ready=False (a node also registers with it, before it is Ready). */
  notReadyTaint: boolean;
  /** Ready=True without our taints, after having been Unknown or False. */
  recovered: boolean;
}

describe('the demo (README: ./dev demo)', () => {
  it('runs its script to the end, the controller does each thing, and the demo says so and exits 0', async () => {
    expect(existsSync(MAIN), `${MAIN} is built by the e2e global setup`).toBe(true);
    const child = spawn(
      process.execPath,
      [MAIN, 'demo', `--duration=${DURATION_S}s`, `--grace=${GRACE_S}s`, '--nodes=6'],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
      },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (b: Buffer) => {
      stdout += b.toString('utf8');
    });
    child.stderr.on('data', (b: Buffer) => {
      stderr += b.toString('utf8');
    });
    const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
    const killer = setTimeout(() => child.kill('SIGKILL'), (DURATION_S + 120) * 1000);

    // Our own eyes on the demo's API server, from the kubeconfig it prints.
    const kubeconfig = await waitUntil(() => /kubeconfig: (\S+)/.exec(stdout)?.[1], {
      timeoutMs: 120_000,
      what: `the demo to print its kubeconfig (stdout: ${stdout.slice(-500)}; stderr: ${stderr.slice(-500)})`,
    });
    const kc = new KubeConfig();
    kc.loadFromFile(kubeconfig);
    const client = await KubeClient.fromKubeConfig(kc, { userAgent: 'nlc-e2e-demo-observer' });
    const seen = new Map<string, Seen>();
    let done = false;
    const observing = (async () => {
      while (!done) {
        try {
          const list = await client.request<List<Node>>({
            method: 'GET',
            path: '/api/v1/nodes',
            timeoutMs: 2000,
          });
          for (const n of list.items) {
            const s = seen.get(n.metadata.name) ?? {
              unknown: false,
              unreachable: false,
              notReadyTaint: false,
              readyFalse: false,
              recovered: false,
            };
            const keys = (n.spec?.taints ?? []).map((t) => t.key);
            const ready = readyStatus(n);
            s.unknown ||= ready === 'Unknown';
            s.readyFalse ||= ready === 'False';
            s.unreachable ||= keys.includes(UNREACHABLE);
            s.notReadyTaint ||= ready === 'False' && keys.includes(NOT_READY);
            if (
              (s.unknown || s.readyFalse) &&
              ready === 'True' &&
              !keys.some((k) => k === UNREACHABLE || k === NOT_READY)
            )
              s.recovered = true;
            seen.set(n.metadata.name, s);
          }
        } catch {
          // The demo stops its control plane at the end.
        }
        await sleep(500);
      }
    })();

    const code = await exited;
    clearTimeout(killer);
    done = true;
    await observing;
    client.close();
    const output = `stdout:\n${stdout.slice(-4000)}\nstderr:\n${stderr.slice(-2000)}`;

    expect(code, output).toBe(0);
    // The demo's own verdict: every step's outcome in time, nothing pending, no false positive.
    const verdict = stdout.slice(stdout.lastIndexOf('What the controller was expected to do'));
    expect(verdict, output).toMatch(/Demo checks passed\./);
    const ok = verdict.split('\n').filter((l) => l.startsWith('  ok '));
    expect(
      ok.map((l) => l.replace(/, after .*/, '').trim()),
      output,
    ).toEqual([
      "ok       new nodes' not-ready taints lifted: every node Ready=True and untainted",
      'ok       node-zone-a-000, node-zone-a-001 marked lost (Ready=Unknown, node.kubernetes.io/unreachable:NoSchedule)',
      'ok       node-zone-b-000 marked lost (Ready=Unknown, node.kubernetes.io/unreachable:NoSchedule)',
      'ok       node-zone-b-001 tainted not ready (Ready=False, node.kubernetes.io/not-ready:NoSchedule)',
      expect.stringMatching(/^ok {7}leadership handed over from replica-[ab]$/),
      'ok       every node Ready=True and untainted again',
      'ok       no heartbeating node marked lost',
    ]);
    expect(verdict, output).not.toMatch(/FAILED|waiting/);
    console.log(verdict);

    // What this test saw for itself agrees.
    expect([...seen.keys()].sort(), output).toEqual([
      'node-zone-a-000',
      'node-zone-a-001',
      'node-zone-b-000',
      'node-zone-b-001',
      'node-zone-c-000',
      'node-zone-c-001',
    ]);
    for (const name of ['node-zone-a-000', 'node-zone-a-001', 'node-zone-b-000']) {
      expect(seen.get(name), name).toMatchObject({ unknown: true, unreachable: true, recovered: true });
    }
    expect(seen.get('node-zone-b-001')).toMatchObject({
      unknown: false,
      unreachable: false,
      readyFalse: true,
      notReadyTaint: true,
      recovered: true,
    });
    for (const name of ['node-zone-c-000', 'node-zone-c-001']) {
      expect(seen.get(name), name).toMatchObject({
        unknown: false,
        unreachable: false,
        readyFalse: false,
      });
    }
  });
});
