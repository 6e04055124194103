import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/**
 * Local ports of this process's own TCP sockets, any state (Linux: /proc/self/fd and
 * /proc/net/tcp, /proc/net/tcp6).
 */
export function tcpPortsOfThisProcess(): Set<number> {
  const inodes = new Set<string>();
  for (const fd of readdirSync('/proc/self/fd')) {
    let target: string;
    try {
      target = readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      continue; // closed meanwhile
    }
    const m = /^socket:\[(\d+)\]$/.exec(target);
    if (m) inodes.add(m[1]!);
  }
  const ports = new Set<number>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const row of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const cols = row.trim().split(/\s+/);
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      if (cols.length < 10 || !inodes.has(cols[9]!)) continue;
      ports.add(Number.parseInt(cols[1]!.split(':')[1]!, 16));
    }
  }
  return ports;
}
