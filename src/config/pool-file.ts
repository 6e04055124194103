import { watch as fsWatch } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { basename, dirname } from 'node:path';
import { timerDelay } from '../clock/clock.js';
import {
  type DisruptionMetrics,
  MAX_POOL_CONFIG_BYTES,
  type PoolConfig,
  PoolConfigError,
  type PoolConfigIssue,
  type PoolGraceBounds,
  parsePoolConfig,
  tooLargeMessage,
} from '../disruption/index.js';
import { type Logger, silentLogger } from '../log/logger.js';
import {
  asyncScheduler,
  BehaviorSubject,
  debounceTime,
  exhaustMap,
  from,
  interval,
  mergeMap,
  type Observable,
  type SchedulerLike,
  Subject,
  type Subscription,
} from '../rx/index.js';

/** What identifies one version of the file on disk (stat follows symlinks, as ConfigMap mounts need). */
export interface FileStamp {
  mtimeMs: number;
  size: number;
  ino: number;
}

/** The file-system edge of the loader, injectable for tests. */
export interface PoolFileSystem {
  /** The file's text; rejects, without reading further, once it holds more than `maxBytes`. */
  readFile(path: string, maxBytes: number): Promise<string>;
  /** undefined when the file does not exist. */
  stat(path: string): Promise<FileStamp | undefined>;
  /**
   * Calls `onChange` when something in the file's directory may have changed (editors and
   * ConfigMap volumes replace files rather than write them). Returns a function that stops it.
   */
  watch(path: string, onChange: () => void, onError: (err: unknown) => void): () => void;
}

/** The real file system: fs/promises plus fs.watch on the file's directory. */
export const nodePoolFileSystem: PoolFileSystem = {
  async readFile(path, maxBytes) {
    const file = await open(path, 'r');
    try {
      // One byte more than allowed tells a file at the limit from a larger one (whatever its
      // stat says: a file may grow, a FIFO or device has no size).
      const buf = Buffer.alloc(maxBytes + 1);
      let length = 0;
      while (length < buf.length) {
        const { bytesRead } = await file.read(buf, length, buf.length - length, null);
        if (bytesRead === 0) break;
        length += bytesRead;
      }
      if (length > maxBytes) throw new Error(tooLargeMessage(length, true));
      return buf.toString('utf8', 0, length);
    } finally {
      await file.close();
    }
  },
  async stat(path) {
    try {
      const s = await stat(path);
      return { mtimeMs: s.mtimeMs, size: s.size, ino: s.ino };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  },
  watch(path, onChange, onError) {
    const file = basename(path);
    const w = fsWatch(dirname(path), { persistent: false }, (_event, name) => {
      // `..data` is the symlink a ConfigMap volume swaps atomically.
      if (name === null || name === file || String(name).startsWith('..')) onChange();
    });
    w.on('error', onError);
    return () => w.close();
  },
};

export type ReloadOutcome =
  | { result: 'applied'; config: PoolConfig; warnings: PoolConfigIssue[] }
  | { result: 'unchanged'; config: PoolConfig }
  /** The file could not be read or is invalid: `config` is the previous one, still in force. */
  | { result: 'invalid'; config: PoolConfig; errors: PoolConfigIssue[]; warnings: PoolConfigIssue[] };

export interface PoolConfigLoaderOptions {
  path: string;
  fs?: PoolFileSystem;
  /** Timers for debounce and polling (clock.scheduler in production). */
  scheduler?: SchedulerLike;
  logger?: Logger;
  metrics?: DisruptionMetrics;
  /** Quiet time after the last watch event before re-reading. Default 500 ms. */
  debounceMs?: number;
  /** mtime/size/inode polling period, a fallback for file systems where watch misses events. 0 = off. Default 30 s. */
  pollIntervalMs?: number;
  /** Use fs.watch. Default true. */
  watch?: boolean;
  /** What every load's grace periods are checked against (--watch-silence-threshold). */
  graceBounds?: PoolGraceBounds;
}

function readIssue(path: string, err: unknown): PoolConfigIssue {
  const message = `cannot read ${path}: ${err instanceof Error ? err.message : String(err)}`;
  return { path: '', field: '', value: path, message, text: message };
}

/**
 * Loads the pool config file and keeps it current: re-reads it on change (fs.watch, debounced,
 * plus mtime polling as a fallback) or on demand (`reload()`, e.g. on SIGHUP). An invalid or
 * unreadable new file is logged and counted, and the previous valid config stays in force.
 */
export class PoolConfigLoader {
  private readonly subject: BehaviorSubject<PoolConfig>;
  private readonly triggers = new Subject<void>();
  private readonly subs: Subscription[] = [];
  private stopWatch: (() => void) | undefined;
  private chain: Promise<unknown> = Promise.resolve();
  private closed = false;

  /** The config in force: the current one on subscribe, then each newly applied one. */
  readonly config$: Observable<PoolConfig>;

  private constructor(
    private readonly path: string,
    private readonly fs: PoolFileSystem,
    private readonly log: Logger,
    private readonly metrics: DisruptionMetrics | undefined,
    private readonly graceBounds: PoolGraceBounds | undefined,
    initial: PoolConfig,
    private lastText: string,
    private lastStamp: FileStamp | undefined,
  ) {
    this.subject = new BehaviorSubject(initial);
    this.config$ = this.subject.asObservable();
  }

  /**
   * Reads and validates the file; throws {@link PoolConfigError} naming every bad entry when it is
   * missing or invalid (a bad file at start must stop the controller). Then starts watching.
   */
  static async open(opts: PoolConfigLoaderOptions): Promise<PoolConfigLoader> {
    const fs = opts.fs ?? nodePoolFileSystem;
    const log = (opts.logger ?? silentLogger).with({ component: 'pool-config', path: opts.path });
    let text: string;
    let stamp: FileStamp | undefined;
    try {
      stamp = await fs.stat(opts.path);
      text = await fs.readFile(opts.path, MAX_POOL_CONFIG_BYTES);
    } catch (err) {
      throw new PoolConfigError(opts.path, [readIssue(opts.path, err)]);
    }
    const parsed = parsePoolConfig(text, opts.graceBounds);
    for (const w of parsed.warnings) log.warn('Pool config warning', { warning: w.text });
    if (!parsed.ok) throw new PoolConfigError(opts.path, parsed.errors);
    log.info('Pool config loaded', { pools: parsed.config.pools.length });
    const loader = new PoolConfigLoader(
      opts.path,
      fs,
      log,
      opts.metrics,
      opts.graceBounds,
      parsed.config,
      text,
      stamp,
    );
    loader.start(opts);
    return loader;
  }

  get current(): PoolConfig {
    return this.subject.getValue();
  }

  /** Re-reads the file now (serialised with other reloads). */
  reload(reason = 'manual'): Promise<ReloadOutcome> {
    const next = this.chain.then(() => this.doReload(reason));
    this.chain = next.catch(() => undefined);
    return next;
  }

  /** Stops watching and polling; completes config$. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.stopWatch?.();
    this.stopWatch = undefined;
    for (const s of this.subs) s.unsubscribe();
    this.triggers.complete();
    this.subject.complete();
  }

  private start(opts: PoolConfigLoaderOptions): void {
    const scheduler = opts.scheduler ?? asyncScheduler;
    const debounceMs = opts.debounceMs ?? 500;
    const pollMs = opts.pollIntervalMs ?? 30_000;
    this.subs.push(
      this.triggers
        .pipe(
          debounceTime(timerDelay(debounceMs), scheduler),
          // reload() serialises itself; a change seen during a reload must not be dropped.
          mergeMap(() => from(this.reload('watch'))),
        )
        .subscribe(),
    );
    if (opts.watch ?? true) {
      try {
        this.stopWatch = this.fs.watch(
          this.path,
          () => this.triggers.next(),
          (err) => {
            this.log.warn('Pool config watch failed; relying on polling', { err });
            this.stopWatch?.();
            this.stopWatch = undefined;
          },
        );
      } catch (err) {
        this.log.warn('Pool config watch unavailable; relying on polling', { err });
      }
    }
    if (pollMs > 0) {
      this.subs.push(
        interval(timerDelay(pollMs), scheduler)
          .pipe(exhaustMap(() => from(this.pollOnce())))
          .subscribe(),
      );
    }
  }

  private async pollOnce(): Promise<void> {
    let stamp: FileStamp | undefined;
    try {
      stamp = await this.fs.stat(this.path);
    } catch {
      return; // reported by the reload that a real change triggers
    }
    if (sameStamp(stamp, this.lastStamp)) return;
    await this.reload('poll');
  }

  /**
   * One reload; never rejects: whatever goes wrong (a throw in parsing or validation included) is
   * an invalid outcome, logged and counted, with the previous config in force. The watch and poll
   * pipelines and the SIGHUP handler rely on it to live on.
   */
  private async doReload(reason: string): Promise<ReloadOutcome> {
    try {
      return await this.tryReload(reason);
    } catch (err) {
      const message = `cannot load ${this.path}: ${err instanceof Error ? err.message : String(err)}`;
      this.metrics?.poolConfigReloads.inc({ result: 'invalid' });
      this.log.error('Pool config invalid, keeping the previous one', { reason, errors: [message] });
      const errors = [{ path: '', field: '', value: undefined, message, text: message }];
      return { result: 'invalid', config: this.current, errors, warnings: [] };
    }
  }

  private async tryReload(reason: string): Promise<ReloadOutcome> {
    const previous = this.current;
    let text: string;
    try {
      this.lastStamp = await this.fs.stat(this.path);
      text = await this.fs.readFile(this.path, MAX_POOL_CONFIG_BYTES);
    } catch (err) {
      const errors = [readIssue(this.path, err)];
      this.metrics?.poolConfigReloads.inc({ result: 'invalid' });
      this.log.error('Pool config unreadable, keeping the previous one', { reason, err: errors[0]!.message });
      return { result: 'invalid', config: previous, errors, warnings: [] };
    }
    if (text === this.lastText) {
      this.metrics?.poolConfigReloads.inc({ result: 'unchanged' });
      this.log.debug(2, 'Pool config unchanged', { reason });
      return { result: 'unchanged', config: previous };
    }
    const parsed = parsePoolConfig(text, this.graceBounds);
    for (const w of parsed.warnings) this.log.warn('Pool config warning', { warning: w.text });
    if (!parsed.ok) {
      this.metrics?.poolConfigReloads.inc({ result: 'invalid' });
      this.log.error('Pool config invalid, keeping the previous one', {
        reason,
        errors: parsed.errors.map((e) => e.text),
      });
      return { result: 'invalid', config: previous, errors: parsed.errors, warnings: parsed.warnings };
    }
    this.lastText = text;
    this.metrics?.poolConfigReloads.inc({ result: 'applied' });
    this.log.info('Pool config reloaded', { reason, pools: parsed.config.pools.length });
    if (!this.closed) this.subject.next(parsed.config);
    return { result: 'applied', config: parsed.config, warnings: parsed.warnings };
  }
}

function sameStamp(a: FileStamp | undefined, b: FileStamp | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a.mtimeMs === b.mtimeMs && a.size === b.size && a.ino === b.ino;
}
