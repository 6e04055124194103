import type { ClientRequestArgs } from 'node:http';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type stream from 'node:stream';
import { formatDuration } from '../clock/duration.js';

/**
 * How long a new connection may take to set up, apart from the deadline of the request riding on
 * it, as client-go's transport bounds it (k8s.io/client-go/transport: a net.Dialer with a 30 s
 * timeout, name lookup included, and http.Transport's TLSHandshakeTimeout of 10 s). A connection
 * that hangs while the network is not ready (a node restarting before pod networking works) then
 * fails within seconds and the request is retried, instead of holding a list page for its whole
 * timeout.
 */
export const DIAL_TIMEOUT_MS = 30_000;
export const TLS_HANDSHAKE_TIMEOUT_MS = 10_000;

/** `host:port` as it is written in messages and CONNECT lines (IPv6 in brackets). */
export function authorityOf(host: string, port: number | string): string {
  return `${net.isIPv6(host) ? `[${host}]` : host}:${port}`;
}

/**
 * Bounds a new socket's set-up: the TCP connection within DIAL_TIMEOUT_MS (when it is still
 * connecting), then, for a TLS socket, the handshake within TLS_HANDSHAKE_TIMEOUT_MS. A phase that
 * runs over destroys the socket with an ETIMEDOUT error naming the phase and `peer`.
 */
export function boundSetUp(socket: stream.Duplex, peer: string, tls: boolean): void {
  const s = socket as net.Socket;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const clear = () => {
    clearTimeout(timer);
    timer = undefined;
  };
  const arm = (ms: number, message: string) => {
    clear();
    timer = setTimeout(() => {
      timer = undefined;
      s.destroy(Object.assign(new Error(message), { code: 'ETIMEDOUT' }));
    }, ms);
  };
  const handshake = () =>
    arm(
      TLS_HANDSHAKE_TIMEOUT_MS,
      `TLS handshake with ${peer}: no answer within ${formatDuration(TLS_HANDSHAKE_TIMEOUT_MS)}`,
    );
  if (s.connecting) {
    arm(DIAL_TIMEOUT_MS, `connect to ${peer}: no TCP connection within ${formatDuration(DIAL_TIMEOUT_MS)}`);
    s.once('connect', () => (tls ? handshake() : clear()));
  } else if (tls) {
    handshake();
  }
  if (tls) s.once('secureConnect', clear);
  s.once('close', clear);
}

type ConnectionCallback = (err: Error | null, stream: stream.Duplex) => void;
type NewConnection = stream.Duplex | null | undefined;

/** Bounds the set-up of a connection an agent just created for `options`. */
function bounded(
  s: NewConnection,
  options: ClientRequestArgs,
  defaultPort: number,
  tls: boolean,
): NewConnection {
  const host = options.host ?? options.hostname ?? 'localhost';
  if (s) boundSetUp(s, authorityOf(host, options.port ?? defaultPort), tls);
  return s;
}

/** A plain-HTTP connection pool whose new connections get DIAL_TIMEOUT_MS to connect. */
export class BoundedHttpAgent extends http.Agent {
  override createConnection(options: ClientRequestArgs, cb?: ConnectionCallback): NewConnection {
    return bounded(super.createConnection(options, cb), options, 80, false);
  }
}

/** A TLS connection pool whose new connections get DIAL_TIMEOUT_MS, then TLS_HANDSHAKE_TIMEOUT_MS. */
export class BoundedHttpsAgent extends https.Agent {
  override createConnection(options: ClientRequestArgs, cb?: ConnectionCallback): NewConnection {
    return bounded(super.createConnection(options, cb), options, 443, true);
  }
}
