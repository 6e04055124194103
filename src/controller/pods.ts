import type { ApiWriter, StillWanted } from '../apply/writer.js';
import type { Clock } from '../clock/clock.js';
import type { EventRecord, PodMarkingTrigger, PodNotReadyDecision } from '../health/index.js';
import { type KubeClient, paths } from '../kube/client.js';
import type { List, Node, Pod } from '../kube/types.js';
import type { Logger } from '../log/logger.js';
import type { EvictionDecision, MarkingPolicy, PodContext } from '../policy/index.js';
import type { ControllerMetrics } from './metrics.js';

/** How a write's re-check says this replica stopped acting (blind, not leading): node-reconcile. */
export const NOT_ACTING = 'not acting';

/** Why a node's pod writes stopped: this replica stopped acting, or what decided them changed. */
type Stopped = 'not-acting' | 'stopped';

export interface PodStepOptions {
  clock: Clock;
  log: Logger;
  metrics: ControllerMetrics;
  client: KubeClient;
  writer: ApiWriter;
  policy: MarkingPolicy;
  /** Aborted on stop: a pod list in flight ends at once. */
  reads: AbortSignal;
  emit: (e: EventRecord) => Promise<void>;
  /** First re-list of a node's pods after this long, then doubling up to podRecheckMaxMs. */
  podRecheckMs: number;
  podRecheckMaxMs: number;
}

/**
 * The pods of a node the policy wants looked at: listed from the API server's watch cache, then
 * marked not Ready (pods/status) or evicted, as the policy says. Re-listed while the node stays
 * that way (newly bound pods get their turn), backing off while nothing is found to do.
 */
export class PodStep {
  /**
   * Nodes whose pods we look at: when their pods were last listed (recorded once a list answered),
   * the interval to the next list, its resourceVersion, whether the node was in its rate-limited
   * step (companion: evicting) then, and `owed`: a run that failed (its list, or a pod write), so
   * the next run lists at once ('retry': the failed run was the node's flip or a retry of it, as
   * kube-controller-manager's nodesToRetry).
   */
  private readonly checkedAt = new Map<string, Checked>();

  constructor(private readonly o: PodStepOptions) {}

  forget(name: string): void {
    this.checkedAt.delete(name);
  }

  /**
   * Brings the node's pods in line; returns when to look again (ms), or undefined. `stillWanted`
   * is asked before each pod's write and after its waits: once what decided the work no longer
   * holds (the node renewed, we stopped acting), the remaining pods are left alone. Throws when the
   * list or a pod write failed: the node's next run (the runner's retry, the safety net) lists at
   * once.
   */
  async run(
    name: string,
    node: Node,
    flipped: boolean,
    ctx: Omit<PodContext, 'trigger'>,
    stillWanted?: StillWanted,
  ): Promise<number | undefined> {
    const { policy } = this.o;
    if (!policy.podsWanted(node, flipped, this.checkedAt.has(name))) {
      this.checkedAt.delete(name);
      return undefined;
    }
    const now = this.o.clock.scheduler.now();
    const last = this.checkedAt.get(name);
    const stepped = policy.inRateLimitedStep(node);
    const wait = this.notDueFor(last, flipped, stepped, now);
    if (wait !== undefined) return wait;
    const trigger = flipped ? 'node-flipped' : last?.owed === 'retry' ? 'retry' : 'resync';
    const pods = await this.list(name, flipped ? undefined : last?.rv, trigger, last);
    // Listed: the interval stays until the run's writes are done (a withdrawn run keeps it).
    const everyMsBefore = last?.everyMs ?? this.o.podRecheckMs;
    const rv = pods.metadata?.resourceVersion;
    this.checkedAt.set(name, { at: now, everyMs: everyMsBefore, rv, stepped });
    const wall = () => this.o.clock.wall();
    const work = policy.pods(node, pods.items, wall(), { ...ctx, trigger });
    const tally: Tally = {
      total: work.marks.length + work.evictions.length,
      done: 0,
      failures: 0,
      blocked: 0,
    };
    const retry = (current: Pod) =>
      policy.pods(node, [current], wall(), { ...ctx, trigger: 'retry' }).marks[0];
    const stopped =
      (await this.mark(name, work.marks, pods.items, retry, tally, stillWanted)) ??
      (await this.evict(name, work.evictions, tally, stillWanted));
    if (stopped !== undefined) {
      // Stopped because this replica stopped acting (blind, not leading, fenced), not because the
      // node changed: the rest is owed, as a retry of this run, to the node's next run (at once
      // when the replica acts again), not left for the next resync a recheck interval away (which
      // under upstream's rules, marks on a flip or a retry only, would not make them either).
      if (stopped === 'not-acting') this.owe(name, trigger, { at: now, everyMs: everyMsBefore, rv, stepped });
      return undefined;
    }
    if (tally.failures > 0) {
      this.owe(name, trigger, { at: now, everyMs: everyMsBefore, rv, stepped });
      throw new Error(`${tally.failures} pod writes failed on node ${name}`);
    }
    // Keep looking while the node is not Ready: pods bound to it later get marked too. Back off
    // while there is nothing to mark (a pod on a node that stopped reporting cannot become Ready).
    let everyMs =
      trigger !== 'resync' || tally.done > 0 || tally.blocked > 0 || last === undefined || last.owed
        ? this.o.podRecheckMs
        : Math.min(last.everyMs * 2, Math.max(this.o.podRecheckMs, this.o.podRecheckMaxMs));
    // A pod that tolerates the eviction for a while is looked at again when its time is up.
    if (work.recheckInMs !== undefined) everyMs = Math.min(everyMs, Math.max(1, Math.ceil(work.recheckInMs)));
    this.checkedAt.set(name, { at: now, everyMs, rv, stepped });
    return everyMs;
  }

  /** How long until the node's pods are due for a list (undefined: now). */
  private notDueFor(last: Checked | undefined, flipped: boolean, stepped: boolean, now: number) {
    // A failed run is owed at once; a node that entered its rate-limited step since the last list
    // (companion: its evictions were admitted) has new work for its pods now, not at the next one.
    if (flipped || last === undefined || last.owed !== undefined || (stepped && !last.stepped)) {
      return undefined;
    }
    return now - last.at < last.everyMs ? last.everyMs - (now - last.at) : undefined;
  }

  /**
   * A run failed: its node's next run lists at once, as a retry of its flip if it was one (so that
   * upstream's pod marking, which only marks on a flip or a retry, still does). Still a node whose
   * pods we look at (`podsWanted`' listedBefore).
   */
  private owe(name: string, trigger: PodMarkingTrigger, kept: Omit<Checked, 'owed'>): void {
    this.checkedAt.set(name, { ...kept, owed: trigger === 'resync' ? 'list' : 'retry' });
  }

  /**
   * The node's pods, always from the API server's watch cache, never from etcd: the first list
   * after the node stopped being Ready with resourceVersion=0 (as kube-controller-manager reads pods
   * from its informer cache), a re-list with data at least as new as the previous list's
   * (resourceVersionMatch=NotOlderThan, `rv`). A quorum read (no resourceVersion) is served from
   * the cache only by servers with consistent reads from it (Kubernetes >= 1.31); older ones read
   * every pod of the cluster from etcd for each, which a zone outage multiplies by its node count
   * (docs/benchmarks.md, "Pod lists during a zone outage"). A stale view is caught by the next list,
   * and a pod status write carries its own resourceVersion precondition.
   */
  private async list(
    name: string,
    rv: string | undefined,
    trigger: PodMarkingTrigger,
    last: Checked | undefined,
  ): Promise<List<Pod>> {
    try {
      return await this.o.client.request<List<Pod>>({
        method: 'GET',
        path: paths.pods(),
        query: {
          fieldSelector: `spec.nodeName=${name}`,
          ...(rv ? { resourceVersion: rv, resourceVersionMatch: 'NotOlderThan' } : { resourceVersion: '0' }),
        },
        timeoutMs: 30_000,
        signal: this.o.reads,
        // Behind marks, taints and the rest in the client's limiter (never starved: it ages).
        priority: 'pods',
      });
    } catch (err) {
      // Not listed: owed at the next run, from whatever the cache has then (e.g. "too large
      // resource version" after an etcd restore). The last list's time is kept.
      this.owe(name, trigger, {
        at: last?.at ?? 0,
        everyMs: this.o.podRecheckMs,
        rv: undefined,
        stepped: last?.stepped ?? false,
      });
      throw err;
    }
  }

  /** Ready=False on each pod the policy names, one at a time; 'stopped' once a write may not go on. */
  private async mark(
    name: string,
    marks: readonly PodNotReadyDecision[],
    listed: readonly Pod[],
    retry: (current: Pod) => PodNotReadyDecision | undefined,
    tally: Tally,
    stillWanted: StillWanted | undefined,
  ): Promise<Stopped | undefined> {
    const { writer, metrics, log } = this.o;
    for (const d of marks) {
      const pod = listed.find((p) => p.metadata.namespace === d.namespace && p.metadata.name === d.name);
      const out = await writer.patchPodStatus(
        d.namespace,
        d.name,
        pod,
        (current) =>
          (current === pod ? d.patch : retry(current)?.patch) as unknown as
            | Record<string, unknown>
            | undefined,
        stillWanted,
      );
      if (out.kind === 'withdrawn')
        return this.withdrawn(name, out.reason, tally.total - tally.done - tally.failures);
      if (out.kind === 'fenced') return 'not-acting';
      if (out.kind === 'failed') tally.failures++;
      if (out.kind === 'applied' || out.kind === 'dry-run') {
        tally.done++;
        metrics.transitions.inc({ kind: 'pods_marked_not_ready' });
        log.info(out.kind === 'dry-run' ? 'Dry run: would mark pod not ready' : 'Marked pod not ready', {
          node: name,
          pod: `${d.namespace}/${d.name}`,
        });
        void this.o.emit(d.event);
      }
    }
    return undefined;
  }

  /** The evictions the policy names, one at a time; 'stopped' once a write may not go on. */
  private async evict(
    name: string,
    evictions: readonly EvictionDecision[],
    tally: Tally,
    stillWanted: StillWanted | undefined,
  ): Promise<Stopped | undefined> {
    const { writer, metrics, log } = this.o;
    for (const e of evictions) {
      const out = await writer.evict(e.namespace, e.name, e.uid, stillWanted);
      if (out.kind === 'withdrawn') {
        return this.withdrawn(name, out.reason, tally.total - tally.done - tally.failures - tally.blocked);
      }
      if (out.kind === 'fenced') return 'not-acting';
      if (out.kind === 'failed') tally.failures++;
      if (out.kind === 'blocked') {
        // A PodDisruptionBudget allows no disruption now: looked at again at the next list.
        tally.blocked++;
        log.info('Eviction refused for now, will retry', {
          node: name,
          pod: `${e.namespace}/${e.name}`,
          reason: out.reason,
        });
      }
      if (out.kind === 'applied' || out.kind === 'dry-run') {
        tally.done++;
        metrics.transitions.inc({ kind: 'pods_evicted' });
        log.info(out.kind === 'dry-run' ? 'Dry run: would evict pod' : 'Evicted pod', {
          node: name,
          pod: `${e.namespace}/${e.name}`,
        });
      }
    }
    return undefined;
  }

  /**
   * What decided the pod writes no longer holds: the rest are left alone, and counted. 'not-acting'
   * when it is this replica that stopped acting (the node itself may still want them).
   */
  private withdrawn(name: string, reason: string, left: number): Stopped {
    this.o.metrics.podWritesWithdrawn.inc(left);
    this.o.log.info('Pod writes stopped: what decided them no longer holds', {
      node: name,
      reason,
      podsLeft: left,
    });
    return reason.startsWith(NOT_ACTING) ? 'not-acting' : 'stopped';
  }
}

/** A node whose pods we look at (see PodStep.checkedAt). */
interface Checked {
  at: number;
  everyMs: number;
  rv: string | undefined;
  stepped: boolean;
  owed?: 'list' | 'retry';
}

/** The pod writes of one run so far. */
interface Tally {
  total: number;
  done: number;
  failures: number;
  blocked: number;
}
