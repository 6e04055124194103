import type { DisruptionMetrics } from '../metrics.js';
import {
  DEFAULT_POOL_NAME,
  EMPTY_POOL_CONFIG,
  type GraceDefaults,
  type PoolConfig,
  type ResolvedGrace,
  resolveGrace,
} from './config.js';
import type { Labels } from './selector.js';

export interface GraceChange {
  name: string;
  before: ResolvedGrace;
  after: ResolvedGrace;
}

/**
 * Resolves grace periods per node and keeps per-pool node counts (nlc_pool_nodes). Swapping the
 * config (a reload) re-resolves every tracked node and returns the nodes whose grace changed, so
 * the caller can hand them to the health tracker.
 */
export class GraceResolver {
  private readonly tracked = new Map<string, { labels: Labels; grace: ResolvedGrace }>();
  private readonly poolCounts = new Map<string, number>();

  private config: PoolConfig;
  private defaults: GraceDefaults;
  private readonly metrics: DisruptionMetrics | undefined;

  constructor(opts: { defaults: GraceDefaults; config?: PoolConfig; metrics?: DisruptionMetrics }) {
    this.defaults = opts.defaults;
    this.config = opts.config ?? EMPTY_POOL_CONFIG;
    this.metrics = opts.metrics;
    this.publishAll();
  }

  get current(): PoolConfig {
    return this.config;
  }

  /** Pure lookup: first matching pool, else the defaults. */
  resolve(labels: Labels | undefined): ResolvedGrace {
    return resolveGrace(this.config, this.defaults, labels);
  }

  /** Resolves and remembers a node (call on add and on label change). */
  track(name: string, labels: Labels | undefined): ResolvedGrace {
    const l = labels ?? {};
    const grace = this.resolve(l);
    const prev = this.tracked.get(name);
    if (prev) this.bump(prev.grace.pool, -1);
    this.tracked.set(name, { labels: l, grace });
    this.bump(grace.pool, +1);
    return grace;
  }

  /** Forgets a deleted node. */
  untrack(name: string): void {
    const prev = this.tracked.get(name);
    if (!prev) return;
    this.tracked.delete(name);
    this.bump(prev.grace.pool, -1);
  }

  /** The resolved grace of a tracked node. */
  graceOf(name: string): ResolvedGrace | undefined {
    return this.tracked.get(name)?.grace;
  }

  /** Installs a new pool config; returns the tracked nodes whose grace or pool changed. */
  setConfig(config: PoolConfig): GraceChange[] {
    this.config = config;
    return this.reresolve();
  }

  /** Installs new defaults (flags); returns the tracked nodes whose grace changed. */
  setDefaults(defaults: GraceDefaults): GraceChange[] {
    this.defaults = defaults;
    return this.reresolve();
  }

  /** Tracked nodes per pool name (`default` for nodes matching no pool). */
  counts(): Record<string, number> {
    return Object.fromEntries(this.poolCounts);
  }

  private reresolve(): GraceChange[] {
    const changes: GraceChange[] = [];
    this.poolCounts.clear();
    for (const [name, entry] of this.tracked) {
      const after = this.resolve(entry.labels);
      const before = entry.grace;
      entry.grace = after;
      const key = after.pool ?? DEFAULT_POOL_NAME;
      this.poolCounts.set(key, (this.poolCounts.get(key) ?? 0) + 1);
      if (
        before.pool !== after.pool ||
        before.monitorGraceMs !== after.monitorGraceMs ||
        before.startupGraceMs !== after.startupGraceMs
      ) {
        changes.push({ name, before, after });
      }
    }
    this.publishAll();
    return changes;
  }

  private bump(pool: string | null, delta: number): void {
    const key = pool ?? DEFAULT_POOL_NAME;
    const n = (this.poolCounts.get(key) ?? 0) + delta;
    this.poolCounts.set(key, n);
    this.metrics?.poolNodes.set({ pool: key }, n);
  }

  /** Every configured pool (and default) gets a series, removed pools lose theirs. */
  private publishAll(): void {
    const m = this.metrics;
    if (!m) return;
    m.poolNodes.reset();
    const names = [DEFAULT_POOL_NAME, ...this.config.pools.map((p) => p.name)];
    for (const pool of names) m.poolNodes.set({ pool }, this.poolCounts.get(pool) ?? 0);
  }
}
