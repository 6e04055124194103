import { Registry } from 'prom-client';
import { asyncScheduler } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Clock } from '../clock/clock.js';
import { resolveLeaderElectionConfig } from '../election/config.js';
import { LeaderElector } from '../election/elector.js';
import { createLeaderElectionMetrics } from '../election/metrics.js';
import { FakeLeaseServer } from '../election/testing/fake-lease-api.js';
import type { KubeClient, KubeRequest } from '../kube/client.js';
import type { Node } from '../kube/types.js';
import { memoryLogger, silentLogger } from '../log/logger.js';
import { createRegistry } from '../metrics/registry.js';
import { ApiWriter, createWriterMetrics, MIN_WRITE_BUDGET_MS } from './writer.js';

/**
 * The writer fenced by a real elector (as src/cli/run.ts wires them), in virtual time: the leader
 * is cut off from the API server, so its fence closes renewDeadline after its last renewal, and a
 * standby takes over leaseDuration after it last saw that renewal. Every write the old leader
 * sends must be over, on its side and the API server's, before then.
 */

const NS = 'nlc-system';
const LOCK = 'node-lifecycle-controller';

interface Sent {
  at: number;
  /** Our side's timeout. */
  timeoutMs: number | undefined;
  /** The API server's (?timeout=). */
  serverTimeout: unknown;
}

let server: FakeLeaseServer;
const electors: LeaderElector[] = [];

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-03-01T12:00:00.000Z') });
  server = new FakeLeaseServer();
});
afterEach(() => {
  for (const e of electors.splice(0)) e.stop();
  vi.useRealTimers();
});

const clock: Clock = { scheduler: asyncScheduler, wall: () => Date.now() };
const advance = (ms: number) => vi.advanceTimersByTimeAsync(ms);

function elector(identity: string): LeaderElector {
  const e = new LeaderElector({
    config: resolveLeaderElectionConfig({ namespace: NS, identity }),
    client: server.as(identity),
    clock,
    logger: silentLogger,
    metrics: createLeaderElectionMetrics(new Registry()),
    lockUpdates$: server.watch(NS, LOCK, 1),
    random: () => 0.5,
  });
  electors.push(e);
  return e;
}

/** An API server edge that answers every write at once and records what it was sent. */
function recordingClient(sent: Sent[]): KubeClient {
  return {
    request: async <T>(req: KubeRequest): Promise<T> => {
      sent.push({ at: Date.now(), timeoutMs: req.timeoutMs, serverTimeout: req.query?.timeout });
      return { metadata: { name: 'n1', resourceVersion: String(sent.length + 1) } } as T;
    },
  } as unknown as KubeClient;
}

describe('ApiWriter fenced by the elector', () => {
  it('a leader cut off from the API server: every write it sends ends by its fence deadline, before a standby may lead; none is sent with less than 100 ms left', async () => {
    const a = elector('a_1');
    a.start();
    await advance(15_000 + 20); // a fresh lock: created one lease duration after the first look
    const b = elector('b_2');
    b.start();
    await advance(3_000);
    expect(a.isLeader()).toBe(true);

    const sent: Sent[] = [];
    const writer = new ApiWriter({
      client: recordingClient(sent),
      fence: () => (a.canWrite() ? undefined : 'not the leader'),
      fenceDeadline: () => a.fenceDeadline(),
      dryRun: false,
      logger: memoryLogger(),
      metrics: createWriterMetrics(createRegistry({ defaultMetrics: false })),
      clock,
      qps: 1000,
      burst: 1000,
      component: 'node-controller',
      instance: 'test',
    });
    const node: Node = { metadata: { name: 'n1', resourceVersion: '1' }, spec: {} };
    const write = () => writer.patchNodeStatus('n1', node, () => ({ status: {} }));

    // The network to the API server goes: renewals hang, the fence deadline stays where it is.
    server.fault = (_req, who) => (who === 'a_1' ? 'hang' : undefined);
    const deadline = a.fenceDeadline()!;
    const outcomes: [number, string][] = [];
    // Writes far from the deadline, just above and below 100 ms left, and after it.
    for (const left of [8_000, 3_000, MIN_WRITE_BUDGET_MS + 20, MIN_WRITE_BUDGET_MS - 20, 10, -500]) {
      await advance(deadline - left - Date.now());
      outcomes.push([left, (await write()).kind]);
    }
    expect(outcomes).toEqual([
      [8_000, 'applied'],
      [3_000, 'applied'],
      [MIN_WRITE_BUDGET_MS + 20, 'applied'],
      [MIN_WRITE_BUDGET_MS - 20, 'fenced'],
      [10, 'fenced'],
      [-500, 'fenced'],
    ]);
    // Each write's timeout, ours and the API server's, ends exactly at the fence deadline.
    expect(sent.map((s) => [s.timeoutMs, s.serverTimeout])).toEqual([
      [8_000, '8s'],
      [3_000, '3s'],
      [MIN_WRITE_BUDGET_MS + 20, '120ms'],
    ]);
    for (const s of sent) expect(s.at + s.timeoutMs!).toBeLessThanOrEqual(deadline);

    // The standby takes over leaseDuration after it last saw a renewal: after every write ended.
    await advance(15_000);
    expect(b.isLeader()).toBe(true);
    expect(a.isLeader()).toBe(false);
    const lastEnd = Math.max(...sent.map((s) => s.at + s.timeoutMs!));
    expect(b.snapshot().renewedAt!).toBeGreaterThan(lastEnd);
  });
});
