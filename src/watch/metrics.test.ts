import { Registry } from 'prom-client';
import { asyncScheduler } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createWatchMetrics } from './metrics.js';
import { Reflector } from './reflector.js';
import { isHealthy, WatchStatus, watchBlindness } from './status.js';
import { bookmark, listPage, obj, ScriptedTransport } from './testing.js';

const flush = () => vi.advanceTimersByTimeAsync(0);

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

async function values(registry: Registry, name: string): Promise<Record<string, number>> {
  const m = await registry.getSingleMetric(name)!.get();
  const out: Record<string, number> = {};
  for (const v of m.values) {
    const labels = Object.entries(v.labels)
      .map(([k, x]) => `${k}=${x}`)
      .join(',');
    out[labels] = v.value;
  }
  return out;
}

describe('watch metrics', () => {
  it('exports events, reconnects, relists, errors, connected, synced, silence and store size', async () => {
    const registry = new Registry();
    const metrics = createWatchMetrics(registry);
    expect(createWatchMetrics(registry)).toBe(metrics);
    const t = new ScriptedTransport();
    const r = new Reflector({
      resource: 'nodes',
      transport: t,
      scheduler: asyncScheduler,
      metrics,
      random: () => 0.5,
    }).start();
    await flush();
    expect(await values(registry, 'nlc_watch_synced')).toEqual({ 'resource=nodes': 0 });
    t.lastList().resolve(listPage([obj('a', '1'), obj('b', '2')], '3'));
    await flush();
    const w = t.lastWatch().open();
    await flush();
    w.send(
      { type: 'ADDED', object: obj('c', '4') },
      { type: 'MODIFIED', object: obj('a', '5') },
      { type: 'DELETED', object: obj('b', '6') },
      bookmark('7'),
    );
    w.chunk('garbage\n');
    await vi.advanceTimersByTimeAsync(12_500);
    expect(await values(registry, 'nlc_watch_seconds_since_last_event')).toEqual({ 'resource=nodes': 12.5 });
    w.send({ type: 'ERROR', object: { kind: 'Status', code: 410 } });
    await flush();
    t.lastList().resolve(listPage([obj('a', '5')], '8'));
    await flush();
    expect(await values(registry, 'nlc_watch_events_total')).toEqual({
      'resource=nodes,type=ADDED': 1,
      'resource=nodes,type=MODIFIED': 1,
      'resource=nodes,type=DELETED': 1,
      'resource=nodes,type=BOOKMARK': 1,
      'resource=nodes,type=ERROR': 1,
    });
    expect(await values(registry, 'nlc_watch_errors_total')).toEqual({
      'resource=nodes,reason=malformed': 1,
      'resource=nodes,reason=gone': 1,
    });
    expect(await values(registry, 'nlc_watch_relists_total')).toEqual({ 'resource=nodes': 1 });
    expect(await values(registry, 'nlc_watch_list_objects_total')).toEqual({ 'resource=nodes': 3 });
    expect(await values(registry, 'nlc_watch_synced')).toEqual({ 'resource=nodes': 1 });
    expect(await values(registry, 'nlc_watch_connected')).toEqual({ 'resource=nodes': 1 });
    expect(await values(registry, 'nlc_watch_store_objects')).toEqual({ 'resource=nodes': 1 });
    expect(await values(registry, 'nlc_watch_seconds_since_last_event')).toEqual({ 'resource=nodes': 0 });
    t.lastWatch().open();
    await flush();
    t.lastWatch().end();
    await vi.advanceTimersByTimeAsync(2000);
    expect(await values(registry, 'nlc_watch_reconnects_total')).toEqual({ 'resource=nodes': 1 });
    r.dispose();
    expect(await values(registry, 'nlc_watch_connected')).toEqual({});
  });
});

describe('isHealthy', () => {
  const base = {
    resource: 'leases',
    connected: true,
    synced: true,
    listing: false,
    lastEventAt: 1000,
    lastContactAt: 1000,
    since: 0,
    reconnects: 0,
    relists: 0,
    lastError: undefined,
    lastErrorAt: undefined,
  };
  it('needs connected, synced and recent data', () => {
    expect(isHealthy(base, 1000 + 40_000, 40_000)).toBe(true);
    expect(isHealthy(base, 1000 + 40_001, 40_000)).toBe(false);
    expect(isHealthy({ ...base, connected: false }, 1000, 40_000)).toBe(false);
    expect(isHealthy({ ...base, synced: false }, 1000, 40_000)).toBe(false);
    expect(isHealthy({ ...base, lastEventAt: undefined, lastContactAt: undefined }, 1000, 40_000)).toBe(
      false,
    );
  });

  it('counts a watch the server accepted as contact, and says why it is blind', () => {
    // Quiet cluster: no data for a long time, but the server accepted a watch 1 s ago.
    expect(
      watchBlindness({ ...base, lastEventAt: 0, lastContactAt: 99_000 }, 100_000, 40_000),
    ).toBeUndefined();
    expect(watchBlindness({ ...base, lastContactAt: 1000 }, 41_001, 40_000)).toBe('silent');
    expect(watchBlindness({ ...base, connected: false }, 1000, 40_000)).toBe('disconnected');
    expect(watchBlindness({ ...base, synced: false, connected: false }, 1000, 40_000)).toBe('unsynced');
  });

  it('WatchStatus emits state changes at once and data-only updates at most once a second', () => {
    const s = new WatchStatus('leases', asyncScheduler);
    const seen: number[] = [];
    s.health$.subscribe((h) => seen.push(h.lastEventAt ?? -1));
    const t0 = asyncScheduler.now();
    s.noteData(t0 + 100);
    s.noteData(t0 + 900);
    s.noteData(t0 + 1000);
    s.noteData(t0 + 1500);
    s.setConnected(true, t0 + 1600);
    expect(seen).toEqual([-1, t0 + 1000, t0 + 1500]);
    expect(s.snapshot().lastEventAt).toBe(t0 + 1500);
  });
});
