import { describe, expect, it } from 'vitest';
import { createLogger, memoryLogger } from './logger.js';

describe('logger', () => {
  it('writes one JSON object a line with constant message and key/values', () => {
    const lines: string[] = [];
    const log = createLogger({ write: (l) => lines.push(l), now: () => 0 }).with({ component: 'watch' });
    log.info('Watch connected', { resource: 'leases', err: new Error('boom') });
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toEqual({
      ts: '1970-01-01T00:00:00.000Z',
      level: 'info',
      msg: 'Watch connected',
      component: 'watch',
      resource: 'leases',
      err: 'boom',
    });
  });

  it('honours verbosity like klog V(n)', () => {
    const log = memoryLogger(2);
    log.debug(2, 'shown');
    log.debug(3, 'hidden');
    expect(log.lines.map((l) => l.msg)).toEqual(['shown']);
    expect(log.enabled(3)).toBe(false);
  });

  it('has a text format for humans', () => {
    const lines: string[] = [];
    createLogger({ format: 'text', write: (l) => lines.push(l), now: () => 0 }).warn('Node marked', {
      node: 'n 1',
      count: 2,
    });
    expect(lines[0]).toBe('1970-01-01T00:00:00.000Z WARN  Node marked node="n 1" count=2');
  });
});
