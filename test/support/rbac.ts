import { writeFileSync } from 'node:fs';
import type { KubeClient } from '../../src/kube/client.js';
import type { LocalControlPlane } from '../../src/localcluster/control-plane.js';

/** The user name a ServiceAccount token authenticates as. */
export const serviceAccountUser = (namespace: string, name: string): string =>
  `system:serviceaccount:${namespace}:${name}`;

/** The groups every ServiceAccount token carries. */
export const serviceAccountGroups = (namespace: string): string[] => [
  'system:serviceaccounts',
  `system:serviceaccounts:${namespace}`,
  'system:authenticated',
];

/** A bound token for a ServiceAccount through TokenRequest (POST .../serviceaccounts/<name>/token). */
export async function requestServiceAccountToken(
  admin: KubeClient,
  namespace: string,
  name: string,
  expirationSeconds = 3600,
): Promise<string> {
  const tr = await admin.request<{ status: { token: string } }>({
    method: 'POST',
    path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/serviceaccounts/${encodeURIComponent(name)}/token`,
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds } },
  });
  return tr.status.token;
}

/** Writes a kubeconfig file for `token` against the local control plane (mode 0600). */
export function writeTokenKubeconfig(cp: LocalControlPlane, token: string, file: string, user: string): void {
  writeFileSync(file, cp.kubeConfigForToken(token, user).exportConfig(), { mode: 0o600 });
}

export interface ResourceRule {
  verbs: string[];
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
}
export interface NonResourceRule {
  verbs: string[];
  nonResourceURLs?: string[];
}
export interface RulesReview {
  resourceRules: ResourceRule[];
  nonResourceRules: NonResourceRule[];
  incomplete: boolean;
  evaluationError?: string;
}

/** SelfSubjectRulesReview: what the client's own identity may do in `namespace`. */
export async function selfSubjectRules(client: KubeClient, namespace: string): Promise<RulesReview> {
  const r = await client.request<{ status: RulesReview }>({
    method: 'POST',
    path: '/apis/authorization.k8s.io/v1/selfsubjectrulesreviews',
    body: {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SelfSubjectRulesReview',
      spec: { namespace },
    },
  });
  return {
    resourceRules: r.status.resourceRules ?? [],
    nonResourceRules: r.status.nonResourceRules ?? [],
    incomplete: r.status.incomplete,
    evaluationError: r.status.evaluationError,
  };
}

/**
 * Rules flattened to one string per permission: `<group>/<resource>:<verb>` (group "core" for the
 * legacy group), with `[name]` appended when the rule is limited to resource names.
 */
export function expandResourceRules(rules: readonly ResourceRule[]): Set<string> {
  const out = new Set<string>();
  for (const r of rules) {
    for (const g of r.apiGroups ?? ['']) {
      for (const res of r.resources ?? []) {
        for (const v of r.verbs) {
          const base = `${g === '' ? 'core' : g}/${res}:${v}`;
          if (r.resourceNames?.length) for (const n of r.resourceNames) out.add(`${base}[${n}]`);
          else out.add(base);
        }
      }
    }
  }
  return out;
}

export function expandNonResourceRules(rules: readonly NonResourceRule[]): Set<string> {
  const out = new Set<string>();
  for (const r of rules)
    for (const u of r.nonResourceURLs ?? []) for (const v of r.verbs) out.add(`${u}:${v}`);
  return out;
}

export interface AccessAttributes {
  verb: string;
  group?: string;
  resource: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}

/** SubjectAccessReview (as admin): may `user` in `groups` do this? */
export async function subjectAccessReview(
  admin: KubeClient,
  user: string,
  groups: string[],
  attrs: AccessAttributes,
): Promise<{ allowed: boolean; reason?: string }> {
  const r = await admin.request<{ status: { allowed: boolean; reason?: string } }>({
    method: 'POST',
    path: '/apis/authorization.k8s.io/v1/subjectaccessreviews',
    body: {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      spec: { user, groups, resourceAttributes: { group: '', ...attrs } },
    },
  });
  return r.status;
}

export interface Sample {
  labels: Record<string, string>;
  value: number;
}

/** Every sample of one metric in a Prometheus text exposition, with its labels. */
export function metricSamples(text: string, name: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const labels: Record<string, string> = {};
    for (const p of (m[3] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[p[1]!] = p[2]!;
    out.push({ labels, value: Number(m[4]) });
  }
  return out;
}

/** Runs `fn` over `items` with at most `limit` in flight; results in input order. */
export async function mapLimited<T, R>(
  items: readonly T[],
  limit: number,
  fn: (t: T) => Promise<R>,
): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const workers = Array.from({ length: Math.min(limit, items.length) }, async () => {
    for (let i = next++; i < items.length; i = next++) out[i] = await fn(items[i]!);
  });
  await Promise.all(workers);
  return out;
}
