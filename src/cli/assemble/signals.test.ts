import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import { memoryLogger } from '../../log/logger.js';
import { ProcessSignals } from './signals.js';

const tick = () => new Promise((r) => setImmediate(r));

function setup() {
  const emitter = new EventEmitter();
  const log = memoryLogger();
  const exits: number[] = [];
  const signals = new ProcessSignals({ signals: emitter, logger: log, exit: (c) => exits.push(c) });
  const stops: string[] = [];
  let finish: (err?: Error) => void = () => {};
  const stop = (reason: string) => {
    stops.push(reason);
    return new Promise<void>((resolve, reject) => {
      finish = (err) => (err ? reject(err) : resolve());
    });
  };
  return { emitter, log, exits, signals, stops, stop, finish: (err?: Error) => finish(err) };
}

describe('ProcessSignals', () => {
  it('a SIGTERM before the shutdown can run is kept, and acted on when the runnable starts; exit 0 after the shutdown', async () => {
    const { emitter, signals, stops, stop, exits, finish } = setup();
    emitter.emit('SIGTERM');
    expect(stops).toEqual([]);
    const r = signals.runnable({ stop });
    expect(r).toMatchObject({ name: 'signals', group: 'serving' });
    await r.start?.(new AbortController().signal);
    expect(stops).toEqual(['SIGTERM']);
    expect(exits).toEqual([]);
    finish();
    await tick();
    expect(exits).toEqual([0]);
  });

  it('a second signal exits 1 at once: before the shutdown can run, and during the shutdown', async () => {
    const early = setup();
    early.emitter.emit('SIGINT');
    early.emitter.emit('SIGTERM');
    expect(early.exits).toEqual([1]);
    expect(early.log.lines).toEqual([
      expect.objectContaining({ level: 'warn', msg: 'Second signal: exiting now', signal: 'SIGTERM' }),
    ]);

    const late = setup();
    await late.signals.runnable({ stop: late.stop }).start?.(new AbortController().signal);
    late.emitter.emit('SIGINT');
    expect(late.stops).toEqual(['SIGINT']);
    late.emitter.emit('SIGINT');
    expect(late.exits).toEqual([1]);
    expect(late.stops).toEqual(['SIGINT']);
  });

  it('a shutdown that fails: logged, exit 1', async () => {
    const { emitter, signals, stop, exits, finish, log } = setup();
    await signals.runnable({ stop }).start?.(new AbortController().signal);
    emitter.emit('SIGTERM');
    finish(new Error('boom'));
    await tick();
    expect(exits).toEqual([1]);
    expect(log.lines.at(-1)).toMatchObject({ level: 'error', msg: 'Shutdown failed' });
  });

  it('SIGHUP reloads the pool file once live; before that, or without one, it says there is none', async () => {
    const { emitter, signals, stop, log } = setup();
    const reloads: number[] = [];
    emitter.emit('SIGHUP');
    await signals.runnable({ stop, reload: () => reloads.push(1) }).start?.(new AbortController().signal);
    emitter.emit('SIGHUP');
    expect(reloads).toEqual([1]);
    expect(log.lines.map((l) => l.msg)).toEqual(['SIGHUP: no --node-pool-config to reload']);

    const none = setup();
    await none.signals.runnable({ stop: none.stop }).start?.(new AbortController().signal);
    none.emitter.emit('SIGHUP');
    expect(none.log.lines.map((l) => l.msg)).toEqual(['SIGHUP: no --node-pool-config to reload']);
  });

  it('without an emitter (in-process callers that pass none) it does nothing', async () => {
    const log = memoryLogger();
    const signals = new ProcessSignals({ signals: undefined, logger: log, exit: () => {} });
    await signals.runnable({ stop: async () => {} }).start?.(new AbortController().signal);
    expect(log.lines).toEqual([]);
  });
});
