import { describe, expect, it } from 'vitest';
import {
  computeZoneState,
  isExcludedFromDisruption,
  LABEL_EXCLUDE_DISRUPTION,
  LABEL_FAILURE_DOMAIN_BETA_REGION,
  LABEL_FAILURE_DOMAIN_BETA_ZONE,
  LABEL_TOPOLOGY_REGION,
  LABEL_TOPOLOGY_ZONE,
  zoneDisplay,
  zoneKeyOf,
  zoneRate,
} from './zones.js';

const rates = { nodeEvictionRate: 0.1, secondaryNodeEvictionRate: 0.01, largeClusterSizeThreshold: 50 };

describe('label keys', () => {
  it('are exactly upstream', () => {
    expect({
      LABEL_TOPOLOGY_REGION,
      LABEL_TOPOLOGY_ZONE,
      LABEL_FAILURE_DOMAIN_BETA_REGION,
      LABEL_FAILURE_DOMAIN_BETA_ZONE,
      LABEL_EXCLUDE_DISRUPTION,
    }).toEqual({
      LABEL_TOPOLOGY_REGION: 'topology.kubernetes.io/region',
      LABEL_TOPOLOGY_ZONE: 'topology.kubernetes.io/zone',
      LABEL_FAILURE_DOMAIN_BETA_REGION: 'failure-domain.beta.kubernetes.io/region',
      LABEL_FAILURE_DOMAIN_BETA_ZONE: 'failure-domain.beta.kubernetes.io/zone',
      LABEL_EXCLUDE_DISRUPTION: 'node.kubernetes.io/exclude-disruption',
    });
  });
});

describe('zoneKeyOf (upstream GetZoneKey)', () => {
  it('joins region and zone with ":\\0:"', () => {
    expect(zoneKeyOf({ 'topology.kubernetes.io/region': 'r1', 'topology.kubernetes.io/zone': 'a' })).toBe(
      'r1:\u0000:a',
    );
  });
  it('prefers the legacy labels when present, even when empty', () => {
    const labels = {
      'topology.kubernetes.io/region': 'r1',
      'topology.kubernetes.io/zone': 'a',
      'failure-domain.beta.kubernetes.io/region': 'old',
      'failure-domain.beta.kubernetes.io/zone': '',
    };
    expect(zoneKeyOf(labels)).toBe('old:\u0000:');
  });
  it('mixes legacy region with new zone label', () => {
    expect(
      zoneKeyOf({ 'failure-domain.beta.kubernetes.io/region': 'old', 'topology.kubernetes.io/zone': 'b' }),
    ).toBe('old:\u0000:b');
  });
  it('gives the empty zone when neither label is set', () => {
    expect(zoneKeyOf({})).toBe('');
    expect(zoneKeyOf(undefined)).toBe('');
    expect(zoneKeyOf({ 'topology.kubernetes.io/zone': '' })).toBe('');
  });
  it('keeps a zone without region', () => {
    expect(zoneKeyOf({ 'topology.kubernetes.io/zone': 'a' })).toBe(':\u0000:a');
  });
  it('displays keys readably', () => {
    expect(zoneDisplay('r1:\u0000:a')).toBe('r1/a');
    expect(zoneDisplay('')).toBe('<none>');
  });
  it('detects the exclude-disruption label by presence', () => {
    expect(isExcludedFromDisruption({ 'node.kubernetes.io/exclude-disruption': '' })).toBe(true);
    expect(isExcludedFromDisruption({ other: 'x' })).toBe(false);
    expect(isExcludedFromDisruption(undefined)).toBe(false);
  });
});

describe('computeZoneState (upstream ComputeZoneState)', () => {
  it.each([
    [0, 1, 'FullDisruption'],
    [0, 5, 'FullDisruption'],
    [5, 0, 'Normal'],
    [0, 0, 'Normal'],
    // notReady must exceed 2 for PartialDisruption
    [1, 2, 'Normal'],
    [2, 3, 'PartialDisruption'], // 3/5 = 0.6 >= 0.55
    [9, 11, 'PartialDisruption'], // 0.55 exactly
    [10, 10, 'Normal'], // 0.5
    [1, 3, 'PartialDisruption'],
  ])('ready=%d notReady=%d -> %s', (ready, notReady, state) => {
    expect(computeZoneState(ready, notReady, 0.55)).toBe(state);
  });
});

describe('zoneRate (upstream setLimiterInZone)', () => {
  it('uses the primary rate for Initial, Normal and FullDisruption', () => {
    expect(zoneRate('Initial', 3, rates)).toBe(0.1);
    expect(zoneRate('Normal', 3, rates)).toBe(0.1);
    expect(zoneRate('FullDisruption', 3, rates)).toBe(0.1);
  });
  it('uses the secondary rate only for zones larger than the threshold', () => {
    expect(zoneRate('PartialDisruption', 51, rates)).toBe(0.01);
    expect(zoneRate('PartialDisruption', 50, rates)).toBe(0);
    expect(zoneRate('PartialDisruption', 5, rates)).toBe(0);
  });
});
