import { timerDelay } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import type { ReleaseResult } from '../election/index.js';
import type { Logger } from '../log/logger.js';
import type { SchedulerLike } from '../rx/index.js';

/**
 * How the shutdown budget (--shutdown-grace-period, the whole of it) is spent:
 * 1. drain: the writes on the wire finish (new writes are refused at once; reads in flight are
 *    aborted, not waited for: only a write can land after another replica starts leading);
 * 2. tail: release the lock Lease (only after a clean drain) and delete the identity lease, side
 *    by side, each bounded by the tail;
 * 3. close the HTTP servers and the client (no waiting).
 * The pod's terminationGracePeriodSeconds must exceed the total, with room for the process to
 * exit; manifests/base is checked against {@link shutdownBudget} by a unit test.
 */
export interface ShutdownBudget {
  totalMs: number;
  drainMs: number;
  tailMs: number;
}

/** At most this of the budget goes to the tail: one or two requests, answered in ms when healthy. */
export const SHUTDOWN_TAIL_MS = 3_000;

export function shutdownBudget(totalMs: number): ShutdownBudget {
  const tailMs = Math.min(SHUTDOWN_TAIL_MS, Math.floor(totalMs / 2));
  return { totalMs, drainMs: totalMs - tailMs, tailMs };
}

export interface ShutdownSteps {
  /** Stop acting at once: no new writes (the fence refuses), watches stopped. Synchronous. */
  stopActing(): void;
  /** Resolves when no write is on the wire (after stopActing, none can start). */
  drain(): Promise<void>;
  /** Writes on the wire right now (for the log when the drain does not finish). */
  inFlight?(): number;
  /** Releases the lock Lease within `timeoutMs` (absent without leader election). */
  release?(timeoutMs: number): Promise<ReleaseResult>;
  /** Stops campaigning without releasing: the lease expires on its own. */
  abandon?(): void;
  /** Other bounded cleanup for the tail (identity lease), each given `timeoutMs`. */
  tail(timeoutMs: number): Promise<void>;
  /** Final, quick: HTTP servers, sockets, timers. */
  close(): Promise<void>;
}

export interface ShutdownResult {
  drained: boolean;
  released: ReleaseResult | 'skipped' | undefined;
}

/**
 * The drain: writes only. `reconciler.stop()` is started (it aborts the reads in flight and ends the
 * workers) but not waited for: a worker still in a read or a retry wait can no longer write (the
 * fence refuses since stopActing), so only the writes already on the wire matter for releasing the
 * lock. A slow API server for reads then does not hold the release back.
 */
export function drainWrites(
  reconciler: { stop(): Promise<void> },
  writer: { idle(): Promise<void> },
): Promise<void> {
  void reconciler.stop();
  return writer.idle();
}

/** Resolves with `true` when `p` settles within `ms` (scheduler time), else `false`. */
function within(p: Promise<unknown>, ms: number, scheduler: SchedulerLike): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const timer = scheduler.schedule(() => resolve(false), timerDelay(ms));
    p.then(
      () => {
        timer.unsubscribe();
        resolve(true);
      },
      () => {
        timer.unsubscribe();
        resolve(true);
      },
    );
  });
}

/**
 * The graceful shutdown, inside `budget`. The lock is released only after a clean drain: a write
 * still on the wire may land after another replica, seeing the released lock, has started to
 * write. When the drain does not finish, the lease is left to expire instead (its holder then
 * stays blocked for the lease duration, which covers any write in flight: a write never outlives
 * the fence, which closes before the lease expires).
 */
export async function runShutdown(
  steps: ShutdownSteps,
  budget: ShutdownBudget,
  scheduler: SchedulerLike,
  log: Logger,
): Promise<ShutdownResult> {
  steps.stopActing();
  const drained = await within(steps.drain(), budget.drainMs, scheduler);
  let released: ShutdownResult['released'];
  const tail: Promise<unknown>[] = [steps.tail(budget.tailMs)];
  if (drained) {
    if (steps.release) {
      const r = steps.release(budget.tailMs).then((x) => {
        released = x;
      });
      tail.push(r);
    }
  } else {
    log.warn('In-flight writes did not finish within the shutdown budget: not releasing the lease', {
      drain: formatDuration(budget.drainMs),
      writesInFlight: steps.inFlight?.(),
    });
    if (steps.abandon) {
      steps.abandon();
      released = 'skipped';
    }
  }
  await within(Promise.allSettled(tail), budget.tailMs, scheduler);
  await steps.close();
  return { drained, released };
}
