import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createDisruptionMetrics } from '../metrics.js';
import { type PoolConfig, validatePoolConfig } from './config.js';
import { GraceResolver } from './resolver.js';

const defaults = { monitorGraceMs: 50_000, startupGraceMs: 60_000 };

function config(doc: unknown): PoolConfig {
  const r = validatePoolConfig(doc);
  if (!r.ok) throw new Error(r.errors.map((e) => e.text).join('\n'));
  return r.config;
}

const v1 = config({
  pools: [{ name: 'gpu', selector: { matchLabels: { pool: 'gpu' } }, nodeMonitorGracePeriod: '5m' }],
});
const v2 = config({
  pools: [
    { name: 'gpu', selector: { matchLabels: { pool: 'gpu' } }, nodeMonitorGracePeriod: '5m' },
    { name: 'edge', selector: { matchLabels: { pool: 'edge' } }, nodeMonitorGracePeriod: '2m' },
  ],
});

describe('GraceResolver', () => {
  it('tracks per-pool counts and exports them', async () => {
    const registry = new Registry();
    const metrics = createDisruptionMetrics(registry);
    const r = new GraceResolver({ defaults, config: v1, metrics });
    expect(r.track('n1', { pool: 'gpu' })).toEqual({
      monitorGraceMs: 300_000,
      startupGraceMs: 60_000,
      pool: 'gpu',
    });
    r.track('n2', { pool: 'edge' });
    r.track('n3', {});
    expect(r.counts()).toEqual({ gpu: 1, default: 2 });
    r.track('n1', { pool: 'cpu' }); // labels changed
    expect(r.counts()).toEqual({ gpu: 0, default: 3 });
    r.untrack('n3');
    expect(r.counts()).toEqual({ gpu: 0, default: 2 });
    const values = (await registry.getSingleMetric('nlc_pool_nodes')!.get()).values;
    expect(values).toEqual(
      expect.arrayContaining([
        { labels: { pool: 'gpu' }, value: 0 },
        { labels: { pool: 'default' }, value: 2 },
      ]),
    );
  });

  it('re-resolves every node on a new config and reports the changes', async () => {
    const registry = new Registry();
    const metrics = createDisruptionMetrics(registry);
    const r = new GraceResolver({ defaults, config: v1, metrics });
    r.track('g', { pool: 'gpu' });
    r.track('e', { pool: 'edge' });
    const changes = r.setConfig(v2);
    expect(changes).toEqual([
      {
        name: 'e',
        before: { monitorGraceMs: 50_000, startupGraceMs: 60_000, pool: null },
        after: { monitorGraceMs: 120_000, startupGraceMs: 60_000, pool: 'edge' },
      },
    ]);
    expect(r.graceOf('e')?.pool).toBe('edge');
    expect(r.counts()).toEqual({ gpu: 1, edge: 1 });
    // removing a pool removes its series
    r.setConfig(config({ pools: [] }));
    const values = (await registry.getSingleMetric('nlc_pool_nodes')!.get()).values;
    expect(values).toEqual([{ labels: { pool: 'default' }, value: 2 }]);
  });

  it('exports a series per configured pool from the start, and forgets untracked nodes', async () => {
    const registry = new Registry();
    const r = new GraceResolver({ defaults, config: v2, metrics: createDisruptionMetrics(registry) });
    const values = (await registry.getSingleMetric('nlc_pool_nodes')!.get()).values;
    expect(values).toEqual([
      { labels: { pool: 'default' }, value: 0 },
      { labels: { pool: 'gpu' }, value: 0 },
      { labels: { pool: 'edge' }, value: 0 },
    ]);
    expect(r.current).toBe(v2);
    expect(r.graceOf('never-tracked')).toBeUndefined();
    r.untrack('never-tracked');
    r.track('g', { pool: 'gpu' });
    r.untrack('g');
    expect(r.graceOf('g')).toBeUndefined();
    expect(r.counts()).toEqual({ gpu: 0 });
    expect(r.setConfig(v1)).toEqual([]);
  });

  it('reports a node whose pool changed with the same grace, or whose startup grace alone changed', () => {
    const same = config({
      pools: [{ name: 'fast', selector: { matchLabels: { pool: 'gpu' } }, nodeMonitorGracePeriod: '5m' }],
    });
    const r = new GraceResolver({ defaults, config: v1 });
    r.track('g', { pool: 'gpu' });
    expect(r.setConfig(same).map((c) => [c.name, c.before.pool, c.after.pool])).toEqual([
      ['g', 'gpu', 'fast'],
    ]);
    r.track('d', {});
    const changes = r.setDefaults({ monitorGraceMs: 50_000, startupGraceMs: 90_000 });
    expect(changes.map((c) => [c.name, c.before.startupGraceMs, c.after.startupGraceMs])).toEqual([
      ['g', 60_000, 90_000],
      ['d', 60_000, 90_000],
    ]);
  });

  it('applies new defaults', () => {
    const r = new GraceResolver({ defaults });
    r.track('a', {});
    expect(r.setDefaults({ monitorGraceMs: 60_000, startupGraceMs: 60_000 })).toHaveLength(1);
    expect(r.graceOf('a')?.monitorGraceMs).toBe(60_000);
  });
});
