/**
 * The second opinion's pure core: which silent nodes to probe and when, and what their kubelets'
 * answers mean. A lease says only "no renewal reached the API server"; whether the node's kubelet
 * still answers on the node network tells a node that is down (mark it sooner) from one cut off
 * from the control plane only (do not evict its pods). Decisions as data, on our monotonic clock;
 * the wiring (src/controller/second-opinion.ts) probes, asks, and acts through every guardrail the
 * lease alone goes through.
 */
export interface SecondOpinionSettings {
  /** --confirm-after: a node silent this long (our clock) has its kubelet probed. */
  confirmAfterMs: number;
  /** After a probe that failed, the next (the one that can confirm) this much later. */
  retryMs: number;
  /** After a probe that answered, the next this much later (the node still silent). */
  intervalMs: number;
  /** One probe's deadline (connect + TLS handshake). */
  timeoutMs: number;
  /** --cut-off-hold: the longest NoExecute is held past the grace for a kubelet that answers (0: never). */
  holdMs: number;
}

/**
 * What one probe of a kubelet found (src/second-opinion/kubelet-probe.ts). answers: a TLS
 * handshake completed. refused: the port is closed, or something listens there but it is not a
 * TLS endpoint that answers. unreachable: no route, or no usable address. timeout: no answer
 * within the deadline (or the caller gave up).
 */
export type ProbeOutcome = 'answers' | 'refused' | 'unreachable' | 'timeout';

/** Defaults: confirm after two renew intervals; a failure retried after 3 s; answers re-checked every renew interval. */
export const DEFAULT_SECOND_OPINION: Readonly<SecondOpinionSettings> = Object.freeze({
  confirmAfterMs: 20_000,
  retryMs: 3_000,
  intervalMs: 10_000,
  timeoutMs: 3_000,
  holdMs: 10 * 60_000,
});

/** Failed probes in a row, at least retryMs apart, that confirm a silent node down. */
export const FAILURES_TO_CONFIRM = 2;

/** A node as the tracker sees it now, with a kubelet endpoint to probe. */
export interface SilentNode {
  name: string;
  /**
   * Names the silence (the tracker's count of heartbeats): a renewal starts a new one and what was
   * probed before no longer counts; an outage or a blind spell that moves silentSince does not.
   */
  silence: number;
  /** Our clock: the node's last observed renewal (or its grace's last restart): the silence's start. */
  silentSince: number;
  /** Our clock: when its grace ends (silentSince + grace): the hold is counted from here. */
  graceEnds: number;
}

/** What the probes of this silence say about one node. */
export type Opinion =
  /** Nothing yet (not silent long enough, no probe finished, or answers too old to count). */
  | { kind: 'none' }
  /** Its kubelet failed FAILURES_TO_CONFIRM probes in a row: down, confirmed at `at`. */
  | { kind: 'down'; at: number; outcome: ProbeOutcome; detail: string }
  /** Its kubelet answered at `at` (a probe started then): its NoExecute is held until `holdUntil`. */
  | { kind: 'answers'; at: number; holdUntil: number };

interface Result {
  /** When the probe started (our clock). */
  at: number;
  outcome: ProbeOutcome;
  detail: string;
}

interface State {
  /** The silence these probes belong to: a renewal (a new silence) starts over. */
  silence: number;
  /** A probe of this silence is on the wire since then. */
  inFlight: number | undefined;
  /** The newest finished probes of this silence, newest last (at most FAILURES_TO_CONFIRM). */
  results: Result[];
  /** Confirmed down at (our clock): no more probes for this silence. */
  down: number | undefined;
}

/**
 * Per node, the probes of its current silence. Not safe to share across replicas: each leader
 * probes for itself (its opinion is on its own clock, like the lease's).
 */
export class SecondOpinion {
  private readonly states = new Map<string, State>();

  constructor(readonly settings: Readonly<SecondOpinionSettings>) {}

  /** The state of `node`'s current silence; a different silence (it renewed) starts over. */
  private stateOf(node: SilentNode): State {
    let s = this.states.get(node.name);
    if (s === undefined || s.silence !== node.silence) {
      s = { silence: node.silence, inFlight: undefined, results: [], down: undefined };
      this.states.set(node.name, s);
    }
    return s;
  }

  /**
   * When `node`'s next probe is due (our clock), or undefined: none for this silence (confirmed
   * down, or one on the wire). A kubelet that answers is probed on for as long as its node is
   * silent, past the hold too: its answers veto the out-of-service taint.
   */
  nextProbe(node: SilentNode): number | undefined {
    const s = this.states.get(node.name);
    const first = node.silentSince + this.settings.confirmAfterMs;
    if (s === undefined || s.silence !== node.silence) return first;
    if (s.down !== undefined || s.inFlight !== undefined) return undefined;
    const last = s.results.at(-1);
    if (last === undefined) return first;
    return last.at + (last.outcome === 'answers' ? this.settings.intervalMs : this.settings.retryMs);
  }

  /**
   * The nodes to probe now, earliest due first, at most `capacity`. `silent` lists every node
   * with a kubelet endpoint whose silence is at least confirmAfter long; the state of any other
   * node (it renewed, it went) is dropped.
   */
  plan<T extends SilentNode>(silent: Iterable<T>, now: number, capacity: number): T[] {
    const due: { node: T; at: number }[] = [];
    const seen = new Set<string>();
    for (const node of silent) {
      seen.add(node.name);
      // A different silence (the node renewed): what was probed before, and a probe on the wire, no longer count.
      if (this.states.get(node.name)?.silence !== node.silence) this.states.delete(node.name);
      const at = this.nextProbe(node);
      if (at !== undefined && at <= now) due.push({ node, at });
    }
    for (const name of this.states.keys()) if (!seen.has(name)) this.states.delete(name);
    if (capacity <= 0) return [];
    due.sort((a, b) => a.at - b.at || (a.node.name < b.node.name ? -1 : 1));
    return due.slice(0, capacity).map((d) => d.node);
  }

  /** A probe of `node` went on the wire at `now`. */
  started(node: SilentNode, now: number): void {
    this.stateOf(node).inFlight = now;
  }

  /**
   * A probe of `node` that started at `startedAt` finished. Returns the node's opinion when this
   * result changed it to 'down' (the caller marks it), else undefined. A result of an older
   * silence (the node renewed while it was on the wire) is dropped.
   */
  finished(
    node: SilentNode,
    startedAt: number,
    outcome: ProbeOutcome,
    detail: string,
  ): Extract<Opinion, { kind: 'down' }> | undefined {
    const s = this.states.get(node.name);
    if (s === undefined || s.silence !== node.silence || s.inFlight !== startedAt) return undefined;
    s.inFlight = undefined;
    if (s.down !== undefined) return undefined;
    s.results.push({ at: startedAt, outcome, detail });
    if (s.results.length > FAILURES_TO_CONFIRM) s.results.shift();
    if (!this.confirms(s.results)) return undefined;
    s.down = startedAt;
    return { kind: 'down', at: startedAt, outcome, detail };
  }

  /** FAILURES_TO_CONFIRM failures in a row, each at least retryMs after the one before. */
  private confirms(results: readonly Result[]): boolean {
    if (results.length < FAILURES_TO_CONFIRM) return false;
    for (let i = 0; i < results.length; i++) {
      if (results[i]!.outcome === 'answers') return false;
      if (i > 0 && results[i]!.at - results[i - 1]!.at < this.settings.retryMs) return false;
    }
    return true;
  }

  /** What the probes of `node`'s current silence say. */
  opinion(node: SilentNode): Opinion {
    const s = this.states.get(node.name);
    if (s === undefined || s.silence !== node.silence) return { kind: 'none' };
    if (s.down !== undefined) {
      const last = s.results.at(-1)!;
      return { kind: 'down', at: s.down, outcome: last.outcome, detail: last.detail };
    }
    // The newest answer stands until two failures in a row say otherwise (down, above), however
    // old it is: probes held back (a blind spell, a leader busy with a mass partition) are not
    // news that the kubelet stopped, and the hold is bounded by holdMs anyway.
    const answer = s.results.findLast((r) => r.outcome === 'answers');
    if (answer === undefined) return { kind: 'none' };
    return { kind: 'answers', at: answer.at, holdUntil: node.graceEnds + this.settings.holdMs };
  }

  /**
   * How long (ms from `now`) `node`'s NoExecute stays held, or undefined: not held. Held only past
   * its grace, while its kubelet answers, and not beyond the hold.
   */
  holdFor(node: SilentNode, now: number): number | undefined {
    const o = this.opinion(node);
    if (o.kind !== 'answers' || now < node.graceEnds || now >= o.holdUntil) return undefined;
    // Looked at again when the hold ends; two failures before that end it at once (the caller
    // reconciles the node when the core confirms it down).
    return o.holdUntil - now;
  }

  /** Nodes with probes on record (for a gauge and tests). */
  get size(): number {
    return this.states.size;
  }

  forget(name: string): void {
    this.states.delete(name);
  }
}
