import net from 'node:net';
import tls from 'node:tls';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { type KubeClient, type KubeRequest, KubeTransportError } from '../kube/client.js';
import { probeKubelet } from '../second-opinion/kubelet-probe.js';
import { DEFAULT_TIMING, SimulatedFleet } from './fleet.js';
import { type KubeletTiming, SimulatedKubelet, simulatedKubeletCert } from './kubelet.js';

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

describe('SimulatedKubelet with an endpoint', () => {
  // Real sockets, real time: the kubelets here heartbeat on the default intervals (10 s), so
  // nothing but start() and the calls under test posts status within a test.
  beforeEach(() => {
    vi.useRealTimers();
  });
  const cert = simulatedKubeletCert();
  const running: SimulatedKubelet[] = [];
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const k of running.splice(0)) {
      k.kill();
      await k.endpoint?.close();
    }
    await Promise.all(closers.splice(0).map((close) => close()));
  });

  function served(client: KubeClient, name = 'n1'): SimulatedKubelet {
    const k = new SimulatedKubelet(client, { name, zone: 'z', region: 'r' }, DEFAULT_TIMING, {
      endpoint: cert,
    });
    running.push(k);
    return k;
  }

  /**
   * fakeServer, with Node GETs answered with the status last patched, as the API server does: a
   * status sync then posts only when something differs.
   */
  function statusKeepingServer() {
    const fake = fakeServer();
    const statuses = new Map<string, unknown>();
    const client = {
      request: async (req: KubeRequest) => {
        const answer = (await fake.client.request(req)) as Record<string, unknown>;
        if (req.method === 'PATCH' && req.path.endsWith('/status')) {
          statuses.set(req.path.slice(0, -'/status'.length), (req.body as { status: unknown }).status);
        }
        if (req.method === 'GET' && statuses.has(req.path))
          return { ...answer, status: statuses.get(req.path) };
        return answer;
      },
    } as unknown as KubeClient;
    return { ...fake, client };
  }

  const probe = (port: number) => probeKubelet({ host: '127.0.0.1', port }, { timeoutMs: 2_000 });

  /** InternalIP and kubelet port of the last status `node` posted. */
  function reported(sent: Array<{ req: KubeRequest }>, node = 'n1') {
    const posts = sent.filter(
      (s) => s.req.method === 'PATCH' && s.req.path === `/api/v1/nodes/${node}/status`,
    );
    const status = (posts.at(-1)?.req.body as { status: Record<string, unknown> } | undefined)?.status;
    const addresses = status?.addresses as Array<{ type: string; address: string }> | undefined;
    const endpoints = status?.daemonEndpoints as { kubeletEndpoint: { Port: number } } | undefined;
    return {
      posts: posts.length,
      internalIP: addresses?.find((a) => a.type === 'InternalIP')?.address,
      port: endpoints?.kubeletEndpoint.Port,
    };
  }

  /** The SHA-256 fingerprint of the certificate served on `port`. */
  function servedCert(port: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const s = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
        resolve(s.getPeerCertificate().fingerprint256);
        s.destroy();
      });
      s.once('error', reject);
    });
  }

  it('the Node reports 127.0.0.1 and the port, where a TLS handshake completes', async () => {
    const { client, sent } = fakeServer();
    const k = served(client);
    await k.start();
    expect(k.endpoint?.isOpen).toBe(true);
    expect(k.endpoint?.port).toBeGreaterThan(0);
    expect(reported(sent)).toEqual({ posts: 1, internalIP: '127.0.0.1', port: k.endpoint?.port });
    expect(await probe(k.endpoint!.port)).toEqual({ outcome: 'answers', detail: 'TLS handshake completed' });
  });

  it('endpoint.close(): refused while the heartbeats go on; open(): answers again on the same port', async () => {
    const { client } = fakeServer();
    const k = served(client);
    await k.start();
    const port = k.endpoint!.port;
    // A connection still open (handshake done, never hung up) does not hold the close up: dropped.
    const held = await new Promise<tls.TLSSocket>((resolve, reject) => {
      const s = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => resolve(s));
      s.once('error', reject);
    });
    held.on('error', () => undefined);
    const dropped = new Promise((r) => held.once('close', r));
    await k.endpoint!.close();
    await dropped;
    expect(k.isHeartbeating).toBe(true);
    expect(await probe(port)).toEqual({ outcome: 'refused', detail: 'connection refused' });
    await k.endpoint!.open();
    expect(k.endpoint!.port).toBe(port);
    expect((await probe(port)).outcome).toBe('answers');
  });

  it('heartbeats paused (cut from the API server): still answers; killed: refused; started again: answers', async () => {
    const { client } = fakeServer();
    const k = served(client);
    await k.start();
    const port = k.endpoint!.port;
    k.pauseHeartbeats();
    expect((await probe(port)).outcome).toBe('answers');
    k.kill();
    expect((await probe(port)).outcome).toBe('refused');
    expect(k.endpoint!.isOpen).toBe(false);
    await k.start();
    expect(k.endpoint!.port).toBe(port);
    expect((await probe(port)).outcome).toBe('answers');
  });

  it('its port taken while closed: it serves on another and posts that in the Node status', async () => {
    const { client, sent } = statusKeepingServer();
    const k = served(client);
    await k.start();
    const port = k.endpoint!.port;
    await k.endpoint!.close();
    const squatter = net.createServer((c) => c.destroy());
    await new Promise<void>((r) => squatter.listen(port, '127.0.0.1', r));
    closers.push(() => new Promise((r) => squatter.close(() => r())));

    await k.endpoint!.open();
    const moved = k.endpoint!.port;
    expect(moved).not.toBe(port);
    await vi.waitFor(() =>
      expect(reported(sent)).toEqual({ posts: 2, internalIP: '127.0.0.1', port: moved }),
    );
    expect((await probe(moved)).outcome).toBe('answers');
  });

  it('without the option: 10.x.y.10:10250 as before, and no endpoint', async () => {
    const { client, sent } = fakeServer();
    const k = new SimulatedKubelet(client, { name: 'n7', zone: 'z', region: 'r' }, DEFAULT_TIMING);
    running.push(k);
    await k.start();
    expect(k.endpoint).toBeUndefined();
    expect(reported(sent, 'n7')).toEqual({ posts: 1, internalIP: '10.1.7.10', port: 10250 });
  });

  it('SimulatedFleet with kubeletEndpoints: a port per node, one certificate; stop() closes them all', async () => {
    const { client, sent } = fakeServer();
    const fleet = await SimulatedFleet.start(client, { nodes: 3, kubeletEndpoints: true });
    running.push(...fleet.kubelets.values());
    const ports = fleet.names.map((n) => fleet.node(n).endpoint!.port);
    expect(new Set(ports).size).toBe(3);
    for (const [i, n] of fleet.names.entries()) {
      expect(reported(sent, n)).toEqual({ posts: 1, internalIP: '127.0.0.1', port: ports[i] });
      expect((await probe(ports[i]!)).outcome).toBe('answers');
    }
    expect(new Set(await Promise.all(ports.map(servedCert))).size).toBe(1);

    fleet.stop();
    await Promise.all(fleet.names.map((n) => fleet.node(n).endpoint!.close()));
    for (const port of ports) expect((await probe(port)).outcome).toBe('refused');
  });
});
