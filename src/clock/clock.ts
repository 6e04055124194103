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
