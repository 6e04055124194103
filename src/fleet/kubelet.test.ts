import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type KubeClient, type KubeRequest, KubeTransportError } from '../kube/client.js';
import { DEFAULT_TIMING } from './fleet.js';
import { type KubeletTiming, SimulatedKubelet } from './kubelet.js';

beforeEach(() => {
  vi.useFakeTimers({ now: Date.parse('2026-05-01T08:00:00.000Z') });
});
afterEach(() => {
  vi.useRealTimers();
});

/**
 * A client standing in for the API server: answers at once, except lease PUTs while `hang` is
 * set, which get no answer until the request's own timeout (a connection to a server that cannot
 * reach etcd).
 */
function fakeServer() {
  const sent: Array<{ at: number; req: KubeRequest }> = [];
  let rv = 1;
  const state = { hang: false };
  const client = {
    request: async (req: KubeRequest) => {
      sent.push({ at: Date.now(), req });
      if (state.hang && req.method === 'PUT') {
        await new Promise((_, reject) =>
          setTimeout(
            () => reject(new KubeTransportError('timed out', 'TIMEOUT')),
            req.timeoutMs ?? 3_600_000,
          ),
        );
      }
      const body = (req.body ?? {}) as { metadata?: object };
      if (req.method === 'GET' && req.path.includes('/leases/'))
        return { metadata: { name: 'n1', resourceVersion: String(rv) }, spec: {} };
      return { ...body, metadata: { ...body.metadata, uid: 'u1', resourceVersion: String(++rv) } };
    },
  } as unknown as KubeClient;
  return { client, sent, state };
}

/** Node n1, renewing its lease and syncing its status every second. */
function kubelet(client: KubeClient, timing: Partial<KubeletTiming>): SimulatedKubelet {
  return new SimulatedKubelet(
    client,
    { name: 'n1', zone: 'z', region: 'r' },
    { ...DEFAULT_TIMING, renewIntervalMs: 1_000, statusUpdateIntervalMs: 1_000, ...timing },
  );
}

describe('SimulatedKubelet', () => {
  it('heartbeat requests (lease and status) carry the configured heartbeat timeout', async () => {
    for (const timeout of [1_000, 10_000]) {
      const { client, sent } = fakeServer();
      const k = kubelet(client, { heartbeatTimeoutMs: timeout });
      await k.start();
      await vi.advanceTimersByTimeAsync(5_000);
      k.kill();
      const heartbeats = sent.filter((s) => s.req.path.includes('/leases') || s.req.path.endsWith('/status'));
      expect(heartbeats.length).toBeGreaterThan(4);
      expect(new Set(heartbeats.map((s) => s.req.timeoutMs))).toEqual(new Set([timeout]));
    }
  });

  it('a renewal hung on the server is given up after the heartbeat timeout and retried', async () => {
    const { client, sent, state } = fakeServer();
    const k = kubelet(client, { jitter: 0, heartbeatTimeoutMs: 1_000 });
    await k.start();
    await vi.advanceTimersByTimeAsync(2_000);
    state.hang = true;
    await vi.advanceTimersByTimeAsync(1_000);
    const hungAt = Date.now();
    state.hang = false;
    await vi.advanceTimersByTimeAsync(3_000);
    k.kill();
    const renewedAfter = sent.filter((s) => s.req.method === 'PUT' && s.at > hungAt);
    expect(renewedAfter.length).toBeGreaterThan(0);
    expect(renewedAfter[0]!.at - hungAt).toBeLessThanOrEqual(1_500);
    expect(k.stats.renewErrors).toBe(1);
  });
});
