import { asyncScheduler } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ReleaseResult } from '../election/elector.js';
import { memoryLogger } from '../log/logger.js';
import {
  drainWrites,
  runShutdown,
  SHUTDOWN_TAIL_MS,
  type ShutdownSteps,
  shutdownBudget,
} from './shutdown.js';

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

const never = () => new Promise<never>(() => {});
const after = <T>(ms: number, v: T) => new Promise<T>((r) => setTimeout(() => r(v), ms));

/** Steps that record what ran and when; each part takes as long as the test says (or hangs). */
function steps(o: { drainMs?: number; releaseMs?: number; tailMs?: number }) {
  const calls: Array<[string, number]> = [];
  const at = (what: string) => calls.push([what, Date.now()]);
  const s: ShutdownSteps = {
    stopActing: () => at('stopActing'),
    drain: () => {
      at('drain');
      return o.drainMs === undefined ? never() : after(o.drainMs, undefined);
    },
    release: (ms) => {
      at(`release(${ms})`);
      return o.releaseMs === undefined ? never() : after<ReleaseResult>(o.releaseMs, 'released');
    },
    abandon: () => at('abandon'),
    tail: (ms) => {
      at(`tail(${ms})`);
      return o.tailMs === undefined ? never() : after(o.tailMs, undefined);
    },
    close: async () => {
      at('close');
    },
  };
  return { s, calls };
}

async function run(s: ShutdownSteps, totalMs: number) {
  let result: Awaited<ReturnType<typeof runShutdown>> | undefined;
  const done = runShutdown(s, shutdownBudget(totalMs), asyncScheduler, memoryLogger()).then((r) => {
    result = r;
  });
  for (let t = 0; t < 60_000 && result === undefined; t += 10) await vi.advanceTimersByTimeAsync(10);
  await done;
  return { result: result!, took: Date.now() };
}

describe('shutdown', () => {
  it('budget: the tail gets 3 s (or half of a short budget), the drain the rest', () => {
    expect(shutdownBudget(10_000)).toEqual({ totalMs: 10_000, drainMs: 7_000, tailMs: SHUTDOWN_TAIL_MS });
    expect(shutdownBudget(4_000)).toEqual({ totalMs: 4_000, drainMs: 2_000, tailMs: 2_000 });
    expect(shutdownBudget(0)).toEqual({ totalMs: 0, drainMs: 0, tailMs: 0 });
  });

  it('a clean drain: writes stop first, then the lease is released and the identity lease deleted', async () => {
    const { s, calls } = steps({ drainMs: 1_200, releaseMs: 40, tailMs: 30 });
    const { result, took } = await run(s, 10_000);
    expect(result).toEqual({ drained: true, released: 'released' });
    expect(calls).toEqual([
      ['stopActing', 0],
      ['drain', 0],
      ['tail(3000)', 1_200],
      ['release(3000)', 1_200],
      ['close', 1_240],
    ]);
    expect(took).toBe(1_240);
  });

  it('writes still on the wire when the drain time is up: the lease is NOT released, it expires', async () => {
    const { s, calls } = steps({ releaseMs: 40, tailMs: 30 });
    const { result, took } = await run(s, 10_000);
    expect(result).toEqual({ drained: false, released: 'skipped' });
    expect(calls.map(([c]) => c)).toEqual(['stopActing', 'drain', 'tail(3000)', 'abandon', 'close']);
    expect(took).toBe(7_030);
  });

  it('everything hangs (API server unreachable): the whole shutdown still ends within the budget', async () => {
    const hung = steps({});
    const { took } = await run(hung.s, 10_000);
    expect(took).toBe(10_000);
    expect(hung.calls.at(-1)).toEqual(['close', 10_000]);
    // A clean drain and a hung release: the same bound.
    const stuck = steps({ drainMs: 500 });
    const t0 = Date.now();
    const r = await run(stuck.s, 10_000);
    expect(r.took - t0).toBe(500 + SHUTDOWN_TAIL_MS);
    expect(r.result).toEqual({ drained: true, released: undefined });
  });
});

describe('drainWrites', () => {
  it('waits for the writes on the wire only: a reconciler still in a read does not hold it', async () => {
    const calls: string[] = [];
    let writesDone: () => void = () => {};
    const drained = drainWrites(
      {
        stop: () => {
          calls.push('stop');
          return never(); // a worker in a writer's re-read or retry wait
        },
      },
      {
        idle: () => {
          calls.push('idle');
          return new Promise<void>((r) => {
            writesDone = r;
          });
        },
      },
    );
    let done = false;
    void drained.then(() => {
      done = true;
    });
    await vi.advanceTimersByTimeAsync(1000);
    expect(calls).toEqual(['stop', 'idle']);
    expect(done).toBe(false); // a write is still on the wire
    writesDone();
    await vi.advanceTimersByTimeAsync(0);
    expect(done).toBe(true);
  });
});
