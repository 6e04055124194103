import type { Counter } from 'prom-client';
import { type Anomaly, AnomalyKind } from '../health/index.js';
import type { Logger } from '../log/logger.js';

/**
 * What the controller does with each kind of surprising data, said the way the log says it: either
 * the object (or this observation of it) is skipped, or it is still used and this is how.
 */
const HANDLING: Record<AnomalyKind, { skipped: true } | { skipped: false; handling: string }> = {
  [AnomalyKind.LeaseWithoutNode]: {
    skipped: false,
    handling: 'lease tracked; nothing to mark until its Node appears',
  },
  [AnomalyKind.LeaseWrongNamespace]: { skipped: true },
  [AnomalyKind.MissingName]: { skipped: true },
  [AnomalyKind.RenewTimeMissing]: { skipped: true },
  [AnomalyKind.RenewTimeUnparsable]: { skipped: true },
  [AnomalyKind.RenewTimeBackward]: { skipped: false, handling: 'still counted as a renewal' },
  [AnomalyKind.RenewTimeReplayed]: { skipped: true },
  [AnomalyKind.RenewTimeNotAdvanced]: { skipped: true },
  [AnomalyKind.HolderMissing]: { skipped: false, handling: 'renewals still count' },
  [AnomalyKind.HolderMismatch]: { skipped: false, handling: 'renewals still count' },
  [AnomalyKind.ReadyConditionRemoved]: {
    skipped: false,
    handling: 'this status update is not counted as a heartbeat',
  },
  [AnomalyKind.HeartbeatUnparsable]: { skipped: false, handling: 'compared as raw text' },
  [AnomalyKind.DuplicateCondition]: { skipped: false, handling: 'the first one is used' },
  [AnomalyKind.InvalidGrace]: { skipped: false, handling: 'default grace periods used' },
  [AnomalyKind.InvalidNow]: { skipped: true },
  [AnomalyKind.LeaseReadInvalid]: {
    skipped: false,
    handling: 'node not marked on it; read again on the next safety-net pass',
  },
};

/**
 * Kinds that legitimate clusters show on every lease at once (KWOK and some simulators name the
 * lease holder `<host>_<uuid>`, not after the node): one info line for the whole cluster, with a
 * count and an example, instead of a warning per lease; the per-lease detail is logged at V(4).
 */
const CLUSTER_PATTERNS: Partial<Record<AnomalyKind, string>> = {
  [AnomalyKind.HolderMismatch]: 'Lease holders differ from node names; renewals still count',
  [AnomalyKind.HolderMissing]: 'Leases without a holder; renewals still count',
};

/** Verbosity of the per-object lines of a cluster-wide pattern (klog: 4 = every observation). */
export const PATTERN_DETAIL_V = 4;

interface Pattern {
  count: number;
  example: Anomaly | undefined;
  logged: boolean;
}

/**
 * Turns the health core's anomaly records into the metric (every occurrence) and log lines (each
 * object and kind once, as the core flags with `first`). Cluster-wide patterns are summed up over
 * the first lease list and logged once when it is done (`leasesSynced`), or, when the first list
 * had none, once at their first appearance.
 */
export class AnomalyReporter {
  private readonly patterns = new Map<AnomalyKind, Pattern>();
  private synced = false;

  constructor(
    private readonly log: Logger,
    private readonly counter: Counter<'kind'>,
  ) {}

  note(anomalies: readonly Anomaly[]): void {
    for (const a of anomalies) {
      this.counter.inc({ kind: a.kind });
      if (!a.first) continue;
      const kv = {
        kind: a.kind,
        object: a.object,
        name: a.namespace ? `${a.namespace}/${a.name}` : a.name,
        detail: a.detail,
      };
      const summary = CLUSTER_PATTERNS[a.kind];
      if (summary !== undefined) {
        this.log.debug(PATTERN_DETAIL_V, summary, kv);
        const p = this.pattern(a.kind);
        p.count++;
        p.example ??= a;
        if (this.synced) this.logPattern(a.kind, p, summary);
        continue;
      }
      const h = HANDLING[a.kind];
      if (h.skipped) this.log.warn('Skipping bad data', kv);
      else this.log.warn('Unexpected data, still used', { ...kv, handling: h.handling });
    }
  }

  /** The first complete lease list has been observed: log the patterns it showed. Idempotent. */
  leasesSynced(): void {
    if (this.synced) return;
    this.synced = true;
    for (const [kind, p] of this.patterns) {
      const summary = CLUSTER_PATTERNS[kind];
      if (summary !== undefined) this.logPattern(kind, p, summary);
    }
  }

  private pattern(kind: AnomalyKind): Pattern {
    let p = this.patterns.get(kind);
    if (p === undefined) {
      p = { count: 0, example: undefined, logged: false };
      this.patterns.set(kind, p);
    }
    return p;
  }

  private logPattern(kind: AnomalyKind, p: Pattern, summary: string): void {
    if (p.logged || p.count === 0) return;
    p.logged = true;
    const e = p.example;
    this.log.info(summary, {
      kind,
      leases: p.count,
      example: e ? (e.namespace ? `${e.namespace}/${e.name}` : e.name) : undefined,
      exampleHolder: e?.detail,
      metric: `nlc_bad_objects_total{kind="${kind}"}`,
      detailAtV: PATTERN_DETAIL_V,
    });
  }
}
