/**
 * What the demo expects the controller to do after each scripted step, judged on what the demo
 * itself watches (the API server's nodes and the leader-election lock), so that `./dev demo`
 * ends by saying whether the controller did its job, and exits non-zero when it did not.
 *
 * Pure: the demo feeds snapshots with its own monotonic time; nothing here reads a clock.
 */

/** A node as the demo's watch shows it. Taints as `key:Effect`, e.g. `node.kubernetes.io/unreachable:NoSchedule`. */
export interface NodeState {
  name: string;
  /** The Ready condition's status (`True`, `False`, `Unknown`), or `-` when it has none. */
  ready: string;
  taints: readonly string[];
}

export interface DemoSnapshot {
  nodes: readonly NodeState[];
  /** The lock's holderIdentity, when the demo has read the lock. */
  leader: string | undefined;
}

export const UNREACHABLE_NOSCHEDULE = 'node.kubernetes.io/unreachable:NoSchedule';
export const UNREACHABLE_NOEXECUTE = 'node.kubernetes.io/unreachable:NoExecute';
export const NOT_READY_NOSCHEDULE = 'node.kubernetes.io/not-ready:NoSchedule';
const OUR_TAINTS = /^node\.kubernetes\.io\/(unreachable|not-ready):/;

/** One expectation: from `since` (ms, the demo's clock), `holds` must become true within `withinMs`. */
export interface Expectation {
  label: string;
  since: number;
  withinMs: number;
  holds: (s: DemoSnapshot) => boolean;
}

export type CheckStatus = 'passed' | 'failed' | 'pending';

export interface CheckResult {
  label: string;
  status: CheckStatus;
  /** Timed checks: passed, how long after `since` it first held; otherwise how long it was waited for. */
  afterMs?: number;
  withinMs?: number;
  /** Failed because it held only after its time ran out (afterMs: when it first held). */
  late?: boolean;
  /** What went wrong, for a failed invariant. */
  detail?: string;
}

const byName = (s: DemoSnapshot, name: string) => s.nodes.find((n) => n.name === name);

/** Nodes whose heartbeats stopped: Ready=Unknown and the unreachable NoSchedule taint, each of them. */
export function lostExpectation(names: readonly string[], since: number, withinMs: number): Expectation {
  return {
    label: `${names.join(', ')} marked lost (Ready=Unknown, ${UNREACHABLE_NOSCHEDULE})`,
    since,
    withinMs,
    holds: (s) =>
      names.every((name) => {
        const n = byName(s, name);
        return n !== undefined && n.ready === 'Unknown' && n.taints.includes(UNREACHABLE_NOSCHEDULE);
      }),
  };
}

/** A node that reports Ready=False while renewing: the not-ready NoSchedule taint, and never Unknown. */
export function notReadyExpectation(name: string, since: number, withinMs: number): Expectation {
  return {
    label: `${name} tainted not ready (Ready=False, ${NOT_READY_NOSCHEDULE})`,
    since,
    withinMs,
    holds: (s) => {
      const n = byName(s, name);
      return n !== undefined && n.ready === 'False' && n.taints.includes(NOT_READY_NOSCHEDULE);
    },
  };
}

/** The lock held by a replica other than the one that was shut down. */
export function handoverExpectation(stopped: string, since: number, withinMs: number): Expectation {
  return {
    label: `leadership handed over from ${stopped}`,
    since,
    withinMs,
    holds: (s) => s.leader !== undefined && s.leader !== '' && s.leader !== stopped,
  };
}

/**
 * Every node Ready=True with none of the controller's taints: after recovery, and at the start,
 * where nodes register with the not-ready taint that the controller removes once they are Ready.
 */
export function recoveredExpectation(
  since: number,
  withinMs: number,
  label = 'every node Ready=True and untainted again',
): Expectation {
  return {
    label,
    since,
    withinMs,
    holds: (s) =>
      s.nodes.length > 0 &&
      s.nodes.every((n) => n.ready === 'True' && !n.taints.some((t) => OUR_TAINTS.test(t))),
  };
}

/**
 * Collects expectations as the demo's steps run, judges each snapshot against them, and watches
 * for the one thing that must never happen: a node that still heartbeats marked lost.
 */
export class DemoChecks {
  /** Each expectation, and how long after its `since` it first held. */
  private readonly expectations: { e: Expectation; seenAfter: number | undefined }[] = [];
  /** Nodes whose heartbeats the demo stopped: only these may be marked Unknown or unreachable. */
  private readonly silenced = new Set<string>();
  /** Nodes wrongly marked lost. */
  private readonly falselyLost = new Set<string>();
  private readonly noExecute = new Set<string>();

  expect(e: Expectation): void {
    this.expectations.push({ e, seenAfter: undefined });
  }

  /** The demo stopped these nodes' heartbeats at this point (they may be marked from now on). */
  silence(names: readonly string[]): void {
    for (const n of names) this.silenced.add(n);
  }

  observe(now: number, s: DemoSnapshot): void {
    for (const x of this.expectations) {
      if (x.seenAfter === undefined && now >= x.e.since && x.e.holds(s)) x.seenAfter = now - x.e.since;
    }
    for (const n of s.nodes) {
      const lost =
        n.ready === 'Unknown' || n.taints.some((t) => t.startsWith('node.kubernetes.io/unreachable:'));
      if (lost && !this.silenced.has(n.name)) this.falselyLost.add(n.name);
      if (n.taints.includes(UNREACHABLE_NOEXECUTE)) this.noExecute.add(n.name);
    }
  }

  /** Each expectation at `now`: passed, failed (its time ran out), or still pending; then the invariant. */
  results(now: number): CheckResult[] {
    const out: CheckResult[] = this.expectations.map(({ e, seenAfter: seen }) => {
      // Seen too late is a failure too: it is judged at the time it first held.
      if (seen !== undefined) {
        if (seen <= e.withinMs)
          return { label: e.label, status: 'passed', afterMs: seen, withinMs: e.withinMs };
        return { label: e.label, status: 'failed', afterMs: seen, withinMs: e.withinMs, late: true };
      }
      const waited = Math.max(0, now - e.since);
      const status = waited > e.withinMs ? 'failed' : 'pending';
      return { label: e.label, status, afterMs: waited, withinMs: e.withinMs };
    });
    const wrong = this.falsePositives;
    out.push({
      label: 'no heartbeating node marked lost',
      status: wrong.length === 0 ? 'passed' : 'failed',
      ...(wrong.length > 0 ? { detail: wrong.join(', ') } : {}),
    });
    return out;
  }

  /** Nodes still heartbeating that were marked lost (Ready=Unknown or unreachable). */
  get falsePositives(): string[] {
    return [...this.falselyLost].sort();
  }

  /** Nodes that got the unreachable NoExecute taint (rate-limited per zone, so not an expectation). */
  get noExecuteTainted(): string[] {
    return [...this.noExecute].sort();
  }

  failed(now: number): boolean {
    return this.results(now).some((r) => r.status === 'failed');
  }
}

/** The summary the demo prints at its end, one line per check. */
export function formatResults(results: readonly CheckResult[]): string[] {
  const secs = (ms: number | undefined) => `${((ms ?? 0) / 1000).toFixed(1)}s`;
  return results.map((r) => {
    if (r.withinMs === undefined) {
      return r.status === 'passed' ? `  ok       ${r.label}` : `  FAILED   ${r.label}: ${r.detail ?? ''}`;
    }
    if (r.status === 'passed')
      return `  ok       ${r.label}, after ${secs(r.afterMs)} (allowed ${secs(r.withinMs)})`;
    if (r.status === 'failed')
      return r.late
        ? `  FAILED   ${r.label}: seen only after ${secs(r.afterMs)} (allowed ${secs(r.withinMs)})`
        : `  FAILED   ${r.label}: not seen in ${secs(r.afterMs)} (allowed ${secs(r.withinMs)})`;
    return `  waiting  ${r.label}: ${secs(r.afterMs)} of ${secs(r.withinMs)} so far`;
  });
}
