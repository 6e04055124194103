export { backoffDelay, watchTimeoutSeconds } from './backoff.js';
export { guardUnhandledRxjsErrors, isolateConsumers } from './isolate.js';
export { createWatchMetrics, type WatchMetrics } from './metrics.js';
export { type ReadPacerOptions, WatchReadPacer } from './read-pacer.js';
export {
  POD_NODE_INDEX,
  Reflector,
  type ReflectorOptions,
  type ResourceWatchDeps,
  watchNodeLeases,
  watchNodes,
  watchPods,
} from './reflector.js';
export { ServerRewindSignal } from './rewind.js';
export {
  isHealthy,
  type WatchBlindness,
  type WatchEventCounts,
  WatchStatus,
  watchBlindness,
} from './status.js';
export { type IndexFunc, Store, type StoreOptions } from './store.js';
export { basicMeta, stripLease, stripNode, stripNodeWithKubelet, stripPod, stripToMeta } from './strip.js';
export {
  type KubeTransportOptions,
  kubeTransport,
  leaseTarget,
  NODE_LEASE_NAMESPACE,
  nodeTarget,
  podTarget,
  responseChunks,
  type WatchTarget,
} from './transport.js';
export * from './types.js';
export { classifyError, WatchError, type WatchOptions, watch } from './watcher.js';
