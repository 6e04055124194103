import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createDisruptionMetrics, type PoolConfig, PoolConfigError } from '../disruption/index.js';
import { memoryLogger } from '../log/logger.js';
import { type FileStamp, nodePoolFileSystem, PoolConfigLoader, type PoolFileSystem } from './pool-file.js';

const PATH = '/etc/nlc/pools.json';

function doc(grace: string, name = 'gpu'): string {
  return JSON.stringify({
    pools: [{ name, selector: { matchLabels: { pool: 'gpu' } }, nodeMonitorGracePeriod: grace }],
  });
}

class FakeFs implements PoolFileSystem {
  private files = new Map<string, { text: string; stamp: FileStamp }>();
  private listeners = new Set<() => void>();
  private errorListeners = new Set<(err: unknown) => void>();
  private tick = 0;
  reads = 0;
  /** When set, reads wait for it. */
  gate: Promise<void> | undefined;

  write(path: string, text: string): void {
    this.tick++;
    this.files.set(path, { text, stamp: { mtimeMs: this.tick * 1000, size: text.length, ino: this.tick } });
  }
  remove(path: string): void {
    this.files.delete(path);
  }
  emit(): void {
    for (const l of this.listeners) l();
  }
  fail(err: unknown): void {
    for (const l of this.errorListeners) l(err);
  }
  get watchers(): number {
    return this.listeners.size;
  }
  async readFile(path: string): Promise<string> {
    this.reads++;
    const f = this.files.get(path); // content as of the start of the read
    if (this.gate) await this.gate;
    if (!f)
      throw Object.assign(new Error(`ENOENT: no such file or directory, open '${path}'`), { code: 'ENOENT' });
    return f.text;
  }
  async stat(path: string): Promise<FileStamp | undefined> {
    return this.files.get(path)?.stamp;
  }
  watch(_path: string, onChange: () => void, onError: (err: unknown) => void): () => void {
    this.listeners.add(onChange);
    this.errorListeners.add(onError);
    return () => {
      this.listeners.delete(onChange);
      this.errorListeners.delete(onError);
    };
  }
}

function graceOf(c: PoolConfig): number | undefined {
  return c.pools[0]?.monitorGraceMs;
}

describe('PoolConfigLoader', () => {
  let fs: FakeFs;
  let loader: PoolConfigLoader | undefined;

  beforeEach(() => {
    vi.useFakeTimers();
    fs = new FakeFs();
  });
  afterEach(() => {
    loader?.close();
    loader = undefined;
    vi.useRealTimers();
  });

  it('refuses to start on an invalid file, naming the bad entry', async () => {
    fs.write(PATH, doc('5x'));
    const err = await PoolConfigLoader.open({ path: PATH, fs }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PoolConfigError);
    expect((err as PoolConfigError).message).toMatch(
      /^invalid pool config \/etc\/nlc\/pools.json: pools\[0\] "gpu": nodeMonitorGracePeriod: "5x": unknown unit "x"/,
    );
    expect((err as PoolConfigError).errors[0]?.poolIndex).toBe(0);
  });

  it('holds every load to the grace bounds it is given (--watch-silence-threshold)', async () => {
    fs.write(PATH, doc('30s'));
    const graceBounds = { watchSilenceThresholdMs: 45_000 };
    const err = await PoolConfigLoader.open({ path: PATH, fs, graceBounds }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PoolConfigError);
    expect((err as PoolConfigError).message).toMatch(
      /pools\[0\] "gpu": nodeMonitorGracePeriod: "30s": out of range; .*above --watch-silence-threshold \(45s\)/,
    );
    fs.write(PATH, doc('1m'));
    loader = await PoolConfigLoader.open({ path: PATH, fs, graceBounds, pollIntervalMs: 0 });
    fs.write(PATH, doc('30s'));
    expect((await loader.reload('SIGHUP')).result).toBe('invalid');
    let current: PoolConfig | undefined;
    loader.config$.subscribe((c) => {
      current = c;
    });
    expect(graceOf(current!)).toBe(60_000);
  });

  it('refuses to start on a missing file', async () => {
    await expect(PoolConfigLoader.open({ path: PATH, fs })).rejects.toThrow(
      /cannot read \/etc\/nlc\/pools.json: ENOENT/,
    );
  });

  it('reloads on demand and keeps the old config when the new file is invalid', async () => {
    const registry = new Registry();
    const metrics = createDisruptionMetrics(registry);
    const log = memoryLogger();
    fs.write(PATH, doc('1m'));
    loader = await PoolConfigLoader.open({ path: PATH, fs, metrics, logger: log });
    const seen: Array<number | undefined> = [];
    loader.config$.subscribe((c) => seen.push(graceOf(c)));
    expect(seen).toEqual([60_000]);

    fs.write(PATH, doc('2m'));
    expect((await loader.reload('SIGHUP')).result).toBe('applied');
    expect(seen).toEqual([60_000, 120_000]);

    fs.write(PATH, doc('0s'));
    const bad = await loader.reload('SIGHUP');
    expect(bad.result).toBe('invalid');
    expect(bad.result === 'invalid' && bad.errors[0]?.text).toMatch(
      /pools\[0\] "gpu": nodeMonitorGracePeriod: "0s": must be greater than 0/,
    );
    expect(graceOf(bad.config)).toBe(120_000);
    expect(graceOf(loader.current)).toBe(120_000);
    expect(seen).toEqual([60_000, 120_000]);
    expect(log.lines).toContainEqual(
      expect.objectContaining({
        level: 'error',
        msg: 'Pool config invalid, keeping the previous one',
        reason: 'SIGHUP',
      }),
    );

    fs.remove(PATH);
    expect((await loader.reload()).result).toBe('invalid');
    expect(graceOf(loader.current)).toBe(120_000);

    fs.write(PATH, doc('2m'));
    expect((await loader.reload()).result).toBe('unchanged');

    const values = (await registry.getSingleMetric('nlc_pool_config_reloads_total')!.get()).values;
    expect(values).toEqual(
      expect.arrayContaining([
        { labels: { result: 'applied' }, value: 1 },
        { labels: { result: 'invalid' }, value: 2 },
        { labels: { result: 'unchanged' }, value: 1 },
      ]),
    );
  });

  it('re-reads once after a burst of watch events (debounced)', async () => {
    fs.write(PATH, doc('1m'));
    loader = await PoolConfigLoader.open({ path: PATH, fs, debounceMs: 500, pollIntervalMs: 0 });
    const seen: Array<number | undefined> = [];
    loader.config$.subscribe((c) => seen.push(graceOf(c)));
    const readsBefore = fs.reads;

    fs.write(PATH, doc('3m'));
    fs.emit();
    await vi.advanceTimersByTimeAsync(300);
    fs.emit();
    await vi.advanceTimersByTimeAsync(300);
    fs.emit();
    await vi.advanceTimersByTimeAsync(499);
    expect(seen).toEqual([60_000]);
    await vi.advanceTimersByTimeAsync(1);
    expect(seen).toEqual([60_000, 180_000]);
    expect(fs.reads - readsBefore).toBe(1);
  });

  it('does not lose a change made while a reload is in progress', async () => {
    fs.write(PATH, doc('1m'));
    loader = await PoolConfigLoader.open({ path: PATH, fs, debounceMs: 100, pollIntervalMs: 0 });
    let open!: () => void;
    fs.gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    fs.write(PATH, doc('2m'));
    fs.emit();
    await vi.advanceTimersByTimeAsync(100); // first reload starts and blocks on the read
    fs.write(PATH, doc('3m'));
    fs.emit();
    await vi.advanceTimersByTimeAsync(100); // second trigger while the first is in flight
    fs.gate = undefined;
    open();
    await vi.advanceTimersByTimeAsync(0);
    expect(graceOf(loader.current)).toBe(180_000);
  });

  it('keeps the old config when a watched change is invalid, then applies a fix', async () => {
    fs.write(PATH, doc('1m'));
    loader = await PoolConfigLoader.open({ path: PATH, fs, debounceMs: 100, pollIntervalMs: 0 });
    fs.write(PATH, '{"pools": [');
    fs.emit();
    await vi.advanceTimersByTimeAsync(100);
    expect(graceOf(loader.current)).toBe(60_000);
    fs.write(PATH, doc('4m'));
    fs.emit();
    await vi.advanceTimersByTimeAsync(100);
    expect(graceOf(loader.current)).toBe(240_000);
  });

  /** A pool config whose one pool is 100,000 lists nested in each other. */
  const DEEP = `{"pools":[${'['.repeat(100_000)}${']'.repeat(100_000)}]}`;
  const DEEP_ERROR = /^nested deeper than 32 levels of objects and lists \(at pools\[0\]\[0\]/;

  it('a watched edit nested 100,000 levels deep is refused, logged and counted; the watch lives on and applies the next edit', async () => {
    const registry = new Registry();
    const metrics = createDisruptionMetrics(registry);
    const log = memoryLogger();
    fs.write(PATH, doc('1m'));
    loader = await PoolConfigLoader.open({
      path: PATH,
      fs,
      metrics,
      logger: log,
      debounceMs: 100,
      pollIntervalMs: 0,
    });
    const seen: Array<number | undefined> = [];
    loader.config$.subscribe((c) => seen.push(graceOf(c)));

    fs.write(PATH, DEEP);
    fs.emit();
    await vi.advanceTimersByTimeAsync(100);
    expect(seen).toEqual([60_000]);
    const refused = log.lines.find((l) => l.msg === 'Pool config invalid, keeping the previous one');
    expect(refused).toMatchObject({ level: 'error', path: PATH, reason: 'watch' });
    expect(refused?.errors).toEqual([expect.stringMatching(DEEP_ERROR)]);

    fs.write(PATH, doc('4m'));
    fs.emit();
    await vi.advanceTimersByTimeAsync(100);
    expect(seen).toEqual([60_000, 240_000]);
    const values = (await registry.getSingleMetric('nlc_pool_config_reloads_total')!.get()).values;
    expect(values).toEqual(
      expect.arrayContaining([
        { labels: { result: 'invalid' }, value: 1 },
        { labels: { result: 'applied' }, value: 1 },
      ]),
    );
  });

  it('a SIGHUP or a poll over a file nested 100,000 levels deep resolves as invalid; later ones apply a fix', async () => {
    fs.write(PATH, doc('1m'));
    loader = await PoolConfigLoader.open({ path: PATH, fs, watch: false, pollIntervalMs: 10_000 });
    // SIGHUP runs `void loader.reload('SIGHUP')`: a rejection there would exit the process.
    fs.write(PATH, DEEP);
    const bad = await loader.reload('SIGHUP');
    expect(bad.result).toBe('invalid');
    expect(bad.result === 'invalid' && bad.errors.map((e) => e.text)).toEqual([
      expect.stringMatching(DEEP_ERROR),
    ]);
    expect(graceOf(loader.current)).toBe(60_000);
    fs.write(PATH, doc('2m'));
    expect((await loader.reload('SIGHUP')).result).toBe('applied');
    expect(graceOf(loader.current)).toBe(120_000);

    // The polling pipeline: a deep edit, then a good one.
    fs.write(PATH, DEEP);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(graceOf(loader.current)).toBe(120_000);
    fs.write(PATH, doc('3m'));
    await vi.advanceTimersByTimeAsync(10_000);
    expect(graceOf(loader.current)).toBe(180_000);
  });

  it('refuses to start on a file nested too deep or over 1 MiB, naming the file', async () => {
    // The refusal's message, or what opened instead (a loader holding 1 MiB is too big to print).
    const refusal = () =>
      PoolConfigLoader.open({ path: PATH, fs }).then(
        (opened) => {
          opened.close();
          return 'opened';
        },
        (err: unknown) => (err instanceof PoolConfigError ? err.message : String(err)),
      );
    fs.write(PATH, DEEP);
    expect(await refusal()).toMatch(
      /^invalid pool config \/etc\/nlc\/pools.json: nested deeper than 32 levels/,
    );
    fs.write(PATH, `${doc('1m')}${' '.repeat(1024 * 1024)}`);
    expect(await refusal()).toMatch(
      /^invalid pool config \/etc\/nlc\/pools.json: too large: \d+ bytes; a pool config may have at most 1048576 bytes/,
    );
  });

  it('polls the file stamp when watching is off or broken', async () => {
    fs.write(PATH, doc('1m'));
    const log = memoryLogger();
    loader = await PoolConfigLoader.open({ path: PATH, fs, pollIntervalMs: 10_000, logger: log });
    expect(fs.watchers).toBe(1);
    fs.fail(new Error('EMFILE'));
    expect(fs.watchers).toBe(0);
    expect(log.lines).toContainEqual(
      expect.objectContaining({ msg: 'Pool config watch failed; relying on polling' }),
    );

    const reads = fs.reads;
    await vi.advanceTimersByTimeAsync(30_000); // unchanged file: stat only, no read
    expect(fs.reads).toBe(reads);
    fs.write(PATH, doc('5m'));
    await vi.advanceTimersByTimeAsync(9_999);
    expect(graceOf(loader.current)).toBe(60_000);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(graceOf(loader.current)).toBe(300_000);
  });

  it('completes config$ and stops timers on close', async () => {
    fs.write(PATH, doc('1m'));
    loader = await PoolConfigLoader.open({ path: PATH, fs, pollIntervalMs: 1000 });
    let completed = false;
    loader.config$.subscribe({ complete: () => (completed = true) });
    loader.close();
    expect(completed).toBe(true);
    expect(fs.watchers).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });
});

describe('nodePoolFileSystem', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'nlc-pools-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('loads a real file and reloads it on demand', async () => {
    const path = join(dir, 'pools.json');
    await writeFile(path, doc('1m'));
    expect(await nodePoolFileSystem.stat(join(dir, 'missing.json'))).toBeUndefined();
    const loader = await PoolConfigLoader.open({ path, watch: false, pollIntervalMs: 0 });
    try {
      expect(graceOf(loader.current)).toBe(60_000);
      await writeFile(path, doc('90s'));
      expect((await loader.reload()).result).toBe('applied');
      expect(graceOf(loader.current)).toBe(90_000);
      await writeFile(path, 'not json');
      expect((await loader.reload()).result).toBe('invalid');
      expect(graceOf(loader.current)).toBe(90_000);
    } finally {
      loader.close();
    }
  });

  it('stops reading a file one byte past 1 MiB', async () => {
    const path = join(dir, 'pools.json');
    await writeFile(path, doc('1m'));
    const loader = await PoolConfigLoader.open({ path, watch: false, pollIntervalMs: 0 });
    try {
      await writeFile(path, doc('1m').padEnd(2 * 1024 * 1024, ' '));
      const r = await loader.reload();
      // "at least": read up to the limit and one byte more, not the whole 2 MiB.
      expect(r.result === 'invalid' && r.errors.map((e) => e.text)).toEqual([
        `cannot read ${path}: too large: at least 1048577 bytes; a pool config may have at most 1048576 bytes ` +
          '(1 MiB, what a ConfigMap holds)',
      ]);
      expect(graceOf(loader.current)).toBe(60_000);
      await writeFile(
        path,
        doc('1m')
          .padEnd(1024 * 1024, ' ')
          .replace('1m', '2m'),
      );
      expect((await loader.reload()).result).toBe('applied');
      expect(graceOf(loader.current)).toBe(120_000);
    } finally {
      loader.close();
    }
  });
});
