import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { memoryLogger } from '../log/logger.js';
import { createBinder, joinHostPort } from './listen.js';
import { connects } from './testing.js';

const open: net.Server[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((s) => new Promise((r) => s.close(r))));
});

function server(): net.Server {
  const s = net.createServer((c) => c.end());
  open.push(s);
  return s;
}

/**
 * A server on a host without IPv6: binding `::` fails with `code` (as listen() reports it, as an
 * 'error' event); any other host binds for real.
 */
function withoutIPv6(code: string): net.Server {
  const s = server();
  const real = s.listen.bind(s) as (...a: unknown[]) => net.Server;
  (s as { listen: unknown }).listen = (opts: net.ListenOptions, cb?: () => void) => {
    if (opts.host === '::') {
      process.nextTick(() => s.emit('error', Object.assign(new Error(`listen ${code} :::0`), { code })));
      return s;
    }
    return real(opts, cb);
  };
  return s;
}

describe('createBinder: listening as Go does', () => {
  it('no host or 0.0.0.0: one dual-stack socket on ::; :: too; a named address only its own family', async () => {
    const bind = createBinder(memoryLogger());
    for (const host of ['', '0.0.0.0', '::']) {
      const a = await bind(server(), { host, port: 0 });
      expect(a.host, host).toBe('::');
      expect(await connects('::1', a.port), host).toBe(true);
      expect(await connects('127.0.0.1', a.port), host).toBe(true);
    }
    const v4 = await bind(server(), { host: '127.0.0.1', port: 0 });
    expect([await connects('127.0.0.1', v4.port), await connects('::1', v4.port)]).toEqual([true, false]);
    const v6 = await bind(server(), { host: '::1', port: 0 });
    expect([await connects('127.0.0.1', v6.port), await connects('::1', v6.port)]).toEqual([false, true]);
  });

  it('a host without IPv6: no host or 0.0.0.0 fall back to 0.0.0.0, logged once; :: fails', async () => {
    for (const code of ['EAFNOSUPPORT', 'EADDRNOTAVAIL']) {
      const logger = memoryLogger();
      const bind = createBinder(logger);
      const a = await bind(withoutIPv6(code), { host: '', port: 0 });
      expect(a.host).toBe('0.0.0.0');
      expect(await connects('127.0.0.1', a.port)).toBe(true);
      const b = await bind(withoutIPv6(code), { host: '0.0.0.0', port: 0 });
      expect(b.host).toBe('0.0.0.0');
      const warnings = logger.lines.filter((l) => l.msg === 'IPv6 is not available: listening on IPv4 only');
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatchObject({ level: 'warn', address: ':0', err: code });
      await expect(bind(withoutIPv6(code), { host: '::', port: 0 })).rejects.toMatchObject({ code });
    }
  });

  it('a port in use is an error, not a reason to bind IPv4 only', async () => {
    const taken = await createBinder(memoryLogger())(server(), { host: '', port: 0 });
    const logger = memoryLogger();
    await expect(createBinder(logger)(server(), { host: '', port: taken.port })).rejects.toMatchObject({
      code: 'EADDRINUSE',
    });
    expect(logger.lines).toEqual([]);
  });

  it('joinHostPort brackets IPv6 hosts', () => {
    expect(joinHostPort('::', 8080)).toBe('[::]:8080');
    expect(joinHostPort('0.0.0.0', 8080)).toBe('0.0.0.0:8080');
    expect(joinHostPort('', 8080)).toBe(':8080');
  });
});
