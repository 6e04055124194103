import { describe, expect, it } from 'vitest';
import { isMatchAll, labelKeyProblem, labelValueProblem } from './selector.js';

const PREFIX = 'prefix must be a DNS subdomain (lowercase, at most 253 characters)';
const NAME = 'name must be at most 63 characters of [A-Za-z0-9-_.], starting and ending with an alphanumeric';
const VALUE =
  'must be empty or at most 63 characters of [A-Za-z0-9-_.], starting and ending with an alphanumeric';

describe('labelKeyProblem (Kubernetes label key syntax)', () => {
  it.each([
    'a',
    'pool',
    'A_b-c.d9',
    'a'.repeat(63),
    'a/x',
    'a.b/x',
    'node.kubernetes.io/exclude-disruption',
    `${'a'.repeat(253)}/x`,
  ])('accepts %s', (key) => {
    expect(labelKeyProblem(key)).toBeUndefined();
  });

  it.each([
    ['', 'must not be empty'],
    ['/a', PREFIX],
    ['Example.com/a', PREFIX],
    ['-a.com/a', PREFIX],
    ['a.com-/a', PREFIX],
    [`${'a'.repeat(254)}/x`, PREFIX],
    ['a/', NAME],
    ['-a', NAME],
    ['a-', NAME],
    ['a b', NAME],
    ['a'.repeat(64), NAME],
    [`x/${'a'.repeat(64)}`, NAME],
  ])('rejects %j', (key, reason) => {
    expect(labelKeyProblem(key)).toBe(reason);
  });
});

describe('labelValueProblem (Kubernetes label value syntax)', () => {
  it.each(['', 'a', 'gpu-a100', 'A.b_c', 'a'.repeat(63)])('accepts %j', (value) => {
    expect(labelValueProblem(value)).toBeUndefined();
  });

  it.each(['-a', 'a-', 'a/b', 'a'.repeat(64)])('rejects %j', (value) => {
    expect(labelValueProblem(value)).toBe(VALUE);
  });
});

describe('isMatchAll', () => {
  it('is true only without any requirement', () => {
    expect(isMatchAll({})).toBe(true);
    expect(isMatchAll({ matchLabels: {}, matchExpressions: [] })).toBe(true);
    expect(isMatchAll({ matchLabels: { pool: 'gpu' } })).toBe(false);
    expect(isMatchAll({ matchExpressions: [{ key: 'pool', operator: 'Exists' }] })).toBe(false);
  });
});
