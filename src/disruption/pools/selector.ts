/**
 * Kubernetes label selectors (metav1.LabelSelector): `matchLabels` and `matchExpressions` are
 * ANDed; an empty selector `{}` matches every node.
 */

export type SelectorOperator = 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
export const SELECTOR_OPERATORS: readonly SelectorOperator[] = ['In', 'NotIn', 'Exists', 'DoesNotExist'];

export interface LabelSelectorRequirement {
  key: string;
  operator: SelectorOperator;
  values?: string[];
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

export type Labels = Readonly<Record<string, string>>;

const has = (labels: Labels, key: string): boolean => Object.hasOwn(labels, key);

function requirementMatches(r: LabelSelectorRequirement, labels: Labels): boolean {
  switch (r.operator) {
    case 'In':
      return has(labels, r.key) && (r.values ?? []).includes(labels[r.key]!);
    case 'NotIn':
      return !has(labels, r.key) || !(r.values ?? []).includes(labels[r.key]!);
    case 'Exists':
      return has(labels, r.key);
    case 'DoesNotExist':
      return !has(labels, r.key);
  }
}

/** Whether `labels` (a node's) satisfy the selector. */
export function matchesSelector(selector: LabelSelector, labels: Labels | undefined): boolean {
  const l = labels ?? {};
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) {
    if (!has(l, k) || l[k] !== v) return false;
  }
  for (const r of selector.matchExpressions ?? []) if (!requirementMatches(r, l)) return false;
  return true;
}

/** Whether the selector matches every node (no requirement at all). */
export function isMatchAll(selector: LabelSelector): boolean {
  return (
    Object.keys(selector.matchLabels ?? {}).length === 0 && (selector.matchExpressions ?? []).length === 0
  );
}

const NAME_RE = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const DNS_SUBDOMAIN_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Label key syntax (`[prefix/]name`); returns a reason or undefined when valid. */
export function labelKeyProblem(key: string): string | undefined {
  if (key === '') return 'must not be empty';
  const slash = key.indexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (
    prefix !== undefined &&
    (prefix.length === 0 || prefix.length > 253 || !DNS_SUBDOMAIN_RE.test(prefix))
  ) {
    return 'prefix must be a DNS subdomain (lowercase, at most 253 characters)';
  }
  if (name.length === 0 || name.length > 63 || !NAME_RE.test(name)) {
    return 'name must be at most 63 characters of [A-Za-z0-9-_.], starting and ending with an alphanumeric';
  }
  return undefined;
}

/** Label value syntax; returns a reason or undefined when valid. */
export function labelValueProblem(value: string): string | undefined {
  if (value === '') return undefined;
  if (value.length > 63 || !NAME_RE.test(value)) {
    return 'must be empty or at most 63 characters of [A-Za-z0-9-_.], starting and ending with an alphanumeric';
  }
  return undefined;
}
