import { getEventListeners } from 'node:events';
import net from 'node:net';
import tls from 'node:tls';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { fullBacklogListener } from '../kube/testing/dead-listeners.js';
import { issue } from '../kube/testing/pki.js';
import type { Node } from '../kube/types.js';
import { claimPort } from '../localcluster/ports.js';
import { kubeletTargetOf, type ProbeResult, probeKubelet } from './kubelet-probe.js';

/** A Node whose status is `status`, whatever its shape (the probe reads it as unknown data). */
const nodeWith = (status: unknown): Node => ({ metadata: { name: 'n1' }, status }) as unknown as Node;

describe('kubeletTargetOf', () => {
  it('the first InternalIP that is an IP literal, and the reported port', () => {
    const node = nodeWith({
      addresses: [
        { type: 'Hostname', address: '10.0.0.1' },
        { type: 'ExternalIP', address: '203.0.113.7' },
        { type: 'InternalIP', address: 'node-1.internal' },
        { type: 'InternalIP', address: '10.0.0.2' },
        { type: 'InternalIP', address: '10.0.0.3' },
      ],
      daemonEndpoints: { kubeletEndpoint: { Port: 10255 } },
    });
    expect(kubeletTargetOf(node)).toEqual({ host: '10.0.0.2', port: 10255 });
    const v6 = nodeWith({ addresses: [{ type: 'InternalIP', address: 'fd00::2' }] });
    expect(kubeletTargetOf(v6)).toEqual({ host: 'fd00::2', port: 10250 });
  });

  it('no port reported (absent, null or the API default 0): 10250', () => {
    const addresses = [{ type: 'InternalIP', address: '10.0.0.2' }];
    for (const daemonEndpoints of [
      undefined,
      null,
      {},
      { kubeletEndpoint: null },
      { kubeletEndpoint: {} },
      { kubeletEndpoint: { Port: null } },
      { kubeletEndpoint: { Port: 0 } },
    ]) {
      expect(
        kubeletTargetOf(nodeWith({ addresses, daemonEndpoints })),
        JSON.stringify(daemonEndpoints),
      ).toEqual({
        host: '10.0.0.2',
        port: 10250,
      });
    }
  });

  it('a malformed port or no usable InternalIP: undefined', () => {
    const addresses = [{ type: 'InternalIP', address: '10.0.0.2' }];
    for (const Port of [-1, 1.5, 65536, Number.NaN, '10250', true, {}]) {
      const node = nodeWith({ addresses, daemonEndpoints: { kubeletEndpoint: { Port } } });
      expect(kubeletTargetOf(node), String(Port)).toBeUndefined();
    }
    for (const status of [
      undefined,
      null,
      'status',
      {},
      { addresses: null },
      { addresses: {} },
      { addresses: [] },
      { addresses: [null, 7, 'InternalIP', [], { type: 'InternalIP' }, { type: 'InternalIP', address: 7 }] },
      { addresses: [{ type: 'InternalIP', address: 'kubelet.example' }] },
      { addresses: [{ type: 'InternalIP', address: '10.0.0.256' }] },
      { addresses: [{ type: 'ExternalIP', address: '10.0.0.2' }] },
    ]) {
      expect(kubeletTargetOf(nodeWith(status)), JSON.stringify(status)).toBeUndefined();
    }
  });

  it('any status whatever: never throws; a target has an IP literal and a port in 1..65535', () => {
    const address = fc.oneof(fc.ipV4(), fc.ipV6(), fc.domain(), fc.anything());
    const entry = fc.oneof(
      fc.record({ type: fc.constantFrom('InternalIP', 'Hostname'), address }),
      fc.anything(),
    );
    const status = fc.oneof(
      fc.record(
        {
          addresses: fc.oneof(fc.array(entry), fc.anything()),
          daemonEndpoints: fc.oneof(
            fc.record({ kubeletEndpoint: fc.record({ Port: fc.oneof(fc.integer(), fc.anything()) }) }),
            fc.anything(),
          ),
        },
        { requiredKeys: [] },
      ),
      fc.anything(),
    );
    fc.assert(
      fc.property(status, (s) => {
        const target = kubeletTargetOf(nodeWith(s));
        if (target === undefined) return;
        expect(net.isIP(target.host)).not.toBe(0);
        expect(Number.isInteger(target.port) && target.port >= 1 && target.port <= 65535).toBe(true);
      }),
    );
  });
});

/** A loopback server that counts the connections it accepted and knows which are still open. */
interface Listener {
  host: string;
  port: number;
  readonly accepted: number;
  readonly open: number;
  /** SNI names the TLS server was sent (TLS servers only). */
  readonly sni: string[];
}

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  await Promise.all(closers.splice(0).map((close) => close()));
});

async function listen(server: net.Server, sni: string[] = [], host = '127.0.0.1'): Promise<Listener> {
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  // For a tls.Server too: 'connection' is the TCP socket, before any TLS.
  server.on('connection', (c: net.Socket) => {
    accepted++;
    sockets.add(c);
    c.on('error', () => undefined);
    c.on('close', () => sockets.delete(c));
  });
  closers.push(async () => {
    for (const c of sockets) c.destroy();
    await new Promise((r) => server.close(r));
  });
  await new Promise<void>((r) => server.listen(0, host, r));
  return {
    host,
    port: (server.address() as net.AddressInfo).port,
    get accepted() {
      return accepted;
    },
    get open() {
      return sockets.size;
    },
    sni,
  };
}

/** A TLS server with a self-signed certificate (verified by nobody), recording the SNI it is sent. */
function kubeletLike(host = '127.0.0.1'): Promise<Listener> {
  const { cert, key } = issue({ cn: 'kubelet', usage: ['server'], sans: [host] });
  const sni: string[] = [];
  const server = tls.createServer({
    cert,
    key,
    SNICallback: (name, cb) => {
      sni.push(name);
      cb(null, undefined);
    },
  });
  // The probe hangs up right after its side of the handshake: the server sees a reset.
  server.on('tlsClientError', () => undefined);
  return listen(server, sni, host);
}

// The plain servers read (and drop) what they are sent: a socket whose bytes are never read does
// not see the client's end either, and would stay open.

/** Accepts TCP connections and never sends a byte. */
const silent = () => listen(net.createServer((c) => c.resume()));
/** Accepts TCP connections and destroys them at once. */
const resetting = () => listen(net.createServer((c) => c.destroy()));
/** Answers in plain HTTP: something listens, but not a TLS endpoint. */
const plainHttp = () =>
  listen(net.createServer((c) => c.resume().end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n')));

/**
 * Runs `fn` and fails when a timer set (with the global setTimeout) while it ran is still pending
 * when it settles: neither fired nor cleared.
 */
async function leavesNoTimer<T>(fn: () => Promise<T>): Promise<T> {
  const pending = new Set<unknown>();
  const realSet = globalThis.setTimeout;
  const realClear = globalThis.clearTimeout;
  const set = vi.spyOn(globalThis, 'setTimeout').mockImplementation(((
    cb: (...args: unknown[]) => void,
    ms?: number,
    ...args: unknown[]
  ) => {
    const t = realSet(() => {
      pending.delete(t);
      cb(...args);
    }, ms);
    pending.add(t);
    return t;
  }) as unknown as typeof setTimeout);
  const clear = vi.spyOn(globalThis, 'clearTimeout').mockImplementation((t) => {
    pending.delete(t);
    realClear(t);
  });
  try {
    const result = await fn();
    expect(set, 'the probe sets its deadline with setTimeout').toHaveBeenCalled();
    expect(pending.size, 'timers left pending').toBe(0);
    return result;
  } finally {
    set.mockRestore();
    clear.mockRestore();
  }
}

/**
 * Probes `target` and checks that nothing is left behind: the probe's timer is gone when it
 * settles, and the server (when there is one) sees every connection closed.
 */
async function probe(
  target: { host: string; port: number },
  timeoutMs: number,
  server?: Listener,
  signal?: AbortSignal,
): Promise<ProbeResult> {
  const result = await leavesNoTimer(() =>
    probeKubelet(target, { timeoutMs, ...(signal ? { signal } : {}) }),
  );
  if (server) await vi.waitFor(() => expect(server.open).toBe(0), { timeout: 1_000, interval: 10 });
  return result;
}

describe('probeKubelet', () => {
  it('a TLS endpoint with a certificate nobody trusts answers; no SNI is sent for an IP literal', async () => {
    for (const host of ['127.0.0.1', '::1']) {
      const server = await kubeletLike(host);
      // A long deadline: the timer must be cleared when the handshake completes, not left to run;
      // and the caller's signal, which lives on, must not keep the probe's listener.
      const signal = new AbortController().signal;
      const result = await probe({ host, port: server.port }, 10_000, server, signal);
      expect(result, host).toEqual({ outcome: 'answers', detail: 'TLS handshake completed' });
      expect(getEventListeners(signal, 'abort')).toEqual([]);
      expect(server.accepted).toBe(1);
      expect(server.sni).toEqual([]);
    }
  });

  it('a closed port is refused', async () => {
    const claim = await claimPort(); // held, so no one else listens on it meanwhile
    try {
      const result = await probe({ host: '127.0.0.1', port: claim.port }, 10_000);
      expect(result).toEqual({ outcome: 'refused', detail: 'connection refused' });
    } finally {
      claim.release();
    }
  });

  it('a server that accepts and says nothing: timeout at the deadline, the connection closed', async () => {
    const server = await silent();
    const started = performance.now();
    const result = await probe({ host: server.host, port: server.port }, 300, server);
    const took = performance.now() - started;
    expect(result).toEqual({ outcome: 'timeout', detail: 'no TLS answer within 300ms' });
    expect(took).toBeGreaterThanOrEqual(290);
    expect(took).toBeLessThan(2_000);
    expect(server.accepted).toBe(1);
  });

  it('a connect that never completes (full accept queue): timeout at the deadline', async () => {
    const backlog = await fullBacklogListener();
    try {
      const result = await probe({ host: '127.0.0.1', port: backlog.port }, 300);
      expect(result).toEqual({ outcome: 'timeout', detail: 'no TCP connection within 300ms' });
    } finally {
      await backlog.close();
    }
  });

  it('a server that accepts and hangs up at once, or answers but not in TLS: refused, handshake failed', async () => {
    for (const server of [await resetting(), await plainHttp()]) {
      const result = await probe({ host: server.host, port: server.port }, 10_000, server);
      expect(result.outcome).toBe('refused');
      expect(result.detail).toMatch(/^TLS handshake failed \(.+\)$/);
      expect(server.accepted).toBe(1);
    }
  });

  it('an abort settles it at once as timeout/aborted and closes the connection', async () => {
    const server = await silent();
    const abort = new AbortController();
    setTimeout(() => abort.abort(), 100);
    const started = performance.now();
    const result = await probe({ host: server.host, port: server.port }, 10_000, server, abort.signal);
    expect(result).toEqual({ outcome: 'timeout', detail: 'aborted' });
    expect(performance.now() - started).toBeLessThan(2_000);
    expect(server.accepted).toBe(1);

    const already = await probeKubelet(
      { host: server.host, port: server.port },
      { timeoutMs: 10_000, signal: abort.signal },
    );
    expect(already).toEqual({ outcome: 'timeout', detail: 'aborted' });
    expect(server.accepted).toBe(1); // no connection attempted
  });

  it('connect errors: no route is unreachable (code named), refused is refused, anything else unreachable', async () => {
    // No route cannot be made on loopback: net.connect hands back a socket that fails with the code.
    const failing = (code: string) => () => {
      const s = new net.Socket();
      process.nextTick(() => s.emit('error', Object.assign(new Error(code), { code })));
      return s;
    };
    const spy = vi.spyOn(net, 'connect');
    try {
      const results: Record<string, ProbeResult> = {};
      for (const code of [
        'EHOSTUNREACH',
        'ENETUNREACH',
        'EHOSTDOWN',
        'EADDRNOTAVAIL',
        'ECONNREFUSED',
        'EACCES',
      ]) {
        spy.mockImplementationOnce(failing(code));
        results[code] = await probe({ host: '192.0.2.1', port: 10250 }, 10_000);
      }
      expect(results).toEqual({
        EHOSTUNREACH: { outcome: 'unreachable', detail: 'host unreachable (EHOSTUNREACH)' },
        ENETUNREACH: { outcome: 'unreachable', detail: 'network unreachable (ENETUNREACH)' },
        EHOSTDOWN: { outcome: 'unreachable', detail: 'host down (EHOSTDOWN)' },
        EADDRNOTAVAIL: { outcome: 'unreachable', detail: 'address not available (EADDRNOTAVAIL)' },
        ECONNREFUSED: { outcome: 'refused', detail: 'connection refused' },
        EACCES: { outcome: 'unreachable', detail: 'connect failed (EACCES)' },
      });
      expect(spy).toHaveBeenCalledTimes(6);
    } finally {
      spy.mockRestore();
    }
  });

  it('a name or a bad port is not connected to: unreachable, never a rejection', async () => {
    const claim = await claimPort();
    try {
      // A name would be looked up (DNS) and then refused here: the probe must not try at all.
      expect(await probeKubelet({ host: 'localhost', port: claim.port }, { timeoutMs: 10_000 })).toEqual({
        outcome: 'unreachable',
        detail: 'the kubelet address is not an IP address',
      });
      for (const port of [0, -1, 65536, 1.5, Number.NaN]) {
        const result = await probeKubelet({ host: '127.0.0.1', port }, { timeoutMs: 10_000 });
        expect(result.outcome, String(port)).toBe('unreachable');
        expect(result.detail).toBe(`invalid kubelet port ${port}`);
      }
    } finally {
      claim.release();
    }
  });
});
