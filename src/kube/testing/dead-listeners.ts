import type { AddressInfo } from 'node:net';
import net from 'node:net';
import { Worker } from 'node:worker_threads';

/**
 * Test helpers (not built into dist): loopback listeners that stall a connection's set-up, as a
 * network that is not ready yet does.
 */

/** Accepts TCP connections and never sends a byte (a TLS handshake or a CONNECT is never answered). */
export interface SilentListener {
  port: number;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** Resolves when `n` connections have been accepted. */
  acceptedAtLeast(n: number): Promise<void>;
  close(): Promise<void>;
}

export async function silentListener(): Promise<SilentListener> {
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  const waiters: { n: number; resolve: () => void }[] = [];
  const server = net.createServer((s) => {
    accepted++;
    sockets.add(s);
    s.on('error', () => undefined);
    s.on('close', () => sockets.delete(s));
    for (const w of waiters.filter((w) => accepted >= w.n)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve();
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    get accepted() {
      return accepted;
    },
    acceptedAtLeast(n: number) {
      if (accepted >= n) return Promise.resolve();
      return new Promise<void>((resolve) => waiters.push({ n, resolve }));
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((r) => server.close(r));
    },
  };
}

/** A listener whose accept queue is full: a new connection's SYN is dropped, its connect() hangs. */
export interface FullBacklogListener {
  port: number;
  close(): Promise<void>;
}

/**
 * A listen socket with a backlog of 1 in a worker thread whose event loop is blocked, so nothing
 * is ever accepted; connections are opened until one does not complete (the queue is full). A
 * connect() to it then stays pending until the client gives up (Linux drops the SYNs).
 */
export async function fullBacklogListener(): Promise<FullBacklogListener> {
  const stop = new Int32Array(new SharedArrayBuffer(4));
  const worker = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads');
     const srv = require('node:net').createServer();
     srv.listen({ port: 0, host: '127.0.0.1', backlog: 1 }, () => {
       parentPort.postMessage(srv.address().port);
       // Block this thread's event loop: the listen socket is never accepted from.
       while (Atomics.load(workerData, 0) === 0) Atomics.wait(workerData, 0, 0, 50);
       srv.close();
       parentPort.close();
     });`,
    { eval: true, workerData: stop },
  );
  const port = await new Promise<number>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  const fillers: net.Socket[] = [];
  const close = async () => {
    for (const s of fillers) s.destroy();
    Atomics.store(stop, 0, 1);
    Atomics.notify(stop, 0);
    await worker.terminate();
  };
  try {
    for (let i = 0; ; i++) {
      if (i > 64) throw new Error('the accept queue never filled');
      const s = net.connect(port, '127.0.0.1');
      s.on('error', () => undefined);
      fillers.push(s);
      const connected = await new Promise<boolean>((resolve) => {
        const t = setTimeout(() => resolve(false), 300);
        s.once('connect', () => {
          clearTimeout(t);
          resolve(true);
        });
      });
      if (!connected) break;
    }
  } catch (err) {
    await close();
    throw err;
  }
  return { port, close };
}
