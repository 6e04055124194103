import { asyncScheduler } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ReleaseResult } from '../election/elector.js';
import { memoryLogger } from '../log/logger.js';
import { Manager, type Runnable, START_ORDER, type StartGroup, startOrder } from './manager.js';

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

const never = () => new Promise<never>(() => {});
const resolveAfter = <T>(ms: number, v: T) => new Promise<T>((r) => setTimeout(() => r(v), ms));

function setup(o: { graceMs?: number; duringStartUp?: string } = {}) {
  const log = memoryLogger();
  const exits: number[] = [];
  const calls: string[] = [];
  const manager = new Manager({
    scheduler: asyncScheduler,
    logger: log,
    shutdownGracePeriodMs: o.graceMs ?? 10_000,
    exit: (c) => exits.push(c),
    duringStartUp: o.duringStartUp,
  });
  /** A runnable that records its start and each stop step as `name:step`. */
  const rec = (name: string, group: StartGroup, extra: Partial<Runnable> = {}): Runnable => ({
    name,
    group,
    start: () => {
      calls.push(`${name}:start`);
    },
    stop: {
      halt: () => calls.push(`${name}:halt`),
      drain: async () => {
        calls.push(`${name}:drain`);
      },
      tail: async () => {
        calls.push(`${name}:tail`);
      },
      close: () => {
        calls.push(`${name}:close`);
      },
    },
    ...extra,
  });
  return { manager, log, exits, calls, rec, msgs: () => log.lines.map((l) => l.msg) };
}

async function settle(p: Promise<unknown>, maxMs = 60_000) {
  let done = false;
  void p.finally(() => {
    done = true;
  });
  for (let t = 0; t < maxMs && !done; t += 10) await vi.advanceTimersByTimeAsync(10);
  await p;
}

describe('Manager: start order', () => {
  it('starts group by group (process, subscribers, serving, watches, election), in the order added within a group', async () => {
    const { manager, calls, rec } = setup();
    expect(START_ORDER).toEqual(['process', 'subscribers', 'serving', 'watches', 'election']);
    manager.add(rec('elector', 'election'));
    manager.add(rec('nodes', 'watches'));
    manager.add(rec('http', 'serving'));
    manager.add(rec('leases', 'watches'));
    manager.add(rec('reconciler', 'subscribers'));
    manager.add(rec('clients', 'process'));
    await manager.start();
    expect(calls).toEqual([
      'clients:start',
      'reconciler:start',
      'http:start',
      'nodes:start',
      'leases:start',
      'elector:start',
    ]);
  });

  it('each start settles before the next begins', async () => {
    const { manager, calls, rec } = setup();
    manager.add(
      rec('slow', 'serving', {
        start: () => resolveAfter(500, undefined).then(() => void calls.push('slow:up')),
      }),
    );
    manager.add(rec('next', 'watches'));
    const started = manager.start();
    await vi.advanceTimersByTimeAsync(499);
    expect(calls).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    await started;
    expect(calls).toEqual(['slow:up', 'next:start']);
  });

  it('a stop while a start waits: its signal aborts, nothing after it starts, and the stop says it came during start-up', async () => {
    const { manager, calls, rec, log } = setup({ duringStartUp: 'start-up: before the node list synced' });
    let aborted = false;
    manager.add(rec('http', 'serving'));
    manager.add(
      rec('nodes', 'watches', {
        start: (signal) =>
          new Promise<void>((r) => {
            calls.push('nodes:start');
            signal.addEventListener('abort', () => {
              aborted = true;
              r();
            });
          }),
      }),
    );
    manager.add(rec('leases', 'watches'));
    manager.add(rec('elector', 'election'));
    const started = manager.start();
    await vi.advanceTimersByTimeAsync(1_000);
    const stopped = manager.stop('SIGTERM');
    expect(aborted).toBe(true);
    await started;
    await settle(stopped);
    expect(calls.filter((c) => c.endsWith(':start'))).toEqual(['http:start', 'nodes:start']);
    expect(log.lines.find((l) => l.msg === 'Shutting down')).toMatchObject({
      reason: 'SIGTERM',
      budget: '10s',
      during: 'start-up: before the node list synced',
    });
  });

  it('a stop after the start finished says no `during`', async () => {
    const { manager, rec, log } = setup({ duringStartUp: 'start-up' });
    manager.add(rec('http', 'serving'));
    await manager.start();
    await settle(manager.stop('SIGINT'));
    expect(log.lines.find((l) => l.msg === 'Shutting down')).not.toHaveProperty('during');
  });

  it('refuses a runnable added after start(), a second start(), and a second lease holder', async () => {
    const { manager, rec } = setup();
    const lease = { release: async (): Promise<ReleaseResult> => 'released', abandon: () => {} };
    manager.add({ name: 'elector', group: 'election', stop: { lease } });
    expect(() => manager.add({ name: 'other', group: 'election', stop: { lease } })).toThrow(
      'manager: other holds a lease, and so does another runnable',
    );
    await manager.start();
    expect(() => manager.add(rec('late', 'process'))).toThrow('manager: cannot add late after start()');
    await expect(manager.start()).rejects.toThrow('manager: start() called twice');
  });

  it('startOrder: by group, then in the order added', () => {
    const r = (name: string, group: StartGroup): Runnable => ({ name, group });
    expect(
      startOrder([r('e', 'election'), r('p1', 'process'), r('w', 'watches'), r('p2', 'process')]).map(
        (x) => x.name,
      ),
    ).toEqual(['p1', 'p2', 'w', 'e']);
  });
});

describe('Manager: stop', () => {
  it('runs each step over every runnable in reverse start order: halt, drain, tail, then close one after the other', async () => {
    const { manager, calls, rec, msgs } = setup();
    manager.add(rec('clients', 'process'));
    manager.add(rec('reconciler', 'subscribers'));
    manager.add(rec('http', 'serving'));
    manager.add(
      rec('nodes', 'watches', {
        stop: {
          halt: () => calls.push('nodes:halt'),
          // A close that takes time holds the next one back.
          close: () => resolveAfter(100, undefined).then(() => void calls.push('nodes:close')),
        },
      }),
    );
    await manager.start();
    calls.length = 0;
    await settle(manager.stop('SIGTERM'));
    expect(calls).toEqual([
      'nodes:halt',
      'http:halt',
      'reconciler:halt',
      'clients:halt',
      'http:drain',
      'reconciler:drain',
      'clients:drain',
      'http:tail',
      'reconciler:tail',
      'clients:tail',
      'nodes:close',
      'http:close',
      'reconciler:close',
      'clients:close',
    ]);
    expect(msgs()).toEqual(['Shutting down', 'Stopped']);
  });

  it('also stops runnables that never started (what they hold was made when assembled)', async () => {
    const { manager, calls, rec } = setup();
    manager.add(rec('http', 'serving'));
    manager.add(rec('elector', 'election'));
    await settle(manager.stop('SIGTERM'));
    await manager.start();
    expect(calls).toEqual([
      'elector:halt',
      'http:halt',
      'elector:drain',
      'http:drain',
      'elector:tail',
      'http:tail',
      'elector:close',
      'http:close',
    ]);
  });

  it('a clean drain releases the lease with the tail of the budget; Stopped says how long it took', async () => {
    const { manager, log } = setup();
    const released: number[] = [];
    manager.add({
      name: 'writer',
      group: 'subscribers',
      stop: { drain: () => resolveAfter(1_200, undefined), inFlight: () => 2 },
    });
    manager.add({
      name: 'elector',
      group: 'election',
      stop: {
        lease: {
          release: (ms) => {
            released.push(ms);
            return resolveAfter<ReleaseResult>(40, 'released');
          },
          abandon: () => released.push(-1),
        },
      },
    });
    await manager.start();
    await settle(manager.stop('SIGTERM'));
    expect(released).toEqual([3_000]);
    expect(log.lines.find((l) => l.msg === 'Stopped')).toMatchObject({
      took: '1.24s',
      drained: true,
      lease: 'released',
    });
  });

  it('writes still on the wire when the drain time is up: the lease is abandoned, the writes in flight of every runnable counted', async () => {
    const { manager, log } = setup();
    let abandoned = 0;
    manager.add({ name: 'a', group: 'subscribers', stop: { drain: never, inFlight: () => 2 } });
    manager.add({ name: 'b', group: 'watches', stop: { drain: never, inFlight: () => 3 } });
    manager.add({ name: 'quiet', group: 'watches', stop: { drain: async () => {} } });
    manager.add({
      name: 'elector',
      group: 'election',
      stop: { lease: { release: () => never(), abandon: () => abandoned++ } },
    });
    await manager.start();
    await settle(manager.stop('SIGTERM'));
    expect(abandoned).toBe(1);
    expect(log.lines.find((l) => String(l.msg).startsWith('In-flight writes'))).toMatchObject({
      level: 'warn',
      drain: '7s',
      writesInFlight: 5,
    });
    expect(log.lines.find((l) => l.msg === 'Stopped')).toMatchObject({
      took: '7s',
      drained: false,
      lease: 'skipped',
    });
  });

  it('without a lease holder: Stopped says lease none, and no writes counted is undefined', async () => {
    const { manager, log } = setup({ graceMs: 4_000 });
    manager.add({ name: 'a', group: 'subscribers', stop: { drain: never } });
    await manager.start();
    await settle(manager.stop('SIGTERM'));
    expect(log.lines.find((l) => String(l.msg).startsWith('In-flight writes'))).toMatchObject({
      drain: '2s',
    });
    expect(log.lines.find((l) => String(l.msg).startsWith('In-flight writes'))).not.toHaveProperty(
      'writesInFlight',
    );
    expect(log.lines.find((l) => l.msg === 'Stopped')).toMatchObject({ lease: 'none', drained: false });
  });

  it('halt gets the budget; stop() twice is one shutdown; stopRequested from the first call', async () => {
    const { manager, log } = setup({ graceMs: 4_000 });
    const budgets: unknown[] = [];
    manager.add({ name: 'a', group: 'election', stop: { halt: (b) => budgets.push(b) } });
    await manager.start();
    expect(manager.stopRequested).toBe(false);
    const first = manager.stop('SIGTERM');
    expect(manager.stopRequested).toBe(true);
    expect(manager.stop('again')).toBe(first);
    await settle(first);
    expect(budgets).toEqual([{ totalMs: 4_000, drainMs: 2_000, tailMs: 2_000 }]);
    expect(log.lines.filter((l) => l.msg === 'Shutting down')).toHaveLength(1);
  });
});

describe('Manager: leadership', () => {
  function leaderSetup() {
    const s = setup();
    const edges: string[] = [];
    const bound = (name: string, group: StartGroup): Runnable => ({
      name,
      group,
      needLeaderElection: true,
      start: () => {
        edges.push(`${name}:start`);
      },
      setLeading: (on) => edges.push(`${name}:${on}`),
      stop: { halt: () => edges.push(`${name}:halt`) },
    });
    return { ...s, edges, bound };
  }

  it('hands the edges to the runnables that need leadership, once each (no repeat of the same edge)', async () => {
    const { manager, edges, bound, rec } = leaderSetup();
    manager.add(bound('reconciler', 'subscribers'));
    manager.add(rec('http', 'serving', { setLeading: () => edges.push('http:edge') }));
    manager.add(bound('late', 'election'));
    await manager.start();
    manager.elected(true);
    manager.elected(true);
    expect(manager.leading).toBe(true);
    manager.elected(false);
    manager.elected(false);
    expect(edges).toEqual([
      'reconciler:start',
      'late:start',
      'reconciler:true',
      'late:true',
      'reconciler:false',
      'late:false',
    ]);
  });

  it('a runnable that needs leadership and starts while this replica leads is told so right after its start', async () => {
    const { manager, edges, bound } = leaderSetup();
    manager.add({ name: 'elector', group: 'watches', start: () => manager.elected(true) });
    manager.add(bound('work', 'election'));
    await manager.start();
    expect(edges).toEqual(['work:start', 'work:true']);
  });

  it('the stop: not leading first, before any halt; never leading again after it', async () => {
    const { manager, edges, bound } = leaderSetup();
    manager.add(bound('work', 'election'));
    await manager.start();
    manager.elected(true);
    const stopped = manager.stop('SIGTERM');
    manager.elected(true);
    await settle(stopped);
    expect(edges).toEqual(['work:start', 'work:true', 'work:false', 'work:halt']);
    expect(manager.leading).toBe(false);
  });

  it('a lost lease: not leading, an error naming the reason, exit 1', async () => {
    const { manager, edges, bound, exits, log } = leaderSetup();
    manager.add(bound('work', 'election'));
    await manager.start();
    manager.elected(true);
    manager.lost('renew deadline passed');
    expect(edges).toEqual(['work:start', 'work:true', 'work:false']);
    expect(exits).toEqual([1]);
    expect(log.lines.at(-1)).toMatchObject({
      level: 'error',
      msg: 'Leadership lost: exiting',
      reason: 'renew deadline passed',
    });
  });

  it('a lease lost during the shutdown does not exit: the shutdown goes on and ends as asked (a warning names the reason)', async () => {
    const { manager, exits, log } = leaderSetup();
    await manager.start();
    manager.elected(true);
    const stopped = manager.stop('SIGTERM');
    manager.lost('renew deadline passed');
    await stopped;
    expect(exits).toEqual([]);
    expect(log.lines.some((l) => l.msg === 'Leadership lost: exiting')).toBe(false);
    expect(log.lines).toContainEqual(
      expect.objectContaining({
        level: 'warn',
        msg: 'Leadership lost during the shutdown: the shutdown goes on',
        reason: 'renew deadline passed',
      }),
    );
  });
});

describe('Manager: checks', () => {
  it('/healthz is ping then the checks of the runnables in the order added (not started); /readyz the same', () => {
    const { manager } = setup();
    const c = (name: string) => ({ name, check: () => undefined });
    manager.add({ name: 'elector', group: 'election', healthz: [c('leaderElection')] });
    manager.add({
      name: 'reconciler',
      group: 'subscribers',
      healthz: [c('api-access')],
      readyz: [c('nodes-watch'), c('leases-watch')],
    });
    manager.add({ name: 'rival', group: 'watches', readyz: [c('concurrent-node-lifecycle')] });
    expect(manager.healthChecks().map((x) => x.name)).toEqual(['ping', 'leaderElection', 'api-access']);
    expect(manager.healthChecks()[0]!.check()).toBeUndefined();
    expect(manager.readyChecks().map((x) => x.name)).toEqual([
      'nodes-watch',
      'leases-watch',
      'concurrent-node-lifecycle',
    ]);
  });
});
