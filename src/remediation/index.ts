/** PURE: remediation of a node known to be down (the out-of-service taint, KEP-2268). */

export { type CleanupOptions, cleanupPlan, type NodeCleanup, writes } from './cleanup.js';
export {
  APPLIED_ANNOTATION,
  announcesShutdown,
  CLOUD_SHUTDOWN_TAINT_KEY,
  carriesOurTaint,
  FENCE_SIGNALS,
  FENCED_ANNOTATION,
  type FenceSignal,
  KUBELET_SHUTDOWN_MESSAGE,
  OUT_OF_SERVICE_TAINT,
  type OutOfServiceCheck,
  OutOfServiceCore,
  type OutOfServiceDecision,
  type OutOfServiceFacts,
  type OutOfServiceSettings,
  ourTaintAddedAt,
  outOfServicePatch,
} from './out-of-service.js';
