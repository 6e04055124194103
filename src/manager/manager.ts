import { formatDuration } from '../clock/duration.js';
import type { ReleaseResult } from '../election/index.js';
import type { Check } from '../http/server.js';
import type { Logger } from '../log/logger.js';
import type { SchedulerLike } from '../rx/index.js';
import { runShutdown, type ShutdownBudget, type ShutdownSteps, shutdownBudget } from './shutdown.js';

/**
 * The order in which the manager starts its runnables, group by group (within a group, in the order
 * they were added); it stops them in the reverse order.
 * - process: what the whole process holds (API clients, the periodic tick);
 * - subscribers: what consumes the watches subscribes before they start (their events are not
 *   replayed to a late subscriber): the reconciler, the per-pool grace;
 * - serving: the HTTP servers, then the signals (a SIGTERM from here on runs the shutdown);
 * - watches: the caches (the node list first: nothing acts before it is in);
 * - election: leader election last; it hands the leading / not-leading edges to the runnables that
 *   need leadership (whatever their group: they are started before any edge).
 */
export const START_ORDER = ['process', 'subscribers', 'serving', 'watches', 'election'] as const;
export type StartGroup = (typeof START_ORDER)[number];

/**
 * What a runnable does when the process stops, step by step (src/manager/shutdown.ts): the manager
 * calls each step of every runnable in reverse start order, also for runnables it never started
 * (what they hold was made when they were assembled).
 */
export interface StopSteps {
  /** At once and synchronously, as the shutdown starts: stop acting (no new write, watches stopped). */
  halt?(budget: ShutdownBudget): void;
  /** Resolves when its writes on the wire are over (the drain: bounded by the budget's drain part). */
  drain?(): Promise<void>;
  /** Its writes on the wire right now (logged when the drain does not finish). */
  inFlight?(): number;
  /**
   * The lock Lease: released after a clean drain within `timeoutMs`, abandoned (left to expire)
   * otherwise. One runnable at most holds it.
   */
  lease?: { release(timeoutMs: number): Promise<ReleaseResult>; abandon(): void };
  /** Bounded cleanup beside the release (each given the budget's tail). */
  tail?(timeoutMs: number): Promise<void>;
  /** Last, quick: servers, sockets, timers. Awaited one after the other. */
  close?(): void | Promise<void>;
}

export interface Runnable {
  /** For logs, tests and errors. */
  readonly name: string;
  readonly group: StartGroup;
  /**
   * Started in its group's turn; the next one starts when the returned promise settles. `signal`
   * aborts when the stop begins (a start still waiting should end then).
   */
  start?(signal: AbortSignal): void | Promise<void>;
  /**
   * controller-runtime's NeedLeaderElection: the runnable gets `setLeading` edges, once it has
   * started: true while this replica leads (never again after the stop began), false when it stops
   * leading, loses the lease, or the stop begins.
   */
  readonly needLeaderElection?: boolean;
  setLeading?(leading: boolean): void;
  /** Checks it contributes to /healthz (liveness) and /readyz, served in the order runnables were added. */
  readonly healthz?: readonly Check[];
  readonly readyz?: readonly Check[];
  readonly stop?: StopSteps;
}

/** What leader election tells the manager. */
export interface Leadership {
  /** This replica leads (true) or not (false); without leader election, true once it may act alone. */
  elected(leading: boolean): void;
  /**
   * The lease was lost while leading: the process exits non-zero (Kubernetes restarts it clean),
   * unless it is shutting down already (the shutdown goes on and exits as it would).
   */
  lost(reason: string): void;
}

export interface ManagerOptions {
  scheduler: SchedulerLike;
  logger: Logger;
  /** --shutdown-grace-period: the whole shutdown, drain and tail included. */
  shutdownGracePeriodMs: number;
  /** Process exit (non-zero on a lost lease). */
  exit(code: number): void;
  /** Said in the `Shutting down` line (as `during`) when the stop comes before start() finished. */
  duringStartUp?: string;
}

type Phase = 'idle' | 'starting' | 'started';

/** Every runnable in start order: by group, then in the order added. */
export function startOrder(runnables: readonly Runnable[]): Runnable[] {
  return START_ORDER.flatMap((g) => runnables.filter((r) => r.group === g));
}

/**
 * Owns the process's lifecycle: components register as runnables; start() starts them in
 * {@link START_ORDER}; leadership edges go to those that need it; stop(reason) runs the graceful
 * shutdown (src/manager/shutdown.ts) over them in reverse order within --shutdown-grace-period and
 * logs `Shutting down` and `Stopped`. After the stop began nothing more starts.
 */
export class Manager implements Leadership {
  private readonly o: ManagerOptions;
  private readonly runnables: Runnable[] = [];
  private readonly started = new Set<Runnable>();
  private readonly abort = new AbortController();
  private phase: Phase = 'idle';
  private isElected = false;
  private leadingNow = false;
  private stopped = false;
  private stopping: Promise<void> | undefined;

  constructor(o: ManagerOptions) {
    this.o = o;
  }

  /** Registers a runnable; only before start(). */
  add(r: Runnable): void {
    if (this.phase !== 'idle') throw new Error(`manager: cannot add ${r.name} after start()`);
    if (r.stop?.lease && this.runnables.some((x) => x.stop?.lease)) {
      throw new Error(`manager: ${r.name} holds a lease, and so does another runnable`);
    }
    this.runnables.push(r);
  }

  /** True from the moment the stop began (the writer's fence refuses from then on). */
  get stopRequested(): boolean {
    return this.stopped;
  }

  /** Whether the runnables that need leadership were last told they lead. */
  get leading(): boolean {
    return this.leadingNow;
  }

  /** /healthz: `ping`, then the runnables' checks in the order they were added. */
  healthChecks(): Check[] {
    return [{ name: 'ping', check: () => undefined }, ...this.runnables.flatMap((r) => r.healthz ?? [])];
  }

  /** /readyz: the runnables' checks in the order they were added. */
  readyChecks(): Check[] {
    return this.runnables.flatMap((r) => r.readyz ?? []);
  }

  /**
   * Starts every runnable in order, each after the previous one's start settled. Returns when all
   * have started, or as soon as the stop began (the rest never start). A start that throws rejects
   * this (nothing is stopped: the caller exits).
   */
  async start(): Promise<void> {
    if (this.phase !== 'idle') throw new Error('manager: start() called twice');
    this.phase = 'starting';
    for (const r of startOrder(this.runnables)) {
      if (this.stopped) return;
      await r.start?.(this.abort.signal);
      this.started.add(r);
      if (r.needLeaderElection && this.leadingNow && !this.stopped) r.setLeading?.(true);
    }
    this.phase = 'started';
  }

  elected(leading: boolean): void {
    this.isElected = leading;
    this.edge();
  }

  lost(reason: string): void {
    this.isElected = false;
    this.edge();
    if (this.stopping) {
      // Asked to stop, and the lease ran out while writes drained (a network that swallows the
      // renewals swallows the release too): the shutdown goes on and ends as asked.
      this.o.logger.warn('Leadership lost during the shutdown: the shutdown goes on', { reason });
      return;
    }
    this.o.logger.error('Leadership lost: exiting', { reason });
    this.o.exit(1);
  }

  /** The graceful shutdown (idempotent: a second call returns the first one's promise). */
  stop(reason: string): Promise<void> {
    this.stopping ??= this.shutdown(reason);
    return this.stopping;
  }

  private edge(): void {
    const leading = this.isElected && !this.stopped;
    if (leading === this.leadingNow) return;
    this.leadingNow = leading;
    for (const r of this.runnables) {
      if (r.needLeaderElection && this.started.has(r)) r.setLeading?.(leading);
    }
  }

  private async shutdown(reason: string): Promise<void> {
    const { logger: log, scheduler } = this.o;
    const started = scheduler.now();
    const budget = shutdownBudget(this.o.shutdownGracePeriodMs);
    log.info('Shutting down', {
      reason,
      budget: formatDuration(budget.totalMs),
      ...(this.phase !== 'started' && this.o.duringStartUp ? { during: this.o.duringStartUp } : {}),
    });
    const result = await runShutdown(this.steps(budget), budget, scheduler, log);
    log.info('Stopped', {
      took: formatDuration(Math.round(scheduler.now() - started)),
      drained: result.drained,
      lease: result.released ?? 'none',
    });
  }

  /** The shutdown's steps over every runnable, in reverse start order. */
  private steps(budget: ShutdownBudget): ShutdownSteps {
    const steps = startOrder(this.runnables)
      .reverse()
      .flatMap((r) => (r.stop ? [r.stop] : []));
    const lease = steps.find((s) => s.lease)?.lease;
    const counting = steps.filter((s) => s.inFlight);
    return {
      stopActing: () => {
        this.stopped = true;
        this.edge();
        this.abort.abort();
        for (const s of steps) s.halt?.(budget);
      },
      drain: async () => {
        await Promise.all(steps.map((s) => s.drain?.()));
      },
      inFlight: counting.length ? () => counting.reduce((n, s) => n + (s.inFlight?.() ?? 0), 0) : undefined,
      release: lease ? (ms) => lease.release(ms) : undefined,
      abandon: lease ? () => lease.abandon() : undefined,
      tail: async (ms) => {
        await Promise.all(steps.map((s) => s.tail?.(ms)));
      },
      close: async () => {
        for (const s of steps) await s.close?.();
      },
    };
  }
}
