import { config, Observable, type Observer, Subscriber, type Subscription } from '../rx/index.js';

type NextFn<T> = (value: T) => void;

/**
 * An Observable whose subscribers' callbacks cannot hurt the stream or the process: a `next`,
 * `error` or `complete` callback that throws is reported to `onError` instead of RxJS's
 * reportUnhandledError (which rethrows on a timer and, in Node, kills the process unless
 * `config.onUnhandledError` is set).
 *
 * Operator chains (`obs.pipe(map(f))`) subscribe with a Subscriber of their own: a throw inside
 * `f` travels down that consumer's chain as an error notification and never reaches the source.
 * What that chain's final subscriber does with it is the consumer's business; see
 * `guardUnhandledRxjsErrors` for the process-wide net.
 */
class IsolatedObservable<T> extends Observable<T> {
  private readonly onConsumerError: (err: unknown) => void;

  constructor(source: Observable<T>, onConsumerError: (err: unknown) => void) {
    super((subscriber) => source.subscribe(subscriber));
    this.onConsumerError = onConsumerError;
  }

  override subscribe(
    observerOrNext?: Partial<Observer<T>> | NextFn<T> | null,
    error?: ((err: unknown) => void) | null,
    complete?: (() => void) | null,
  ): Subscription {
    if (observerOrNext instanceof Subscriber) return super.subscribe(observerOrNext);
    const report = this.onConsumerError;
    const fail = (err: unknown): void => {
      try {
        report(err);
      } catch {
        /* the reporter must not throw either */
      }
    };
    let self: unknown;
    let next: NextFn<T> | undefined;
    let onError: ((err: unknown) => void) | undefined;
    let onComplete: (() => void) | undefined;
    if (typeof observerOrNext === 'function' || observerOrNext == null) {
      next = observerOrNext ?? undefined;
      onError = error ?? undefined;
      onComplete = complete ?? undefined;
    } else {
      self = observerOrNext;
      next = observerOrNext.next;
      onError = observerOrNext.error;
      onComplete = observerOrNext.complete;
    }
    // Hot path: one closure, no argument arrays.
    return super.subscribe({
      next: next
        ? (value: T) => {
            try {
              next.call(self, value);
            } catch (err) {
              fail(err);
            }
          }
        : undefined,
      error: onError
        ? (err: unknown) => {
            try {
              onError.call(self, err);
            } catch (e) {
              fail(e);
            }
          }
        : undefined,
      complete: onComplete
        ? () => {
            try {
              onComplete.call(self);
            } catch (e) {
              fail(e);
            }
          }
        : undefined,
    });
  }
}

export function isolateConsumers<T>(
  source: Observable<T>,
  onConsumerError: (err: unknown) => void,
): Observable<T> {
  return new IsolatedObservable(source, onConsumerError);
}

/**
 * Process-wide safety net for main.ts: routes errors RxJS could not deliver (a subscriber without
 * an error callback, a throwing callback somewhere in an operator chain) to `onError` instead of
 * rethrowing them on a timer, which would crash the process. Returns a function restoring the
 * previous handler.
 */
export function guardUnhandledRxjsErrors(onError: (err: unknown) => void): () => void {
  const previous = config.onUnhandledError;
  config.onUnhandledError = (err: unknown) => {
    try {
      onError(err);
    } catch {
      /* never throw from here */
    }
  };
  return () => {
    config.onUnhandledError = previous;
  };
}
