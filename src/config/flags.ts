import { isIPv6 } from 'node:net';
import { DURATION_SYNTAX_HELP, formatDuration, tryParseDuration } from '../clock/duration.js';
import { MAX_GRACE_MS } from '../disruption/index.js';
import { Companion } from '../health/index.js';
import { COMPONENT_NAME } from '../names/index.js';

/**
 * Command-line flags in kube-controller-manager's style: `--name=value` or `--name value`,
 * booleans as `--name`, `--name=true|false`. Every flag is declared once here with its type,
 * default, accepted range and help, the controller's (FLAGS) and its subcommands' (STATUS_FLAGS,
 * DEMO_FLAGS); `--help` prints the table.
 */

export class FlagError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FlagError';
  }
}

type Kind = 'duration' | 'number' | 'int' | 'bool' | 'string' | 'enum' | 'address';

export interface FlagSpec {
  name: string;
  kind: Kind;
  default: string;
  help: string;
  /** Inclusive bounds (durations in ms). */
  min?: number;
  max?: number;
  /** Exclusive lower bound. */
  greaterThan?: number;
  values?: readonly string[];
  /** A bool flag's values besides true and false (kept as the string given). */
  also?: readonly string[];
  /** Other names accepted for the same flag (kube-controller-manager's spelling, ...). */
  aliases?: readonly string[];
  /**
   * A comma-separated map flag (as component-base's --feature-gates): each occurrence adds its pairs
   * to the ones before (a later pair for the same key wins) instead of replacing them.
   */
  merges?: boolean;
  group: string;
}

const DUR = 'duration' as const;

export const FLAGS: readonly FlagSpec[] = [
  // Node health (names and defaults of kube-controller-manager's node-lifecycle-controller).
  {
    group: 'Node health',
    name: 'node-monitor-grace-period',
    kind: DUR,
    default: '50s',
    // Above the smallest --watch-silence-threshold (1s), which must be below it.
    greaterThan: 1000,
    max: MAX_GRACE_MS,
    help: 'How long a node may go without a heartbeat (lease renewal or status update) before it is marked Unknown. Keep it above 45s: the HTTP/2 health check needs 30s+15s to notice a dead connection, and lower values make clusters flap (in upstream mode 45s or less is logged as a warning at start).',
  },
  {
    group: 'Node health',
    name: 'node-startup-grace-period',
    kind: DUR,
    default: '1m',
    greaterThan: 0,
    max: MAX_GRACE_MS,
    help: 'Grace period for a node that has never posted Ready before it is marked Unknown.',
  },
  {
    group: 'Node health',
    name: 'node-monitor-period',
    kind: DUR,
    default: '5s',
    min: 100,
    max: 3600_000,
    help: 'Period of the safety-net full re-check of every node. Detection itself is event-driven and does not wait for this.',
  },
  {
    group: 'Node health',
    name: 'node-pool-config',
    kind: 'string',
    default: '',
    help: 'JSON file of node pools (label selectors) with their own grace periods; reloaded on change and on SIGHUP.',
  },
  {
    group: 'Node health',
    name: 'mark-pods-not-ready',
    kind: 'enum',
    default: 'always',
    values: ['always', 'upstream'],
    help: "When to set Ready=False on a lost node's pods: 'upstream' only when this controller flips Ready from True; 'always' whenever the node is not Ready (also False->Unknown and kubelet-reported NotReady).",
  },
  {
    group: 'Node health',
    name: 'watch-silence-threshold',
    kind: DUR,
    default: '45s',
    min: 1000,
    max: 3600_000,
    help: 'A lease watch with no event, bookmark or successful reconnect for this long counts as blind: nothing is marked until sight returns. When not set and the default is not below --node-monitor-grace-period, 3/4 of that grace period.',
  },
  {
    group: 'Node health',
    name: 'watch-read-interval',
    kind: DUR,
    default: '0s',
    min: 0,
    max: 500,
    help: 'Read the lease and node watches once per this interval instead of as each event arrives: one wake-up per interval however many heartbeats come in, for up to this much later sight of each (a lease is re-read before its node is marked). 0: read as events arrive.',
  },

  // Mode.
  {
    group: 'Mode',
    name: 'mode',
    kind: 'enum',
    default: 'upstream',
    values: ['upstream', 'companion'],
    help: "What is written for a lost node. 'upstream': kube-controller-manager's node-lifecycle writes (Ready and the kubelet's conditions Unknown, node.kubernetes.io taints, pods Ready=False, its Events); run it only with that controller turned off. 'companion': beside a provider's node-lifecycle controller that cannot be turned off (EKS, GKE, AKS): only our own taint (--companion-taint-key) and Node condition NodeLeaseExpired, optionally pods Ready=False and evictions; all removed when the node renews.",
  },
  {
    group: 'Mode',
    name: 'allow-concurrent-node-lifecycle-controller',
    kind: 'bool',
    default: 'false',
    help: "Upstream mode: keep writing although another node-lifecycle controller (kube-controller-manager's, not turned off) was seen setting a node's Ready condition within the last hour. Without it such a replica writes nothing, logs an error naming the node, the manager and the fix, fails /readyz and sets nlc_conflicting_controller{manager} to 1, until an hour after that controller's last such write. Not checked with --dry-run.",
  },
  {
    group: 'Mode',
    name: 'companion-taint-key',
    kind: 'string',
    default: Companion.DefaultTaintKey,
    help: 'Companion mode: the key of our NoSchedule taint on a lost node (a prefixed key under a domain you own, not kubernetes.io or k8s.io). Its value is "evicting" once evictions began. Pods tolerate <key>:NoExecute to opt out of our evictions.',
  },
  {
    group: 'Mode',
    name: 'companion-evict-after',
    kind: DUR,
    default: '0s',
    min: 0,
    max: 7 * 24 * 3600_000,
    help: "Companion mode: evict a lost node's pods (Eviction API: PodDisruptionBudgets honoured; DaemonSet, mirror and finished pods skipped) this long after its grace ran out, as the zone rates, --max-noexecute-* and the full-disruption stop allow. 0: never evict (the provider's controller still does, at its own grace).",
  },
  {
    group: 'Mode',
    name: 'companion-mark-pods-not-ready',
    kind: 'bool',
    default: 'true',
    help: "Companion mode: set Ready=False on a lost node's pods at our grace, so Services stop sending them traffic then instead of at the provider's grace. A live kubelet sets them back.",
  },

  // Eviction protection.
  {
    group: 'Disruption',
    name: 'node-eviction-rate',
    kind: 'number',
    default: '0.1',
    min: 0,
    max: 1000,
    help: 'Nodes per second that may get NoExecute taints in a healthy zone.',
  },
  {
    group: 'Disruption',
    name: 'secondary-node-eviction-rate',
    kind: 'number',
    default: '0.01',
    min: 0,
    max: 1000,
    help: 'Nodes per second that may get NoExecute taints in a partially disrupted large zone.',
  },
  {
    group: 'Disruption',
    name: 'large-cluster-size-threshold',
    kind: 'int',
    default: '50',
    min: 0,
    max: 1_000_000,
    help: 'Zones with more nodes than this use the secondary rate when partially disrupted; smaller ones stop tainting.',
  },
  {
    group: 'Disruption',
    name: 'unhealthy-zone-threshold',
    kind: 'number',
    default: '0.55',
    min: 0,
    max: 1,
    help: 'Fraction of not-Ready nodes (at least 3) at which a zone counts as partially disrupted.',
  },
  {
    group: 'Disruption',
    name: 'max-noexecute-taints',
    kind: 'int',
    default: '0',
    min: 0,
    max: 1_000_000,
    help: 'Blast-radius cap: at most this many nodes may get NEW NoExecute taints within --max-noexecute-window (0 disables).',
  },
  {
    group: 'Disruption',
    name: 'max-noexecute-percent',
    kind: 'number',
    default: '0',
    min: 0,
    max: 100,
    help: 'Blast-radius cap as a percentage of the fleet within --max-noexecute-window (0 disables). With both set the smaller wins.',
  },
  {
    group: 'Disruption',
    name: 'max-noexecute-window',
    kind: DUR,
    default: '10m',
    greaterThan: 0,
    max: 7 * 24 * 3600_000,
    help: 'Sliding window of the blast-radius cap.',
  },

  // Remediation of a node known to be down (src/remediation/).
  {
    group: 'Remediation',
    name: 'out-of-service',
    kind: 'bool',
    also: ['dry-run'],
    default: 'false',
    help: "Apply node.kubernetes.io/out-of-service=nodeshutdown:NoExecute (non-graceful node shutdown: pods force-deleted, volumes detached at once) to a node this controller marked lost whose lease is silent AND that a fence signal (--out-of-service-signals) says is down, --out-of-service-after later, as the zone rates, --max-noexecute-* and the full-disruption stop allow; removed once the node renews and is Ready. Never on lease silence alone. With --dry-run it only logs and counts; --out-of-service=dry-run does that for this step alone on a live install (no zone token taken). docs/operations.md, 'The out-of-service taint'.",
  },
  {
    group: 'Remediation',
    name: 'out-of-service-signals',
    kind: 'string',
    default: 'cloud-shutdown-taint,kubelet-shutdown,fence-annotation',
    help: "With --out-of-service: the fence signals trusted, comma-separated. cloud-shutdown-taint: the cloud provider's node.cloudprovider.kubernetes.io/shutdown taint; kubelet-shutdown: the kubelet set Ready=False 'node is shutting down' (graceful node shutdown) before its lease stopped; fence-annotation: node-lifecycle-controller.io/fenced=true on the Node, set by an operator or a fencing agent once the machine is off.",
  },
  {
    group: 'Remediation',
    name: 'out-of-service-after',
    kind: DUR,
    default: '1m',
    min: 0,
    max: 24 * 3600_000,
    help: 'With --out-of-service: how long a node must have been seen marked, silent and fenced (on our clock, from the first time all three held) before the taint.',
  },

  // A second opinion before each verdict (src/second-opinion/).
  {
    group: 'Second opinion',
    name: 'second-opinion',
    kind: 'enum',
    default: 'off',
    values: ['off', 'kubelet'],
    help: "kubelet: before judging a silent node by its lease alone, ask its kubelet: a TCP connect and TLS handshake to the endpoint the Node reports (InternalIP, daemonEndpoints.kubeletEndpoint.Port; no credentials, no request). A node silent --confirm-after whose kubelet fails two probes 3s apart is marked then, not at the grace; a node past its grace whose kubelet still answers is cut off from the control plane, not down: marked Unknown and NoSchedule, but its NoExecute taint is held while it answers, up to --cut-off-hold. Needs egress from the controller to the nodes' kubelet port. docs/operations.md, 'A second opinion'.",
  },
  {
    group: 'Second opinion',
    name: 'confirm-after',
    kind: DUR,
    default: '20s',
    min: 10_000,
    max: MAX_GRACE_MS,
    help: 'With --second-opinion=kubelet: how long a node must have been silent (no lease renewal seen, on our clock) before its kubelet is probed. At least one renew interval (10s); with the confirming probe (3s later, 3s timeout) it must end before --node-monitor-grace-period.',
  },
  {
    group: 'Second opinion',
    name: 'cut-off-hold',
    kind: DUR,
    default: '10m',
    min: 0,
    max: 24 * 3600_000,
    help: 'With --second-opinion=kubelet: the longest the NoExecute taint of a node past its grace is held while its kubelet still answers (0: never held: only the sooner mark). Then it is applied as usual (zone rates, the cap); at once if the kubelet stops answering.',
  },

  // Leader election (kube-controller-manager's flag names).
  {
    group: 'Leader election',
    name: 'leader-elect',
    kind: 'bool',
    default: 'true',
    help: 'Run under Lease-based leader election; only the leader writes. Disable only for a single replica.',
  },
  {
    group: 'Leader election',
    name: 'leader-elect-lease-duration',
    kind: DUR,
    default: '15s',
    min: 1000,
    max: 3600_000,
    help: 'How long non-leaders wait after the last observed renewal before taking the lease.',
  },
  {
    group: 'Leader election',
    name: 'leader-elect-renew-deadline',
    kind: DUR,
    default: '10s',
    min: 500,
    max: 3600_000,
    help: 'How long the leader keeps retrying to renew before it gives up leadership. Must be less than the lease duration.',
  },
  {
    group: 'Leader election',
    name: 'leader-elect-retry-period',
    kind: DUR,
    default: '2s',
    min: 100,
    max: 3600_000,
    help: 'Interval between attempts to acquire or renew. renew-deadline must exceed 1.2 x retry-period.',
  },
  {
    group: 'Leader election',
    name: 'leader-elect-resource-name',
    kind: 'string',
    default: COMPONENT_NAME,
    help: 'Name of the lock Lease. Give each install its own so two installs never collide.',
  },
  {
    group: 'Leader election',
    name: 'leader-elect-resource-namespace',
    kind: 'string',
    default: '',
    help: 'Namespace of the lock Lease and identity leases (default: POD_NAMESPACE, else kube-system).',
  },
  {
    group: 'Leader election',
    name: 'blind-step-down-after',
    kind: DUR,
    default: '2m30s',
    min: 0,
    max: 24 * 3600_000,
    help: 'A leader whose watches have been blind (disconnected, unsynced or silent) this long steps down: it releases the lease so that a replica that can see leads, and leads again only once it sees. 0 never steps down; otherwise at least --node-monitor-grace-period. When not set, 3 x --node-monitor-grace-period.',
  },
  {
    group: 'Leader election',
    name: 'feature-gates',
    kind: 'string',
    default: '',
    merges: true,
    help: "Comma-separated key=value pairs of feature gates, as kube-controller-manager takes them (a 'kube:' prefix is accepted; given more than once, the pairs merge and a later one wins). Options are: CoordinatedLeaderElection=true|false (BETA - default=false): coordinated leader election (KEP-4355): each replica publishes a LeaseCandidate and kube-apiserver's coordinator names the leader (the oldest emulation version during an upgrade); needs kube-apiserver with the same gate and --runtime-config=coordination.k8s.io/v1beta1=true, else ordinary leader election is used (docs/deploy.md).",
  },
  {
    group: 'Leader election',
    name: 'emulated-version',
    kind: 'string',
    default: '',
    help: "With coordinated leader election: the version (MAJOR.MINOR, at most the binary's) this replica states as its emulation version, which the coordinator compares (kube-controller-manager's flag). Default: the binary's MAJOR.MINOR.",
  },
  {
    group: 'Leader election',
    name: 'identity-lease-gc-age',
    kind: DUR,
    default: '1h',
    min: 1000,
    max: 30 * 24 * 3600_000,
    help: 'Identity leases of replicas not renewed for this long are deleted by a live replica. Each replica renews its own every min(10s, this/4).',
  },

  // Operation.
  {
    group: 'Operation',
    name: 'kubeconfig',
    kind: 'string',
    default: '',
    help: 'Path to a kubeconfig. Order: this flag, $KUBECONFIG, in-cluster service account, ~/.kube/config.',
  },
  {
    group: 'Operation',
    name: 'dry-run',
    kind: 'bool',
    default: 'false',
    help: 'Compute, log and count every decision but write nothing to Nodes or Pods.',
  },
  {
    group: 'Operation',
    name: 'metrics-bind-address',
    kind: 'address',
    default: ':8080',
    help: 'host:port for /metrics ("0" disables). As in Go (kube-controller-manager, controller-runtime): no host (":8080") or 0.0.0.0 listens on every address of both IP families (IPv4 only on a host without IPv6), [::] on both families too, 127.0.0.1 or [::1] on that address only.',
  },
  {
    group: 'Operation',
    name: 'metrics-secure',
    kind: 'bool',
    default: 'true',
    help: 'Serve /metrics over HTTPS, each request authenticated with a TokenReview and authorized with a SubjectAccessReview (get on the non-resource URL /metrics), as kube-controller-manager does. false serves plain HTTP to anyone: for local use only.',
  },
  {
    group: 'Operation',
    name: 'tls-cert-file',
    kind: 'string',
    default: '',
    help: 'PEM certificate (with intermediates) of the metrics server, re-read when it changes. When empty, a self-signed certificate is generated at start.',
  },
  {
    group: 'Operation',
    name: 'tls-private-key-file',
    kind: 'string',
    default: '',
    help: 'PEM private key matching --tls-cert-file.',
  },
  {
    group: 'Operation',
    name: 'metrics-auth-stale-if-error',
    kind: DUR,
    default: '10m',
    min: 0,
    max: 24 * 3600_000,
    help: 'While the API server is unreachable (timeouts, connection errors, 5xx; not a 429 or another 4xx), a token and user it allowed within this long, and has not refused since, are still allowed (the controller is blind then, and its metrics say so). 0 fails closed.',
  },
  {
    group: 'Operation',
    name: 'health-probe-bind-address',
    kind: 'address',
    default: ':8081',
    help: 'host:port for /healthz, /livez and /readyz, plain HTTP without authentication ("0" disables). Bound as --metrics-bind-address is: ":8081" answers over IPv4 and IPv6.',
  },
  {
    group: 'Operation',
    name: 'shutdown-grace-period',
    kind: DUR,
    default: '10s',
    min: 0,
    max: 600_000,
    help: "On SIGTERM, the whole shutdown takes at most this: writes in flight may take all of it but the last 3s (or half, if shorter), then the lease is released (only if they all finished; otherwise it is left to expire) and the identity lease deleted. Keep it below the pod's terminationGracePeriodSeconds.",
  },
  {
    group: 'Operation',
    name: 'kube-api-qps',
    kind: 'number',
    default: '50',
    greaterThan: 0,
    max: 100_000,
    help: 'Average requests per second to the API server, reads and writes alike (watches excepted; leader election has its own budget).',
  },
  {
    group: 'Operation',
    name: 'kube-api-burst',
    kind: 'int',
    default: '100',
    min: 1,
    max: 100_000,
    help: 'Burst of requests allowed above --kube-api-qps.',
  },
  {
    group: 'Operation',
    name: 'log-format',
    kind: 'enum',
    default: 'json',
    values: ['json', 'text'],
    aliases: ['logging-format'],
    help: "Log format: one JSON object a line, or text for humans. --logging-format (kube-controller-manager's name) is the same flag.",
  },
  {
    group: 'Operation',
    name: 'v',
    kind: 'int',
    default: '0',
    min: 0,
    max: 10,
    help: 'Log verbosity (klog levels: 2 for decisions, 4 for every observation).',
  },
];

/** The flags of `status` (src/cli/status.ts), the read-only fleet view. */
export const STATUS_FLAGS: readonly FlagSpec[] = [
  {
    group: 'Status',
    name: 'kubeconfig',
    kind: 'string',
    default: '',
    help: 'Path to a kubeconfig (same resolution order as the controller).',
  },
  {
    group: 'Status',
    name: 'watch',
    kind: 'bool',
    default: 'false',
    help: 'Keep the view open and refresh it every second.',
  },
  {
    group: 'Status',
    name: 'companion-taint-key',
    kind: 'string',
    default: Companion.DefaultTaintKey,
    help: "The companion mode's taint key (--companion-taint-key of the controller): shown in full, with its value.",
  },
  {
    group: 'Status',
    name: 'lock',
    kind: 'string',
    default: COMPONENT_NAME,
    help: 'Name of the leader-election Lease.',
  },
  {
    group: 'Status',
    name: 'timeout',
    kind: 'duration',
    default: '15s',
    min: 1000,
    max: 600_000,
    help: 'How long to wait for the API server: its first answer, then the complete node and lease lists. After that, one line names the server and the cause (connection refused, timed out, a refusal) and the exit code is 1.',
  },
  {
    group: 'Status',
    name: 'max-rows',
    kind: 'int',
    default: '40',
    min: 1,
    max: 100000,
    help: 'Rows shown (not-Ready nodes first).',
  },
];

/** The flags of `cleanup` (src/cli/cleanup.ts): what an uninstall leaves on the nodes. */
export const CLEANUP_FLAGS: readonly FlagSpec[] = [
  {
    group: 'Cleanup',
    name: 'kubeconfig',
    kind: 'string',
    default: '',
    help: 'Path to a kubeconfig (same resolution order as the controller).',
  },
  {
    group: 'Cleanup',
    name: 'yes',
    kind: 'bool',
    default: 'false',
    help: "Write. Without it, each node's plan is printed and nothing is written (a dry run).",
  },
  {
    group: 'Cleanup',
    name: 'companion-taint-key',
    kind: 'string',
    default: Companion.DefaultTaintKey,
    help: "The companion mode's taint key the controller ran with (--companion-taint-key): taken off every node.",
  },
  {
    group: 'Cleanup',
    name: 'timeout',
    kind: 'duration',
    default: '30s',
    min: 1000,
    max: 600_000,
    help: 'Deadline of each request to the API server.',
  },
  {
    group: 'Cleanup',
    name: 'kube-api-qps',
    kind: 'number',
    default: '20',
    greaterThan: 0,
    max: 10_000,
    help: "Client-side rate limit of its requests (as the controller's --kube-api-qps).",
  },
  {
    group: 'Cleanup',
    name: 'kube-api-burst',
    kind: 'int',
    default: '30',
    min: 1,
    max: 100_000,
    help: 'Burst of that rate limit.',
  },
];

/** The flags of `demo` (src/cli/demo.ts), the scripted local demo. */
export const DEMO_FLAGS: readonly FlagSpec[] = [
  {
    group: 'Demo',
    name: 'nodes',
    kind: 'int',
    default: '24',
    // The script stops two nodes of zone-a and uses two of zone-b: at least two per zone.
    min: 6,
    max: 2000,
    help: 'Simulated nodes, spread over three zones.',
  },
  {
    group: 'Demo',
    name: 'duration',
    kind: 'duration',
    default: '0s',
    min: 0,
    max: 24 * 3600_000,
    help: 'Stop after this long (0: run until Ctrl-C).',
  },
  {
    group: 'Demo',
    name: 'grace',
    kind: 'duration',
    default: '15s',
    min: 3000,
    max: 600_000,
    help: "The controller's --node-monitor-grace-period (kubelets renew every grace/8).",
  },
];

/** Every name a flag answers to (its name and aliases) -> the flag. */
function byNameOf(flags: readonly FlagSpec[]): Map<string, FlagSpec> {
  return new Map(flags.flatMap((f) => [f.name, ...(f.aliases ?? [])].map((n) => [n, f] as const)));
}

const BY_NAME = byNameOf(FLAGS);

export type FlagValues = Record<string, string | number | boolean>;

function describeAccepted(f: FlagSpec): string {
  const fmt = (v: number) => (f.kind === 'duration' ? formatDuration(v) : String(v));
  const range: string[] = [];
  if (f.greaterThan !== undefined) range.push(`> ${fmt(f.greaterThan)}`);
  if (f.min !== undefined) range.push(`>= ${fmt(f.min)}`);
  if (f.max !== undefined) range.push(`<= ${fmt(f.max)}`);
  const r = range.length ? ` ${range.join(' and ')}` : '';
  switch (f.kind) {
    case 'duration':
      return `${DURATION_SYNTAX_HELP}${r}`;
    case 'number':
      return `a number${r}`;
    case 'int':
      return `a whole number${r}`;
    case 'bool':
      return f.also?.length ? `true, false or ${f.also.join(', ')}` : 'true or false';
    case 'enum':
      return `one of ${f.values?.join(', ')}`;
    case 'address':
      return 'host:port, :port, [IPv6]:port, or 0 to disable';
    default:
      return 'a string';
  }
}

function bad(f: FlagSpec, raw: string, why?: string, as = f.name): FlagError {
  return new FlagError(
    `invalid value ${JSON.stringify(raw)} for flag --${as}${why ? ` (${why})` : ''}: accepted: ${describeAccepted(f)}`,
  );
}

/**
 * Parses one flag value by its declared kind; throws FlagError naming the flag (as the user spelled
 * it: `as`, when an alias was used) and the accepted values.
 */
export function parseFlagValue(f: FlagSpec, raw: string, as = f.name): string | number | boolean {
  const checkRange = (v: number): number => {
    if (f.greaterThan !== undefined && !(v > f.greaterThan)) throw bad(f, raw, undefined, as);
    if (f.min !== undefined && v < f.min) throw bad(f, raw, undefined, as);
    if (f.max !== undefined && v > f.max) throw bad(f, raw, undefined, as);
    return v;
  };
  switch (f.kind) {
    case 'duration': {
      const r = tryParseDuration(raw);
      if (!r.ok) throw bad(f, raw, r.error, as);
      return checkRange(r.ms);
    }
    case 'number': {
      const v = raw.trim() === '' ? Number.NaN : Number(raw);
      if (!Number.isFinite(v)) throw bad(f, raw, undefined, as);
      return checkRange(v);
    }
    case 'int': {
      if (!/^[+-]?\d+$/.test(raw.trim())) throw bad(f, raw, undefined, as);
      return checkRange(Number(raw));
    }
    case 'bool': {
      const v = raw.toLowerCase();
      if (f.also?.includes(v)) return v;
      if (['true', '1', 't'].includes(v)) return true;
      if (['false', '0', 'f'].includes(v)) return false;
      throw bad(f, raw, undefined, as);
    }
    case 'enum':
      if (!f.values?.includes(raw)) throw bad(f, raw, undefined, as);
      return raw;
    case 'address': {
      if (raw === '0') return raw;
      const r = splitHostPort(raw);
      if (!r.address) throw bad(f, raw, r.why, as);
      return raw;
    }
    default:
      return raw;
  }
}

/**
 * host:port as Go's net.SplitHostPort reads it, an IPv6 address in brackets: ":8080" (no host:
 * every address of both IP families, as Go listens on it), "0.0.0.0:8080", "[::]:8080",
 * "[::1]:8080", "127.0.0.1:8080", "localhost:8080". How each host is bound: src/http/listen.ts.
 */
export function parseAddress(raw: string): { host: string; port: number } | undefined {
  return splitHostPort(raw).address;
}

function splitHostPort(raw: string): { address?: { host: string; port: number }; why?: string } {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(raw);
  if (!m) {
    const unbracketed = /^(.*:.*):(\d{1,5})$/.exec(raw);
    if (unbracketed && isIPv6(unbracketed[1]!)) {
      return { why: `an IPv6 address needs brackets: [${unbracketed[1]}]:${unbracketed[2]}` };
    }
    return {};
  }
  const port = Number(m[3]);
  if (port > 65535) return {};
  const bracketed = m[1];
  if (bracketed !== undefined && !isIPv6(bracketed)) return { why: 'only an IPv6 address goes in brackets' };
  return { address: { host: bracketed ?? m[2] ?? '', port } };
}

export interface ParsedArgs {
  values: FlagValues;
  /** Flags the user set explicitly. */
  explicit: Set<string>;
  positionals: string[];
  help: boolean;
  version: boolean;
}

/** Parses argv (without node and script) against FLAGS. Unknown flags are errors. */
export function parseArgs(argv: readonly string[], flags: readonly FlagSpec[] = FLAGS): ParsedArgs {
  const byName = flags === FLAGS ? BY_NAME : byNameOf(flags);
  const values: FlagValues = {};
  for (const f of flags) values[f.name] = parseFlagValue(f, f.default);
  const explicit = new Set<string>();
  const positionals: string[] = [];
  let help = false;
  let version = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      positionals.push(...argv.slice(i + 1));
      break;
    }
    if (!arg.startsWith('-') || arg === '-') {
      positionals.push(arg);
      continue;
    }
    const body = arg.replace(/^--?/, '');
    const eq = body.indexOf('=');
    const name = eq >= 0 ? body.slice(0, eq) : body;
    if (name === 'help' || name === 'h') {
      help = true;
      continue;
    }
    if (name === 'version') {
      version = true;
      continue;
    }
    const f = byName.get(name);
    if (!f) throw new FlagError(`unknown flag: --${name} (see --help for the list of flags)`);
    let raw: string;
    if (eq >= 0) raw = body.slice(eq + 1);
    else if (f.kind === 'bool') raw = 'true';
    else {
      const next = argv[i + 1];
      if (next === undefined)
        throw new FlagError(`flag needs an argument: --${name} (accepted: ${describeAccepted(f)})`);
      raw = next;
      i++;
    }
    const value = parseFlagValue(f, raw, name);
    values[f.name] = f.merges && explicit.has(f.name) ? `${values[f.name]},${value}` : value;
    explicit.add(f.name);
  }
  return { values, explicit, positionals, help, version };
}

/** The --help text: every flag with its default, grouped. */
export function helpText(usage: string, flags: readonly FlagSpec[] = FLAGS): string {
  const lines = [usage, ''];
  let group = '';
  for (const f of flags) {
    if (f.group !== group) {
      group = f.group;
      lines.push(`${group} flags:`);
    }
    const type = f.kind === 'bool' ? '' : ` ${f.kind === 'enum' ? (f.values ?? []).join('|') : f.kind}`;
    const def =
      f.default === '' ? '' : ` (default ${f.kind === 'string' ? JSON.stringify(f.default) : f.default})`;
    lines.push(`      --${f.name}${type}`);
    lines.push(`          ${f.help}${def}`);
  }
  lines.push(
    '      -h, --help',
    '          Show this help.',
    '      --version',
    '          Print the version, the git revision it was built from and the Node.js version, and exit.',
  );
  return lines.join('\n');
}
