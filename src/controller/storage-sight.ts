/**
 * Whether the API server could accept renewals, judged from what this controller sees (pure: times
 * in, decisions out).
 *
 * kube-apiserver serves watches from its watch cache: while etcd is down (a restart, a restore, a
 * disk stall) the lease watch stays open and looks healthy, but no kubelet can renew, so every node
 * looks silent at once. Two things show the storage working: a lease write arriving on the watch
 * (storage accepted it) and a prompt answer to our quorum re-read of a lease. A re-read that fails
 * shows it does not: an outage from the last proof it worked to the first proof it works again. So
 * does a fleet-wide silence: no lease written for longer than 1.5 renew intervals while at least two
 * leases had been renewing (an outage too short for any deadline, and so any re-read, to fall into:
 * the next write ends it). Like a blind spell of the lease watch, that time does not count against
 * any node (the caller moves every deadline by it). A re-read answered slowly, with no other proof
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

interface LeaseWrite {
  lease: string;
  /** Its kubelet's renew interval (see renewIntervalOf in lease-recheck.ts). */
  renewIntervalMs: number;
  at: number;
}

export class StorageSight {
  /** When the storage last showed it works: a lease write on the watch, a prompt re-read (monotonic ms). */
  private lastProofAt: number | undefined;
  /** Start of an outage still open (a re-read failed since the last proof of writes). */
  private since: number | undefined;
  /** End of the last outage counted, or of the lease watch's last blind spell: never counted twice. */
  private coveredUntil = Number.NEGATIVE_INFINITY;
  /** The last lease write seen, and the last one before it by another lease (a fleet was renewing). */
  private lastWrite: LeaseWrite | undefined;
  private otherWrite: LeaseWrite | undefined;
  /** The lease watch cannot see (its silence is not the fleet's) since a spell began. */
  private leaseWatchBlind = false;

  /** @param slowMs A re-read slower than this, with no other proof meanwhile, shows an outage. */
  constructor(private readonly slowMs: number) {}

  /**
   * A lease write arrived on the watch at `now` (`write`: which lease, and its kubelet's renew
   * interval). Returns the length of the outage it ends (ms), if any: one a re-read opened, or the
   * fleet-wide silence it breaks.
   */
  writeSeen(now: number, write?: { lease: string; renewIntervalMs: number }): number | undefined {
    const silentSince = this.silentSince(now);
    if (write) {
      if (this.lastWrite && this.lastWrite.lease !== write.lease) this.otherWrite = this.lastWrite;
      this.lastWrite = { ...write, at: now };
    }
    this.lastProofAt = now;
    if (silentSince !== undefined) this.since = Math.min(this.since ?? silentSince, silentSince);
    return this.end(now);
  }

  /**
   * When a fleet-wide silence still going at `now` began: no write for longer than 1.5 renew
   * intervals after two leases were written within that span, both since the last outage counted
   * (a silence is counted once, until the fleet is seen renewing again). A fleet of one node shows
   * nothing this way (its silence is its own).
   */
  private silentSince(now: number): number | undefined {
    const last = this.lastWrite;
    const other = this.otherWrite;
    if (this.leaseWatchBlind || !last || !other || other.at < this.coveredUntil) return undefined;
    const spanMs = FLEET_SILENCE_FACTOR * Math.max(last.renewIntervalMs, other.renewIntervalMs);
    if (last.at - other.at > spanMs) return undefined;
    return now - last.at > spanMs ? last.at : undefined;
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
    const since = this.silentSince(now);
    if (since === undefined) return undefined;
    this.coveredUntil = Math.max(this.coveredUntil, now);
    return now - since;
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
    const slow = now - sentAt >= this.slowMs;
    if (slow && this.lastProofAt !== undefined && this.lastProofAt >= sentAt) return {};
    const verdict: ReadVerdict = {};
    if (slow) {
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
