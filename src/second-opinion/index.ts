export * from './kubelet-probe.js';
export * from './verdict.js';
