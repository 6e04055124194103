import type { Logger } from '../../log/logger.js';
import type { Runnable } from '../../manager/manager.js';

export interface SignalOptions {
  /** Signals to handle; the CLI passes the process, tests may pass an EventEmitter. */
  signals: NodeJS.EventEmitter | undefined;
  logger: Logger;
  exit: (code: number) => void;
}

/** What a signal does once the shutdown can run. */
export interface SignalActions {
  /** SIGTERM, SIGINT: the graceful shutdown; the process exits 0 after it, 1 if it failed. */
  stop(reason: string): Promise<void>;
  /** SIGHUP: reload the --node-pool-config file (absent without one). */
  reload?: () => void;
}

/**
 * SIGTERM, SIGINT and SIGHUP, ours from the first moment (installed at construction): a signal that
 * comes while the clients and servers are being made is kept and acted on as soon as the shutdown
 * can run (the runnable's start, after the HTTP servers); the default action would end the process
 * without a word. A second SIGTERM or SIGINT exits 1 at once, whenever it comes.
 */
export class ProcessSignals {
  private readonly o: SignalOptions;
  private readonly early: string[] = [];
  private actions: SignalActions | undefined;
  private count = 0;

  constructor(o: SignalOptions) {
    this.o = o;
    o.signals?.on('SIGTERM', () => this.onSignal('SIGTERM'));
    o.signals?.on('SIGINT', () => this.onSignal('SIGINT'));
    o.signals?.on('SIGHUP', () => this.onHangup());
  }

  /** Group serving, after the HTTP servers: from its start a signal runs `actions`. */
  runnable(actions: SignalActions): Runnable {
    return { name: 'signals', group: 'serving', start: () => this.live(actions) };
  }

  private live(actions: SignalActions): void {
    this.actions = actions;
    for (const sig of this.early.splice(0)) this.onSignal(sig);
  }

  private onSignal(sig: string): void {
    const actions = this.actions;
    if (!actions) {
      if (this.early.length > 0) this.exitNow(sig);
      else this.early.push(sig);
      return;
    }
    this.count++;
    if (this.count > 1) {
      this.exitNow(sig);
      return;
    }
    void actions.stop(sig).then(
      () => this.o.exit(0),
      (err: unknown) => {
        this.o.logger.error('Shutdown failed', { err });
        this.o.exit(1);
      },
    );
  }

  private exitNow(sig: string): void {
    this.o.logger.warn('Second signal: exiting now', { signal: sig });
    this.o.exit(1);
  }

  private onHangup(): void {
    const reload = this.actions?.reload;
    if (!reload) {
      this.o.logger.info('SIGHUP: no --node-pool-config to reload');
      return;
    }
    reload();
  }
}
