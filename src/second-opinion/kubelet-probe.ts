import net from 'node:net';
import tls from 'node:tls';
import { timerDelay } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import type { Node } from '../kube/types.js';
import type { ProbeOutcome } from './verdict.js';

/**
 * The kubelet second opinion's only I/O: does something on the node network still complete a TLS
 * handshake at the kubelet endpoint the Node reports? A TCP connection, then a TLS handshake with
 * nothing verified; the socket is destroyed as soon as the handshake completes. No credentials,
 * no HTTP request, no SNI (the host is an IP literal), no redirect or name to follow: the probe
 * tells a node whose kubelet still runs but cannot reach the API server from one that is gone,
 * and learns nothing else. How many probes run at once, and how often, is the caller's business.
 */

/** Where a kubelet listens. `host` is an IP literal (v4 or v6), never a name to look up. */
export interface KubeletTarget {
  host: string;
  port: number;
}

export interface ProbeResult {
  outcome: ProbeOutcome;
  /** Short and human, for logs and Events: "connection refused", "no TLS answer within 2s". */
  detail: string;
}

/** The kubelet's --port default, which the API server also assumes when a Node reports none. */
export const DEFAULT_KUBELET_PORT = 10250;

/** Errors of a TCP connect that mean the address cannot be reached from here. */
const UNREACHABLE_CODES: ReadonlyMap<string, string> = new Map([
  ['EHOSTUNREACH', 'host unreachable'],
  ['ENETUNREACH', 'network unreachable'],
  ['EHOSTDOWN', 'host down'],
  ['EADDRNOTAVAIL', 'address not available'],
]);

function field(v: unknown, key: string): unknown {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
    ? (v as Record<string, unknown>)[key]
    : undefined;
}

const isPort = (v: unknown): v is number =>
  Number.isInteger(v) && (v as number) >= 1 && (v as number) <= 65535;

/**
 * The kubelet endpoint a Node reports: its first InternalIP that is an IP literal, and
 * `status.daemonEndpoints.kubeletEndpoint.Port`. The Node is data from the API server (or from
 * whoever can write Node status), so every field is checked, nothing throws, and a hostname is
 * never taken: resolving it would ask DNS, and the probe must go where the Node says, nowhere else.
 *
 * The port: 10250 when none is reported. Port 0 counts as none, because the API type has no
 * omitempty on it (a Node that reports no endpoint carries `{"Port":0}`) and kube-apiserver,
 * which connects to kubelets itself, falls back to its default port for 0 as well. Any other
 * value outside 1..65535, or not an integer, is a malformed report: undefined, no probe.
 */
export function kubeletTargetOf(node: Node): KubeletTarget | undefined {
  const status: unknown = field(node, 'status');
  const addresses = field(status, 'addresses');
  if (!Array.isArray(addresses)) return undefined;
  let host: string | undefined;
  for (const a of addresses as unknown[]) {
    const address = field(a, 'address');
    if (field(a, 'type') === 'InternalIP' && typeof address === 'string' && net.isIP(address) !== 0) {
      host = address;
      break;
    }
  }
  if (host === undefined) return undefined;
  const port = field(field(field(status, 'daemonEndpoints'), 'kubeletEndpoint'), 'Port');
  if (port === undefined || port === null || port === 0) return { host, port: DEFAULT_KUBELET_PORT };
  return isPort(port) ? { host, port } : undefined;
}

const codeOf = (err: unknown): string | undefined => {
  const code = field(err, 'code');
  return typeof code === 'string' ? code : undefined;
};

/** The result for an error before the TCP connection was established. */
function connectFailed(err: unknown): ProbeResult {
  const code = codeOf(err);
  if (code === 'ECONNREFUSED') return { outcome: 'refused', detail: 'connection refused' };
  const known = code === undefined ? undefined : UNREACHABLE_CODES.get(code);
  if (known) return { outcome: 'unreachable', detail: `${known} (${code})` };
  return { outcome: 'unreachable', detail: `connect failed (${code ?? 'no error code'})` };
}

/**
 * The result for a connection that was established but did not complete a TLS handshake: reset,
 * closed, answered with a TLS alert or with something that is not TLS. Something listens there,
 * but not a kubelet that answers: refused.
 */
function handshakeFailed(err: unknown): ProbeResult {
  const code = codeOf(err) ?? 'connection closed';
  return { outcome: 'refused', detail: `TLS handshake failed (${code})` };
}

/**
 * One probe of `target`: a TCP connection, then a TLS handshake, both within `timeoutMs`
 * altogether. Never rejects; whatever happens, the socket and the timer are gone when the promise
 * settles. An abort through `signal` settles it at once as 'timeout' with detail 'aborted'.
 */
export function probeKubelet(
  target: KubeletTarget,
  options: { timeoutMs: number; signal?: AbortSignal },
): Promise<ProbeResult> {
  // Checked here too, not only in kubeletTargetOf: net.connect would look a name up in DNS, and
  // throws on a bad port instead of reporting it.
  if (net.isIP(target.host) === 0) {
    return Promise.resolve({ outcome: 'unreachable', detail: 'the kubelet address is not an IP address' });
  }
  if (!isPort(target.port)) {
    return Promise.resolve({ outcome: 'unreachable', detail: `invalid kubelet port ${String(target.port)}` });
  }
  const { signal } = options;
  if (signal?.aborted) return Promise.resolve({ outcome: 'timeout', detail: 'aborted' });

  return new Promise<ProbeResult>((resolve) => {
    let connected = false;
    let settled = false;
    let secure: tls.TLSSocket | undefined;
    const socket = net.connect({ host: target.host, port: target.port });

    const settle = (result: ProbeResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      secure?.destroy();
      socket.destroy();
      resolve(result);
    };
    const onAbort = () => settle({ outcome: 'timeout', detail: 'aborted' });
    const timer = setTimeout(() => {
      const phase = connected ? 'no TLS answer' : 'no TCP connection';
      settle({ outcome: 'timeout', detail: `${phase} within ${formatDuration(options.timeoutMs)}` });
    }, timerDelay(options.timeoutMs));
    signal?.addEventListener('abort', onAbort, { once: true });

    // Once TLS has taken the socket over, its errors may surface on either object.
    socket.on('error', (err) => settle(connected ? handshakeFailed(err) : connectFailed(err)));
    socket.once('connect', () => {
      connected = true;
      // Nothing is verified: the question is only whether a TLS endpoint answers, and it is sent
      // nothing but the handshake. No servername: SNI carries host names, not IP literals.
      secure = tls.connect({ socket, rejectUnauthorized: false });
      secure.on('error', (err) => settle(handshakeFailed(err)));
      secure.once('close', () => settle(handshakeFailed(undefined)));
      secure.once('secureConnect', () => settle({ outcome: 'answers', detail: 'TLS handshake completed' }));
    });
  });
}
