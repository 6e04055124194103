/**
 * Whether the API server could accept renewals, judged from what this controller sees (pure: times
 * in, decisions out).
 *
 * kube-apiserver serves watches from its watch cache: while etcd is down (a restart, a restore, a
 * disk stall) the lease watch stays open and looks healthy, but no kubelet can renew, so every node
 * looks silent at once. Two things show the storage working: a lease write arriving on the watch
 * (storage accepted it) and a prompt answer to our quorum re-read of a lease. A re-read that fails
 * shows it does not: an outage from the last proof it worked to the first proof it works again. So
 * does a fleet-wide silence: no lease written for longer than 1.5 renew intervals by a fleet seen
 * renewing (an outage too short for any deadline, and so any re-read, to fall into: the next write
 * ends it, unless its kubelet wrote it on time). Like a blind spell of the lease watch, that time
 * does not count against any node (the caller moves every deadline by it, up to a cap the tracker
 * keeps). A re-read answered slowly, with no other proof
 * meanwhile, shows only that the storage was slow while it waited (a dead fleet writes nothing, so
 * the last proof may be a whole grace back): its own time counts. A silence still going when a
 * re-read is answered, promptly or slowly, may be an outage just over or a fleet that died:
 * readAnswered reports it, once, and the caller holds judgement for the kubelets' reconnect back-off.
 */
/** A fleet silent for longer than this many renew intervals has stopped renewing at once. */
export const FLEET_SILENCE_FACTOR = 1.5;

/** What the answer to a re-read shows about the storage (each field: a length in ms, when shown). */
export interface ReadVerdict {
  /** An outage that the answer ends (one opened by a failed re-read): kubelets may be backing off. */
  outageMs?: number;
  /** The read's own wait, with no other proof meanwhile: the storage was slow (or away) that long. */
  slowMs?: number;
  /** A fleet-wide silence still going at the answer (reported once): an outage just over, or a fleet that died. */
  silentMs?: number;
}

/** A lease write on the watch: which lease, its kubelet's rhythm. */
export interface WriteSeen {
  lease: string;
  /** Its kubelet's renew interval (see renewIntervalOf in lease-recheck.ts). */
  renewIntervalMs: number;
  /** How long after the renewal before it the kubelet wrote it, on its own clock (renewGapOf), if known. */
  renewGapMs?: number | undefined;
}

interface LeaseWrite {
  lease: string;
  renewIntervalMs: number;
  at: number;
}

export class StorageSight {
  /** When the storage last showed it works: a lease write on the watch, an answered re-read (monotonic ms). */
  private lastProofAt: number | undefined;
  /** Start of an outage still open (a re-read failed since the last proof of writes). */
  private since: number | undefined;
  /** End of the last outage counted (a silence a write broke included), or of the lease watch's last blind spell: never counted twice. */
  private coveredUntil = Number.NEGATIVE_INFINITY;
  /** When the last fleet-wide silence was counted: the next needs a lease write after it. */
  private silenceCountedAt = Number.NEGATIVE_INFINITY;
  /** The last lease write seen. */
  private lastWrite: LeaseWrite | undefined;
  /**
   * The renew interval of the fleet once two leases were seen written within 1.5 of their renew
   * intervals of each other (a fleet renewing: its silence is not one node's); infinite before (a
   * fleet not seen renewing is never silent).
   */
  private fleetIntervalMs = Number.POSITIVE_INFINITY;
  /** The lease watch cannot see (its silence is not the fleet's) since a spell began. */
  private leaseWatchBlind = false;

  /** @param slowMs A re-read slower than this, with no other proof meanwhile, shows the storage slow for its wait. */
  constructor(private readonly slowMs: number) {}

  /**
   * A lease write arrived on the watch at `now` (`write`: which lease, its kubelet's rhythm).
   * Returns the length of the outage it ends (ms), if any: one a re-read opened, or the fleet-wide
   * silence it breaks. A write its kubelet made on time (no longer after its renewal before than
   * the silence's span, on its own clock) shows the storage accepted it on time: the silence was the
   * watch's (a stalled watch delivering held writes at once), not the storage's, and counts nothing.
   */
  writeSeen(now: number, write: WriteSeen): number | undefined {
    const silence = this.silence(now);
    const onTime = silence !== undefined && (write.renewGapMs ?? Number.POSITIVE_INFINITY) <= silence.spanMs;
    this.fleetRenewing(write, now);
    this.lastWrite = { lease: write.lease, renewIntervalMs: write.renewIntervalMs, at: now };
    this.lastProofAt = now;
    if (silence !== undefined && !onTime) {
      this.since = Math.min(this.since ?? silence.since, silence.since);
      this.silenceCountedAt = now;
    }
    return this.end(now);
  }

  /** Two leases written within 1.5 of their renew intervals of each other: the fleet is renewing. */
  private fleetRenewing(write: WriteSeen, now: number): void {
    const last = this.lastWrite;
    if (this.leaseWatchBlind || !last || last.lease === write.lease) return;
    const intervalMs = Math.max(last.renewIntervalMs, write.renewIntervalMs);
    if (now - last.at <= FLEET_SILENCE_FACTOR * intervalMs) this.fleetIntervalMs = intervalMs;
  }

  /**
   * A fleet-wide silence still going at `now`, when it began and its span: no write for longer than 1.5 renew
   * intervals, in a fleet seen renewing before (two leases written within that span of each other,
   * at some point), with at least one write since the last silence counted (a fleet that died is
   * counted once). It runs from the last write, or from the end of the last outage counted (issue
   * 47: one renewal after an outage, and etcd away again, was no silence until two leases wrote). A
   * fleet of one node shows nothing this way (its silence is its own).
   */
  private silence(now: number): { since: number; spanMs: number } | undefined {
    const last = this.lastWrite;
    if (this.leaseWatchBlind || !last || last.at < this.silenceCountedAt) return undefined;
    const since = Math.max(last.at, this.coveredUntil);
    const spanMs = FLEET_SILENCE_FACTOR * Math.max(last.renewIntervalMs, this.fleetIntervalMs);
    return now - since > spanMs ? { since, spanMs } : undefined;
  }

  /**
   * The lease watch cannot see (disconnected, unsynced, silent): a silence of writes is not the
   * fleet's until it sees again; the writes it replays on its way back end nothing.
   */
  leaseWatchLost(): void {
    this.leaseWatchBlind = true;
  }

  /** A fleet-wide silence still going at `now` ends here, once: its length (ms), if there is one. */
  private silenceEnds(now: number): number | undefined {
    const silence = this.silence(now);
    if (silence === undefined) return undefined;
    this.silenceCountedAt = now;
    return now - silence.since;
  }

  /** The lease watch sees again at `at` after a blind spell: a silence before that is the spell's. */
  leaseWatchSees(at: number): void {
    this.leaseWatchBlind = false;
    this.coveredUntil = Math.max(this.coveredUntil, at);
  }

  /**
   * The lease watch lost sight at `at`: an open outage ends there (the blind spell moves deadlines
   * from then on; counting both would move them twice). Returns its length (ms), if one was open.
   */
  watchBlind(at: number): number | undefined {
    if (this.since === undefined) return undefined;
    return this.end(Math.max(at, this.since));
  }

  /** A re-read sent at `sentAt` failed (no answer, or the server could not reach its storage). Returns true when this opens an outage. */
  readFailed(sentAt: number): boolean {
    if (this.since !== undefined) return false;
    this.since = Math.max(this.lastProofAt ?? sentAt, this.coveredUntil);
    return true;
  }

  /**
   * A re-read sent at `sentAt` was answered at `now`: the storage works now. It ends an outage a
   * failed re-read opened (outageMs); answered slowly with no other proof meanwhile, the storage was
   * slow for the read's own time (slowMs: not since the last proof, which for a dead fleet is a whole
   * grace back); a fleet-wide silence still going is reported once (silentMs). A slow answer while
   * other proof arrived shows nothing.
   */
  readAnswered(sentAt: number, now: number): ReadVerdict {
    if (this.since !== undefined) {
      const outageMs = this.end(now);
      this.lastProofAt = now;
      return { outageMs };
    }
    const verdict: ReadVerdict = {};
    if (now - sentAt >= this.slowMs) {
      // Slow, unless a write or another answer showed the storage working while it waited.
      if ((this.lastProofAt ?? Number.NEGATIVE_INFINITY) >= sentAt) return verdict;
      const slowMs = now - Math.max(sentAt, this.coveredUntil);
      if (slowMs > 0) verdict.slowMs = slowMs;
    }
    const silentMs = this.silenceEnds(now);
    if (silentMs !== undefined) verdict.silentMs = silentMs;
    this.lastProofAt = now;
    return verdict;
  }

  private end(now: number): number | undefined {
    if (this.since === undefined) return undefined;
    const outageMs = Math.max(0, now - this.since);
    this.since = undefined;
    this.coveredUntil = Math.max(this.coveredUntil, now);
    return outageMs;
  }
}
