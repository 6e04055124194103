/** What the adaptor needs from an elector (LeaderElector implements it). */
export interface ElectionHealthSource {
  check(toleranceMs: number): Error | undefined;
}

/** kube-controller-manager's tolerance beyond the lease duration before /healthz fails. */
export const DEFAULT_HEALTHZ_TOLERANCE_MS = 20_000;

/**
 * client-go's HealthzAdaptor: a /healthz check that fails when this replica leads (or led and has
 * not exited) but has not renewed the lease for leaseDuration + tolerance, e.g. a wedged event loop,
 * so the kubelet restarts it. Non-leaders are healthy. It can be created before the elector and
 * bound later. /readyz must NOT use it: a standby has to be Ready.
 */
export class LeaderHealthzAdaptor {
  readonly name = 'leaderElection';
  private source: ElectionHealthSource | undefined;

  constructor(readonly toleranceMs: number = DEFAULT_HEALTHZ_TOLERANCE_MS) {}

  setLeaderElection(source: ElectionHealthSource | undefined): void {
    this.source = source;
  }

  /** undefined when healthy, else the reason. */
  check(): Error | undefined {
    return this.source?.check(this.toleranceMs);
  }
}
