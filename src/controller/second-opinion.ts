import type { Clock } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import { zoneKeyOf } from '../disruption/index.js';
import {
  EventReason,
  type EventRecord,
  EventType,
  type NodeHealthTracker,
  nodeRef,
} from '../health/index.js';
import { authorityOf } from '../kube/setup-timeout.js';
import type { Node } from '../kube/types.js';
import type { Logger } from '../log/logger.js';
import type { SecondOpinion, SilentNode } from '../second-opinion/index.js';
import {
  type KubeletTarget,
  kubeletTargetOf,
  type ProbeResult,
  probeKubelet,
} from '../second-opinion/index.js';
import type { Store } from '../watch/index.js';
import type { ControllerMetrics } from './metrics.js';

/** Probes on the wire at once, at most (each is one socket for at most the probe timeout). */
export const MAX_PROBES_IN_FLIGHT = 32;

export type Probe = (
  target: KubeletTarget,
  options: { timeoutMs: number; signal?: AbortSignal },
) => Promise<ProbeResult>;

export interface SecondOpinionDriverOptions {
  clock: Clock;
  log: Logger;
  metrics: ControllerMetrics['secondOpinion'];
  tracker: NodeHealthTracker;
  /** The node watch's store (the kubelet endpoints come from the Nodes' status). */
  nodes: Store<Node>;
  opinion: SecondOpinion;
  /**
   * Whether this replica leads: only the leader probes. Blind or not: a probe reads the node
   * network, it writes nothing, and what it finds waits for sight like every mark.
   */
  leading: () => boolean;
  /** Whether this replica acts (leads and sees): the hold is announced (an Event) only then. */
  acting: () => boolean;
  /** Aborted on stop: probes on the wire end at once. */
  reads: AbortSignal;
  /** A node's deadline moved earlier (confirmed down): re-arm the deadline timer. */
  deadlinesMoved: () => void;
  /** A node needs a reconcile now (its hold ended early: its kubelet stopped answering). */
  reconcile: (name: string) => void;
  emit: (e: EventRecord) => void;
  /** The probe (tests inject one); the real one by default. */
  probe?: Probe;
  maxInFlight?: number;
}

/**
 * The wiring of the second opinion (src/second-opinion/verdict.ts): on each tick, the nodes silent
 * for --confirm-after with a kubelet endpoint are probed as the core plans (bounded: at most
 * MAX_PROBES_IN_FLIGHT at once); a node confirmed down is timed out at once in the tracker (its
 * mark then goes the way every mark goes: the lease re-read, blindness, the fence); a node past its
 * grace whose kubelet answers has its NoExecute held (the reconciler's view asks heldFor).
 */
export class SecondOpinionDriver {
  private inFlight = 0;
  /** Nodes whose hold was announced (an Event), per silence. */
  private readonly announced = new Map<string, number>();
  /** Zones reported cut off from the control plane (every node past its grace answers). */
  private readonly cutOff = new Set<string>();
  private readonly probe: Probe;
  private readonly maxInFlight: number;

  constructor(private readonly o: SecondOpinionDriverOptions) {
    this.probe = o.probe ?? probeKubelet;
    this.maxInFlight = o.maxInFlight ?? MAX_PROBES_IN_FLIGHT;
  }

  private now(): number {
    return this.o.clock.scheduler.now();
  }

  /** The node as the core sees it, or undefined: not tracked, not silent long enough, or no endpoint. */
  private silentNode(
    node: Node,
    now: number,
  ): (SilentNode & { target: KubeletTarget; zone: string }) | undefined {
    const name = node.metadata.name;
    const h = this.o.tracker.health(name);
    if (!h?.hasNode || now - h.probeTimestamp < this.o.opinion.settings.confirmAfterMs) return undefined;
    const target = kubeletTargetOf(node);
    if (target === undefined) return undefined;
    return {
      name,
      silence: h.heartbeats,
      silentSince: h.probeTimestamp,
      graceEnds: h.probeTimestamp + h.graceMs,
      target,
      zone: zoneKeyOf(node.metadata.labels),
    };
  }

  /** The core's view of one node by name (undefined: not silent long enough, no endpoint). */
  private silentByName(name: string, now: number): SilentNode | undefined {
    const node = this.o.nodes.get(name);
    return node ? this.silentNode(node, now) : undefined;
  }

  /** One pass: probe the nodes due (call it every second or so). */
  tick(): void {
    if (!this.o.leading()) return;
    const now = this.now();
    const silent: (SilentNode & { target: KubeletTarget; zone: string })[] = [];
    for (const node of this.o.nodes.values()) {
      const s = this.silentNode(node, now);
      if (s) silent.push(s);
    }
    const since = new Map(silent.map((x) => [x.name, x.silence]));
    for (const [name, at] of this.announced) if (since.get(name) !== at) this.announced.delete(name);
    let held = 0;
    for (const x of silent) {
      if (this.o.opinion.holdFor(x, now) === undefined) continue;
      held++;
      if (this.o.acting()) this.holding(x, now);
    }
    this.o.metrics.held.set(held);
    if (this.o.acting()) this.reportZones(silent, now);
    for (const node of this.o.opinion.plan(silent, now, this.maxInFlight - this.inFlight)) {
      this.start(node, now);
    }
  }

  /**
   * A zone with two or more nodes past their grace whose kubelets all answer is cut off from the
   * control plane, not lost: said once (a warning) when it becomes so and when it ends, and shown
   * by nlc_second_opinion_cut_off_zones{zone}. Nodes without a kubelet endpoint are not counted.
   */
  private reportZones(silent: readonly (SilentNode & { zone: string })[], now: number): void {
    const zones = new Map<string, { past: string[]; answering: number }>();
    for (const x of silent) {
      if (now < x.graceEnds) continue;
      const z = zones.get(x.zone) ?? { past: [], answering: 0 };
      z.past.push(x.name);
      if (this.o.opinion.opinion(x).kind === 'answers') z.answering++;
      zones.set(x.zone, z);
    }
    const cut = new Set<string>();
    for (const [zone, z] of zones) if (z.past.length >= 2 && z.answering === z.past.length) cut.add(zone);
    for (const zone of cut) {
      if (this.cutOff.has(zone)) continue;
      this.cutOff.add(zone);
      this.o.metrics.cutOffZones.set({ zone }, 1);
      this.o.log.warn(
        'Zone cut off from the control plane, not lost: the kubelets of its silent nodes all answer',
        {
          zone,
          nodes: zones.get(zone)!.past.length,
        },
      );
    }
    for (const zone of [...this.cutOff]) {
      if (cut.has(zone)) continue;
      this.cutOff.delete(zone);
      this.o.metrics.cutOffZones.remove({ zone });
      this.o.log.info('Zone no longer cut off from the control plane', { zone });
    }
  }

  private start(node: SilentNode & { target: KubeletTarget }, now: number): void {
    const { opinion } = this.o;
    opinion.started(node, now);
    this.inFlight++;
    void this.probe(node.target, { timeoutMs: opinion.settings.timeoutMs, signal: this.o.reads })
      .catch((err: unknown): ProbeResult => ({ outcome: 'unreachable', detail: String(err) }))
      .then((r) => {
        this.inFlight--;
        this.o.metrics.probes.inc({ outcome: r.outcome });
        if (this.o.reads.aborted) return;
        // Judged on the node as the tracker has it now: an outage or a blind spell may have moved
        // its silence's start since (same silence), a renewal ended it (a new one: dropped).
        const current = this.silentByName(node.name, this.now()) ?? node;
        if (opinion.finished(current, now, r.outcome, r.detail))
          this.confirmed({ ...current, target: node.target }, r);
      });
  }

  /** The core confirmed `node` down: timed out now (or, past its grace already, its hold is over). */
  private confirmed(node: SilentNode & { target: KubeletTarget }, r: ProbeResult): void {
    const now = this.now();
    const name = node.name;
    this.o.metrics.confirmedDown.inc();
    const silentFor = formatDuration(Math.round(now - node.silentSince));
    this.o.log.info('Kubelet not answering: node confirmed down', {
      node: name,
      kubelet: endpoint(node.target),
      outcome: r.outcome,
      detail: r.detail,
      silentFor,
    });
    if (this.o.tracker.confirmDown(name, node.silentSince, now)) this.o.deadlinesMoved();
    else if (this.o.tracker.isTimedOut(name, now)) this.o.reconcile(name);
  }

  /** `node` is held (past its grace, its kubelet answers): said once per silence. */
  private holding(node: SilentNode & { target: KubeletTarget }, now: number): void {
    if (this.announced.get(node.name) === node.silence) return;
    this.announced.set(node.name, node.silence);
    const hold = formatDuration(this.o.opinion.settings.holdMs);
    const silentFor = formatDuration(Math.round(now - node.silentSince));
    this.o.log.info('Kubelet still answers: NoExecute held', {
      node: node.name,
      kubelet: endpoint(node.target),
      silentFor,
      holdAtMost: hold,
    });
    const n = this.o.nodes.get(node.name);
    this.o.emit({
      involvedObject: nodeRef(node.name, n?.metadata.uid),
      type: EventType.Warning,
      reason: EventReason.KubeletStillAnswering,
      message: `Lease not renewed for ${silentFor} but the kubelet at ${endpoint(node.target)} answers: cut off from the control plane, not down. Pods not evicted while it answers, for at most ${hold} past the grace (--cut-off-hold)`,
    });
  }

  /**
   * How long more `name`'s NoExecute is held (ms), or undefined: not held. Asked by the
   * reconciler's view of the node.
   */
  heldFor(name: string, now: number): number | undefined {
    const s = this.silentByName(name, now);
    return s ? this.o.opinion.holdFor(s, now) : undefined;
  }

  /** Whether `name`'s kubelet answered in this silence (and was not confirmed down since). */
  answers(name: string, now: number): boolean {
    const s = this.silentByName(name, now);
    return s !== undefined && this.o.opinion.opinion(s).kind === 'answers';
  }

  /** What confirmed `name` down, for the Ready condition's message (undefined: it was not). */
  confirmedNote(name: string, now: number): string | undefined {
    const h = this.o.tracker.health(name);
    if (h?.confirmedAt === undefined) return undefined;
    const node = this.o.nodes.get(name);
    const s = node ? this.silentNode(node, now) : undefined;
    if (!s) return undefined;
    const o = this.o.opinion.opinion(s);
    if (o.kind !== 'down') return undefined;
    return `Confirmed down before the grace: its kubelet at ${endpoint(s.target)} did not answer two probes (${o.detail}).`;
  }

  forget(name: string): void {
    this.o.opinion.forget(name);
    this.announced.delete(name);
  }
}

function endpoint(t: KubeletTarget): string {
  return authorityOf(t.host, t.port);
}
