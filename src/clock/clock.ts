import { asyncScheduler, type SchedulerLike } from '../rx/index.js';

/**
 * Time as this controller sees it. `scheduler.now()` is MONOTONIC milliseconds (never jumps with
 * NTP or a manual clock change) and is what every staleness or expiry judgement uses. `wall()` is
 * only for timestamps written into API objects (lastTransitionTime, timeAdded, acquireTime).
 *
 * Tests pass an RxJS TestScheduler/VirtualTimeScheduler as `scheduler` and a fake `wall`.
 */
export interface Clock {
  scheduler: SchedulerLike;
  wall: () => number;
}

/** RxJS's asyncScheduler, but reporting monotonic time (performance.now) instead of Date.now. */
export const monotonicScheduler: SchedulerLike = {
  now: () => performance.now(),
  schedule: asyncScheduler.schedule.bind(asyncScheduler) as SchedulerLike['schedule'],
};

export const systemClock: Clock = { scheduler: monotonicScheduler, wall: () => Date.now() };

/**
 * The longest delay a Node.js timer takes: 2^31 - 1 ms, about 24.8 days. A longer one fires after
 * 1 ms instead (with a TimeoutOverflowWarning), and a timer that finds nothing due and re-arms
 * then spins ~1,000 times a second.
 */
export const MAX_TIMER_DELAY_MS = 2 ** 31 - 1;

/**
 * A delay any timer takes (setTimeout, setInterval, a scheduler's schedule): NaN and negative
 * delays become 0, longer ones than {@link MAX_TIMER_DELAY_MS} become that. A timer cut short
 * fires early, so its callback must check that its time has come and arm again if not; every
 * delay that derives from config or data goes through here.
 */
export function timerDelay(ms: number): number {
  if (!(ms > 0)) return 0;
  return Math.min(ms, MAX_TIMER_DELAY_MS);
}
