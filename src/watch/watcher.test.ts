import { asyncScheduler, config, type Subscription } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { KubeApiError, KubeTransportError } from '../kube/client.js';
import type { KubeObject } from '../kube/types.js';
import { memoryLogger } from '../log/logger.js';
import { ServerRewindSignal } from './rewind.js';
import { WatchStatus } from './status.js';
import { bookmark, listPage, obj, ScriptedTransport } from './testing.js';
import type { WatchEvent, WatchTuningOverrides } from './types.js';
import { watch } from './watcher.js';

const flush = () => vi.advanceTimersByTimeAsync(0);
const advance = (ms: number) => vi.advanceTimersByTimeAsync(ms);

/** Compact event log: 'Init', 'InitApply:a@1', 'Apply:a@2', 'Delete:a@2', 'InitDone'. */
function fmt(e: WatchEvent<KubeObject>): string {
  return 'object' in e ? `${e.type}:${e.object.metadata.name}@${e.object.metadata.resourceVersion}` : e.type;
}

function setup(tuning: WatchTuningOverrides = {}) {
  const t = new ScriptedTransport();
  const status = new WatchStatus('things', asyncScheduler);
  const log = memoryLogger();
  const events: string[] = [];
  const sub: Subscription = watch<KubeObject>({
    resource: 'things',
    transport: t,
    scheduler: asyncScheduler,
    status,
    logger: log,
    random: () => 0.5,
    tuning,
  }).subscribe((e) => events.push(fmt(e)));
  return { t, status, log, events, sub };
}

/** Runs the initial list (one page) and opens the first watch. */
async function synced(tuning: WatchTuningOverrides = {}, items = [obj('a', '5'), obj('b', '6')], rv = '10') {
  const s = setup(tuning);
  await flush();
  s.t.lastList().resolve(listPage(items, rv));
  await flush();
  s.t.lastWatch().open();
  await flush();
  s.events.length = 0;
  return s;
}

const ev = (type: string, o: KubeObject) => ({ type, object: o });
/** What kube-apiserver answers a read from a resourceVersion it has not reached (after 3 s). */
const tooLarge = () =>
  new KubeApiError(
    504,
    {
      kind: 'Status',
      status: 'Failure',
      message: 'Timeout: Too large resource version: 10, current: 3',
      reason: 'Timeout',
      details: { causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }] },
      code: 504,
    },
    {},
    'GET /x',
  );
const gone = () => new KubeApiError(410, { kind: 'Status', code: 410, reason: 'Expired' }, {}, 'GET /x');
const refused = () => new KubeTransportError('connect ECONNREFUSED', 'ECONNREFUSED');

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('watch: list then watch', () => {
  it('pages the list with limit/continue, emits Init..InitDone, then watches from the list RV with bookmarks', async () => {
    const { t, events, status } = setup({ pageSize: 2 });
    await flush();
    expect(t.lists).toHaveLength(1);
    expect(t.lists[0]!.req).toMatchObject({ limit: 2, continue: undefined });
    t.lists[0]!.resolve(listPage([obj('a', '5'), obj('b', '6')], '10', 'tok1'));
    await flush();
    expect(t.lists).toHaveLength(2);
    expect(t.lists[1]!.req.continue).toBe('tok1');
    expect(status.snapshot().synced).toBe(false);
    t.lists[1]!.resolve(listPage([obj('c', '7', 'ns1')], '10'));
    await flush();
    expect(events).toEqual(['Init', 'InitApply:a@5', 'InitApply:b@6', 'InitApply:c@7', 'InitDone']);
    expect(t.watches).toHaveLength(1);
    const w = t.watches[0]!.req;
    expect(w.resourceVersion).toBe('10');
    expect(w.allowWatchBookmarks).toBe(true);
    // random 0.5 -> the middle of [300, 600]
    expect(w.timeoutSeconds).toBe(450);
    const h = status.snapshot();
    expect(h).toMatchObject({ synced: true, connected: true, listing: false, reconnects: 0, relists: 0 });
  });

  it('emits Apply and Delete from watch events and tracks the resourceVersion', async () => {
    const { t, events, status } = await synced();
    t.lastWatch().send(
      ev('ADDED', obj('c', '11')),
      ev('MODIFIED', obj('a', '12')),
      ev('DELETED', obj('b', '13')),
    );
    expect(events).toEqual(['Apply:c@11', 'Apply:a@12', 'Delete:b@13']);
    expect(status.events).toMatchObject({ ADDED: 1, MODIFIED: 1, DELETED: 1 });
    t.lastWatch().end();
    await flush();
    expect(t.lastWatch().req.resourceVersion).toBe('13');
  });

  it('strips objects and skips (and counts) ones without metadata.name', async () => {
    const t = new ScriptedTransport();
    const status = new WatchStatus('things', asyncScheduler);
    const seen: unknown[] = [];
    watch<KubeObject>({
      resource: 'things',
      transport: t,
      scheduler: asyncScheduler,
      status,
      random: () => 0.5,
      strip: (raw) => {
        const m = (raw as KubeObject).metadata;
        return m?.name ? { metadata: { name: m.name, resourceVersion: m.resourceVersion } } : undefined;
      },
    }).subscribe((e) => seen.push(e));
    await flush();
    t.lastList().resolve(
      listPage([{ metadata: { name: 'a', resourceVersion: '1', uid: 'x' } }, { metadata: {} }], '2'),
    );
    await flush();
    expect(seen).toEqual([
      { type: 'Init' },
      { type: 'InitApply', object: { metadata: { name: 'a', resourceVersion: '1' } } },
      { type: 'InitDone' },
    ]);
    expect(status.errorCount('malformed')).toBe(1);
  });
});

describe('watch: resuming', () => {
  it('resumes at once from the last RV seen after a clean close', async () => {
    const { t, events, status } = await synced();
    t.lastWatch().send(ev('MODIFIED', obj('a', '20')));
    await advance(5000);
    t.lastWatch().end();
    await flush();
    expect(t.watches).toHaveLength(2);
    expect(t.watches[1]!.req.resourceVersion).toBe('20');
    expect(t.lists).toHaveLength(1);
    expect(status.snapshot()).toMatchObject({ reconnects: 1, connected: true });
    expect(status.errors.size).toBe(0);
    t.watches[1]!.open().send(ev('MODIFIED', obj('b', '21')));
    await flush();
    expect(events).toEqual(['Apply:a@20', 'Apply:b@21']);
  });

  it('treats a watch closed at once without events as a failure (no hot loop)', async () => {
    const { t, status } = await synced();
    t.lastWatch().end();
    await flush();
    expect(t.watches).toHaveLength(1);
    expect(status.errorCount('short_watch')).toBe(1);
    await advance(799);
    expect(t.watches).toHaveLength(1);
    await advance(1);
    expect(t.watches).toHaveLength(2);
    expect(t.watches[1]!.req.resourceVersion).toBe('10');
  });

  it('bookmarks move the resume point, count as events and emit nothing', async () => {
    const { t, events, status } = await synced();
    await advance(30_000);
    t.lastWatch().send(bookmark('55'));
    expect(events).toEqual([]);
    expect(status.events.BOOKMARK).toBe(1);
    expect(status.snapshot().lastEventAt).toBe(Date.now());
    t.lastWatch().end();
    await flush();
    expect(t.lastWatch().req.resourceVersion).toBe('55');
  });

  it('on a network error: connected=false, backoff, then resumes the watch from the last RV', async () => {
    const { t, status, events } = await synced();
    t.lastWatch().send(ev('MODIFIED', obj('a', '11')));
    const first = t.lastWatch();
    first.fail(new KubeTransportError('socket hang up', 'ECONNRESET'));
    await flush();
    expect(first.released).toBe(true);
    expect(first.signal.aborted).toBe(true);
    expect(status.snapshot()).toMatchObject({ connected: false, lastError: 'network' });
    expect(status.errorCount('network')).toBe(1);
    await advance(799);
    expect(t.watches).toHaveLength(1);
    await advance(1);
    expect(t.watches).toHaveLength(2);
    expect(t.lastWatch().req.resourceVersion).toBe('11');
    t.lastWatch().open();
    await flush();
    expect(status.snapshot()).toMatchObject({ connected: true, reconnects: 1 });
    expect(t.lists).toHaveLength(1);
    expect(events).toEqual(['Apply:a@11']);
  });

  it('backs off 0.8s doubling to a 30s cap, and starts again from 0.8s after 120s of health', async () => {
    const { t } = await synced();
    const delays: number[] = [];
    let last = Date.now();
    const failAndMeasure = async (i: number) => {
      const n = t.watches.length;
      // The first failure breaks the open stream; later ones refuse the new watch requests.
      if (i === 0) t.lastWatch().fail(refused());
      else t.lastWatch().reject(refused());
      await flush();
      last = Date.now();
      while (t.watches.length === n) await advance(100);
      delays.push(Date.now() - last);
    };
    for (let i = 0; i < 8; i++) await failAndMeasure(i);
    expect(delays).toEqual([800, 1600, 3200, 6400, 12800, 25600, 30000, 30000]);

    // Healthy (bookmarks every 30 s) for 119 s is not enough: the next delay is still 30 s...
    let rv = 70;
    const healthyFor = async (ms: number) => {
      t.lastWatch().open();
      for (let left = ms; left > 0; left -= 30_000) {
        await advance(Math.min(30_000, left));
        t.lastWatch().send(bookmark(String(rv++)));
      }
    };
    await healthyFor(119_000);
    let n = t.watches.length;
    t.lastWatch().fail(refused());
    await advance(29_999);
    expect(t.watches).toHaveLength(n);
    await advance(1);
    expect(t.watches).toHaveLength(n + 1);
    expect(t.lastWatch().req.resourceVersion).toBe(String(rv - 1));
    // ...120 s is: back to 0.8 s.
    await healthyFor(120_000);
    n = t.watches.length;
    t.lastWatch().fail(refused());
    await advance(799);
    expect(t.watches).toHaveLength(n);
    await advance(1);
    expect(t.watches).toHaveLength(n + 1);
  });

  it('keeps jittered delays within ±20% and under the cap', async () => {
    const { backoffDelay } = await import('./backoff.js');
    const o = { initialMs: 800, factor: 2, maxMs: 30_000, resetAfterMs: 120_000, jitter: 0.2 };
    expect(backoffDelay(0, o, () => 0)).toBe(640);
    expect(backoffDelay(0, o, () => 0.999999)).toBe(960);
    expect(backoffDelay(10, o, () => 0.999999)).toBe(30_000);
    expect(backoffDelay(10, o, () => 0)).toBe(24_000);
  });
});

describe('watch: 410 Gone', () => {
  it('relists at once on HTTP 410 and emits Delete for objects that vanished', async () => {
    const { t, events, status } = await synced({}, [obj('a', '5'), obj('b', '6'), obj('c', '7')]);
    t.lastWatch().send(ev('ADDED', obj('d', '11')));
    t.lastWatch().fail(refused());
    await advance(800);
    t.lastWatch().reject(gone());
    await flush();
    expect(t.lists).toHaveLength(2);
    expect(status.snapshot()).toMatchObject({ relists: 1, listing: true, lastError: 'gone' });
    // b and d were deleted while we were away; a changed; e is new.
    t.lastList().resolve(listPage([obj('a', '30'), obj('c', '7'), obj('e', '31')], '40'));
    await flush();
    expect(events).toEqual([
      'Apply:d@11',
      'Init',
      'InitApply:a@30',
      'InitApply:c@7',
      'InitApply:e@31',
      'Delete:b@6',
      'Delete:d@11',
      'InitDone',
    ]);
    expect(t.lastWatch().req.resourceVersion).toBe('40');
    expect(status.errorCount('gone')).toBe(1);
  });

  it('relists on an ERROR event with code 410 inside the stream', async () => {
    const { t, events, status } = await synced();
    const w = t.lastWatch();
    w.send(
      ev('MODIFIED', obj('a', '11')),
      {
        type: 'ERROR',
        object: {
          kind: 'Status',
          status: 'Failure',
          message: 'too old resource version',
          reason: 'Expired',
          code: 410,
        },
      },
      ev('MODIFIED', obj('a', '12')),
    );
    await flush();
    // Nothing after the ERROR line is applied; the stream is released and a relist starts at once.
    expect(events).toEqual(['Apply:a@11', 'Init']);
    expect(w.released).toBe(true);
    expect(w.signal.aborted).toBe(true);
    expect(t.lists).toHaveLength(2);
    expect(status.events.ERROR).toBe(1);
    expect(status.errorCount('gone')).toBe(1);
    t.lastList().resolve(listPage([obj('a', '12')], '50'));
    await flush();
    expect(events.slice(2)).toEqual(['InitApply:a@12', 'Delete:b@6', 'InitDone']);
  });

  it('backs off when 410s repeat', async () => {
    const { t } = await synced();
    t.lastWatch().send({ type: 'ERROR', object: { kind: 'Status', code: 410 } });
    await flush();
    expect(t.lists).toHaveLength(2);
    t.lastList().resolve(listPage([], '60'));
    await flush();
    t.lastWatch().reject(gone());
    await flush();
    expect(t.lists).toHaveLength(2);
    await advance(1600); // attempt 1 -> 1.6 s
    expect(t.lists).toHaveLength(3);
  });

  it('restarts a paginated list from scratch when a page fails (Init again)', async () => {
    const { t, events } = setup({ pageSize: 1 });
    await flush();
    t.lastList().resolve(listPage([obj('a', '1')], '9', 'tok'));
    await flush();
    t.lastList().reject(gone()); // continue token expired
    await flush();
    expect(t.lists).toHaveLength(3);
    expect(t.lastList().req.continue).toBeUndefined();
    t.lastList().resolve(listPage([obj('a', '1'), obj('b', '2')], '9'));
    await flush();
    expect(events).toEqual(['Init', 'InitApply:a@1', 'Init', 'InitApply:a@1', 'InitApply:b@2', 'InitDone']);
  });
});

describe('watch: throttling and timeouts', () => {
  it('waits for Retry-After on a 429 list, then lists again', async () => {
    const { t, status } = setup();
    await flush();
    t.lastList().reject(
      new KubeApiError(429, { kind: 'Status', code: 429 }, { 'retry-after': '7' }, 'GET /x'),
    );
    await flush();
    expect(status.errorCount('too_many_requests')).toBe(1);
    await advance(6999);
    expect(t.lists).toHaveLength(1);
    await advance(1);
    expect(t.lists).toHaveLength(2);
  });

  it('resumes (not relists) after Retry-After when a watch gets 429', async () => {
    const { t } = await synced();
    t.lastWatch().fail(refused());
    await advance(800);
    expect(t.watches).toHaveLength(2);
    // Backoff would say 1.6 s; the server says 3 s.
    t.lastWatch().reject(new KubeApiError(429, { details: { retryAfterSeconds: 3 } }, {}, 'GET /x'));
    await advance(2999);
    expect(t.watches).toHaveLength(2);
    await advance(1);
    expect(t.watches).toHaveLength(3);
    expect(t.lastWatch().req.resourceVersion).toBe('10');
    expect(t.lists).toHaveLength(1);
  });

  it('re-opens a quiet watch after the idle timeout at once, from the last resourceVersion', async () => {
    const { t, status } = await synced({ idleTimeoutMs: 90_000 });
    const w = t.lastWatch();
    // Data every 60 s keeps it alive.
    for (let i = 0; i < 3; i++) {
      await advance(60_000);
      w.send(bookmark(String(20 + i)));
    }
    expect(w.signal.aborted).toBe(false);
    const contact = status.snapshot().lastContactAt!;
    await advance(89_999);
    expect(w.signal.aborted).toBe(false);
    await advance(1);
    expect(w.signal.aborted).toBe(true);
    expect(w.released).toBe(true);
    // No backoff: the next watch is already open, and the stream never counted as disconnected.
    expect(t.watches).toHaveLength(2);
    expect(t.lastWatch().req.resourceVersion).toBe('22');
    expect(status.snapshot()).toMatchObject({ connected: true });
    expect(status.errorCount('idle_timeout')).toBe(1);
    // The server answering the new watch is fresh contact.
    t.lastWatch().open();
    await flush();
    expect(status.snapshot().lastContactAt).toBeGreaterThan(contact);
  });

  it('a quiet watch whose re-open is never answered fails and backs off', async () => {
    const { t, status } = await synced({ idleTimeoutMs: 90_000 });
    await advance(90_000); // quiet: re-opened at once
    expect(t.watches).toHaveLength(2);
    const contact = status.snapshot().lastContactAt!;
    await advance(90_000); // the re-open got no answer at all
    expect(t.lastWatch().signal.aborted).toBe(true);
    expect(status.snapshot()).toMatchObject({ connected: false, lastError: 'idle_timeout' });
    expect(status.snapshot().lastContactAt).toBe(contact);
    await advance(799);
    expect(t.watches).toHaveLength(2);
    await advance(1);
    expect(t.watches).toHaveLength(3);
  });

  it('the idle timeout also covers a watch request that never gets an answer', async () => {
    const { t, status } = await synced({ idleTimeoutMs: 60_000 });
    t.lastWatch().end();
    await advance(2000); // clean close... (the first watch had no events: short watch backoff 0.8 s)
    const pending = t.lastWatch();
    await advance(60_000);
    expect(pending.signal.aborted).toBe(true);
    expect(status.errorCount('idle_timeout')).toBe(1);
  });

  it('aborts a list page that exceeds its deadline and retries after backoff', async () => {
    const { t, status } = setup({ listTimeoutMs: 10_000 });
    await flush();
    const first = t.lastList();
    await advance(10_000);
    expect(first.signal.aborted).toBe(true);
    expect(status.errorCount('timeout')).toBe(1);
    // A late answer is ignored.
    first.resolve(listPage([obj('late', '1')], '5'));
    await advance(800);
    expect(t.lists).toHaveLength(2);
    expect(t.watches).toHaveLength(0);
  });
});

describe('watch: bad data', () => {
  it('counts and skips malformed lines, joins lines split across chunks, keeps the stream', async () => {
    const { t, events, status, log } = await synced();
    const w = t.lastWatch();
    const line = (o: unknown) => JSON.stringify(o);
    w.chunk(`${line(ev('MODIFIED', obj('a', '11')))}\n{"type":"MODIFIED","object":{not json}\n`);
    w.chunk(`${line(ev('MODIFIED', obj('b', '12'))).slice(0, 17)}`);
    w.chunk(`${line(ev('MODIFIED', obj('b', '12'))).slice(17)}\n["array"]\n42\n`);
    w.chunk(`{"type":"WHAT","object":{}}\n{"type":"ADDED","object":{"metadata":{}}}\n\n`);
    w.chunk(`${line(ev('ADDED', obj('c', '13')))}\n`);
    expect(events).toEqual(['Apply:a@11', 'Apply:b@12', 'Apply:c@13']);
    expect(status.errorCount('malformed')).toBe(5);
    expect(w.signal.aborted).toBe(false);
    expect(log.lines.filter((l) => l.msg === 'skipping malformed watch data')).toHaveLength(1);
  });

  it('a watch line over the limit fails the connection', async () => {
    const { t, status } = await synced({ maxLineLength: 100 });
    t.lastWatch().chunk('x'.repeat(101));
    await flush();
    expect(t.lastWatch().signal.aborted).toBe(true);
    expect(status.errorCount('line_too_long')).toBe(1);
  });
});

describe('watch: unsubscribe', () => {
  it('mid-list: aborts the request, leaves no timer, ignores the late answer', async () => {
    const { t, sub, events } = setup();
    await flush();
    const l = t.lastList();
    expect(vi.getTimerCount()).toBe(1); // the list deadline
    sub.unsubscribe();
    expect(l.signal.aborted).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
    l.resolve(listPage([obj('a', '1')], '2'));
    await advance(600_000);
    expect(events).toEqual(['Init']);
    expect(t.lists).toHaveLength(1);
    expect(t.watches).toHaveLength(0);
  });

  it('mid-watch: aborts, releases the stream, leaves no timer', async () => {
    const { t, sub, status } = await synced();
    const w = t.lastWatch();
    expect(vi.getTimerCount()).toBe(1); // the idle check
    sub.unsubscribe();
    expect(w.signal.aborted).toBe(true);
    expect(w.released).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
    expect(status.snapshot().connected).toBe(false);
    await advance(600_000);
    expect(t.watches).toHaveLength(1);
  });

  it('during backoff: cancels the pending retry', async () => {
    const { t, sub } = await synced();
    t.lastWatch().reject(refused());
    await flush();
    expect(vi.getTimerCount()).toBe(1);
    sub.unsubscribe();
    expect(vi.getTimerCount()).toBe(0);
    await advance(60_000);
    expect(t.watches).toHaveLength(1);
  });

  it('from inside next (take-style) stops the loop at once', async () => {
    const t = new ScriptedTransport();
    const seen: string[] = [];
    const sub: Subscription = watch<KubeObject>({
      resource: 'x',
      transport: t,
      scheduler: asyncScheduler,
    }).subscribe((e) => {
      seen.push(fmt(e));
      if (seen.length === 2) sub.unsubscribe();
    });
    await flush();
    const l = t.lastList();
    l.resolve(listPage([obj('a', '1'), obj('b', '2'), obj('c', '3')], '4'));
    await flush();
    expect(seen).toEqual(['Init', 'InitApply:a@1']);
    expect(t.watches).toHaveLength(0);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('watch: consumers that throw', () => {
  it('a throwing subscriber is counted and logged; the stream goes on; RxJS never sees the error', async () => {
    const onUnhandled = vi.fn();
    const previous = config.onUnhandledError;
    config.onUnhandledError = onUnhandled;
    try {
      const t = new ScriptedTransport();
      const status = new WatchStatus('x', asyncScheduler);
      const log = memoryLogger();
      const seen: string[] = [];
      watch<KubeObject>({
        resource: 'x',
        transport: t,
        scheduler: asyncScheduler,
        status,
        logger: log,
      }).subscribe({
        next(e) {
          seen.push(fmt(e));
          throw new Error('consumer bug');
        },
      });
      await flush();
      t.lastList().resolve(listPage([obj('a', '1'), obj('b', '2')], '3'));
      await flush();
      t.lastWatch()
        .open()
        .send(ev('MODIFIED', obj('a', '4')));
      await advance(20_000);
      t.lastWatch().send(ev('MODIFIED', obj('a', '5')));
      await flush();
      expect(seen).toEqual(['Init', 'InitApply:a@1', 'InitApply:b@2', 'InitDone', 'Apply:a@4', 'Apply:a@5']);
      expect(status.errorCount('subscriber')).toBe(6);
      expect(status.snapshot().connected).toBe(true);
      expect(t.lastWatch().signal.aborted).toBe(false);
      // Logged at most once per 10 s.
      const logged = log.lines.filter((l) => l.msg === 'watch subscriber threw; the stream goes on');
      expect(logged).toHaveLength(2);
      expect(logged[1]!.suppressed).toBe(4);
      await advance(1000);
      expect(onUnhandled).not.toHaveBeenCalled();
    } finally {
      config.onUnhandledError = previous;
    }
  });
});

describe('watch: a resourceVersion ahead of the server (etcd restored from a backup)', () => {
  // kube-apiserver accepts a watch from a resourceVersion it has not reached and sends nothing, not
  // even bookmarks, until its revision passes it (seen on the real server after an etcd restore and
  // a kube-apiserver restart; kubernetes/kubernetes#107457): such a watch is only ever quiet.
  it('a quiet watch asks whether the server has data as new as its resourceVersion; "too large" relists at once', async () => {
    const { t, status, events } = await synced({ idleTimeoutMs: 30_000 });
    await advance(30_000);
    // Re-opened at once from the same resourceVersion, and probed with a list of one object.
    expect(t.watches).toHaveLength(2);
    expect(t.lists).toHaveLength(2);
    expect(t.lastList().req).toMatchObject({
      limit: 1,
      resourceVersion: '10',
      resourceVersionMatch: 'NotOlderThan',
    });
    t.lastWatch().open(); // the server accepts the watch from the future and says nothing
    t.lastList().reject(tooLarge());
    await flush();
    expect(t.lists).toHaveLength(3);
    expect(t.lastList().req).toMatchObject({ limit: 100, continue: undefined });
    expect(t.lastList().req.resourceVersion).toBeUndefined();
    expect(t.lastWatch().released).toBe(true);
    expect(status.errorCount('too_large_resource_version')).toBe(1);
    expect(status.snapshot()).toMatchObject({ relists: 1, listing: true });
    t.lastList().resolve(listPage([obj('a', '2'), obj('c', '3')], '4'));
    await flush();
    expect(events).toEqual(['Init', 'InitApply:a@2', 'InitApply:c@3', 'Delete:b@6', 'InitDone']);
    expect(t.lastWatch().req.resourceVersion).toBe('4');
  });

  it('a probe the server answers (it has our resourceVersion) changes nothing; another error neither', async () => {
    const { t, status } = await synced({ idleTimeoutMs: 30_000 });
    await advance(30_000);
    t.lastWatch().open();
    t.lastList().resolve(listPage([obj('a', '5')], '12'));
    await flush();
    await advance(30_000);
    t.lastWatch().open();
    t.lastList().reject(new KubeApiError(503, { kind: 'Status', code: 503 }, {}, 'GET /x'));
    await flush();
    expect(t.lists).toHaveLength(3);
    expect(t.watches).toHaveLength(3);
    expect(t.lastWatch().released).toBe(false);
    expect(status.snapshot()).toMatchObject({ relists: 0, connected: true });
  });

  it('a late "too large" for a resourceVersion we moved past since is ignored', async () => {
    const { t, status } = await synced({ idleTimeoutMs: 30_000 });
    await advance(30_000);
    t.lastWatch()
      .open()
      .send(ev('MODIFIED', obj('a', '11')));
    await flush();
    t.lastList().reject(tooLarge());
    await flush();
    expect(t.lists).toHaveLength(2);
    expect(status.snapshot().relists).toBe(0);
  });

  it('watches sharing a rewind signal: when one finds the server behind, the others relist at once', async () => {
    // Their resourceVersions come from the history the server lost: even one the new history has
    // passed (no "too large", no 410) resumes a watch that skips what was written since the
    // restore, while the store keeps what the lost history said.
    const rewind = new ServerRewindSignal();
    const open = async (resource: string) => {
      const t = new ScriptedTransport();
      const status = new WatchStatus(resource, asyncScheduler);
      const sub = watch<KubeObject>({
        resource,
        transport: t,
        scheduler: asyncScheduler,
        status,
        random: () => 0.5,
        tuning: { idleTimeoutMs: resource === 'leases' ? 30_000 : 90_000 },
        rewind,
      }).subscribe();
      await flush();
      t.lastList().resolve(listPage([obj('a', '5')], '10'));
      await flush();
      t.lastWatch().open();
      await flush();
      return { t, status, sub };
    };
    const leases = await open('leases');
    const nodes = await open('nodes');
    const pods = await open('pods');
    pods.t.lastWatch().fail(gone()); // relisting already, from the server as it is now
    await flush();
    expect(pods.t.lists).toHaveLength(2);
    await advance(30_000);
    leases.t.lastWatch().open();
    expect(nodes.t.lists).toHaveLength(1);
    leases.t.lastList().reject(tooLarge());
    await flush();
    expect(leases.status.snapshot()).toMatchObject({ relists: 1, listing: true });
    expect(leases.t.lists).toHaveLength(3);
    // The node watch relists at once, 60 s before its own idle timeout, without asking.
    expect(nodes.t.lists).toHaveLength(2);
    expect(nodes.t.lastList().req).toMatchObject({ limit: 100 });
    expect(nodes.t.lastList().req.resourceVersion).toBeUndefined();
    expect(nodes.t.lastWatch().released).toBe(true);
    expect(nodes.status.snapshot()).toMatchObject({ relists: 1, listing: true, lastError: 'server_rewound' });
    // The list in progress is left alone.
    expect(pods.t.lists).toHaveLength(2);
    expect(pods.t.lastList().signal.aborted).toBe(false);
    for (const w of [leases, nodes, pods]) w.sub.unsubscribe();
  });

  it('a watch refused with 504 "Too large resource version" relists (as client-go does); a plain 504 resumes', async () => {
    const { t, status } = await synced();
    t.lastWatch().fail(refused());
    await advance(800);
    t.lastWatch().reject(
      new KubeApiError(504, { kind: 'Status', code: 504, reason: 'Timeout' }, {}, 'GET /x'),
    );
    await advance(1600);
    expect(t.lists).toHaveLength(1);
    expect(t.lastWatch().req.resourceVersion).toBe('10');
    t.lastWatch().reject(tooLarge());
    await advance(3200);
    expect(t.lists).toHaveLength(2);
    expect(status.errorCount('too_large_resource_version')).toBe(1);
  });
});
