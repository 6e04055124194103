/**
 * Zones and zone states, as kube-controller-manager's node lifecycle controller defines them.
 */

export const LABEL_TOPOLOGY_REGION = 'topology.kubernetes.io/region';
export const LABEL_TOPOLOGY_ZONE = 'topology.kubernetes.io/zone';
export const LABEL_FAILURE_DOMAIN_BETA_REGION = 'failure-domain.beta.kubernetes.io/region';
export const LABEL_FAILURE_DOMAIN_BETA_ZONE = 'failure-domain.beta.kubernetes.io/zone';
/** Nodes carrying this label (any value) are left out of zone statistics, but still tainted. */
export const LABEL_EXCLUDE_DISRUPTION = 'node.kubernetes.io/exclude-disruption';

/**
 * The zone key of a node, identical to upstream's `GetZoneKey`: the legacy failure-domain labels
 * win whenever they are PRESENT (even with an empty value); `region + ":\0:" + zone`; the empty
 * string when both region and zone are empty. The same string is upstream's metric label value.
 */
export function zoneKeyOf(labels: Readonly<Record<string, string>> | undefined | null): string {
  if (!labels) return '';
  const zone = Object.hasOwn(labels, LABEL_FAILURE_DOMAIN_BETA_ZONE)
    ? labels[LABEL_FAILURE_DOMAIN_BETA_ZONE]
    : labels[LABEL_TOPOLOGY_ZONE];
  const region = Object.hasOwn(labels, LABEL_FAILURE_DOMAIN_BETA_REGION)
    ? labels[LABEL_FAILURE_DOMAIN_BETA_REGION]
    : labels[LABEL_TOPOLOGY_REGION];
  const z = typeof zone === 'string' ? zone : '';
  const r = typeof region === 'string' ? region : '';
  if (r === '' && z === '') return '';
  return `${r}:\u0000:${z}`;
}

/** A zone key made readable for logs (`region/zone`, or `<none>` for the empty zone). */
export function zoneDisplay(zone: string): string {
  if (zone === '') return '<none>';
  return zone.replace(':\u0000:', '/');
}

/** Whether the node is left out of zone statistics (upstream: label present, any value). */
export function isExcludedFromDisruption(
  labels: Readonly<Record<string, string>> | undefined | null,
): boolean {
  return !!labels && Object.hasOwn(labels, LABEL_EXCLUDE_DISRUPTION);
}

export type ZoneState = 'Initial' | 'Normal' | 'PartialDisruption' | 'FullDisruption';
export const ZONE_STATES: readonly ZoneState[] = ['Initial', 'Normal', 'PartialDisruption', 'FullDisruption'];

/**
 * Upstream's ComputeZoneState over counted (non-excluded) nodes: a node is "not ready" unless its
 * Ready condition is True (False, Unknown and a missing condition all count as not ready).
 */
export function computeZoneState(ready: number, notReady: number, unhealthyZoneThreshold: number): ZoneState {
  if (ready === 0 && notReady > 0) return 'FullDisruption';
  if (notReady > 2 && notReady / (notReady + ready) >= unhealthyZoneThreshold) return 'PartialDisruption';
  return 'Normal';
}

export interface RateSettings {
  /** --node-eviction-rate (per second). */
  nodeEvictionRate: number;
  /** --secondary-node-eviction-rate (per second). */
  secondaryNodeEvictionRate: number;
  /** --large-cluster-size-threshold (nodes). */
  largeClusterSizeThreshold: number;
}

/**
 * NoExecute taints per second allowed in a zone (upstream's setLimiterInZone): Initial and Normal
 * use the primary rate; PartialDisruption the secondary rate when the zone has MORE than
 * largeClusterSizeThreshold counted nodes, else 0; FullDisruption the primary rate (only reached
 * while another zone is not fully disrupted: master disruption is handled by the caller).
 */
export function zoneRate(state: ZoneState, zoneSize: number, s: RateSettings): number {
  switch (state) {
    case 'Initial':
    case 'Normal':
    case 'FullDisruption':
      return s.nodeEvictionRate;
    case 'PartialDisruption':
      return zoneSize > s.largeClusterSizeThreshold ? s.secondaryNodeEvictionRate : 0;
  }
}
