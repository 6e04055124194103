/**
 * The controller's configuration: argv (and the downward-API environment main passes in) parsed
 * once into one validated Config (flags.ts: every flag with its type, default and range; config.ts:
 * the rules between flags), and the --node-pool-config file read, watched and reloaded
 * (pool-file.ts; parsed and validated by src/disruption's parsePoolConfig).
 */
export {
  type BindAddress,
  buildConfig,
  type Config,
  type ConfigEnv,
  type ConfigWarning,
  companionTaintKeyProblem,
  configWarnings,
  FEATURE_GATES,
  featureGates,
  loadConfig,
} from './config.js';
export {
  CLEANUP_FLAGS,
  DEMO_FLAGS,
  FLAGS,
  FlagError,
  type FlagSpec,
  type FlagValues,
  helpText,
  type ParsedArgs,
  parseAddress,
  parseArgs,
  parseFlagValue,
  STATUS_FLAGS,
} from './flags.js';
export {
  type FileStamp,
  nodePoolFileSystem,
  PoolConfigLoader,
  type PoolConfigLoaderOptions,
  type PoolFileSystem,
  type ReloadOutcome,
} from './pool-file.js';
