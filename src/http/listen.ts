import type net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Logger } from '../log/logger.js';

export interface ServerAddress {
  host: string;
  port: number;
}

/**
 * Error codes of binding `::` on a host without IPv6: no IPv6 sockets at all (EAFNOSUPPORT), or
 * IPv6 disabled so that no IPv6 address can be bound (EADDRNOTAVAIL). Anything else (EADDRINUSE,
 * EACCES) is a real failure and is not hidden by binding IPv4 instead.
 */
const NO_IPV6 = new Set(['EAFNOSUPPORT', 'EADDRNOTAVAIL']);

/** host:port with an IPv6 host in brackets, as Go's net.JoinHostPort writes it. */
export function joinHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

function listenOnce(server: net.Server, host: string, port: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen({ port, host, ipv6Only: false }, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/**
 * Binds servers as Go's `net.Listen("tcp", addr)` does, which is how kube-controller-manager and
 * controller-runtime bind their ports:
 * - no host (":8080") or 0.0.0.0: one dual-stack socket on `::`, reached over IPv4 and IPv6 alike;
 *   on a host without IPv6 (EAFNOSUPPORT, EADDRNOTAVAIL) `0.0.0.0` instead, logged once per binder;
 * - `::`: dual-stack too, but no fallback (it names IPv6);
 * - any other host: that address only (127.0.0.1 is IPv4 only, ::1 IPv6 only).
 */
export function createBinder(
  logger: Logger,
): (server: net.Server, addr: ServerAddress) => Promise<ServerAddress> {
  let toldIPv4Only = false;
  return async (server, addr) => {
    const wildcard = addr.host === '' || addr.host === '0.0.0.0';
    try {
      await listenOnce(server, wildcard ? '::' : addr.host, addr.port);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code ?? '';
      if (!wildcard || !NO_IPV6.has(code)) throw err;
      if (!toldIPv4Only) {
        toldIPv4Only = true;
        logger.warn('IPv6 is not available: listening on IPv4 only', {
          address: joinHostPort(addr.host, addr.port),
          err: code,
        });
      }
      await listenOnce(server, '0.0.0.0', addr.port);
    }
    const a = server.address() as AddressInfo;
    return { host: a.address, port: a.port };
  };
}
