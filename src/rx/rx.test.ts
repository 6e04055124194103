import * as rxjs from 'rxjs';
import { describe, expect, it } from 'vitest';
import * as rx from './index.js';

describe('src/rx: RxJS pieces loaded one by one', () => {
  it('re-exports exactly the objects the rxjs root exports (an rxjs upgrade that moves one fails here)', () => {
    const names = Object.keys(rx).sort();
    expect(names.length).toBeGreaterThan(10);
    for (const name of names) {
      const ours = (rx as Record<string, unknown>)[name];
      const theirs = (rxjs as Record<string, unknown>)[name];
      expect(ours, name).toBeDefined();
      expect(ours, name).toBe(theirs);
    }
  });

  it('works together with the root exports (one Observable class)', async () => {
    const values = await rxjs.lastValueFrom(
      rx.from([1, 2, 3, 4]).pipe(
        rx.filter((n) => n % 2 === 0),
        rx.map((n) => n * 10),
        rxjs.toArray(),
      ),
    );
    expect(values).toEqual([20, 40]);
    expect(new rx.Subject<number>()).toBeInstanceOf(rxjs.Observable);
  });
});
