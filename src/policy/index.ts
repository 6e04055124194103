/** PURE: what the controller writes for a lost or recovered node, one policy chosen at start-up. */

export { type CompanionPolicyOptions, companionPolicy } from './companion.js';
export type * from './types.js';
export { type UpstreamPolicyOptions, upstreamPolicy } from './upstream.js';
