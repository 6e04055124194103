import type { ChildProcess } from 'node:child_process';
import net from 'node:net';

/**
 * A loopback port held for a child process that binds it later (etcd, kube-apiserver, Prometheus,
 * kube-controller-manager): the port stays ours from the claim until `release()`, also while the
 * child is down between a kill and a restart.
 *
 * Why not "find a free port, close the probe, pass the number on": between the close and the
 * child's bind the port is free again, and any other process's `bind(0)` or outgoing `connect()`
 * may be given it (several test files, control planes and fleets run at once on one machine).
 * kube-apiserver refuses `--secure-port=0`, and etcd's HTTP gateway dials the configured
 * `host:0` instead of the bound port, so binding port 0 in the child is not an option for them.
 *
 * How: the kernel picks the port (bind to port 0) for a TCP socket of ours that we connect to an
 * anchor listener of ours and keep open. While it exists, the kernel hands that port to no other
 * `bind(0)` and to no outgoing connection; a listener that asks for this port by number with
 * SO_REUSEADDR can still bind it, because our socket is connected, not listening. Go's `net.Listen`
 * (etcd, kube-apiserver, Prometheus) and Node's (libuv) set SO_REUSEADDR, so the child takes the
 * port over and serves it; nothing else is told the number.
 */
export interface PortClaim {
  readonly host: string;
  readonly port: number;
  /** `host:port`, with brackets for an IPv6 host (for URLs and `--*-address` flags). */
  readonly address: string;
  /** Until release(). */
  readonly held: boolean;
  /** Gives the port back to the kernel's pool (idempotent). */
  release(): void;
}

/** `host:port` with brackets around an IPv6 literal, as in a URL. */
export function hostPort(host: string, port: number): string {
  return net.isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`;
}

const anchors = new Map<string, Promise<net.Server>>();

/** One listener per host that our claim sockets connect to (never given to a child). */
function anchor(host: string): Promise<net.Server> {
  let a = anchors.get(host);
  if (!a) {
    a = new Promise<net.Server>((resolve, reject) => {
      const server = net.createServer((peer) => {
        // Ends when the claim's socket is released (allowHalfOpen is off); nothing is ever read.
        // Neither end of a claim keeps the process alive.
        peer.unref();
        peer.on('error', () => peer.destroy());
      });
      server.once('error', reject);
      server.listen(0, host, () => {
        server.unref();
        resolve(server);
      });
    });
    a.catch(() => anchors.delete(host));
    anchors.set(host, a);
  }
  return a;
}

/** Claims a free TCP port on `host` (a loopback address: 127.0.0.1 or ::1) until released. */
export async function claimPort(host = '127.0.0.1'): Promise<PortClaim> {
  const failed = (err: Error) => new Error(`claiming a port on ${host}: ${err.message}`, { cause: err });
  const server = await anchor(host).catch((err: Error) => {
    throw failed(err);
  });
  const to = (server.address() as net.AddressInfo).port;
  const socket = net.connect({ host, port: to, localAddress: host, localPort: 0 });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', (err) => reject(failed(err)));
  });
  socket.on('error', () => socket.destroy());
  socket.unref();
  const port = socket.localPort;
  if (port === undefined) throw new Error(`claiming a port on ${host}: the socket has no local port`);
  return {
    host,
    port,
    address: hostPort(host, port),
    get held() {
      return !socket.destroyed;
    },
    release: () => {
      socket.destroy();
    },
  };
}

/** For a child that is not restarted: the claim ends when the child exits (or fails to start). */
export function releaseWhenExits(claim: PortClaim, child: ChildProcess): void {
  if (child.exitCode !== null || child.signalCode !== null) claim.release();
  child.once('exit', () => claim.release());
  child.once('error', () => claim.release());
}
