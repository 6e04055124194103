import { DURATION_SYNTAX_HELP, formatDuration, tryParseDuration } from '../../clock/duration.js';
import {
  isMatchAll,
  type LabelSelector,
  type LabelSelectorRequirement,
  type Labels,
  labelKeyProblem,
  labelValueProblem,
  matchesSelector,
  SELECTOR_OPERATORS,
  type SelectorOperator,
} from './selector.js';

/**
 * Per-node-pool grace periods. File format (JSON):
 *
 * ```json
 * {
 *   "pools": [
 *     {
 *       "name": "gpu",
 *       "selector": {
 *         "matchLabels": { "node.kubernetes.io/instance-type": "p4d.24xlarge" },
 *         "matchExpressions": [{ "key": "pool", "operator": "In", "values": ["gpu", "ml"] }]
 *       },
 *       "nodeMonitorGracePeriod": "2m",
 *       "nodeStartupGracePeriod": "10m"
 *     }
 *   ]
 * }
 * ```
 *
 * First match wins; a node matching no pool uses the defaults (the flags). A pool may leave one
 * grace period out (it then uses the default) but not both. Unknown fields are errors.
 */

/** Nodes matching no pool are reported under this pool name; no pool may use it. */
export const DEFAULT_POOL_NAME = 'default';

/** The longest grace period, a pool's as the flags' (a timer waits at most ~24.8 days). */
export const MAX_GRACE_MS = 24 * 3_600_000;

/** What a pool's grace periods are checked against besides their syntax. */
export interface PoolGraceBounds {
  /**
   * --watch-silence-threshold: a nodeMonitorGracePeriod must be above it, as
   * --node-monitor-grace-period must (a blind watch is noticed before a grace can run out).
   */
  watchSilenceThresholdMs?: number;
  /**
   * With --second-opinion=kubelet: --confirm-after + the confirming probe's wait and timeout. A
   * nodeMonitorGracePeriod at or below it leaves no time to confirm a node down before the grace
   * (a warning: its nodes are marked at their grace, as without the second opinion, which can then
   * only hold their NoExecute taints); --confirm-after itself is refused against the default grace.
   */
  confirmDownMs?: number;
}

/**
 * The largest pool config accepted, in bytes: 1 MiB, what a ConfigMap can hold. A file is never
 * read past it, so a huge file cannot exhaust the controller's memory.
 */
export const MAX_POOL_CONFIG_BYTES = 1024 * 1024;

/**
 * The deepest nesting of objects and lists accepted. A valid file needs 7 levels (the document,
 * `pools`, a pool, `selector`, `matchExpressions`, a requirement, `values`); deeper input is
 * refused before validation, which walks (and quotes) values recursively.
 */
export const MAX_POOL_CONFIG_DEPTH = 32;

/** At most this many errors (and as many warnings) are reported; the rest are counted. */
export const MAX_POOL_CONFIG_ISSUES = 50;

/**
 * A grace period (--node-monitor-grace-period, a pool's nodeMonitorGracePeriod) must be above this
 * not to mark live nodes: a kubelet whose connection to the API server died without a word notices
 * only through client-go's HTTP/2 health check, a ping after 30s without a frame
 * (HTTP2_READ_IDLE_TIMEOUT_SECONDS) answered within 15s (HTTP2_PING_TIMEOUT_SECONDS); until then it
 * cannot renew its lease. kube-controller-manager's help says the grace must exceed their sum.
 */
export const HTTP2_HEALTH_CHECK_MS = 45_000;

export interface NodePool {
  name: string;
  /** Position in the file (0-based), for messages. */
  index: number;
  selector: LabelSelector;
  /** Undefined: the default monitor grace applies. */
  monitorGraceMs?: number;
  /** Undefined: the default startup grace applies. */
  startupGraceMs?: number;
}

export interface PoolConfig {
  pools: readonly NodePool[];
}

export const EMPTY_POOL_CONFIG: PoolConfig = Object.freeze({ pools: Object.freeze([]) });

export interface GraceDefaults {
  monitorGraceMs: number;
  startupGraceMs: number;
}

export interface ResolvedGrace {
  monitorGraceMs: number;
  startupGraceMs: number;
  /** Name of the matching pool, or null when the node matched none (defaults). */
  pool: string | null;
}

/** One problem found in a pool config file. */
export interface PoolConfigIssue {
  /** JSON path of the offending value, e.g. `pools[2].nodeMonitorGracePeriod`. */
  path: string;
  poolIndex?: number;
  poolName?: string;
  /** Field name (last path element). */
  field: string;
  value: unknown;
  /** What is wrong and what is accepted. */
  message: string;
  /** One line for people: `pools[2] "gpu": nodeMonitorGracePeriod: "5x": <message>`. */
  text: string;
}

export type PoolConfigResult =
  | { ok: true; config: PoolConfig; warnings: PoolConfigIssue[] }
  | { ok: false; errors: PoolConfigIssue[]; warnings: PoolConfigIssue[] };

export class PoolConfigError extends Error {
  constructor(
    readonly source: string,
    readonly errors: PoolConfigIssue[],
  ) {
    super(`invalid pool config ${source}: ${errors.map((e) => e.text).join('; ')}`);
    this.name = 'PoolConfigError';
  }
}

const POOL_FIELDS = new Set(['name', 'selector', 'nodeMonitorGracePeriod', 'nodeStartupGracePeriod']);
const SELECTOR_FIELDS = new Set(['matchLabels', 'matchExpressions']);
const REQUIREMENT_FIELDS = new Set(['key', 'operator', 'values']);
const POOL_NAME_RE = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

function show(value: unknown): string {
  if (value === undefined) return '<missing>';
  const s = JSON.stringify(value);
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}

/** An issue of the whole document (no pool, no field): its text is the message alone. */
function documentIssue(message: string): PoolConfigIssue {
  return { path: '', field: '', value: undefined, message, text: message };
}

/**
 * Where `doc` nests objects or lists deeper than `limit` levels (the document itself is level 1):
 * the path of the first value too deep, or undefined. Iterative, so any depth is walked without
 * recursion; each object is visited once.
 */
function tooDeepAt(doc: unknown, limit: number): string | undefined {
  interface Entry {
    value: unknown;
    depth: number;
    key: string;
    parent: Entry | undefined;
  }
  const seen = new WeakSet<object>();
  const stack: Entry[] = [{ value: doc, depth: 1, key: '', parent: undefined }];
  for (;;) {
    const e = stack.pop();
    if (e === undefined) return undefined;
    const v = e.value;
    if (typeof v !== 'object' || v === null || seen.has(v)) continue;
    if (e.depth > limit) {
      const keys: string[] = [];
      for (let p: Entry | undefined = e; p !== undefined; p = p.parent) keys.push(p.key);
      const path = keys.reverse().join('').replace(/^\./, '');
      return path.length > 80 ? `${path.slice(0, 77)}...` : path;
    }
    seen.add(v);
    if (Array.isArray(v)) {
      v.forEach((value: unknown, i) => {
        stack.push({ value, depth: e.depth + 1, key: `[${i}]`, parent: e });
      });
    } else {
      for (const [k, value] of Object.entries(v)) {
        stack.push({ value, depth: e.depth + 1, key: `.${k}`, parent: e });
      }
    }
  }
}

class Collector {
  readonly errors: PoolConfigIssue[] = [];
  readonly warnings: PoolConfigIssue[] = [];
  /** Every error found, reported or not. */
  errorCount = 0;
  private warningCount = 0;
  poolIndex: number | undefined;
  poolName: string | undefined;

  private issue(path: string, field: string, value: unknown, message: string): PoolConfigIssue {
    const where =
      this.poolIndex === undefined
        ? ''
        : `pools[${this.poolIndex}]${this.poolName !== undefined ? ` ${JSON.stringify(this.poolName)}` : ''}: `;
    const rel = this.poolIndex === undefined ? path : path.replace(/^pools\[\d+\]\.?/, '');
    const text = `${where}${rel === '' ? '' : `${rel}: `}${show(value)}: ${message}`;
    const out: PoolConfigIssue = { path, field, value, message, text };
    if (this.poolIndex !== undefined) out.poolIndex = this.poolIndex;
    if (this.poolName !== undefined) out.poolName = this.poolName;
    return out;
  }
  error(path: string, field: string, value: unknown, message: string): void {
    if (++this.errorCount <= MAX_POOL_CONFIG_ISSUES)
      this.errors.push(this.issue(path, field, value, message));
  }
  warn(path: string, field: string, value: unknown, message: string): void {
    if (++this.warningCount <= MAX_POOL_CONFIG_ISSUES) {
      this.warnings.push(this.issue(path, field, value, message));
    }
  }
  /** Says how many issues were found beyond those reported. */
  finish(): void {
    const more = (n: number, what: string) =>
      documentIssue(`${n - MAX_POOL_CONFIG_ISSUES} more ${what} not shown (${n} in all)`);
    if (this.errorCount > MAX_POOL_CONFIG_ISSUES) this.errors.push(more(this.errorCount, 'errors'));
    if (this.warningCount > MAX_POOL_CONFIG_ISSUES) this.warnings.push(more(this.warningCount, 'warnings'));
  }
}

function unknownFields(c: Collector, obj: Record<string, unknown>, allowed: Set<string>, base: string): void {
  for (const k of Object.keys(obj)) {
    if (!allowed.has(k)) {
      c.error(
        base === '' ? k : `${base}.${k}`,
        k,
        obj[k],
        `unknown field; accepted fields: ${[...allowed].join(', ')}`,
      );
    }
  }
}

function validateGrace(
  c: Collector,
  pool: Record<string, unknown>,
  field: string,
  base: string,
  aboveMs?: number,
): number | undefined {
  const raw = pool[field];
  if (raw === undefined) return undefined;
  const path = `${base}.${field}`;
  const lower =
    aboveMs === undefined ? 'greater than 0' : `above --watch-silence-threshold (${formatDuration(aboveMs)})`;
  const accepted = `accepted: ${DURATION_SYNTAX_HELP}, ${lower} and at most ${formatDuration(MAX_GRACE_MS)}`;
  if (typeof raw !== 'string') {
    c.error(path, field, raw, `must be a duration string; ${accepted}`);
    return undefined;
  }
  const parsed = tryParseDuration(raw);
  if (!parsed.ok) {
    c.error(path, field, raw, `${parsed.error}; ${accepted}`);
    return undefined;
  }
  if (!(parsed.ms > 0)) {
    c.error(path, field, raw, `must be greater than 0; ${accepted}`);
    return undefined;
  }
  if (parsed.ms > MAX_GRACE_MS || (aboveMs !== undefined && parsed.ms <= aboveMs)) {
    c.error(path, field, raw, `out of range; ${accepted}`);
    return undefined;
  }
  return parsed.ms;
}

function validateSelector(c: Collector, raw: unknown, base: string): LabelSelector | undefined {
  const path = `${base}.selector`;
  if (!isObject(raw)) {
    c.error(
      path,
      'selector',
      raw,
      'must be an object with matchLabels and/or matchExpressions ({} matches every node)',
    );
    return undefined;
  }
  unknownFields(c, raw, SELECTOR_FIELDS, path);
  let ok = true;
  const selector: LabelSelector = {};
  if (raw.matchLabels !== undefined) {
    const labels = validateMatchLabels(c, raw.matchLabels, `${path}.matchLabels`);
    if (labels.ok) selector.matchLabels = labels.value;
    ok &&= labels.ok;
  }
  if (raw.matchExpressions !== undefined) {
    const me = raw.matchExpressions;
    if (!Array.isArray(me)) {
      c.error(
        `${path}.matchExpressions`,
        'matchExpressions',
        me,
        'must be a list of {key, operator, values?}',
      );
      ok = false;
    } else {
      const reqs: LabelSelectorRequirement[] = [];
      me.forEach((r: unknown, i) => {
        const req = validateRequirement(c, r, `${path}.matchExpressions[${i}]`, i);
        if (req) reqs.push(req);
        else ok = false;
      });
      selector.matchExpressions = reqs;
    }
  }
  return ok ? selector : undefined;
}

/** matchLabels: label keys and values as the API server checks them; every problem reported. */
function validateMatchLabels(
  c: Collector,
  ml: unknown,
  path: string,
): { ok: true; value: Record<string, string> } | { ok: false } {
  if (!isObject(ml)) {
    c.error(path, 'matchLabels', ml, 'must be an object of label key -> value strings');
    return { ok: false };
  }
  let ok = true;
  const labels: Record<string, string> = {};
  for (const [k, v] of Object.entries(ml)) {
    const kp = labelKeyProblem(k);
    if (kp) {
      c.error(path, 'matchLabels', k, `invalid label key: ${kp}`);
      ok = false;
    }
    if (typeof v !== 'string') {
      c.error(`${path}.${k}`, k, v, 'label value must be a string');
      ok = false;
      continue;
    }
    const vp = labelValueProblem(v);
    if (vp) {
      c.error(`${path}.${k}`, k, v, `invalid label value: ${vp}`);
      ok = false;
    }
    labels[k] = v;
  }
  return ok ? { ok: true, value: labels } : { ok: false };
}

/** One of matchExpressions: {key, operator, values?}; undefined (problems reported) when invalid. */
function validateRequirement(
  c: Collector,
  r: unknown,
  rp: string,
  i: number,
): LabelSelectorRequirement | undefined {
  if (!isObject(r)) {
    c.error(rp, `matchExpressions[${i}]`, r, 'must be an object {key, operator, values?}');
    return undefined;
  }
  unknownFields(c, r, REQUIREMENT_FIELDS, rp);
  const { key, operator, values } = r;
  let ok = true;
  if (typeof key !== 'string' || labelKeyProblem(key)) {
    c.error(
      `${rp}.key`,
      'key',
      key,
      typeof key === 'string' ? `invalid label key: ${labelKeyProblem(key)}` : 'must be a label key string',
    );
    ok = false;
  }
  if (typeof operator !== 'string' || !SELECTOR_OPERATORS.includes(operator as SelectorOperator)) {
    c.error(`${rp}.operator`, 'operator', operator, `accepted: ${SELECTOR_OPERATORS.join(', ')}`);
    return undefined;
  }
  const op = operator as SelectorOperator;
  const needsValues = op === 'In' || op === 'NotIn';
  if (needsValues) {
    if (!Array.isArray(values) || values.length === 0) {
      c.error(`${rp}.values`, 'values', values, `operator ${op} needs a non-empty list of label values`);
      return undefined;
    }
    values.forEach((v: unknown, j) => {
      const problem = typeof v !== 'string' ? 'must be a string' : labelValueProblem(v);
      if (problem) {
        c.error(`${rp}.values[${j}]`, `values[${j}]`, v, `invalid label value: ${problem}`);
        ok = false;
      }
    });
  } else if (values !== undefined && !(Array.isArray(values) && values.length === 0)) {
    c.error(`${rp}.values`, 'values', values, `operator ${op} takes no values`);
    ok = false;
  }
  if (!ok || typeof key !== 'string') return undefined;
  const req: LabelSelectorRequirement = { key, operator: op };
  if (needsValues) req.values = [...(values as string[])];
  return req;
}

/**
 * Validates a parsed pool config document; collects every problem (the first
 * {@link MAX_POOL_CONFIG_ISSUES} of each kind are reported). Total: a document nested deeper than
 * {@link MAX_POOL_CONFIG_DEPTH} levels, or anything else that makes the check throw, is an error
 * result, never an exception.
 */
export function validatePoolConfig(doc: unknown, bounds: PoolGraceBounds = {}): PoolConfigResult {
  const fail = (message: string): PoolConfigResult => ({
    ok: false,
    errors: [documentIssue(message)],
    warnings: [],
  });
  try {
    const deep = tooDeepAt(doc, MAX_POOL_CONFIG_DEPTH);
    if (deep !== undefined) {
      return fail(
        `nested deeper than ${MAX_POOL_CONFIG_DEPTH} levels of objects and lists (at ${deep}; ` +
          'a pool config needs 7)',
      );
    }
    const c = new Collector();
    const result = validateDocument(c, doc, bounds);
    c.finish();
    return result ?? { ok: false, errors: c.errors, warnings: c.warnings };
  } catch (err) {
    return fail(`cannot validate the pool config: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** The checks of validatePoolConfig; undefined when `c` holds errors. */
function validateDocument(c: Collector, doc: unknown, bounds: PoolGraceBounds): PoolConfigResult | undefined {
  if (!isObject(doc)) {
    c.error('', '', doc, 'the pool config must be a JSON object {"pools": [...]}');
    return undefined;
  }
  unknownFields(c, doc, new Set(['pools']), '');
  const rawPools = doc.pools;
  if (!Array.isArray(rawPools)) {
    c.error('pools', 'pools', rawPools, 'must be a list of pools');
    return undefined;
  }
  const pools: NodePool[] = [];
  const names = new Map<string, number>();
  let matchAllAt: NodePool | undefined;
  rawPools.forEach((raw: unknown, index) => {
    c.poolIndex = index;
    c.poolName = isObject(raw) && typeof raw.name === 'string' ? raw.name : undefined;
    const pool = validatePool(c, raw, index, bounds, names);
    if (!pool) return;
    if (matchAllAt) {
      c.warn(
        `pools[${index}].selector`,
        'selector',
        (raw as Record<string, unknown>).selector,
        `never used: pools[${matchAllAt.index}] ${JSON.stringify(matchAllAt.name)} has an empty selector and matches every node first`,
      );
    }
    pools.push(pool);
    if (!matchAllAt && isMatchAll(pool.selector)) matchAllAt = pool;
  });
  if (c.errorCount > 0) return undefined;
  return { ok: true, config: { pools }, warnings: c.warnings };
}

/** One pool; undefined when it has errors (all reported). Warns of grace periods that mislead. */
function validatePool(
  c: Collector,
  raw: unknown,
  index: number,
  bounds: PoolGraceBounds,
  names: Map<string, number>,
): NodePool | undefined {
  const base = `pools[${index}]`;
  if (!isObject(raw)) {
    c.error(
      base,
      `pools[${index}]`,
      raw,
      'must be an object {name, selector, nodeMonitorGracePeriod?, nodeStartupGracePeriod?}',
    );
    return undefined;
  }
  const errorsBefore = c.errorCount;
  unknownFields(c, raw, POOL_FIELDS, base);
  const name = raw.name;
  validatePoolName(c, name, base, index, names);
  const selector = raw.selector === undefined ? undefined : validateSelector(c, raw.selector, base);
  if (raw.selector === undefined) {
    c.error(`${base}.selector`, 'selector', undefined, 'required; {} matches every node');
  }
  const monitorGraceMs = validateGrace(
    c,
    raw,
    'nodeMonitorGracePeriod',
    base,
    bounds.watchSilenceThresholdMs,
  );
  const startupGraceMs = validateGrace(c, raw, 'nodeStartupGracePeriod', base);
  if (raw.nodeMonitorGracePeriod === undefined && raw.nodeStartupGracePeriod === undefined) {
    c.error(
      `${base}.nodeMonitorGracePeriod`,
      'nodeMonitorGracePeriod',
      undefined,
      'a pool must set nodeMonitorGracePeriod, nodeStartupGracePeriod or both',
    );
  }
  if (c.errorCount > errorsBefore || !selector || typeof name !== 'string') return undefined;
  if (monitorGraceMs !== undefined && monitorGraceMs <= HTTP2_HEALTH_CHECK_MS) {
    c.warn(
      `${base}.nodeMonitorGracePeriod`,
      'nodeMonitorGracePeriod',
      raw.nodeMonitorGracePeriod,
      `at or below ${formatDuration(HTTP2_HEALTH_CHECK_MS)}: client-go's HTTP/2 health check needs 30s + 15s ` +
        'to notice a dead connection, so nodes may flap NotReady (upstream default is 50s)',
    );
  }
  if (
    monitorGraceMs !== undefined &&
    bounds.confirmDownMs !== undefined &&
    monitorGraceMs <= bounds.confirmDownMs
  ) {
    c.warn(
      `${base}.nodeMonitorGracePeriod`,
      'nodeMonitorGracePeriod',
      raw.nodeMonitorGracePeriod,
      `at or below ${formatDuration(bounds.confirmDownMs)} (--confirm-after and the confirming probe): ` +
        'the second opinion cannot confirm a node down before this grace, so its nodes are marked at ' +
        'the grace (their NoExecute still held while their kubelets answer)',
    );
  }
  if (monitorGraceMs !== undefined && startupGraceMs !== undefined && startupGraceMs < monitorGraceMs) {
    c.warn(
      `${base}.nodeStartupGracePeriod`,
      'nodeStartupGracePeriod',
      raw.nodeStartupGracePeriod,
      'shorter than nodeMonitorGracePeriod: new nodes get less time than running ones',
    );
  }
  const pool: NodePool = { name, index, selector };
  if (monitorGraceMs !== undefined) pool.monitorGraceMs = monitorGraceMs;
  if (startupGraceMs !== undefined) pool.startupGraceMs = startupGraceMs;
  return pool;
}

/** A pool's name: its syntax, not the default pool's, not taken by an earlier pool (then noted). */
function validatePoolName(
  c: Collector,
  name: unknown,
  base: string,
  index: number,
  names: Map<string, number>,
): void {
  if (typeof name !== 'string' || !POOL_NAME_RE.test(name) || name.length > 63) {
    c.error(
      `${base}.name`,
      'name',
      name,
      'accepted: 1-63 characters of [A-Za-z0-9-_.], starting and ending with an alphanumeric',
    );
  } else if (name === DEFAULT_POOL_NAME) {
    c.error(`${base}.name`, 'name', name, `"${DEFAULT_POOL_NAME}" is reserved for nodes that match no pool`);
  } else if (names.has(name)) {
    c.error(`${base}.name`, 'name', name, `duplicate pool name (also pools[${names.get(name)}])`);
  } else {
    names.set(name, index);
  }
}

/**
 * Parses and validates pool config text (JSON). Total, as validatePoolConfig: text over
 * {@link MAX_POOL_CONFIG_BYTES} bytes is an error result.
 */
export function parsePoolConfig(text: string, bounds: PoolGraceBounds = {}): PoolConfigResult {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > MAX_POOL_CONFIG_BYTES) {
    return { ok: false, errors: [documentIssue(tooLargeMessage(bytes))], warnings: [] };
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    const trimmed = text.trimStart();
    const hint =
      trimmed.startsWith('pools:') || trimmed.startsWith('---') || trimmed.startsWith('#')
        ? ' (this looks like YAML: only JSON is supported)'
        : '';
    const message = `not valid JSON: ${err instanceof Error ? err.message : String(err)}${hint}`;
    return { ok: false, errors: [documentIssue(message)], warnings: [] };
  }
  return validatePoolConfig(doc, bounds);
}

/** The error for a pool config of `bytes` bytes (more than it may hold), or at least that many. */
export function tooLargeMessage(bytes: number, atLeast = false): string {
  return (
    `too large: ${atLeast ? 'at least ' : ''}${bytes} bytes; a pool config may have at most ` +
    `${MAX_POOL_CONFIG_BYTES} bytes (1 MiB, what a ConfigMap holds)`
  );
}

/** The grace periods for a node: the first pool whose selector matches, else the defaults. */
export function resolveGrace(
  config: PoolConfig,
  defaults: GraceDefaults,
  labels: Labels | undefined,
): ResolvedGrace {
  for (const pool of config.pools) {
    if (matchesSelector(pool.selector, labels)) {
      return {
        monitorGraceMs: pool.monitorGraceMs ?? defaults.monitorGraceMs,
        startupGraceMs: pool.startupGraceMs ?? defaults.startupGraceMs,
        pool: pool.name,
      };
    }
  }
  return { monitorGraceMs: defaults.monitorGraceMs, startupGraceMs: defaults.startupGraceMs, pool: null };
}
