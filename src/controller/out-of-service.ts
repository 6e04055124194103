import type { ApiWriter, WriteOutcome } from '../apply/writer.js';
import type { Clock } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import { type DisruptionController, zoneKeyOf } from '../disruption/index.js';
import { EventReason, type EventRecord, EventType, nodeRef } from '../health/index.js';
import { KubeApiError, type KubeClient } from '../kube/client.js';
import type { List, Node } from '../kube/types.js';
import type { Logger } from '../log/logger.js';
import type { MarkingPolicy } from '../policy/index.js';
import {
  carriesOurTaint,
  type FenceSignal,
  OUT_OF_SERVICE_TAINT,
  type OutOfServiceCheck,
  OutOfServiceCore,
  type OutOfServiceSettings,
  outOfServicePatch,
} from '../remediation/index.js';
import type { LeaseRecheck } from './lease-recheck.js';
import type { ControllerMetrics } from './metrics.js';
import { ADMISSION_TTL_MS } from './taints.js';

/**
 * The disruption controller's queue is keyed by node name; an out-of-service admission goes in
 * under this prefix (a node name has no ':'), so it shares the zones' rates and the blast-radius
 * cap with the NoExecute taints without standing in for them (the cap counts it on its node's
 * slot when the node's own NoExecute taint holds one: one node, one slot).
 */
export const OUT_OF_SERVICE_QUEUE_PREFIX = 'out-of-service:';

/** How often the VolumeAttachments of a node we tainted are looked at until none is left. */
const VOLUME_CHECK_MS = 10_000;

const TAINT = `${OUT_OF_SERVICE_TAINT.key}=${OUT_OF_SERVICE_TAINT.value}:${OUT_OF_SERVICE_TAINT.effect}`;

export interface OutOfServiceStepOptions {
  clock: Clock;
  log: Logger;
  metrics: ControllerMetrics;
  client: KubeClient;
  writer: ApiWriter;
  disruption: DisruptionController;
  policy: MarkingPolicy;
  recheckLease: LeaseRecheck;
  settings: OutOfServiceSettings;
  reads: AbortSignal;
  /** The node's lease is past its grace now (our clock). */
  silent: (name: string) => boolean;
  /** --second-opinion: its kubelet answered in this silence (a veto). Absent: off. */
  kubeletAnswers?: (name: string) => boolean;
  /** Dry run: the node's mark was decided but not written (the node does not show it). */
  dryRunMarked: (name: string) => boolean;
  /** Why we do not act now (undefined: we act). */
  blind: () => string | undefined;
  /** A copy of the node fresher than the watch's (read after a 409): observed as the watch's is. */
  observeFresh: (node: Node) => void;
  /** The node as our write returned it: it stands in for the watch's older copy until that catches up. */
  written: (name: string, node: Node | undefined) => void;
  admissionRequested: () => void;
  emit: (e: EventRecord) => Promise<void>;
}

/**
 * The out-of-service step of one node's reconcile: asks the pure core (src/remediation/) and does
 * what it says through the fenced writer; the admission through the zone pass, the lease re-read
 * before the taint, the taint's removal, and one report when the node's VolumeAttachments are gone.
 */
export class OutOfServiceStep {
  private readonly core: OutOfServiceCore;
  /** Nodes the zone pass admitted whose taint write has not run yet, and when (our clock). */
  private readonly admitted = new Map<string, number>();
  /** Fenced nodes, logged once per spell: since when (our clock) and by which signal. */
  private readonly fenced = new Map<string, { since: number; signal: FenceSignal }>();
  /** Nodes we tainted whose VolumeAttachments were not yet seen gone. */
  private readonly volumes = new Set<string>();
  /** A list of VolumeAttachments was refused (401/403) and said so once. */
  private volumeListRefused = false;
  /** Dry run: nodes we would have tainted (nothing is written, so the node never shows it). */
  private readonly dryRun = new Set<string>();

  constructor(private readonly o: OutOfServiceStepOptions) {
    this.core = new OutOfServiceCore(o.settings);
  }

  private now(): number {
    return this.o.clock.scheduler.now();
  }

  /** Every copy of a node the watch delivers (a kubelet's shutdown announcement is kept). */
  observe(node: Node): void {
    this.core.observe(node);
  }

  /** We saw the node renew (a watch change or a fresh read; not a list). */
  renewed(name: string): void {
    this.core.renewed(name);
  }

  admit(name: string): void {
    this.admitted.set(name, this.now());
  }

  forget(name: string): void {
    this.core.forget(name);
    this.fenced.delete(name);
    this.volumes.delete(name);
    this.dryRun.delete(name);
    this.release(name);
  }

  /** The node's request leaves the zone queue, and an admission it holds is given back. */
  private release(name: string): void {
    this.o.disruption.cancel(OUT_OF_SERVICE_QUEUE_PREFIX + name);
    if (this.admitted.delete(name)) this.settle(name, 'dropped');
  }

  private settle(name: string, outcome: 'applied' | 'failed' | 'dropped'): void {
    this.o.disruption.settle(OUT_OF_SERVICE_QUEUE_PREFIX + name, outcome, this.now());
  }

  private count(decision: string, signal: string): void {
    this.o.metrics.outOfService.decisions.inc({ decision, signal });
  }

  /** Returns 'fenced', or when to look again (ms). Throws to be retried. */
  async run(name: string, node: Node): Promise<'fenced' | number | undefined> {
    const now = this.now();
    const heldSince = this.admitted.get(name);
    if (heldSince !== undefined && now - heldSince > ADMISSION_TTL_MS) {
      // Not used in time (a blind spell held the run back): back to the zone, asked for again.
      this.admitted.delete(name);
      this.settle(name, 'failed');
    }
    const admitted = this.admitted.has(name);
    const d = this.core.decide({ ...this.check(name, node), admitted, wallNow: this.o.clock.wall() }, now);
    // A request stays queued, and an admission held, only while the decision is to ask for or to
    // write the taint: any other (the node back, the signal gone, not acting, a delay started
    // again, the taint already on) gives them back, so no admission outlives what it was for.
    if (d.kind !== 'request' && d.kind !== 'apply') this.release(name);
    if (d.kind === 'remove') return this.remove(name, node);
    // Its VolumeAttachments are looked at only while our taint is on it: taken off by an operator,
    // or found gone by a removal ('unchanged'), there is nothing more to report.
    if (!carriesOurTaint(node)) this.volumes.delete(name);
    if (d.kind === 'none') {
      if (d.cancel) this.cancel(name, d.why ?? '');
      if (this.volumes.has(name)) await this.checkVolumes(name, node);
      return this.volumes.has(name) ? VOLUME_CHECK_MS : undefined;
    }
    this.noteFenced(name, d.signal, now);
    if (d.kind === 'wait') return d.inMs;
    if (d.kind === 'request' && this.o.settings.dryRun) {
      // --out-of-service=dry-run: what would be asked of the zone is said, once per fenced spell;
      // nothing is asked (the real NoExecute taints' tokens are not spent on it).
      if (!this.dryRun.has(name)) {
        this.dryRun.add(name);
        this.count('dry_run', d.signal);
        this.o.log.info('Dry run (--out-of-service=dry-run): would apply the out-of-service taint', {
          node: name,
          signal: d.signal,
          waited: formatDuration(Math.round(now - (this.fenced.get(name)?.since ?? now))),
        });
      }
      return undefined;
    }
    if (d.kind === 'request') {
      if (this.dryRun.has(name)) return undefined;
      // A second NoExecute taint of the node: the cap counts it on the node's own slot.
      this.o.disruption.requestNoExecute(
        OUT_OF_SERVICE_QUEUE_PREFIX + name,
        zoneKeyOf(node.metadata.labels),
        now,
        OUT_OF_SERVICE_TAINT.key,
        name,
      );
      this.o.admissionRequested();
      this.count('requested', d.signal);
      return undefined;
    }
    const admittedAt = this.admitted.get(name) ?? now;
    this.admitted.delete(name);
    return this.apply(name, node, d.signal, admittedAt);
  }

  /** What we know now about this copy of the node: the facts every decision and re-check asks. */
  private check(name: string, node: Node): OutOfServiceCheck {
    return {
      node,
      marked: this.o.policy.markedLost(node) || this.o.dryRunMarked(name),
      silent: this.o.silent(name),
      blind: this.o.blind(),
      kubeletAnswers: this.o.kubeletAnswers?.(name) ?? false,
    };
  }

  /** A copy of the node read after a 409 (newer than the watch's): everything it shows counts. */
  private fresh(node: Node): void {
    this.core.observe(node);
    this.o.observeFresh(node);
  }

  /** The first time in a spell a node is seen fenced: one line naming the signal. */
  private noteFenced(name: string, signal: FenceSignal, now: number): void {
    if (this.fenced.has(name)) return;
    this.fenced.set(name, { since: now, signal });
    this.o.log.info('Node fenced: out-of-service taint after the delay', {
      node: name,
      signal,
      after: formatDuration(this.o.settings.afterMs),
    });
  }

  /** A fenced node's taint is not applied after all (its request and admission released already). */
  private cancel(name: string, why: string): void {
    const f = this.fenced.get(name);
    this.fenced.delete(name);
    this.dryRun.delete(name);
    this.count('cancelled', f?.signal ?? 'none');
    this.o.log.info('Out-of-service taint not applied: what decided it no longer holds', {
      node: name,
      signal: f?.signal,
      reason: why,
    });
  }

  /** `admittedAt`: when its zone admitted it (our clock): the taint's timeAdded says so. */
  private async apply(
    name: string,
    node: Node,
    signal: FenceSignal,
    admittedAt: number,
  ): Promise<'fenced' | number | undefined> {
    // The lease is read again (quorum) as before any mark: a watch behind or a storage outage
    // shows here, and nothing is written. A read that fails (throws, to be retried) gives the
    // admission back first: left in flight, the zone queue would refuse the retry's request.
    let stale: boolean;
    try {
      stale = await this.o.recheckLease.confirmStale(name);
    } catch (err) {
      this.settle(name, 'failed');
      throw err;
    }
    if (!stale || this.o.blind() !== undefined) {
      this.settle(name, 'dropped');
      this.count('withdrawn', signal);
      return undefined;
    }
    // Every copy the write is computed from (after a 409, a fresh read) is asked the question that
    // decided it, as a whole: a node back (Ready, renewing) gets nothing, whatever signal it shows.
    let used = signal;
    const out = await this.o.writer.patchNode(
      name,
      node,
      (current) => {
        if (current !== node) this.fresh(current);
        const s = this.core.warranted(this.check(name, current));
        if (s === undefined) return undefined;
        used = s;
        return outOfServicePatch(current, s, this.o.clock.wall() - Math.max(0, this.now() - admittedAt));
      },
      () =>
        this.o.blind() ??
        (!this.o.silent(name)
          ? 'node renewed'
          : this.o.kubeletAnswers?.(name)
            ? 'its kubelet answers (second opinion)'
            : undefined),
    );
    const ok = out.kind === 'applied' || out.kind === 'dry-run';
    this.settle(name, ok ? 'applied' : out.kind === 'failed' ? 'failed' : 'dropped');
    if (out.kind === 'applied') this.o.written(name, out.object as Node | undefined);
    if (out.kind === 'failed') throw out.error;
    if (out.kind === 'fenced') return 'fenced';
    if (!ok) {
      this.count('withdrawn', signal);
      return undefined;
    }
    return this.applied(name, node, used, out);
  }

  private applied(
    name: string,
    node: Node,
    signal: FenceSignal,
    out: Extract<WriteOutcome, { kind: 'applied' | 'dry-run' }>,
  ): number | undefined {
    const since = this.fenced.get(name)?.since ?? this.now();
    const waited = formatDuration(Math.round(this.now() - since));
    if (out.kind === 'dry-run') {
      this.dryRun.add(name);
      this.count('dry_run', signal);
      this.o.log.info('Dry run: would apply the out-of-service taint', { node: name, signal, waited });
      return undefined;
    }
    this.count('applied', signal);
    this.o.metrics.outOfService.delay.observe((this.now() - since) / 1000);
    this.o.log.info('Applied the out-of-service taint', { node: name, taint: TAINT, signal, waited });
    void this.o.emit(
      this.nodeEvent(
        node,
        EventType.Warning,
        EventReason.OutOfServiceTaintApplied,
        `Node is down (signal: ${signal}) and was marked lost ${waited} ago: ${TAINT} added, so its pods are force-deleted and their volumes detached`,
      ),
    );
    this.volumes.add(name);
    return VOLUME_CHECK_MS;
  }

  private async remove(name: string, node: Node): Promise<'fenced' | number | undefined> {
    this.fenced.delete(name);
    this.dryRun.delete(name);
    // As the taint's write: every copy it is computed from is asked whether the node is back.
    const out = await this.o.writer.patchNode(
      name,
      node,
      (current) => this.core.removalPatch(this.check(name, current)),
      () => this.o.blind(),
    );
    if (out.kind === 'failed') throw out.error;
    if (out.kind === 'fenced') return 'fenced';
    if (out.kind !== 'applied' && out.kind !== 'dry-run') return undefined;
    this.volumes.delete(name);
    const dry = out.kind === 'dry-run';
    this.count(dry ? 'dry_run_removed' : 'removed', 'none');
    this.o.log.info(
      dry ? 'Dry run: would remove the out-of-service taint' : 'Removed the out-of-service taint',
      {
        node: name,
        taint: TAINT,
      },
    );
    if (!dry) {
      void this.o.emit(
        this.nodeEvent(
          node,
          EventType.Normal,
          EventReason.OutOfServiceTaintRemoved,
          `Node is back (renewing, and Ready or no fence signal left): ${TAINT} removed`,
        ),
      );
    }
    return undefined;
  }

  /** A node we tainted: once none of its VolumeAttachments is left, says so (log and Event) once. */
  private async checkVolumes(name: string, node: Node): Promise<void> {
    let list: List<{ spec?: { nodeName?: string } }>;
    try {
      list = await this.o.client.request({
        method: 'GET',
        path: '/apis/storage.k8s.io/v1/volumeattachments',
        query: { resourceVersion: '0' },
        timeoutMs: 30_000,
        signal: this.o.reads,
      });
    } catch (err) {
      // Only a report: the node's other steps go on, and it is looked at again later. A refusal is
      // an install without the rule (manifests/components/out-of-service has it): said once, as a
      // warning; any other failure is retried quietly.
      if (err instanceof KubeApiError && (err.status === 401 || err.status === 403)) {
        if (!this.volumeListRefused)
          this.o.log.warn(
            'Cannot list VolumeAttachments: the report of detached volumes needs list on volumeattachments.storage.k8s.io (manifests/components/out-of-service, or the chart with controller.outOfService=true)',
            { node: name, status: err.status },
          );
        this.volumeListRefused = true;
      } else this.o.log.debug(2, 'Could not list VolumeAttachments', { node: name, err });
      return;
    }
    const left = list.items.filter((a) => a.spec?.nodeName === name).length;
    if (left > 0) return;
    this.volumes.delete(name);
    this.o.log.info('Out-of-service node has no VolumeAttachment left', { node: name });
    void this.o.emit(
      this.nodeEvent(
        node,
        EventType.Normal,
        EventReason.OutOfServiceVolumesDetached,
        'No VolumeAttachment is left on this node',
      ),
    );
  }

  private nodeEvent(
    node: Node,
    type: EventRecord['type'],
    reason: EventRecord['reason'],
    message: string,
  ): EventRecord {
    return { involvedObject: nodeRef(node.metadata.name, node.metadata.uid), type, reason, message };
  }
}

/** A cap Event about an out-of-service admission names the node, and the taint. */
export function outOfServiceHeld(e: EventRecord): EventRecord {
  const name = e.involvedObject.name;
  if (!name.startsWith(OUT_OF_SERVICE_QUEUE_PREFIX)) return e;
  return {
    ...e,
    involvedObject: { ...e.involvedObject, name: name.slice(OUT_OF_SERVICE_QUEUE_PREFIX.length) },
    message: `${e.message} (${OUT_OF_SERVICE_TAINT.key})`,
  };
}
