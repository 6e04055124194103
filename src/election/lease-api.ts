import { KubeApiError, type KubeClient, PatchType, paths } from '../kube/client.js';
import type { RequestPriority } from '../kube/rate-limit.js';
import type { Lease, List } from '../kube/types.js';

/** The part of KubeClient the election uses (tests pass a fake). */
export type KubeRequester = Pick<KubeClient, 'request'>;

export interface CallOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
}

/** Lease CRUD in one namespace, with optimistic concurrency (resourceVersion preconditions). */
export class LeaseApi {
  constructor(
    private readonly client: KubeRequester,
    readonly namespace: string,
    /** Its requests' lane in the client's rate limiter (the leader's lock: 'critical'). */
    private readonly priority: RequestPriority = 'normal',
  ) {}

  /** The lease, or undefined when it does not exist. */
  async get(name: string, o: CallOptions = {}): Promise<Lease | undefined> {
    try {
      return await this.client.request<Lease>({
        method: 'GET',
        path: paths.lease(this.namespace, name),
        ...o,
        priority: this.priority,
      });
    } catch (err) {
      if (err instanceof KubeApiError && err.isNotFound) return undefined;
      throw err;
    }
  }

  async list(labelSelector: string, o: CallOptions = {}): Promise<List<Lease>> {
    return await this.client.request<List<Lease>>({
      method: 'GET',
      path: paths.leases(this.namespace),
      query: { labelSelector },
      ...o,
      priority: this.priority,
    });
  }

  /** Creates; rejects with 409 AlreadyExists when someone was faster. */
  async create(lease: Lease, o: CallOptions = {}): Promise<Lease> {
    const body: Lease = {
      ...lease,
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { ...lease.metadata, namespace: this.namespace },
    };
    return await this.client.request<Lease>({
      method: 'POST',
      path: paths.leases(this.namespace),
      body,
      ...o,
      priority: this.priority,
    });
  }

  /**
   * Replaces the lease. `lease.metadata.resourceVersion` must be set: the server answers 409
   * Conflict when the stored object changed since, which is how a lost race shows.
   */
  async update(lease: Lease, o: CallOptions = {}): Promise<Lease> {
    if (!lease.metadata.resourceVersion) throw new Error('lease update without resourceVersion');
    const body: Lease = { ...lease, apiVersion: 'coordination.k8s.io/v1', kind: 'Lease' };
    return await this.client.request<Lease>({
      method: 'PUT',
      path: paths.lease(this.namespace, lease.metadata.name),
      body,
      ...o,
      priority: this.priority,
    });
  }

  /** Merge-patches labels, guarded by resourceVersion (409 when it changed). */
  async patchLabels(
    name: string,
    resourceVersion: string,
    labels: Record<string, string>,
    o: CallOptions = {},
  ): Promise<Lease> {
    return await this.client.request<Lease>({
      method: 'PATCH',
      path: paths.lease(this.namespace, name),
      contentType: PatchType.merge,
      body: { metadata: { resourceVersion, labels } },
      ...o,
      priority: this.priority,
    });
  }

  /**
   * Deletes only if the stored object still has this resourceVersion. Resolves false when it is
   * gone already (404) or changed meanwhile (409).
   */
  async deleteIfUnchanged(name: string, resourceVersion: string, o: CallOptions = {}): Promise<boolean> {
    try {
      await this.client.request({
        method: 'DELETE',
        path: paths.lease(this.namespace, name),
        body: { apiVersion: 'v1', kind: 'DeleteOptions', preconditions: { resourceVersion } },
        ...o,
        priority: this.priority,
      });
      return true;
    } catch (err) {
      if (err instanceof KubeApiError && (err.isNotFound || err.isConflict)) return false;
      throw err;
    }
  }
}

export function isConflict(err: unknown): boolean {
  return err instanceof KubeApiError && err.isConflict;
}
