import { spawn } from 'node:child_process';
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { claimPort, hostPort, type PortClaim, releaseWhenExits } from './ports.js';

async function listen(port: number, host: string): Promise<net.Server> {
  const server = net.createServer((s) => s.end('served'));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}

async function close(server: net.Server): Promise<void> {
  await new Promise<void>((r) => server.close(() => r()));
}

async function read(port: number, host: string): Promise<string> {
  const s = net.connect(port, host);
  let text = '';
  s.on('data', (b: Buffer) => {
    text += b.toString();
  });
  await new Promise<void>((resolve, reject) => {
    s.once('end', resolve);
    s.once('error', reject);
  });
  return text;
}

describe('claimPort', () => {
  it.each(['127.0.0.1', '::1'])(
    'a listener asking for the claimed port by number gets it (%s)',
    async (host) => {
      const claim = await claimPort(host);
      try {
        expect(claim.address).toBe(hostPort(host, claim.port));
        const child = await listen(claim.port, host);
        expect(await read(claim.port, host)).toBe('served');
        await close(child);
        // Down and up again (a restarted kube-apiserver): the claim still holds and yields the port.
        const again = await listen(claim.port, host);
        expect(await read(claim.port, host)).toBe('served');
        await close(again);
      } finally {
        claim.release();
      }
    },
  );

  it('the kernel gives a claimed port to no other bind(0), also while nobody listens on it', async () => {
    // 100 claims, then 2,000 servers on port 0 one after the other: without the claims held, about
    // 2000 * 100 / 14,000 = 14 of those would land on a claimed port (the race of issue 27).
    const claims: PortClaim[] = [];
    try {
      for (let i = 0; i < 100; i++) claims.push(await claimPort());
      const claimed = new Set(claims.map((c) => c.port));
      expect(claimed.size).toBe(100);
      const collisions: number[] = [];
      for (let i = 0; i < 2000; i++) {
        const s = await listen(0, '127.0.0.1');
        const port = (s.address() as net.AddressInfo).port;
        if (claimed.has(port)) collisions.push(port);
        await close(s);
      }
      expect(collisions).toEqual([]);
    } finally {
      for (const c of claims) c.release();
    }
  });

  it('releaseWhenExits: held while the child runs, released when it exits', async () => {
    const claim = await claimPort();
    const child = spawn(process.execPath, ['-e', 'process.stdin.resume()'], {
      stdio: ['pipe', 'ignore', 'ignore'],
    });
    releaseWhenExits(claim, child);
    await new Promise((r) => child.once('spawn', r));
    expect(claim.held).toBe(true);
    const exited = new Promise((r) => child.once('exit', r));
    child.stdin?.end();
    await exited;
    expect(claim.held).toBe(false);
  });

  it('a held claim does not keep the process alive (no ref-counted handle left)', async () => {
    const tcpHandles = () => process.getActiveResourcesInfo().filter((r) => r.startsWith('TCP')).length;
    const settle = () => new Promise((r) => setTimeout(r, 50));
    (await claimPort()).release(); // the anchor listener exists from here on
    await settle(); // claims released by earlier tests have closed both ends
    const before = tcpHandles();
    const claim = await claimPort();
    await settle(); // the anchor has accepted our socket

    expect(tcpHandles()).toBe(before);
    claim.release();
  });

  it('an address that is not on this machine fails with a clear error', async () => {
    // 192.0.2.0/24 is TEST-NET-1: never assigned to a local interface.
    await expect(claimPort('192.0.2.1')).rejects.toThrow(
      /^claiming a port on 192\.0\.2\.1: listen EADDRNOTAVAIL/,
    );
  });

  it('hostPort brackets IPv6 literals only', () => {
    expect(hostPort('::1', 6443)).toBe('[::1]:6443');
    expect(hostPort('127.0.0.1', 6443)).toBe('127.0.0.1:6443');
    expect(hostPort('localhost', 80)).toBe('localhost:80');
  });
});
