/**
 * docs/metrics.md, generated from the code: every metric family the controller registers, with its
 * type, label names and help text, grouped by the part of the controller that registers it.
 *
 *   npm run metrics-reference              # rewrite docs/metrics.md
 *   npm run metrics-reference -- --check   # exit 1 when docs/metrics.md is not what the code gives
 *
 * Each area below calls the same metric factories the process calls (src/cli/run.ts and
 * src/cli/assemble/*.ts) on a Registry of its own; the areas are then merged into one Registry,
 * which throws on a name two areas both register, as the process's single Registry would.
 * test/unit/metrics-reference.test.ts regenerates the text in memory and compares it with the file.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Metric, type MetricObjectWithValues, type MetricValue, Registry } from 'prom-client';
import { createWriterMetrics } from '../src/apply/writer.js';
import { createConcurrentControllerMetrics } from '../src/controller/concurrent-controller.js';
import { createControllerMetrics } from '../src/controller/metrics.js';
import { createDisruptionMetrics } from '../src/disruption/metrics.js';
import { createLeaderElectionMetrics } from '../src/election/metrics.js';
import { createHttpConnectionMetrics } from '../src/http/connections.js';
import { createDelegatedAuthMetrics } from '../src/http/delegated-auth.js';
import { createMetricsServerMetrics } from '../src/http/server.js';
import { createServingCertMetrics } from '../src/http/serving-cert.js';
import { createBuildInfoMetric } from '../src/metrics/build-info.js';
import { EVENT_LOOP_SAMPLE_MS, EventLoopSampler } from '../src/metrics/event-loop.js';
import { createApiRequestMetrics, createRegistry } from '../src/metrics/registry.js';
import { createWatchMetrics } from '../src/watch/metrics.js';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const REFERENCE = path.join(REPO_ROOT, 'docs', 'metrics.md');
export const COMMAND = 'npm run metrics-reference';

export interface Area {
  title: string;
  /** Where the factories live, and when the process registers them. */
  about: string;
  /** Registers the area's families on the registry given, as the process does. */
  register(registry: Registry): void;
}

/** In the order src/cli/run.ts creates them. */
export const AREAS: readonly Area[] = [
  {
    title: 'Process and runtime',
    about:
      "prom-client's default metrics (`createRegistry`, src/metrics/registry.ts), the event-loop " +
      "series served from the process's one periodic timer (`EventLoopSampler`, src/metrics/event-loop.ts) and " +
      '`nlc_build_info` (src/metrics/build-info.ts). Always; the event-loop help names the tick, shown here at its ' +
      'default (`--watch-read-interval` unset).',
    register(registry) {
      // createRegistry() makes the process's registry; its families are merged into this one.
      const defaults = createRegistry();
      for (const m of defaults.getMetricsAsArray()) registry.registerMetric(m as unknown as Metric);
      new EventLoopSampler(registry, EVENT_LOOP_SAMPLE_MS);
      createBuildInfoMetric(registry, { version: '0.0.0', revision: 'unknown', nodejsVersion: 'v0' });
    },
  },
  {
    title: 'Requests to kube-apiserver',
    about:
      '`createApiRequestMetrics` (src/metrics/registry.ts), at start (src/cli/assemble/api-clients.ts). Always.',
    register: createApiRequestMetrics,
  },
  {
    title: 'Node lifecycle and work queue',
    about:
      '`createControllerMetrics` (src/controller/metrics.ts; the `workqueue_*` families from ' +
      'src/controller/workqueue-metrics.ts), in src/cli/assemble/controller.ts. Always.',
    register: createControllerMetrics,
  },
  {
    title: 'Disruption: zones, rates, the NoExecute cap',
    about:
      '`createDisruptionMetrics` (src/disruption/metrics.ts), in src/cli/assemble/controller.ts. Always.',
    register: createDisruptionMetrics,
  },
  {
    title: 'Watches',
    about: '`createWatchMetrics` (src/watch/metrics.ts), in src/cli/assemble/controller.ts. Always.',
    register: createWatchMetrics,
  },
  {
    title: 'Leader election',
    about:
      '`createLeaderElectionMetrics` (src/election/metrics.ts), in src/cli/assemble/election.ts. Always.',
    register: createLeaderElectionMetrics,
  },
  {
    title: 'Another node-lifecycle controller',
    about:
      '`createConcurrentControllerMetrics` (src/controller/concurrent-controller.ts), in ' +
      'src/cli/assemble/node-lifecycle.ts. Upstream mode only (`--mode=upstream`, the default), not with `--dry-run`.',
    register: createConcurrentControllerMetrics,
  },
  {
    title: 'Writes',
    about: '`createWriterMetrics` (src/apply/writer.ts), in src/cli/assemble/node-lifecycle.ts. Always.',
    register: createWriterMetrics,
  },
  {
    title: 'Metrics and probe servers',
    about:
      '`createMetricsServerMetrics` (src/http/server.ts) and `createHttpConnectionMetrics` ' +
      '(src/http/connections.ts), in src/cli/assemble/serving.ts. Always.',
    register(registry) {
      createMetricsServerMetrics(registry);
      createHttpConnectionMetrics(registry);
    },
  },
  {
    title: "Metrics over HTTPS: serving certificate and scrapers' tokens",
    about:
      '`createServingCertMetrics` (src/http/serving-cert.ts) and `createDelegatedAuthMetrics` ' +
      '(src/http/delegated-auth.ts), in src/cli/assemble/serving.ts. Only while `/metrics` is served ' +
      'over HTTPS (`--metrics-secure`, the default).',
    register(registry) {
      createServingCertMetrics(registry);
      createDelegatedAuthMetrics(registry);
    },
  },
];

export interface Family {
  name: string;
  type: string;
  labels: readonly string[];
  help: string;
}

/** The families each area registers, sorted by name; throws if two areas register one name. */
export async function familiesByArea(areas: readonly Area[] = AREAS): Promise<Map<Area, Family[]>> {
  const registries = areas.map((area) => {
    const registry = new Registry();
    area.register(registry);
    return registry;
  });
  // As the process's one Registry would: a name registered twice is an error, not a silent overwrite.
  Registry.merge(registries);
  const out = new Map<Area, Family[]>();
  for (const [i, area] of areas.entries()) {
    const registry = registries[i]!;
    const json: MetricObjectWithValues<MetricValue<string>>[] = await registry.getMetricsAsJSON();
    const families = json.map((m) => ({
      name: m.name,
      type: String(m.type),
      labels: labelNames(registry, m.name),
      help: m.help,
    }));
    out.set(
      area,
      families.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)),
    );
  }
  return out;
}

/** The label names a family was declared with (prom-client keeps them on the metric object). */
function labelNames(registry: Registry, name: string): readonly string[] {
  const metric = registry.getSingleMetric(name) as unknown as { labelNames?: readonly string[] } | undefined;
  return metric?.labelNames ?? [];
}

/** A table cell: one line, pipes escaped. */
function cell(text: string): string {
  return text.replace(/\s+/g, ' ').replace(/\|/g, '\\|').trim();
}

export function render(byArea: Map<Area, Family[]>): string {
  const total = [...byArea.values()].reduce((n, f) => n + f.length, 0);
  const lines = [
    '# Metrics reference',
    '',
    `<!-- Generated by \`${COMMAND}\` (scripts/metrics-reference.ts) from the metric factories in src/. ` +
      'Do not edit by hand: test/unit/metrics-reference.test.ts fails when this file is not what the code gives. -->',
    '',
    `Every metric family the controller registers (${total}), with its type, label names and help text, ` +
      'grouped by the part of the controller that registers it, and when. Generated from the code by ' +
      `\`${COMMAND}\`; \`test/unit/metrics-reference.test.ts\` keeps it in step.`,
    '',
    'Scraping `/metrics` (HTTPS and a token by default): [deploy.md](deploy.md#metrics-https-tokens-and-who-may-scrape). ' +
      'What to watch and the alerts built on these: [operations.md](operations.md#alerts). Names follow ' +
      'kube-controller-manager where it has the same metric (`node_collector_*`, `workqueue_*`, `rest_client_*`, ' +
      '`leader_election_*`); the rest are `nlc_*`. A histogram is exposed as `_bucket`, `_sum` and `_count` series.',
    '',
  ];
  for (const [area, families] of byArea) {
    lines.push(
      `## ${area.title}`,
      '',
      area.about,
      '',
      '| name | type | labels | help |',
      '| --- | --- | --- | --- |',
    );
    for (const f of families) {
      const labels = f.labels.length > 0 ? f.labels.map((l) => `\`${l}\``).join(', ') : '';
      lines.push(`| \`${f.name}\` | ${f.type} | ${labels} | ${cell(f.help)} |`);
    }
    lines.push('');
  }
  return lines.join('\n');
}

export async function generate(): Promise<string> {
  return render(await familiesByArea());
}

async function main(argv: string[]): Promise<number> {
  const unknown = argv.filter((a) => a !== '--check');
  if (unknown.length > 0) throw new Error(`usage: ${COMMAND} [-- --check] (unknown: ${unknown.join(' ')})`);
  const text = await generate();
  const rel = path.relative(REPO_ROOT, REFERENCE);
  if (argv.includes('--check')) {
    let current = '';
    try {
      current = readFileSync(REFERENCE, 'utf8');
    } catch {}
    if (current === text) {
      console.log(`${rel} is up to date`);
      return 0;
    }
    console.error(`${rel} is not what the code registers: run \`${COMMAND}\` and commit the result`);
    return 1;
  }
  writeFileSync(REFERENCE, text);
  console.log(`wrote ${rel}`);
  return 0;
}

if (
  process.argv[1] &&
  path.resolve(process.argv[1]) === path.resolve(REPO_ROOT, 'scripts', 'metrics-reference.ts')
) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      console.error(err instanceof Error ? err.message : String(err));
      process.exitCode = 1;
    },
  );
}
