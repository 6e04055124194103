import type http from 'node:http';
import type net from 'node:net';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Clock } from '../clock/clock.js';
import type { Subscription } from '../rx/index.js';

/**
 * Bounds on the connections of one of our HTTP(S) servers. Node's own `maxConnections` drops every
 * connection beyond the limit at once, so a few idle sockets shut out the kubelet's probes or a
 * scrape; and its header timeout is only checked every 30 s (about 60-90 s for an idle socket).
 */
export interface ConnectionLimits {
  /** Connections open at once. */
  maxConnections: number;
  /**
   * How long a connection may stay open without a request in flight: from accept until the
   * headers of its first request are in (a TLS handshake included), and between requests.
   */
  idleTimeoutMs: number;
}

export type ServerName = 'metrics' | 'probes';

/** Why we closed a connection: to make room, refused at the limit, or idle for too long. */
export type CloseReason = 'evicted' | 'refused' | 'idle_timeout';

export interface HttpConnectionMetrics {
  open: Gauge<'server'>;
  closed: Counter<'server' | 'reason'>;
}

export function createHttpConnectionMetrics(registry: Registry): HttpConnectionMetrics {
  return {
    open: new Gauge({
      name: 'nlc_http_open_connections',
      help: 'Connections open to the metrics and probe servers (server: metrics, probes).',
      labelNames: ['server'] as const,
      registers: [registry],
    }),
    closed: new Counter({
      name: 'nlc_http_connections_closed_total',
      help: 'Connections the metrics and probe servers closed themselves, by reason: evicted (the longest-idle connection, to make room for a new one at the limit), refused (a new connection at the limit while every open one had a request in flight), idle_timeout (no request within the idle timeout).',
      labelNames: ['server', 'reason'] as const,
      registers: [registry],
    }),
  };
}

interface Conn {
  /** The TCP socket (under TLS, the raw one: destroying it ends both). */
  socket: net.Socket;
  /** local and remote address and port: finds the connection of a TLS socket. */
  tuple: string;
  inFlight: number;
  idleTimer: Subscription | undefined;
}

function tupleOf(s: net.Socket): string | undefined {
  if (s.remoteAddress === undefined) return undefined;
  return `${s.localAddress}|${s.localPort}|${s.remoteAddress}|${s.remotePort}`;
}

/**
 * Applies `limits` to a server. At the limit, a new connection makes room by closing the connection
 * that has been idle (no request in flight) the longest; only when every open connection has a
 * request in flight is the new one closed instead. So idle sockets, however many are opened, never
 * keep a client that sends a request out, and no request in flight is cut.
 */
export class ConnectionLimiter {
  /** Open connections, in the order they last became idle (busy ones are skipped when evicting). */
  private readonly conns = new Map<net.Socket, Conn>();
  private readonly byTuple = new Map<string, Conn>();
  /** Raw and TLS sockets -> their connection. */
  private readonly bySocket = new WeakMap<net.Socket, Conn>();

  constructor(
    server: http.Server,
    private readonly name: ServerName,
    private readonly limits: ConnectionLimits,
    private readonly clock: Clock,
    private readonly metrics?: HttpConnectionMetrics,
  ) {
    // 'connection' is the TCP socket for HTTPS too (before the handshake), so that sockets that
    // never finish one count as well.
    server.on('connection', (socket: net.Socket) => this.accept(socket));
    // Before the handler, so that a response it ends at once is seen to end.
    server.prependListener('request', (req, res) => this.request(req, res));
  }

  /** Connections open now. */
  get size(): number {
    return this.conns.size;
  }

  /** Closes every connection (server shutdown: a socket that never sent a byte holds close()). */
  destroyAll(): void {
    for (const c of [...this.conns.values()]) {
      this.forget(c);
      c.socket.destroy();
    }
  }

  private accept(socket: net.Socket): void {
    const tuple = tupleOf(socket);
    if (tuple === undefined) {
      socket.destroy();
      return;
    }
    if (this.conns.size >= this.limits.maxConnections && !this.evictLongestIdle()) {
      this.metrics?.closed.inc({ server: this.name, reason: 'refused' });
      socket.destroy();
      return;
    }
    const c: Conn = { socket, tuple, inFlight: 0, idleTimer: undefined };
    this.conns.set(socket, c);
    this.byTuple.set(tuple, c);
    this.bySocket.set(socket, c);
    this.metrics?.open.set({ server: this.name }, this.conns.size);
    socket.once('close', () => this.forget(c));
    this.armIdle(c);
  }

  private evictLongestIdle(): boolean {
    for (const c of this.conns.values()) {
      if (c.inFlight === 0) {
        this.close(c, 'evicted');
        return true;
      }
    }
    return false;
  }

  private request(req: http.IncomingMessage, res: http.ServerResponse): void {
    const s = req.socket;
    let c = this.bySocket.get(s);
    if (!c) {
      const t = tupleOf(s);
      c = t === undefined ? undefined : this.byTuple.get(t);
      if (!c) return;
      this.bySocket.set(s, c);
    }
    const conn = c;
    conn.inFlight++;
    conn.idleTimer?.unsubscribe();
    conn.idleTimer = undefined;
    res.once('close', () => {
      conn.inFlight--;
      if (conn.inFlight > 0 || this.conns.get(conn.socket) !== conn) return;
      // Idle from now: last in eviction order.
      this.conns.delete(conn.socket);
      this.conns.set(conn.socket, conn);
      this.armIdle(conn);
    });
  }

  private armIdle(c: Conn): void {
    c.idleTimer?.unsubscribe();
    c.idleTimer = this.clock.scheduler.schedule(() => {
      c.idleTimer = undefined;
      if (c.inFlight === 0 && this.conns.get(c.socket) === c) this.close(c, 'idle_timeout');
    }, this.limits.idleTimeoutMs);
  }

  private close(c: Conn, reason: CloseReason): void {
    this.forget(c);
    this.metrics?.closed.inc({ server: this.name, reason });
    c.socket.destroy();
  }

  private forget(c: Conn): void {
    c.idleTimer?.unsubscribe();
    c.idleTimer = undefined;
    if (this.conns.get(c.socket) !== c) return;
    this.conns.delete(c.socket);
    if (this.byTuple.get(c.tuple) === c) this.byTuple.delete(c.tuple);
    this.metrics?.open.set({ server: this.name }, this.conns.size);
  }
}
