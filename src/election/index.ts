export {
  CHECK_STOPPED,
  type CoordinationSupport,
  CoordinationWatchdog,
  candidateVersions,
  checkCoordinatedElection,
  type LeaseCandidate,
  LeaseCandidatePublisher,
  watchCandidate,
} from './candidate.js';
export {
  COMPONENT_NAME,
  candidateNameProblem,
  coordinatedRecheckMs,
  defaultIdentity,
  JITTER_FACTOR,
  LEADER_ELECTION_DEFAULTS,
  type LeaderElectionConfig,
  LeaderElectionConfigError,
  type LeaderElectionConfigInput,
  LeaderElectionFlags,
  type LeaderElectionTiming,
  resolveLeaderElectionConfig,
  validateTiming,
} from './config.js';
export {
  type ApiAccess,
  type ElectionEvent,
  type LeaderCallbacks,
  LeaderElector,
  type LeaderElectorOptions,
  type LostLeadership,
  NotLeaderError,
  type ReleaseResult,
  type StopReason,
} from './elector.js';
export {
  DEFAULT_HEALTHZ_TOLERANCE_MS,
  type ElectionHealthSource,
  LeaderHealthzAdaptor,
  type PendingDecision,
  undecidedTooLong,
} from './healthz.js';
export {
  HOSTNAME_ANNOTATION,
  HOSTNAME_LABEL,
  IDENTITY_DEFAULTS,
  IDENTITY_LABEL,
  type IdentityLeaseOptions,
  IdentityLeases,
  identityLeaseName,
  LEADER_LABEL,
} from './identity.js';
export { type KubeRequester, LeaseApi } from './lease-api.js';
export { lockUpdates, namedUpdates, watchLock } from './lock-watch.js';
export { createLeaderElectionMetrics, type LeaderElectionMetrics } from './metrics.js';
