/**
 * The loader when parsing or validation throws, whatever the cause (parsePoolConfig is meant to be
 * total; this proves the loader does not depend on it): the reload is invalid, logged and counted,
 * the config in force stays, and the watch pipeline applies the next edit.
 */
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createDisruptionMetrics, type PoolConfig } from '../disruption/index.js';
import { memoryLogger } from '../log/logger.js';
import { type FileStamp, PoolConfigLoader, type PoolFileSystem } from './pool-file.js';

const THROWS = 'parse throws on this text';

// The loader takes parsePoolConfig from the disruption core's index.
vi.mock('../disruption/index.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../disruption/index.js')>();
  return {
    ...real,
    parsePoolConfig: (text: string, bounds?: Parameters<typeof real.parsePoolConfig>[1]) => {
      if (text === THROWS) throw new RangeError('Maximum call stack size exceeded');
      return real.parsePoolConfig(text, bounds);
    },
  };
});

const PATH = '/etc/nlc/pools.json';
const doc = (grace: string) =>
  JSON.stringify({ pools: [{ name: 'gpu', selector: {}, nodeMonitorGracePeriod: grace }] });

/** One file; `emit` plays a watch event. */
class OneFileFs implements PoolFileSystem {
  text = '';
  private tick = 0;
  private stamp: FileStamp = { mtimeMs: 0, size: 0, ino: 0 };
  private listener: (() => void) | undefined;
  write(text: string): void {
    this.text = text;
    this.tick++;
    this.stamp = { mtimeMs: this.tick, size: text.length, ino: 1 };
  }
  emit(): void {
    this.listener?.();
  }
  async readFile(): Promise<string> {
    return this.text;
  }
  async stat(): Promise<FileStamp> {
    return this.stamp;
  }
  watch(_path: string, onChange: () => void): () => void {
    this.listener = onChange;
    return () => {
      this.listener = undefined;
    };
  }
}

const graceOf = (c: PoolConfig) => c.pools[0]?.monitorGraceMs;

describe('PoolConfigLoader when parsing throws', () => {
  let loader: PoolConfigLoader | undefined;
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    loader?.close();
    loader = undefined;
    vi.useRealTimers();
  });

  it('counts and logs the throw as an invalid reload, keeps the config, and the watch applies the next edit', async () => {
    const fs = new OneFileFs();
    const registry = new Registry();
    const log = memoryLogger();
    fs.write(doc('1m'));
    loader = await PoolConfigLoader.open({
      path: PATH,
      fs,
      logger: log,
      metrics: createDisruptionMetrics(registry),
      debounceMs: 100,
      pollIntervalMs: 0,
    });
    const seen: Array<number | undefined> = [];
    loader.config$.subscribe((c) => seen.push(graceOf(c)));

    fs.write(THROWS);
    fs.emit();
    await vi.advanceTimersByTimeAsync(100);
    expect(log.lines).toContainEqual(
      expect.objectContaining({
        level: 'error',
        msg: 'Pool config invalid, keeping the previous one',
        path: PATH,
        reason: 'watch',
        errors: [`cannot load ${PATH}: Maximum call stack size exceeded`],
      }),
    );
    // On demand (SIGHUP) too: resolved, not rejected.
    const sighup = await loader.reload('SIGHUP');
    expect(sighup.result === 'invalid' && sighup.errors.map((e) => e.text)).toEqual([
      `cannot load ${PATH}: Maximum call stack size exceeded`,
    ]);
    expect(graceOf(loader.current)).toBe(60_000);

    fs.write(doc('4m'));
    fs.emit();
    await vi.advanceTimersByTimeAsync(100);
    expect(seen).toEqual([60_000, 240_000]);
    const values = (await registry.getSingleMetric('nlc_pool_config_reloads_total')!.get()).values;
    expect(values).toEqual(
      expect.arrayContaining([
        { labels: { result: 'invalid' }, value: 2 },
        { labels: { result: 'applied' }, value: 1 },
      ]),
    );
  });
});
