import type { Socket } from 'node:net';
import { describe, expect, it, vi } from 'vitest';
import { WatchReadPacer } from './read-pacer.js';

/** A socket as the pacer sees it: `destroyed` and the libuv stream handle under it. */
function fakeSocket() {
  const calls: string[] = [];
  const handle = {
    readStart: vi.fn(() => {
      calls.push('start');
      return 0;
    }),
    readStop: vi.fn(() => {
      calls.push('stop');
      return 0;
    }),
  };
  const socket = { destroyed: false, _handle: handle as typeof handle | null };
  return { socket, asSocket: socket as unknown as Socket, handle, calls };
}

/** Lets the current turn end (the pacer stops reads in the check phase, after the poll). */
const afterTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** A pacer with two sockets attached and stopped (one turn past the attach). */
async function twoPaced() {
  const pacer = new WatchReadPacer();
  const a = fakeSocket();
  const b = fakeSocket();
  pacer.attach(a.asSocket);
  pacer.attach(b.asSocket);
  await afterTurn();
  return { pacer, a, b };
}

describe('WatchReadPacer', () => {
  it('reads a paced socket only in the turn of a tick: stopped after attach, started by tick, stopped again', async () => {
    const pacer = new WatchReadPacer();
    const s = fakeSocket();
    pacer.attach(s.asSocket);
    expect(s.calls).toEqual([]); // what came with the headers is read in this turn
    await afterTurn();
    expect(s.calls).toEqual(['stop']);
    pacer.tick();
    expect(s.calls).toEqual(['stop', 'start']);
    await afterTurn();
    expect(s.calls).toEqual(['stop', 'start', 'stop']);
    // A second tick in the same turn as another does not start or stop twice.
    pacer.tick();
    pacer.tick();
    await afterTurn();
    expect(s.calls).toEqual(['stop', 'start', 'stop', 'start', 'stop']);
    expect(pacer.size).toBe(1);
  });

  it('one tick starts every paced socket; one check phase stops them all', async () => {
    const { pacer, a, b } = await twoPaced();
    pacer.tick();
    expect([a.calls, b.calls]).toEqual([
      ['stop', 'start'],
      ['stop', 'start'],
    ]);
    await afterTurn();
    expect([a.calls, b.calls]).toEqual([
      ['stop', 'start', 'stop'],
      ['stop', 'start', 'stop'],
    ]);
  });

  it('letting go restores reading on a live socket (it may go back to the agent pool)', async () => {
    const pacer = new WatchReadPacer();
    const s = fakeSocket();
    const release = pacer.attach(s.asSocket);
    await afterTurn();
    release();
    expect(s.calls).toEqual(['stop', 'start']);
    expect(pacer.size).toBe(0);
    // Released: ticks leave it alone, and a second release does nothing.
    pacer.tick();
    release();
    await afterTurn();
    expect(s.calls).toEqual(['stop', 'start']);
  });

  it('letting go before the stop ran leaves reading untouched', async () => {
    const pacer = new WatchReadPacer();
    const s = fakeSocket();
    const release = pacer.attach(s.asSocket);
    release();
    await afterTurn();
    expect(s.calls).toEqual([]);
  });

  it('close() lets every stream go with reading restored', async () => {
    const { pacer, a, b } = await twoPaced();
    pacer.close();
    expect([a.calls, b.calls]).toEqual([
      ['stop', 'start'],
      ['stop', 'start'],
    ]);
    expect(pacer.size).toBe(0);
  });

  it('never touches a destroyed socket or a handle the socket no longer has', async () => {
    const pacer = new WatchReadPacer();
    const gone = fakeSocket();
    const swapped = fakeSocket();
    const releaseGone = pacer.attach(gone.asSocket);
    pacer.attach(swapped.asSocket);
    await afterTurn();
    gone.socket.destroyed = true;
    swapped.socket._handle = null; // closed: Node.js drops the handle
    pacer.tick();
    await afterTurn();
    releaseGone();
    expect(gone.calls).toEqual(['stop']);
    expect(swapped.calls).toEqual(['stop']);
    expect(pacer.size).toBe(0);
  });

  it('a socket without a stream handle is read as it comes, reported once', async () => {
    const why: string[] = [];
    const pacer = new WatchReadPacer({ onUnsupported: (w) => why.push(w) });
    const release = pacer.attach({ destroyed: false } as unknown as Socket);
    pacer.attach(null);
    expect(pacer.size).toBe(0);
    expect(why).toHaveLength(1);
    expect(why[0]).toMatch(/readStart\/readStop/);
    release();
    pacer.tick();
    await afterTurn();
    expect(pacer.size).toBe(0);
  });
});
