import { Counter, Gauge, type Metric, type Registry } from 'prom-client';

/**
 * Leader-election metrics. Upstream names keep upstream's meaning (k8s.io/component-base
 * clientgo/leaderelection); ours start with `nlc_`. `name` is the lock Lease's name, as
 * kube-controller-manager reports it.
 *
 * - `leader_election_master_status{name}`: 1 while this replica leads, else 0 (0 from the start).
 * - `leader_election_slowpath_total{name}`: renewals by the LEADER that could not go the fast way
 *   (an update from our cached copy) and had to GET the lock and update again; counted when the
 *   slow-path update is sent, like client-go.
 * - `nlc_leader_election_transitions_total{name}`: acquisitions of the lock this replica observed
 *   since it started (a new non-empty holder; the holder found at startup is not counted).
 * - `nlc_leader_election_renew_errors_total{name}`: renew attempts by the leader that failed
 *   (request error, timeout or conflict on the slow path). A fast-path failure followed by a
 *   successful slow path is not an error.
 * - `nlc_leader_election_coordinated{name}`: 1 while this replica runs coordinated leader election
 *   (--feature-gates=CoordinatedLeaderElection=true and the API server serves it), else 0.
 * - `nlc_leader_election_lock_info{name, strategy, preferred_holder}`: 1 for the lock's
 *   spec.strategy and spec.preferredHolder as this replica last saw them ('' when unset); no
 *   series while the lock is missing or not yet read.
 * - `nlc_lease_candidate_pings_answered_total`, `nlc_lease_candidate_renew_errors_total`: the
 *   LeaseCandidate's answers to the coordinator's pings and its failed writes.
 * - `nlc_identity_lease_renew_errors_total`, `nlc_identity_leases_collected_total`: the identity
 *   lease publisher's failed renewals and the stale identity leases it deleted.
 */
export interface LeaderElectionMetrics {
  masterStatus: Gauge<'name'>;
  slowpath: Counter<'name'>;
  transitions: Counter<'name'>;
  renewErrors: Counter<'name'>;
  coordinated: Gauge<'name'>;
  lockInfo: Gauge<'name' | 'strategy' | 'preferred_holder'>;
  candidatePings: Counter<string>;
  candidateErrors: Counter<string>;
  identityRenewErrors: Counter<string>;
  identityCollected: Counter<string>;
}

/** Registers (or, when already registered on this registry, reuses) the election metrics. */
export function createLeaderElectionMetrics(registry: Registry): LeaderElectionMetrics {
  const registers = [registry];
  const reuse = <T extends Metric>(name: string, make: () => T): T =>
    (registry.getSingleMetric(name) as T | undefined) ?? make();
  return {
    masterStatus: reuse(
      'leader_election_master_status',
      () =>
        new Gauge({
          name: 'leader_election_master_status',
          help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease. Please make sure to group by name.",
          labelNames: ['name'],
          registers,
        }),
    ),
    slowpath: reuse(
      'leader_election_slowpath_total',
      () =>
        new Counter({
          name: 'leader_election_slowpath_total',
          help: "Total number of slow path exercised in renewing leader leases. 'name' is the string used to identify the lease. Please make sure to group by name.",
          labelNames: ['name'],
          registers,
        }),
    ),
    transitions: reuse(
      'nlc_leader_election_transitions_total',
      () =>
        new Counter({
          name: 'nlc_leader_election_transitions_total',
          help: 'Acquisitions of the leader-election lock (a new holder) observed by this replica since it started.',
          labelNames: ['name'],
          registers,
        }),
    ),
    renewErrors: reuse(
      'nlc_leader_election_renew_errors_total',
      () =>
        new Counter({
          name: 'nlc_leader_election_renew_errors_total',
          help: 'Renew attempts of the leader-election lock that failed while this replica was leading.',
          labelNames: ['name'],
          registers,
        }),
    ),
    coordinated: reuse(
      'nlc_leader_election_coordinated',
      () =>
        new Gauge({
          name: 'nlc_leader_election_coordinated',
          help: '1 while this replica runs coordinated leader election (a LeaseCandidate; the coordinator in kube-apiserver names the holder), else 0.',
          labelNames: ['name'],
          registers,
        }),
    ),
    lockInfo: reuse(
      'nlc_leader_election_lock_info',
      () =>
        new Gauge({
          name: 'nlc_leader_election_lock_info',
          help: "The leader-election lock's spec.strategy and spec.preferredHolder as this replica last saw them ('' when unset).",
          labelNames: ['name', 'strategy', 'preferred_holder'],
          registers,
        }),
    ),
    candidatePings: reuse(
      'nlc_lease_candidate_pings_answered_total',
      () =>
        new Counter({
          name: 'nlc_lease_candidate_pings_answered_total',
          help: "Pings of the coordinator (a new spec.pingTime on this replica's LeaseCandidate) answered with a renewal.",
          registers,
        }),
    ),
    candidateErrors: reuse(
      'nlc_lease_candidate_renew_errors_total',
      () =>
        new Counter({
          name: 'nlc_lease_candidate_renew_errors_total',
          help: "Failed creations, renewals and deletions of this replica's LeaseCandidate.",
          registers,
        }),
    ),
    identityRenewErrors: reuse(
      'nlc_identity_lease_renew_errors_total',
      () =>
        new Counter({
          name: 'nlc_identity_lease_renew_errors_total',
          help: "Failed renewals of this replica's identity lease.",
          registers,
        }),
    ),
    identityCollected: reuse(
      'nlc_identity_leases_collected_total',
      () =>
        new Counter({
          name: 'nlc_identity_leases_collected_total',
          help: 'Stale identity leases of other replicas deleted by this replica.',
          registers,
        }),
    ),
  };
}
