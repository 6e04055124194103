/** The pure health decision core: observations + monotonic now -> health, deadlines, decisions. */
export * from './conditions.js';
export * from './deadlines.js';
export * from './events.js';
export * from './pods.js';
export * from './reasons.js';
export * from './taints.js';
export * from './time.js';
export * from './tracker.js';
export type * from './types.js';
