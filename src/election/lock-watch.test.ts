import { asyncScheduler } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { KubeClient } from '../kube/client.js';
import { memoryLogger } from '../log/logger.js';
import { ServerRewindSignal } from '../watch/rewind.js';
import { listPage, ScriptedTransport } from '../watch/testing.js';
import { watchLock } from './lock-watch.js';

const flush = () => vi.advanceTimersByTimeAsync(0);

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('watchLock', () => {
  it('relists when another watch of the same server finds it rewound (etcd restored from a backup)', async () => {
    const t = new ScriptedTransport();
    const rewind = new ServerRewindSignal();
    const lock = watchLock(
      {
        client: {} as KubeClient,
        clock: { scheduler: asyncScheduler },
        logger: memoryLogger(),
        rewind,
        wrapTransport: () => t,
      },
      'nlc-system',
      'node-lifecycle-controller',
    );
    lock.start();
    await flush();
    t.lastList().resolve(listPage([], '10'));
    await flush();
    t.lastWatch().open();
    await flush();
    expect(t.lists).toHaveLength(1);
    rewind.raise('leases');
    await flush();
    expect(t.lists).toHaveLength(2);
    expect(t.lastList().req.resourceVersion).toBeUndefined();
    lock.stop();
  });
});
