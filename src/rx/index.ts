/**
 * The parts of RxJS the controller uses, loaded from their own modules.
 *
 * `import { ... } from 'rxjs'` loads the whole library (every operator and observable creator,
 * several hundred CommonJS modules): about 11 MiB of resident memory in a controller whose peak at
 * 100 nodes is about 95 MiB. rxjs 7 publishes each piece under `rxjs/internal/*` (its package.json
 * `exports` map), and its root index re-exports exactly those modules, so the classes and functions
 * here are the very ones `rxjs` exports (`rx.test.ts` checks that they are identical, so an rxjs
 * upgrade that moves one fails there, not in production). Code under src/ imports RxJS values from
 * here; types may come from 'rxjs' directly (type imports are erased).
 */

export type {
  Observer,
  SchedulerAction,
  SchedulerLike,
  Subscription,
} from 'rxjs';
export { AsyncSubject } from 'rxjs/internal/AsyncSubject';
export { BehaviorSubject } from 'rxjs/internal/BehaviorSubject';
export { config } from 'rxjs/internal/config';
export { Observable } from 'rxjs/internal/Observable';
export { from } from 'rxjs/internal/observable/from';
export { interval } from 'rxjs/internal/observable/interval';
export { debounceTime } from 'rxjs/internal/operators/debounceTime';
export { exhaustMap } from 'rxjs/internal/operators/exhaustMap';
export { filter } from 'rxjs/internal/operators/filter';
export { map } from 'rxjs/internal/operators/map';
export { mergeMap } from 'rxjs/internal/operators/mergeMap';
export { ReplaySubject } from 'rxjs/internal/ReplaySubject';
export { Subject } from 'rxjs/internal/Subject';
export { Subscriber } from 'rxjs/internal/Subscriber';
export { asyncScheduler } from 'rxjs/internal/scheduler/async';
