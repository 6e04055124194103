import type { ApiWriter } from '../apply/writer.js';
import type { Clock } from '../clock/clock.js';
import type { Ticker } from '../clock/ticker.js';
import type { DisruptionController } from '../disruption/index.js';
import type { NodeHealthTracker, ObservationResult } from '../health/index.js';
import type { KubeClient } from '../kube/client.js';
import type { Lease, Node } from '../kube/types.js';
import type { Logger } from '../log/logger.js';
import type { MarkingPolicy } from '../policy/index.js';
import type { OutOfServiceSettings } from '../remediation/index.js';
import type { SecondOpinionSettings } from '../second-opinion/index.js';
import type { Reflector } from '../watch/index.js';
import type { ControllerMetrics } from './metrics.js';
import type { Probe } from './second-opinion.js';
import type { LeadershipControl } from './sight-driver.js';

/** What NodeLifecycleController is built from (src/cli/assemble/node-lifecycle.ts gives it). */
export interface NodeLifecycleOptions {
  clock: Clock;
  logger: Logger;
  metrics: ControllerMetrics;
  client: KubeClient;
  writer: ApiWriter;
  tracker: NodeHealthTracker;
  disruption: DisruptionController;
  leases: Reflector<Lease>;
  nodes: Reflector<Node>;
  /** A lease watch silent (no event, bookmark or reconnect) for longer than this counts as blind. */
  watchSilenceThresholdMs: number;
  /** Safety-net full re-check period (--node-monitor-period). */
  monitorPeriodMs: number;
  /**
   * The process's periodic tick (EventLoopSampler). When given, the 1 s sight check and the
   * safety net run on its ticks instead of timers of their own (fewer wake-ups); absent, or coarser
   * than a period, they use the clock's scheduler.
   */
  ticker?: Ticker;
  /** What is written for a lost or recovered node (default: upstream's, with markPodsNotReady). */
  policy?: MarkingPolicy;
  /** The default policy's --mark-pods-not-ready. */
  markPodsNotReady?: 'always' | 'upstream';
  /**
   * While a node is not Ready its pods are re-listed (newly bound pods get marked): first after this
   * long, then at doubling intervals up to podRecheckMaxMs while a re-list finds nothing to mark.
   */
  podRecheckMs?: number;
  podRecheckMaxMs?: number;
  /**
   * Leader election, told when this replica can see (eligible to lead) and asked to step down when
   * it has led blind for `blindStepDownMs`. Absent without leader election.
   */
  election?: LeadershipControl;
  /** A leader whose watches have been blind this long steps down (0 or absent: never). */
  blindStepDownMs?: number;
  workers?: number;
  /** Of the workers, how many may reconcile ordinary (not urgent) keys at once (default: all). */
  ordinaryWorkers?: number;
  /**
   * --out-of-service: the out-of-service taint for a node this controller marked lost that a fence
   * signal says is down (src/remediation/); absent: off.
   */
  outOfService?: OutOfServiceSettings;
  /**
   * --second-opinion=kubelet: probe a silent node's kubelet before the verdict (src/second-opinion/);
   * absent: off. `probe` replaces the real probe (tests).
   */
  secondOpinion?: { settings: SecondOpinionSettings; probe?: Probe };
  /** Called for each lease or node event before it is processed (benchmarks, tests). */
  onObservation?: (kind: 'lease' | 'node', result: ObservationResult) => void;
}
