import { readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { loadAllYaml } from '@kubernetes/client-node';
import { loadAll } from 'js-yaml';
import { type KubeClient, PatchType } from '../../src/kube/client.js';

/** One Kubernetes object as read from a manifest. */
export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> } & Record<string, unknown>;
  [key: string]: unknown;
}

/**
 * Plain YAML documents (js-yaml), empty ones dropped: what kubectl would send. Not
 * @kubernetes/client-node's loadAllYaml, which maps fields to its model classes (NetworkPolicy's
 * `from` becomes `_from`, which the API server refuses).
 */
export function parseManifests(text: string): Manifest[] {
  return (loadAll(text) as (Manifest | null | undefined)[]).filter((o): o is Manifest => o != null);
}

interface KustomizeLabels {
  pairs?: Record<string, string>;
  includeSelectors?: boolean;
  includeTemplates?: boolean;
}
interface KustomizeImage {
  name: string;
  newName?: string;
  newTag?: string;
  digest?: string;
}

const SUPPORTED_KUSTOMIZATION_KEYS = new Set(['apiVersion', 'kind', 'resources', 'labels', 'images']);

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function asManifest(doc: unknown, where: string): Manifest {
  if (
    !isRecord(doc) ||
    typeof doc.apiVersion !== 'string' ||
    typeof doc.kind !== 'string' ||
    !isRecord(doc.metadata) ||
    typeof doc.metadata.name !== 'string'
  ) {
    throw new Error(`${where}: not a Kubernetes object (apiVersion, kind, metadata.name)`);
  }
  return doc as unknown as Manifest;
}

function setImage(spec: unknown, images: readonly KustomizeImage[]): void {
  if (!isRecord(spec)) return;
  for (const list of [spec.containers, spec.initContainers]) {
    if (!Array.isArray(list)) continue;
    for (const c of list) {
      if (!isRecord(c) || typeof c.image !== 'string') continue;
      const m = /^([^@:]+(?::\d+\/[^@:]+)?)(?::([^@]+))?(?:@(.+))?$/.exec(c.image);
      const name = m?.[1] ?? c.image;
      const img = images.find((i) => i.name === name);
      if (!img) continue;
      const base = img.newName ?? name;
      if (img.digest) c.image = `${base}@${img.digest}`;
      else if (img.newTag) c.image = `${base}:${img.newTag}`;
      else c.image = `${base}${m?.[2] ? `:${m[2]}` : ''}${m?.[3] ? `@${m[3]}` : ''}`;
    }
  }
}

/**
 * Renders a kustomize base the way `kubectl kustomize` does, for the features such a base uses:
 * the `resources` files in order, `labels` (metadata.labels only) and `images`. Anything else
 * (namespace, patches, components, name prefixes, directories as resources, selector or template
 * labels) throws, so a caller never silently applies something other than what kustomize renders.
 */
export function renderKustomizeBase(dir: string): Manifest[] {
  const kFile = path.join(dir, 'kustomization.yaml');
  const docs = (loadAllYaml(readFileSync(kFile, 'utf8')) as unknown[]).filter(isRecord);
  if (docs.length !== 1) throw new Error(`${kFile}: expected one document`);
  const k = docs[0]!;
  for (const key of Object.keys(k)) {
    if (!SUPPORTED_KUSTOMIZATION_KEYS.has(key)) throw new Error(`${kFile}: "${key}" is not supported here`);
  }
  const labels: Record<string, string> = {};
  for (const l of (k.labels ?? []) as KustomizeLabels[]) {
    if (l.includeSelectors || l.includeTemplates) {
      throw new Error(`${kFile}: labels with includeSelectors/includeTemplates are not supported here`);
    }
    Object.assign(labels, l.pairs ?? {});
  }
  const images = (k.images ?? []) as KustomizeImage[];
  const out: Manifest[] = [];
  for (const r of (k.resources ?? []) as string[]) {
    const file = path.resolve(dir, r);
    if (!statSync(file).isFile()) throw new Error(`${kFile}: resource ${r} is not a file`);
    const objects = (loadAllYaml(readFileSync(file, 'utf8')) as unknown[])
      .filter((d) => d !== null && d !== undefined)
      .map((d) => asManifest(d, file));
    for (const o of objects) {
      if (Object.keys(labels).length > 0) o.metadata.labels = { ...(o.metadata.labels ?? {}), ...labels };
      const spec = o.spec;
      if (isRecord(spec)) {
        setImage(spec, images);
        if (isRecord(spec.template)) setImage(spec.template.spec, images);
        const job = spec.jobTemplate;
        if (isRecord(job) && isRecord(job.spec) && isRecord(job.spec.template))
          setImage(job.spec.template.spec, images);
      }
      out.push(o);
    }
  }
  return out;
}

interface ApiResource {
  name: string;
  kind: string;
  namespaced: boolean;
}

/** Resolves apiVersion + kind to REST paths through the API server's discovery documents. */
export class ApiResolver {
  private readonly lists = new Map<string, Promise<ApiResource[]>>();

  constructor(private readonly client: KubeClient) {}

  private static base(apiVersion: string): string {
    return apiVersion.includes('/') ? `/apis/${apiVersion}` : `/api/${apiVersion}`;
  }

  /** The collection resource (no subresources) serving this kind. */
  async resource(apiVersion: string, kind: string): Promise<ApiResource> {
    const base = ApiResolver.base(apiVersion);
    let list = this.lists.get(base);
    if (!list) {
      list = this.client
        .request<{ resources: ApiResource[] }>({ method: 'GET', path: base })
        .then((l) => l.resources.filter((r) => !r.name.includes('/')));
      this.lists.set(base, list);
    }
    const found = (await list).find((r) => r.kind === kind);
    if (!found) throw new Error(`the API server serves no ${kind} in ${apiVersion}`);
    return found;
  }

  /** Path of the object itself; a namespaced kind without metadata.namespace is an error. */
  async objectPath(o: Pick<Manifest, 'apiVersion' | 'kind' | 'metadata'>): Promise<string> {
    const r = await this.resource(o.apiVersion, o.kind);
    const ns = o.metadata.namespace;
    if (r.namespaced && !ns)
      throw new Error(`${o.kind} ${o.metadata.name} is namespaced but names no namespace`);
    if (!r.namespaced && ns)
      throw new Error(`${o.kind} ${o.metadata.name} is cluster-scoped but names a namespace`);
    const scope = r.namespaced ? `/namespaces/${encodeURIComponent(ns!)}` : '';
    return `${ApiResolver.base(o.apiVersion)}${scope}/${r.name}/${encodeURIComponent(o.metadata.name)}`;
  }
}

/**
 * Server-side apply (PATCH application/apply-patch+yaml, force=true) of one object; resolves with
 * what the server stored (with `dryRun`, `?dryRun=All`: what it would store, after admission and
 * validation, storing nothing). JSON is YAML, so the object is sent as JSON.
 */
export async function serverSideApply(
  client: KubeClient,
  resolver: ApiResolver,
  o: Manifest,
  fieldManager: string,
  opts: { dryRun?: boolean } = {},
): Promise<Manifest> {
  return await client.request<Manifest>({
    method: 'PATCH',
    path: await resolver.objectPath(o),
    query: { fieldManager, force: true, ...(opts.dryRun ? { dryRun: 'All' } : {}) },
    contentType: PatchType.apply,
    body: JSON.stringify(o),
  });
}
