import type { List } from '../kube/types.js';
import type { WatchTransport } from './types.js';

/**
 * Asks the server whether it has reached a resourceVersion: a list of one object with
 * resourceVersionMatch=NotOlderThan, served from its watch cache. One question at a time: asking
 * while one is in flight does nothing.
 */
export class ResourceVersionProbe {
  private readonly transport: WatchTransport;
  private readonly timeoutMs: number;
  /** The question in flight. */
  private inFlight: AbortController | undefined;

  constructor(transport: WatchTransport, timeoutMs: number) {
    this.transport = transport;
    this.timeoutMs = timeoutMs;
  }

  /**
   * Asks about `rv` unless a question is in flight. `answered` gets the error of the answer
   * (undefined when the server has data as new as `rv`); never after `cancel`.
   */
  ask(rv: string, answered: (err: unknown) => void): void {
    if (this.inFlight) return;
    const ac = new AbortController();
    this.inFlight = ac;
    let pending: Promise<List<unknown>>;
    try {
      pending = this.transport.list(
        { limit: 1, resourceVersion: rv, resourceVersionMatch: 'NotOlderThan', timeoutMs: this.timeoutMs },
        ac.signal,
      );
    } catch (err) {
      pending = Promise.reject(err);
    }
    const done = (err?: unknown) => {
      if (this.inFlight !== ac) return;
      this.inFlight = undefined;
      answered(err);
    };
    pending.then(() => done(), done);
  }

  /** Aborts the question in flight; its answer is ignored. */
  cancel(): void {
    this.inFlight?.abort();
    this.inFlight = undefined;
  }
}
