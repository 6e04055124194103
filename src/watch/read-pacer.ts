import type { Socket } from 'node:net';

/**
 * Reads watch streams on a shared cadence instead of whenever bytes arrive (--watch-read-interval).
 *
 * Why: following the heartbeats costs a Node.js process far more per event than its JavaScript
 * does. Each lease renewal arriving on its own wakes the process (epoll, read, TLS, HTTP, streams)
 * with cold caches. Measured at 1,000 nodes (docs/benchmarks.md, "2026-12-01, fifth: watch reads
 * on a cadence"): a bare `node:https` lease watch spends 226 µs of CPU per renewal read as it comes
 * and 71 µs read every 100 ms. With pacing, a watch socket is read only right after a tick:
 * `tick()` starts reading on every paced socket, the event loop's poll phase that follows reads
 * whatever the kernel holds, and the check phase right after it stops reading again. Between ticks
 * the bytes wait in the kernel; the watches cost one wake-up per tick however many events arrive,
 * plus at most one per socket between two ticks that runs no JavaScript: libuv takes a stopped
 * socket out of epoll lazily, on the first readiness after the stop (seen with strace: an
 * epoll_wait returning for the socket, then EPOLL_CTL_DEL, nothing read).
 *
 * A tick reads until the socket is drained, not one poll's worth: while a turn reads something
 * (the socket's `bytesRead` grew), the check phase leaves the socket reading for one more turn, and
 * it stops in the first turn that reads nothing. One poll reads what the kernel holds at that moment
 * (about 1 MB on a watch socket), so a burst bigger than that (a mass status flip, the echoes of our
 * own taint writes on a large cluster) used to be read one poll's worth per tick: 12.3 MB/s at 100ms,
 * 2.6 MB/s at 500ms, and the node watch fell seconds behind while it counted as in contact. Now a
 * backlog is read at the unpaced rate (the sender refills the buffer while we parse what we read;
 * measured at 3,000 nodes: docs/benchmarks.md, "Paced watch reads under a burst"), and a quiet tick
 * costs one extra turn of the loop (no extra wake-up).
 *
 * What it changes: an event is seen up to one interval after it arrives (a lease renewal is timed
 * when seen, so a deadline moves that much later, never earlier). Nothing is marked on a late view:
 * the controller re-reads a lease from the API server before marking its node. The leader election
 * lock's watch is not paced (a handover waits on it).
 *
 * How: it stops and starts the libuv stream handle under the socket (`socket._handle`,
 * readStop/readStart; for a TLS socket the TLS wrap, which stops the TCP reads under it). Node.js's
 * own "reading" flag is left alone, so its stream machinery does not restart reads behind our back,
 * and reading is restored when a stream is let go (the socket may return to the agent's pool).
 * Where the handle does not offer these (another runtime), the stream is read as it comes and
 * `attach` reports it once through `onUnsupported`.
 */
export interface ReadPacerOptions {
  /** Called once when a stream cannot be paced (no stream handle with readStart/readStop). */
  onUnsupported?: (why: string) => void;
}

interface StreamHandle {
  readStart(): number;
  readStop(): number;
}

interface Paced {
  socket: Socket;
  handle: StreamHandle;
  /** We stopped its reads (and must start them again before letting go). */
  stopped: boolean;
  /**
   * The socket's bytesRead at the last check phase; -1 from attach to the first (the read that brought
   * the response headers counts as a read: a resumed watch may be replaying a backlog).
   */
  mark: number;
}

/** Bytes the socket has read so far (Node.js counts them on the stream handle), if it says. */
function bytesReadOf(socket: Socket): number | undefined {
  const n = (socket as { bytesRead?: unknown }).bytesRead;
  return typeof n === 'number' ? n : undefined;
}

function streamHandleOf(socket: Socket | null | undefined): StreamHandle | undefined {
  const h = (socket as unknown as { _handle?: Partial<StreamHandle> | null } | null | undefined)?._handle;
  return h && typeof h.readStart === 'function' && typeof h.readStop === 'function'
    ? (h as StreamHandle)
    : undefined;
}

/** Driven by a ticker: call `tick()` on the cadence (src/metrics/event-loop.ts, EventLoopSampler). */
export class WatchReadPacer {
  private readonly streams = new Set<Paced>();
  private stopQueued = false;
  private warned = false;

  constructor(private readonly o: ReadPacerOptions = {}) {}

  /** Streams being paced now. */
  get size(): number {
    return this.streams.size;
  }

  /**
   * Paces the socket under a response from now until the returned function is called (call it when
   * the stream ends or is abandoned; it starts reading again if the socket lives on).
   */
  attach(socket: Socket | null | undefined): () => void {
    const handle = streamHandleOf(socket);
    if (!socket || !handle) {
      if (!this.warned) {
        this.warned = true;
        this.o.onUnsupported?.('the socket has no stream handle with readStart/readStop');
      }
      return () => undefined;
    }
    const p: Paced = { socket, handle, stopped: false, mark: -1 };
    this.streams.add(p);
    // Read what has come with the headers in this turn, then wait for the next tick.
    this.queueStop();
    return () => this.release(p);
  }

  /** Starts reading every paced stream; each stops again after the first poll phase that reads nothing. */
  tick(): void {
    for (const p of this.streams) {
      if (!this.alive(p)) {
        this.streams.delete(p);
        continue;
      }
      if (p.stopped) {
        p.stopped = false;
        p.handle.readStart();
      }
    }
    if (this.streams.size > 0) this.queueStop();
  }

  /** Lets every stream go (reads restored). */
  close(): void {
    for (const p of [...this.streams]) this.release(p);
  }

  private alive(p: Paced): boolean {
    return !p.socket.destroyed && streamHandleOf(p.socket) === p.handle;
  }

  private release(p: Paced): void {
    if (!this.streams.delete(p)) return;
    if (p.stopped && this.alive(p)) p.handle.readStart();
    p.stopped = false;
  }

  /**
   * After this turn's poll phase has read what the kernel holds: a socket that read something may
   * hold more (a backlog), so it reads in the next turn too (the pending immediate keeps that turn's
   * poll from blocking); one that read nothing stops until the next tick.
   */
  private queueStop(): void {
    if (this.stopQueued) return;
    this.stopQueued = true;
    setImmediate(() => {
      this.stopQueued = false;
      let draining = false;
      for (const p of this.streams) {
        if (p.stopped) continue;
        if (!this.alive(p)) {
          this.streams.delete(p);
          continue;
        }
        const read = bytesReadOf(p.socket);
        if (read !== undefined && read > p.mark) {
          p.mark = read;
          draining = true;
          continue;
        }
        p.stopped = true;
        p.handle.readStop();
      }
      if (draining) this.queueStop();
    });
  }
}
