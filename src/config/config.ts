import { formatDuration } from '../clock/duration.js';
import { HTTP2_HEALTH_CHECK_MS } from '../disruption/index.js';
import {
  candidateNameProblem,
  defaultIdentity,
  type LeaderElectionConfig,
  LeaderElectionConfigError,
  resolveLeaderElectionConfig,
} from '../election/index.js';
import { FENCE_SIGNALS, type FenceSignal, type OutOfServiceSettings } from '../remediation/index.js';
import { DEFAULT_SECOND_OPINION, type SecondOpinionSettings } from '../second-opinion/index.js';
import { FlagError, type ParsedArgs, parseAddress, parseArgs } from './flags.js';

export interface BindAddress {
  host: string;
  port: number;
}

/** Everything the controller is configured with, parsed and validated once at start. */
export interface Config {
  kubeconfig: string | undefined;
  dryRun: boolean;
  health: {
    monitorGraceMs: number;
    startupGraceMs: number;
    monitorPeriodMs: number;
    markPodsNotReady: 'always' | 'upstream';
    watchSilenceThresholdMs: number;
    /** --watch-read-interval: read the lease and node watches on this cadence (0: as events arrive). */
    watchReadIntervalMs: number;
  };
  nodePoolConfigPath: string | undefined;
  /** --mode: upstream's writes, or companion (beside a provider's controller). */
  mode: 'upstream' | 'companion';
  /**
   * Upstream mode: whether to look for another node-lifecycle controller setting the nodes' Ready
   * condition (not in dry-run), and whether to keep writing when one is seen
   * (--allow-concurrent-node-lifecycle-controller); src/controller/concurrent-controller.ts.
   */
  concurrentController: { check: boolean; allow: boolean };
  companion: { taintKey: string; evictAfterMs: number; markPodsNotReady: boolean };
  /** --out-of-service: the signals trusted and the delay; undefined: off. */
  outOfService: OutOfServiceSettings | undefined;
  /** --second-opinion=kubelet: when to probe, how long to hold; undefined: off. */
  secondOpinion: SecondOpinionSettings | undefined;
  disruption: {
    evictionRate: number;
    secondaryEvictionRate: number;
    largeClusterSizeThreshold: number;
    unhealthyZoneThreshold: number;
    capMaxNodes: number;
    capMaxPercent: number;
    capWindowMs: number;
  };
  leaderElection: LeaderElectionConfig & {
    enabled: boolean;
    /** --blind-step-down-after: a leader blind this long steps down (0: never). */
    blindStepDownMs: number;
    identityLeaseGcAgeMs: number;
    /** Names this replica's identity lease: the pod name in a cluster, else the host name. */
    hostname: string;
    /** --feature-gates=CoordinatedLeaderElection=true: a LeaseCandidate; the coordinator names the leader. */
    coordinated: boolean;
    /** --emulated-version (MAJOR.MINOR), checked against the build's version at start; '' for the binary's. */
    emulatedVersion: string;
  };
  metricsAddress: BindAddress | undefined;
  /** HTTPS + TokenReview/SubjectAccessReview for /metrics, or plain HTTP (secure false). */
  metricsSecurity: {
    secure: boolean;
    certFile: string | undefined;
    keyFile: string | undefined;
    staleIfErrorMs: number;
  };
  probeAddress: BindAddress | undefined;
  shutdownGracePeriodMs: number;
  kubeApi: { qps: number; burst: number };
  log: { format: 'json' | 'text'; verbosity: number };
}

/** The only environment the controller reads: downward-API values, and the host name. */
export interface ConfigEnv {
  POD_NAME?: string | undefined;
  POD_NAMESPACE?: string | undefined;
  HOSTNAME?: string | undefined;
}

function address(raw: string): BindAddress | undefined {
  return raw === '0' ? undefined : parseAddress(raw);
}

/**
 * Builds the Config from parsed flags and the downward-API environment. Throws FlagError naming
 * the flag(s) when values are individually valid but inconsistent.
 */
export function buildConfig(args: ParsedArgs, env: ConfigEnv, hostname: string): Config {
  const v = args.values;
  const num = (k: string) => v[k] as number;
  const str = (k: string) => v[k] as string;
  const bool = (k: string) => v[k] as boolean;
  const unschedulableMonitor = num('node-monitor-grace-period');
  // Checked in this order: a run with several bad flags is told about the first.
  const leaderElection = leaderElectionFlags(args, env, hostname);
  const watchSilenceThresholdMs = watchSilenceThreshold(args, unschedulableMonitor);
  const serving = servingFlags(args);
  return {
    kubeconfig: str('kubeconfig') || undefined,
    dryRun: bool('dry-run'),
    health: {
      monitorGraceMs: unschedulableMonitor,
      startupGraceMs: num('node-startup-grace-period'),
      monitorPeriodMs: num('node-monitor-period'),
      markPodsNotReady: str('mark-pods-not-ready') as 'always' | 'upstream',
      watchSilenceThresholdMs,
      watchReadIntervalMs: readInterval(args),
    },
    nodePoolConfigPath: str('node-pool-config') || undefined,
    mode: str('mode') as 'upstream' | 'companion',
    concurrentController: {
      check: str('mode') === 'upstream' && !bool('dry-run'),
      allow: bool('allow-concurrent-node-lifecycle-controller'),
    },
    companion: companionFlags(args),
    outOfService: outOfServiceFlags(args),
    secondOpinion: secondOpinionFlags(args, unschedulableMonitor),
    disruption: {
      evictionRate: num('node-eviction-rate'),
      secondaryEvictionRate: num('secondary-node-eviction-rate'),
      largeClusterSizeThreshold: num('large-cluster-size-threshold'),
      unhealthyZoneThreshold: num('unhealthy-zone-threshold'),
      capMaxNodes: num('max-noexecute-taints'),
      capMaxPercent: num('max-noexecute-percent'),
      capWindowMs: num('max-noexecute-window'),
    },
    leaderElection,
    metricsAddress: serving.metricsAddress,
    metricsSecurity: serving.metricsSecurity,
    probeAddress: serving.probeAddress,
    shutdownGracePeriodMs: num('shutdown-grace-period'),
    kubeApi: { qps: num('kube-api-qps'), burst: num('kube-api-burst') },
    log: { format: str('log-format') as 'json' | 'text', verbosity: num('v') },
  };
}

/**
 * The leader election settings: the lock (namespace from the flag, else the pod's, else
 * kube-system), our identity, the timings checked together, coordinated election's gate.
 */
function leaderElectionFlags(args: ParsedArgs, env: ConfigEnv, hostname: string): Config['leaderElection'] {
  const v = args.values;
  const num = (k: string) => v[k] as number;
  const str = (k: string) => v[k] as string;
  const bool = (k: string) => v[k] as boolean;
  const namespace = str('leader-elect-resource-namespace') || env.POD_NAMESPACE || 'kube-system';
  // Identity: the pod name (unique per replica in a Deployment), else host name plus randomness
  // (two processes on one host must still differ).
  const identity = env.POD_NAME || defaultIdentity(hostname);
  let election: LeaderElectionConfig;
  try {
    election = resolveLeaderElectionConfig({
      leaseDurationMs: num('leader-elect-lease-duration'),
      renewDeadlineMs: num('leader-elect-renew-deadline'),
      retryPeriodMs: num('leader-elect-retry-period'),
      name: str('leader-elect-resource-name'),
      namespace,
      identity,
    });
  } catch (err) {
    if (err instanceof LeaderElectionConfigError) throw new FlagError(err.problems.join('; '));
    throw err;
  }
  const coordinated = featureGates(str('feature-gates')).CoordinatedLeaderElection === true;
  if (coordinated && bool('leader-elect')) {
    const problem = candidateNameProblem(identity);
    if (problem)
      throw new FlagError(`--feature-gates=CoordinatedLeaderElection=true: ${problem} (set POD_NAME)`);
  }
  return {
    ...election,
    enabled: bool('leader-elect'),
    blindStepDownMs: blindStepDown(args, num('node-monitor-grace-period')),
    identityLeaseGcAgeMs: num('identity-lease-gc-age'),
    hostname: env.POD_NAME || hostname,
    coordinated,
    emulatedVersion: str('emulated-version'),
  };
}

/**
 * --watch-silence-threshold: below the grace period (a blind watch must be noticed before a
 * node's grace could run out on stale data); unset, 45 s or 3/4 of a grace of 45 s or less.
 */
function watchSilenceThreshold(args: ParsedArgs, unschedulableMonitor: number): number {
  let silence = args.values['watch-silence-threshold'] as number;
  if (!args.explicit.has('watch-silence-threshold') && silence >= unschedulableMonitor) {
    // Upstream has no such flag: someone carrying over --node-monitor-grace-period=40s must not be
    // refused for a flag they never set. The derived default keeps the same margin rule.
    silence = Math.max(1000, Math.floor((unschedulableMonitor * 3) / 4));
  }
  if (silence >= unschedulableMonitor) {
    // Only an explicit threshold can get here (a derived one is below any grace the flag
    // accepts); the message names both flags, with the values as Go durations, like the flags take them.
    throw new FlagError(
      `invalid value ${JSON.stringify(formatDuration(silence))} for flag --watch-silence-threshold: ` +
        `it must be less than --node-monitor-grace-period (${formatDuration(unschedulableMonitor)}); ` +
        `accepted: >= 1s and < ${formatDuration(unschedulableMonitor)}, or leave it unset (45s, or 3/4 ` +
        `of the grace period when that is 45s or less)`,
    );
  }
  return silence;
}

/** The metrics and probe listeners: distinct ports, the serving certificate's two flags together. */
function servingFlags(args: ParsedArgs): Pick<Config, 'metricsAddress' | 'probeAddress' | 'metricsSecurity'> {
  const str = (k: string) => args.values[k] as string;
  const metricsAddress = address(str('metrics-bind-address'));
  const probeAddress = address(str('health-probe-bind-address'));
  if (
    metricsAddress &&
    probeAddress &&
    metricsAddress.port === probeAddress.port &&
    metricsAddress.port !== 0
  ) {
    throw new FlagError(
      `--metrics-bind-address and --health-probe-bind-address must use different ports (both ${metricsAddress.port})`,
    );
  }
  const certFile = str('tls-cert-file') || undefined;
  const keyFile = str('tls-private-key-file') || undefined;
  if ((certFile === undefined) !== (keyFile === undefined)) {
    throw new FlagError('--tls-cert-file and --tls-private-key-file must be given together');
  }
  const secure = args.values['metrics-secure'] as boolean;
  if (certFile && !secure) {
    throw new FlagError('--tls-cert-file and --tls-private-key-file need --metrics-secure=true');
  }
  return {
    metricsAddress,
    probeAddress,
    metricsSecurity: {
      secure,
      certFile,
      keyFile,
      staleIfErrorMs: args.values['metrics-auth-stale-if-error'] as number,
    },
  };
}

/**
 * --blind-step-down-after: when not set, 3 x the grace period; when set, 0 (never) or at least the
 * grace period. A new leader starts every node with a fresh grace period, so a handover costs up
 * to one grace period of detection: stepping down after a shorter blind spell can cost more than
 * the spell itself.
 */
function blindStepDown(args: ParsedArgs, graceMs: number): number {
  if (!args.explicit.has('blind-step-down-after')) return 3 * graceMs;
  const v = args.values['blind-step-down-after'] as number;
  if (v > 0 && v < graceMs) {
    throw new FlagError(
      `--blind-step-down-after (${formatDuration(v)}) must be 0 (never step down) or at least ` +
        `--node-monitor-grace-period (${formatDuration(graceMs)}): a new leader gives every node a fresh ` +
        'grace period, so stepping down after a shorter blind spell can delay detection more than the spell',
    );
  }
  return v;
}

/** Kubernetes' own domains: their keys belong to its components (the provider's, in companion mode). */
const RESERVED_DOMAIN = /(^|\.)(kubernetes\.io|k8s\.io)$/;
/** A qualified name's parts (apimachinery IsQualifiedName): DNS-1123 subdomain prefix, 63-char name. */
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

/** Why `key` cannot be our taint key (undefined: it can). */
export function companionTaintKeyProblem(key: string): string | undefined {
  const slash = key.indexOf('/');
  if (slash < 0) return 'it needs a prefix: a domain you own, e.g. example.com/unreachable';
  const prefix = key.slice(0, slash);
  const name = key.slice(slash + 1);
  if (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))
    return `prefix ${JSON.stringify(prefix)} is not a DNS subdomain`;
  if (name.length > 63 || !QUALIFIED_NAME.test(name)) {
    return `name ${JSON.stringify(name)} must be 1-63 characters [A-Za-z0-9-_.], starting and ending alphanumeric`;
  }
  if (RESERVED_DOMAIN.test(prefix))
    return `${prefix} is Kubernetes' own domain (the provider's controller writes there)`;
  return undefined;
}

/** "--a is" / "--a, --b are": flags set that only another flag gives a meaning. */
function onlyWith(flags: readonly string[]): string {
  return `${flags.map((f) => `--${f}`).join(', ')} ${flags.length === 1 ? 'is' : 'are'}`;
}

/** The companion flags: only with --mode=companion, and --mark-pods-not-ready only without it. */
function companionFlags(args: ParsedArgs): Config['companion'] {
  const v = args.values;
  const companion = v.mode === 'companion';
  const set = ['companion-taint-key', 'companion-evict-after', 'companion-mark-pods-not-ready'].filter((f) =>
    args.explicit.has(f),
  );
  if (!companion && set.length > 0) {
    throw new FlagError(
      `${onlyWith(set)} only used with --mode=companion (this is --mode=${String(v.mode)}): set --mode=companion or remove ${set.length === 1 ? 'it' : 'them'}`,
    );
  }
  if (companion && args.explicit.has('allow-concurrent-node-lifecycle-controller')) {
    throw new FlagError(
      '--allow-concurrent-node-lifecycle-controller is for --mode=upstream; companion mode runs beside the ' +
        "provider's node-lifecycle controller by design",
    );
  }
  if (companion && args.explicit.has('mark-pods-not-ready')) {
    throw new FlagError(
      '--mark-pods-not-ready is for --mode=upstream; in companion mode use --companion-mark-pods-not-ready',
    );
  }
  const taintKey = v['companion-taint-key'] as string;
  const problem = companionTaintKeyProblem(taintKey);
  if (problem) {
    throw new FlagError(
      `invalid value ${JSON.stringify(taintKey)} for flag --companion-taint-key (${problem}): accepted: ` +
        'a prefixed key, <DNS subdomain you own>/<name>, not under kubernetes.io or k8s.io',
    );
  }
  return {
    taintKey,
    evictAfterMs: v['companion-evict-after'] as number,
    markPodsNotReady: v['companion-mark-pods-not-ready'] as boolean,
  };
}

/** --out-of-service-*: only with --out-of-service; the signals, a non-empty list of known ones. */
function outOfServiceFlags(args: ParsedArgs): OutOfServiceSettings | undefined {
  const v = args.values;
  const mode = v['out-of-service'] as boolean | 'dry-run';
  if (mode === false) {
    const set = ['out-of-service-signals', 'out-of-service-after'].filter((f) => args.explicit.has(f));
    if (set.length > 0)
      throw new FlagError(
        `${onlyWith(set)} only used with --out-of-service: add --out-of-service or remove ${set.length === 1 ? 'it' : 'them'}`,
      );
    return undefined;
  }
  const raw = v['out-of-service-signals'] as string;
  const items = raw.split(',').map((x) => x.trim());
  const unknown = items.find((x) => !(FENCE_SIGNALS as readonly string[]).includes(x));
  if (unknown !== undefined) {
    throw new FlagError(
      `invalid value ${JSON.stringify(raw)} for flag --out-of-service-signals (${
        unknown === '' ? 'an empty item' : `unknown signal ${JSON.stringify(unknown)}`
      }): accepted: a comma-separated list of ${FENCE_SIGNALS.join(', ')} (at least one)`,
    );
  }
  return {
    signals: [...new Set(items as FenceSignal[])],
    afterMs: v['out-of-service-after'] as number,
    ...(mode === 'dry-run' ? { dryRun: true } : {}),
  };
}

/** --confirm-after, --cut-off-hold: only with --second-opinion=kubelet; the confirmation ends inside the grace. */
function secondOpinionFlags(args: ParsedArgs, monitorGraceMs: number): SecondOpinionSettings | undefined {
  const v = args.values;
  if (v['second-opinion'] !== 'kubelet') {
    const set = ['confirm-after', 'cut-off-hold'].filter((f) => args.explicit.has(f));
    if (set.length > 0)
      throw new FlagError(
        `${onlyWith(set)} only used with --second-opinion=kubelet: add --second-opinion=kubelet or remove ${set.length === 1 ? 'it' : 'them'}`,
      );
    return undefined;
  }
  const d = DEFAULT_SECOND_OPINION;
  const confirmAfterMs = v['confirm-after'] as number;
  // The confirming probe starts retryMs after the first and may take timeoutMs: all before the grace.
  const latest = monitorGraceMs - d.retryMs - d.timeoutMs;
  if (confirmAfterMs >= latest) {
    throw new FlagError(
      `invalid value ${JSON.stringify(formatDuration(confirmAfterMs))} for flag --confirm-after: with --node-monitor-grace-period=${formatDuration(monitorGraceMs)} accepted: 10s to below ${formatDuration(latest)} (the grace less the confirming probe's ${formatDuration(d.retryMs)} wait and ${formatDuration(d.timeoutMs)} timeout)`,
    );
  }
  return { ...d, confirmAfterMs, holdMs: v['cut-off-hold'] as number };
}

/** The feature gates this controller has, with their defaults (kube-controller-manager's names). */
export const FEATURE_GATES = { CoordinatedLeaderElection: false } as const;
type FeatureGate = keyof typeof FEATURE_GATES;

/**
 * --feature-gates as kube-controller-manager reads it: comma-separated Gate=true|false, an optional
 * 'kube:' component prefix; an unknown gate or a value that is not a boolean is an error.
 */
export function featureGates(raw: string): Record<FeatureGate, boolean> {
  const out: Record<FeatureGate, boolean> = { ...FEATURE_GATES };
  const known = Object.keys(FEATURE_GATES).join(', ');
  for (const part of raw.split(',')) {
    const item = part.trim();
    if (item === '') continue;
    const eq = item.indexOf('=');
    const key = (eq < 0 ? item : item.slice(0, eq)).trim().replace(/^kube:/, '');
    const value = eq < 0 ? '' : item.slice(eq + 1).trim();
    if (!Object.hasOwn(FEATURE_GATES, key)) {
      throw new FlagError(
        `invalid value ${JSON.stringify(raw)} for flag --feature-gates: unrecognized feature gate: ${key} (known: ${known})`,
      );
    }
    const v = value.toLowerCase();
    if (!['true', 'false', '1', '0', 't', 'f'].includes(v)) {
      throw new FlagError(
        `invalid value ${JSON.stringify(raw)} for flag --feature-gates: ${key} must be true or false (got ${JSON.stringify(value)})`,
      );
    }
    out[key as FeatureGate] = ['true', '1', 't'].includes(v);
  }
  return out;
}

/** --watch-read-interval: 0 (read as events arrive) or 10ms-500ms, in whole ms. */
function readInterval(args: ParsedArgs): number {
  const v = args.values['watch-read-interval'] as number;
  if (v > 0 && v < 10) {
    throw new FlagError(
      `invalid value ${JSON.stringify(formatDuration(v))} for flag --watch-read-interval: ` +
        'must be 0 (read watches as events arrive) or between 10ms and 500ms',
    );
  }
  return Math.round(v);
}

/** A value that is accepted but probably wrong: logged as a warning at start, once. */
export interface ConfigWarning {
  msg: string;
  fields: Record<string, string>;
}

/**
 * What to warn about in a valid Config. A grace of 45s or less in upstream mode marks live nodes Unknown,
 * taints them and marks their pods not ready whenever their connection breaks silently (whole
 * clusters flap after a load balancer or an API server restart). Not in companion mode: there a
 * short grace is the point, only our own taint and condition follow (the provider still decides
 * Ready at its own grace), and docs/deploy.md ("Managed clusters") weighs that cost.
 */
export function configWarnings(config: Config): ConfigWarning[] {
  const out: ConfigWarning[] = [];
  if (config.mode === 'upstream' && config.health.monitorGraceMs <= HTTP2_HEALTH_CHECK_MS) {
    out.push({
      msg: '--node-monitor-grace-period is 45s or less: live nodes will be marked Unknown',
      fields: {
        flag: '--node-monitor-grace-period',
        value: formatDuration(config.health.monitorGraceMs),
        recommended: `above ${formatDuration(HTTP2_HEALTH_CHECK_MS)} (default 50s)`,
        why: 'a kubelet notices a dead connection to the API server only by its HTTP/2 health check (30s idle + 15s ping timeout) and cannot renew its lease until then: with a shorter grace such nodes are marked Unknown, tainted and their pods marked not ready, and when a load balancer or an API server restart cuts many connections at once the whole cluster flaps',
      },
    });
  }
  return out;
}

/** argv + environment -> Config (or FlagError). */
export function loadConfig(
  argv: readonly string[],
  env: ConfigEnv,
  hostname: string,
): { config: Config; args: ParsedArgs } {
  const args = parseArgs(argv);
  return { config: buildConfig(args, env, hostname), args };
}
