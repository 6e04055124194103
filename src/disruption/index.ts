export { BlastRadiusCap, type CapSettings, validateCapSettings } from './cap.js';
export {
  type Admission,
  type AdmitResult,
  DEFAULT_DISRUPTION_OPTIONS,
  DisruptionController,
  type DisruptionDecision,
  type DisruptionEvent,
  type DisruptionOptions,
  type DisruptionUpdate,
  type NodeObservation,
  type QueuedNode,
  type ReadyStatus,
  type RequestResult,
  type SettleOutcome,
  validateDisruptionOptions,
  type ZoneStatus,
  type ZoneTransition,
} from './controller.js';
export {
  createDisruptionMetrics,
  type DisruptionMetrics,
  HELD_BACK_REASONS,
  type HeldBackReason,
} from './metrics.js';
export {
  DEFAULT_POOL_NAME,
  EMPTY_POOL_CONFIG,
  type GraceDefaults,
  HTTP2_HEALTH_CHECK_MS,
  MAX_GRACE_MS,
  MAX_POOL_CONFIG_BYTES,
  type NodePool,
  type PoolConfig,
  PoolConfigError,
  type PoolConfigIssue,
  type PoolConfigResult,
  type PoolGraceBounds,
  parsePoolConfig,
  type ResolvedGrace,
  resolveGrace,
  tooLargeMessage,
  validatePoolConfig,
} from './pools/config.js';
export { type GraceChange, GraceResolver } from './pools/resolver.js';
export {
  isMatchAll,
  type LabelSelector,
  type LabelSelectorRequirement,
  type Labels,
  matchesSelector,
  type SelectorOperator,
} from './pools/selector.js';
export { type DisruptionSeed, planSeed, type SeedGrant, type TaintInPlace } from './seed.js';
export {
  computeZoneState,
  isExcludedFromDisruption,
  LABEL_EXCLUDE_DISRUPTION,
  LABEL_FAILURE_DOMAIN_BETA_REGION,
  LABEL_FAILURE_DOMAIN_BETA_ZONE,
  LABEL_TOPOLOGY_REGION,
  LABEL_TOPOLOGY_ZONE,
  type RateSettings,
  ZONE_STATES,
  type ZoneState,
  zoneDisplay,
  zoneKeyOf,
  zoneRate,
} from './zones.js';
