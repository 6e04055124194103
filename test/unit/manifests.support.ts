/**
 * Helpers for the manifest tests (test/unit/manifests*.test.ts): reading manifests/, a small
 * JSON-patch applier for the overlays' Deployment patches, the controller's metric catalog built
 * from the real metric factories, and a PromQL scanner that finds metric selectors.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadAllYaml } from '@kubernetes/client-node';
import type { Registry } from 'prom-client';
import { createWriterMetrics } from '../../src/apply/writer.js';
import { buildInfo } from '../../src/cli/build-info.js';
import { systemClock } from '../../src/clock/clock.js';
import { createControllerMetrics } from '../../src/controller/metrics.js';
import { WORK_QUEUE_NAME } from '../../src/controller/node-lifecycle.js';
import { createDisruptionMetrics } from '../../src/disruption/metrics.js';
import { watchLock } from '../../src/election/lock-watch.js';
import { createLeaderElectionMetrics } from '../../src/election/metrics.js';
import { createDelegatedAuthMetrics } from '../../src/http/delegated-auth.js';
import { createMetricsServerMetrics } from '../../src/http/server.js';
import { createServingCertMetrics } from '../../src/http/serving-cert.js';
import type { KubeClient } from '../../src/kube/client.js';
import { createBuildInfoMetric } from '../../src/metrics/build-info.js';
import { EVENT_LOOP_SAMPLE_MS, EventLoopSampler } from '../../src/metrics/event-loop.js';
import { createApiRequestMetrics, createRegistry } from '../../src/metrics/registry.js';
import { createWatchMetrics } from '../../src/watch/metrics.js';
import { watchNodeLeases, watchNodes } from '../../src/watch/reflector.js';
import { projectKubectl } from '../support/kubectl.js';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const MANIFESTS = join(REPO, 'manifests');

export type Obj = Record<string, unknown>;

export function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Follows a path of keys / indexes; undefined when any step is missing. */
export function get(v: unknown, ...path: (string | number)[]): unknown {
  let cur: unknown = v;
  for (const k of path) {
    if (typeof k === 'number') {
      if (!Array.isArray(cur)) return undefined;
      cur = cur[k];
    } else {
      if (!isObj(cur)) return undefined;
      cur = cur[k];
    }
  }
  return cur;
}

export function arr(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

export function walkFiles(dir: string, accept: (p: string) => boolean): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...walkFiles(p, accept));
    else if (accept(p)) out.push(p);
  }
  return out;
}

export const yamlFiles = (): string[] => walkFiles(MANIFESTS, (p) => /\.ya?ml$/.test(p));

/** All documents of a YAML file (empty documents dropped). */
export function loadDocs(file: string): Obj[] {
  return (loadAllYaml(readFileSync(file, 'utf8')) as unknown[]).filter(isObj);
}

/** The one document of `kind` (and `name`, if given) in the files of a folder. */
export function findDoc(dir: string, kind: string, name?: string): Obj {
  const docs = walkFiles(dir, (p) => /\.ya?ml$/.test(p) && !/kustomization\.ya?ml$/.test(p)).flatMap(
    loadDocs,
  );
  const found = docs.filter(
    (d) => d.kind === kind && (name === undefined || get(d, 'metadata', 'name') === name),
  );
  if (found.length !== 1)
    throw new Error(`expected one ${kind} ${name ?? ''} in ${dir}, found ${found.length}`);
  return found[0]!;
}

export function kustomizationOf(dir: string): Obj {
  const docs = loadDocs(join(dir, 'kustomization.yaml'));
  if (docs.length !== 1) throw new Error(`${dir}/kustomization.yaml: expected one document`);
  return docs[0]!;
}

// ---------------------------------------------------------------------------------------------
// JSON patch (RFC 6902) for the overlays' patches, enough for add / replace / remove.

function unescapePointer(s: string): string {
  return s.replace(/~1/g, '/').replace(/~0/g, '~');
}

export interface PatchOp {
  op: 'add' | 'replace' | 'remove';
  path: string;
  value?: unknown;
}

export function applyJsonPatch(doc: unknown, ops: readonly PatchOp[]): unknown {
  const root = structuredClone(doc);
  for (const o of ops) {
    const parts = o.path.split('/').slice(1).map(unescapePointer);
    const last = parts.pop();
    if (last === undefined) throw new Error(`bad path ${o.path}`);
    let parent: unknown = root;
    for (const p of parts) {
      parent = Array.isArray(parent) ? parent[Number(p)] : isObj(parent) ? parent[p] : undefined;
      if (parent === undefined) throw new Error(`${o.op} ${o.path}: ${p} does not exist`);
    }
    if (Array.isArray(parent)) {
      const i = last === '-' ? parent.length : Number(last);
      if (o.op === 'add') parent.splice(i, 0, structuredClone(o.value));
      else if (i >= parent.length) throw new Error(`${o.op} ${o.path}: no element ${i}`);
      else if (o.op === 'replace') parent[i] = structuredClone(o.value);
      else parent.splice(i, 1);
    } else if (isObj(parent)) {
      if (o.op !== 'add' && !(last in parent)) throw new Error(`${o.op} ${o.path}: ${last} does not exist`);
      if (o.op === 'remove') delete parent[last];
      else parent[last] = structuredClone(o.value);
    } else {
      throw new Error(`${o.op} ${o.path}: parent is not a container`);
    }
  }
  return root;
}

/**
 * The base Deployment with an overlay's JSON6902 patches on it and the overlay's image override,
 * the way kustomize renders it (only the features our overlays use).
 */
export function deploymentOf(overlayDir: string): Obj {
  const k = kustomizationOf(overlayDir);
  const bases = arr(k.resources).map((r) => resolve(overlayDir, String(r)));
  let dep: Obj | undefined;
  let image = '';
  for (const b of bases) {
    dep = findDoc(b, 'Deployment');
    const bk = kustomizationOf(b);
    for (const i of arr(bk.images)) if (isObj(i) && i.newTag) image = `${i.name}:${i.newTag}`;
  }
  if (!dep) throw new Error(`${overlayDir}: no base with a Deployment`);
  // kustomize's order: the resources, then the components' patches, then the overlay's own.
  const patches = [
    ...arr(k.components).flatMap((c) => arr(kustomizationOf(resolve(overlayDir, String(c))).patches)),
    ...arr(k.patches),
  ];
  for (const p of patches) {
    if (!isObj(p) || get(p, 'target', 'kind') !== 'Deployment') continue;
    const ops = loadAllYaml(String(p.patch))[0] as PatchOp[];
    dep = applyJsonPatch(dep, ops) as Obj;
  }
  for (const i of arr(k.images)) if (isObj(i) && i.newTag) image = `${i.name}:${i.newTag}`;
  const c = get(dep, 'spec', 'template', 'spec', 'containers', 0);
  if (isObj(c) && image) c.image = image;
  return dep;
}

// ---------------------------------------------------------------------------------------------
// kubectl kustomize, with the project's own kubectl (test/support/kubectl.ts).

/** Renders a kustomization directory; throws with kustomize's message on failure. */
export function kustomize(dir: string): Obj[] {
  const r = spawnSync(projectKubectl(), ['kustomize', dir], { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`kubectl kustomize ${dir} failed: ${r.stderr}`);
  return (loadAllYaml(r.stdout) as unknown[]).filter(isObj);
}

/**
 * Renders base + the given components through a throwaway kustomization outside the repo, with
 * `namespace:` when given (as a user's overlay sets it).
 */
export function kustomizeWith(resources: string[], components: string[], namespace?: string): Obj[] {
  const dir = mkdtempSync(join(tmpdir(), 'nlc-kustomize-'));
  try {
    const rel = (p: string) => relative(dir, p);
    writeFileSync(
      join(dir, 'kustomization.yaml'),
      [
        'apiVersion: kustomize.config.k8s.io/v1beta1',
        'kind: Kustomization',
        ...(namespace ? [`namespace: ${namespace}`] : []),
        'resources:',
        ...resources.map((r) => `  - ${rel(r)}`),
        'components:',
        ...components.map((c) => `  - ${rel(c)}`),
        '',
      ].join('\n'),
    );
    return kustomize(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// The controller's metric catalog, from the real metric factories.

export interface MetricInfo {
  /** Family name as registered. */
  family: string;
  type: string;
  help: string;
  labelNames: readonly string[];
  /** Label values seen in the exposition (only what the catalog's registry produced). */
  labelValues: ReadonlyMap<string, ReadonlySet<string>>;
}

/**
 * A registry with every metric family the controller process registers (src/cli/run.ts), and
 * label values where the code fixes them (the watches' resources, the work queue's name).
 */
export function controllerRegistry(): { registry: Registry; dispose(): void } {
  const registry = createRegistry();
  createBuildInfoMetric(registry, buildInfo());
  // The event-loop series (never started: it would only tick).
  new EventLoopSampler(registry, EVENT_LOOP_SAMPLE_MS);
  const controller = createControllerMetrics(registry);
  controller.workqueue.forQueue(WORK_QUEUE_NAME, () => performance.now());
  createWriterMetrics(registry);
  createApiRequestMetrics(registry);
  createDisruptionMetrics(registry);
  createLeaderElectionMetrics(registry);
  // The metrics server's (served securely, as by default).
  createMetricsServerMetrics(registry);
  createDelegatedAuthMetrics(registry);
  createServingCertMetrics(registry);
  // The controller's own watches (never started: no request is made), so that the watch metrics
  // carry the `resource` label values the controller really uses.
  const metrics = createWatchMetrics(registry);
  const deps = { client: {} as KubeClient, clock: systemClock, metrics };
  const reflectors = [watchNodeLeases(deps), watchNodes(deps), watchLock(deps, 'nlc-system', 'lock')];
  return {
    registry,
    dispose() {
      for (const r of reflectors) r.dispose();
    },
  };
}

/** Exposed series names (histogram/summary families expanded) -> their family. */
export async function controllerMetricCatalog(): Promise<Map<string, MetricInfo>> {
  const { registry, dispose } = controllerRegistry();
  const json = await registry.getMetricsAsJSON();
  dispose();
  const out = new Map<string, MetricInfo>();
  for (const m of json) {
    const single = registry.getSingleMetric(m.name) as unknown as
      | { labelNames?: readonly string[] }
      | undefined;
    const labelValues = new Map<string, Set<string>>();
    for (const v of m.values) {
      for (const [k, val] of Object.entries(v.labels ?? {})) {
        const set = labelValues.get(k) ?? new Set<string>();
        set.add(String(val));
        labelValues.set(k, set);
      }
    }
    const info: MetricInfo = {
      family: m.name,
      type: String(m.type),
      help: m.help,
      labelNames: single?.labelNames ?? [],
      labelValues,
    };
    out.set(m.name, info);
    if (info.type === 'histogram') {
      out.set(`${m.name}_bucket`, { ...info, labelNames: [...info.labelNames, 'le'] });
      out.set(`${m.name}_sum`, info);
      out.set(`${m.name}_count`, info);
    } else if (info.type === 'summary') {
      out.set(m.name, { ...info, labelNames: [...info.labelNames, 'quantile'] });
      out.set(`${m.name}_sum`, info);
      out.set(`${m.name}_count`, info);
    }
  }
  return out;
}

/**
 * Series Prometheus itself makes: `up` per scrape target. Labels every scraped series carries from
 * the Prometheus Operator's target labelling (ServiceMonitor): job, namespace, service, pod, ...
 */
export const PROMETHEUS_SERIES = new Set(['up']);
export const TARGET_LABELS = new Set([
  // Added by Prometheus' external labels or a multi-cluster store (the dashboard's $cluster).
  'cluster',
  'job',
  'instance',
  'namespace',
  'service',
  'pod',
  'container',
  'endpoint',
]);

// ---------------------------------------------------------------------------------------------
// PromQL scanning: which metric selectors (name + label matchers) an expression uses.

export interface LabelMatcher {
  name: string;
  op: string;
  value: string;
}

export interface Selector {
  metric: string;
  matchers: LabelMatcher[];
}

const KEYWORDS = new Set([
  'and',
  'or',
  'unless',
  'bool',
  'offset',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'inf',
  'nan',
  'start',
  'end',
]);
/** Aggregation operators: may be followed by by/without before their parentheses. */
const AGGREGATIONS = new Set([
  'sum',
  'min',
  'max',
  'avg',
  'group',
  'stddev',
  'stdvar',
  'count',
  'count_values',
  'bottomk',
  'topk',
  'quantile',
  'limitk',
  'limit_ratio',
]);
/** Keywords followed by a parenthesised label list (not an expression). */
const LABEL_LIST_KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right']);

function readString(s: string, i: number): { value: string; end: number } {
  const q = s[i]!;
  let j = i + 1;
  let value = '';
  while (j < s.length && s[j] !== q) {
    if (s[j] === '\\' && q !== '`') {
      value += s[j + 1] ?? '';
      j += 2;
    } else {
      value += s[j];
      j++;
    }
  }
  if (j >= s.length) throw new Error(`unterminated string at ${i} in ${s}`);
  return { value, end: j + 1 };
}

function skipSpace(s: string, i: number): number {
  while (i < s.length && /\s/.test(s[i]!)) i++;
  return i;
}

/** Skips a balanced bracket group starting at s[i] (one of ( [ {), strings included. */
function skipGroup(s: string, i: number): number {
  const open = s[i]!;
  const close = open === '(' ? ')' : open === '[' ? ']' : '}';
  let depth = 0;
  for (let j = i; j < s.length; j++) {
    const c = s[j]!;
    if (c === '"' || c === "'" || c === '`') {
      j = readString(s, j).end - 1;
    } else if (c === open) depth++;
    else if (c === close && --depth === 0) return j + 1;
  }
  throw new Error(`unbalanced ${open} at ${i} in ${s}`);
}

function parseMatchers(body: string): LabelMatcher[] {
  const out: LabelMatcher[] = [];
  let i = 0;
  while (i < body.length) {
    i = skipSpace(body, i);
    if (i >= body.length) break;
    const name = /^[a-zA-Z_][a-zA-Z0-9_]*/.exec(body.slice(i))?.[0];
    if (!name) throw new Error(`bad label matcher in {${body}}`);
    i = skipSpace(body, i + name.length);
    const op = /^(=~|!~|!=|=)/.exec(body.slice(i))?.[0];
    if (!op) throw new Error(`bad label matcher operator in {${body}}`);
    i = skipSpace(body, i + op.length);
    const str = readString(body, i);
    out.push({ name, op, value: str.value });
    i = skipSpace(body, str.end);
    if (body[i] === ',') i++;
  }
  return out;
}

/**
 * Metric selectors used by a PromQL expression: every identifier that is not a function,
 * aggregation or keyword, with the label matchers that follow it. Strings, label lists of
 * by/without/on/ignoring/group_*, ranges and subqueries in [...] are skipped.
 */
export function promqlSelectors(expr: string): Selector[] {
  const out: Selector[] = [];
  const s = expr;
  let i = 0;
  while (i < s.length) {
    const c = s[i]!;
    if (c === '"' || c === "'" || c === '`') {
      i = readString(s, i).end;
    } else if (c === '[') {
      i = skipGroup(s, i);
    } else if (c === '{') {
      // A selector without a metric name ({__name__=...}): not used by our queries.
      throw new Error(`selector without a metric name at ${i} in ${s}`);
    } else if (/[0-9.]/.test(c)) {
      i++;
      while (i < s.length && /[0-9a-zA-Z.]/.test(s[i]!)) i++;
    } else if (/[a-zA-Z_:]/.test(c)) {
      const ident = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(s.slice(i))![0];
      let j = skipSpace(s, i + ident.length);
      if (LABEL_LIST_KEYWORDS.has(ident)) {
        i = s[j] === '(' ? skipGroup(s, j) : j;
      } else if (KEYWORDS.has(ident) || AGGREGATIONS.has(ident)) {
        i = j;
      } else if (s[j] === '(') {
        i = j; // function or aggregation: scan its arguments
      } else {
        const sel: Selector = { metric: ident, matchers: [] };
        if (s[j] === '{') {
          const end = skipGroup(s, j);
          sel.matchers = parseMatchers(s.slice(j + 1, end - 1));
          j = end;
        }
        out.push(sel);
        i = j;
      }
    } else if (c === '$') {
      throw new Error(`template variable outside a string or range at ${i} in ${s}`);
    } else {
      i++;
    }
  }
  return out;
}

/** label_replace(..., dst, replacement, "zone", regex) calls on the zone label. */
export function zoneLabelReplaces(expr: string): { replacement: string; regex: string }[] {
  const out: { replacement: string; regex: string }[] = [];
  const re = /"zone_name",\s*"((?:[^"\\]|\\.)*)",\s*"zone",\s*"((?:[^"\\]|\\.)*)"/g;
  for (const m of expr.matchAll(re)) out.push({ replacement: m[1]!, regex: m[2]! });
  return out;
}

/** GitHub's anchor for a Markdown heading. */
export function githubAnchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

export function markdownAnchors(file: string): Set<string> {
  const out = new Set<string>();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    const m = /^#{1,6}\s+(.*)$/.exec(line);
    if (m) out.add(githubAnchor(m[1]!));
  }
  return out;
}
