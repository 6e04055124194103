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

/**
 * A socket whose kernel buffer holds `pending` bytes: `poll()` is the event loop's poll phase, which
 * reads at most one read's worth (libuv reads in a bounded loop per readiness) while the handle is
 * started; `bytesRead` counts what was read, as Node.js's does.
 */
function kernelSocket(oneRead: number) {
  const s = { pending: 0, reading: true, bytesRead: 0 };
  const handle = {
    readStart: () => {
      s.reading = true;
      return 0;
    },
    readStop: () => {
      s.reading = false;
      return 0;
    },
  };
  const socket = {
    destroyed: false,
    _handle: handle,
    get bytesRead() {
      return s.bytesRead;
    },
  };
  return {
    s,
    asSocket: socket as unknown as Socket,
    arrive(n: number) {
      s.pending += n;
    },
    poll() {
      if (!s.reading) return;
      const n = Math.min(s.pending, oneRead);
      s.pending -= n;
      s.bytesRead += n;
    },
  };
}

/** Attaches a socket with nothing to read: the attach turn counts as a read, the next one stops it. */
async function attachQuiet(pacer: WatchReadPacer, k: ReturnType<typeof kernelSocket>) {
  pacer.attach(k.asSocket);
  for (let turn = 0; turn < 2; turn++) {
    k.poll();
    await afterTurn();
  }
  expect(k.s.reading).toBe(false);
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
  it('a backlog bigger than one read is drained in the tick that finds it, not one read per tick', async () => {
    const ONE_READ = 64 * 1024;
    const pacer = new WatchReadPacer();
    const k = kernelSocket(ONE_READ);
    await attachQuiet(pacer, k);
    // A burst: five and a bit reads' worth wait in the kernel.
    k.arrive(5 * ONE_READ + 100);
    pacer.tick();
    for (let turn = 0; turn < 10; turn++) {
      k.poll();
      await afterTurn();
    }
    expect(k.s.pending).toBe(0);
    expect(k.s.bytesRead).toBe(5 * ONE_READ + 100);
    // Drained: reading stops in the first turn that finds nothing, until the next tick.
    expect(k.s.reading).toBe(false);
  });

  it('keeps reading while every turn finds data, stops in the first turn that finds none', async () => {
    const pacer = new WatchReadPacer();
    const k = kernelSocket(1000);
    await attachQuiet(pacer, k);
    // Data keeps coming for 4 turns after the tick (a sender refilling the buffer as it is read).
    pacer.tick();
    const readingAfter: boolean[] = [];
    for (let turn = 0; turn < 6; turn++) {
      if (turn < 4) k.arrive(500);
      k.poll();
      await afterTurn();
      readingAfter.push(k.s.reading);
    }
    expect(k.s.bytesRead).toBe(2000);
    // Turns 0-3 read something: go on; turn 4 read nothing: stop (and stay stopped).
    expect(readingAfter).toEqual([true, true, true, true, false, false]);
  });

  it('a quiet tick costs one turn of reading: nothing in the kernel, stopped in the same turn', async () => {
    const pacer = new WatchReadPacer();
    const k = kernelSocket(1000);
    await attachQuiet(pacer, k);
    pacer.tick();
    expect(k.s.reading).toBe(true);
    k.poll();
    await afterTurn();
    expect(k.s.reading).toBe(false);
  });
  it('a watch that opens on a backlog (a resumed watch replaying) drains it in the turns after attach', async () => {
    const pacer = new WatchReadPacer();
    const k = kernelSocket(1000);
    k.arrive(3500);
    k.poll(); // the read that brought the response headers
    pacer.attach(k.asSocket);
    for (let turn = 0; turn < 6; turn++) {
      await afterTurn();
      k.poll();
    }
    expect(k.s.pending).toBe(0);
    expect(k.s.reading).toBe(false);
  });
});
