import { config, Observable, Subject } from 'rxjs';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { guardUnhandledRxjsErrors, isolateConsumers } from './isolate.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('isolateConsumers', () => {
  it('reports throws from next/error/complete callbacks instead of RxJS', () => {
    vi.useFakeTimers();
    const previous = config.onUnhandledError;
    const unhandled = vi.fn();
    config.onUnhandledError = unhandled;
    try {
      const reported: unknown[] = [];
      const s = new Subject<number>();
      const iso = isolateConsumers(s, (e) => reported.push((e as Error).message));
      const got: number[] = [];
      iso.subscribe((v) => {
        got.push(v);
        throw new Error(`next ${v}`);
      });
      iso.subscribe({
        next: () => undefined,
        complete() {
          throw new Error('complete');
        },
      });
      s.next(1);
      s.next(2);
      s.complete();
      const e = new Subject<number>();
      isolateConsumers(e, (x) => reported.push((x as Error).message)).subscribe({
        error() {
          throw new Error('error cb');
        },
      });
      e.error(new Error('source failed'));
      vi.runAllTimers();
      expect(got).toEqual([1, 2]);
      expect(reported).toEqual(['next 1', 'next 2', 'complete', 'error cb']);
      expect(unhandled).not.toHaveBeenCalled();
    } finally {
      config.onUnhandledError = previous;
    }
  });

  it('keeps `this` of observer objects', () => {
    const iso = isolateConsumers(new Observable<number>((s) => s.next(5)), () => undefined);
    const target = {
      sum: 0,
      next(v: number) {
        this.sum += v;
      },
    };
    iso.subscribe(target);
    expect(target.sum).toBe(5);
  });

  it('guardUnhandledRxjsErrors catches what a bare subscriber would crash on, and restores', () => {
    vi.useFakeTimers();
    const before = config.onUnhandledError;
    const seen: unknown[] = [];
    const restore = guardUnhandledRxjsErrors((e) => seen.push((e as Error).message));
    try {
      new Observable<number>((s) => s.error(new Error('nobody listens'))).subscribe();
      vi.runAllTimers();
      expect(seen).toEqual(['nobody listens']);
    } finally {
      restore();
    }
    expect(config.onUnhandledError).toBe(before);
  });
});
