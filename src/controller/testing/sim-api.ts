/**
 * TEST SUPPORT ONLY (used by src/controller/*.test.ts): an in-memory kube-apiserver holding Nodes
 * and node Leases, for running the node-lifecycle controller on the REAL watch layer, tracker and
 * writer in virtual time (run it under vi.useFakeTimers). It serves list + watch (resumed from a
 * resourceVersion, like the real server), quorum GETs of leases, pod lists and the controller's
 * patches; simulated kubelets renew their leases on timers.
 *
 * The controller's network path can be cut (open watches break), refuse new connections, or hang
 * (nothing answers, open watches deliver nothing until it recovers). Kubelets have their own path:
 * a cut between the controller and the server does not stop them; a server outage can.
 */

import { KubeApiError, KubeFencedError, type KubeRequest, KubeTransportError } from '../../kube/client.js';
import type { Lease, Node, NodeCondition, Pod, Taint } from '../../kube/types.js';
import { Observable, type Subscriber } from '../../rx/index.js';
import { listPage } from '../../watch/testing.js';
import type { ListRequest, WatchRequest, WatchTransport } from '../../watch/types.js';

type Resource = 'leases' | 'nodes';

interface Change {
  rv: number;
  resource: Resource;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: Lease | Node;
}

interface Stream {
  resource: Resource;
  sub: Subscriber<string>;
  /** Lines held back while the path hangs (a stalled connection delivers them late, if ever). */
  held: string[];
}

/** How the controller's requests fare. */
export type PathState = 'up' | 'refuse' | 'hang';

const LEASE_PATH = /^\/apis\/coordination\.k8s\.io\/v1\/namespaces\/kube-node-lease\/leases\/([^/]+)$/;
const NODE_PATH = /^\/api\/v1\/nodes\/([^/]+)(\/status)?$/;
const POD_PATH = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)(?:\/(status|eviction))?$/;

function clone<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

function microTime(wallMs: number): string {
  return `${new Date(wallMs).toISOString().slice(0, 23)}000Z`;
}

function apiError(status: number, reason: string, what: string): KubeApiError {
  return new KubeApiError(status, { kind: 'Status', reason, code: status }, {}, what);
}

/**
 * A request held on the wire: resolves when `onWake`'s callback is called (never without one),
 * rejects as the network would at its timeout or when the caller aborts.
 */
function held(
  what: string,
  signal: AbortSignal | undefined,
  timeoutMs: number | undefined,
  onWake?: (wake: () => void) => void,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => reject(new KubeTransportError(`${what}: timed out`, 'TIMEOUT')), timeoutMs);
    onWake?.(() => {
      clearTimeout(timer);
      resolve();
    });
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(new KubeTransportError(`${what}: aborted`, 'ABORTED'));
      },
      { once: true },
    );
  });
}

export class SimApiServer {
  readonly leases = new Map<string, Lease>();
  readonly nodes = new Map<string, Node>();
  /** Every PATCH the controller sent that was applied: [monotonic time, path]. */
  readonly patches: Array<{ at: number; path: string; body: unknown }> = [];
  /** Pods (not watched: listed by node, patched, evicted), by namespace/name. */
  readonly pods = new Map<string, Pod>();
  /** Events posted (monotonic time, body), in order. */
  readonly events: Array<{ at: number; body: unknown }> = [];
  /** Pods evicted (monotonic time, namespace/name), in order. */
  readonly evictions: Array<{ at: number; pod: string }> = [];
  /** VolumeAttachments (listed, not watched): the node each is on. */
  readonly volumeAttachments: Array<{ metadata: { name: string }; spec: { nodeName: string } }> = [];
  /** The controller may not list VolumeAttachments (403), as an install without that rule. */
  volumeAttachmentsForbidden = false;
  /** Pods whose eviction a PodDisruptionBudget refuses (429) while listed here. */
  readonly pdbBlocked = new Set<string>();
  private readonly history: Change[] = [];
  /** Watch opens waiting for a stalled resource to flow again. */
  private readonly stalledOpens: Array<() => void> = [];
  private readonly streams = new Set<Stream>();
  private readonly kubelets = new Map<string, ReturnType<typeof setInterval>>();
  private readonly lastRenewal = new Map<string, number>();
  private rv = 1;
  private path: PathState = 'up';
  /** False while the server itself is down for everyone (kubelets cannot renew either). */
  private kubeletsReach = true;
  private readonly watchDelayMs = new Map<Resource, number>();
  /** Leases whose watch events the controller does not get (held back) while set. */
  private readonly heldLeases = new Set<string>();
  /** Resources whose watches deliver nothing while set (requests and kubelets are not affected). */
  private readonly stalledWatches = new Set<Resource>();
  private readonly listDelayMs = new Map<Resource, number>();
  /** Requests waiting for the storage to come back (etcd down under a running API server). */
  private storageWaiters: Array<() => void> | undefined;
  /** While the storage is down, the controller's requests fail at once with a 500 instead of waiting. */
  private storageErrors = false;
  /**
   * Called with every request the controller's client sends (not watches), after the path let it
   * through and before it is answered: may wait, throw, or return a body to answer with instead.
   */
  onRequest: ((req: KubeRequest) => Promise<unknown> | unknown) | undefined;

  constructor(private readonly now: () => number = () => Date.now()) {}

  // ---------------------------------------------------------------- the cluster

  /** A Ready node with its lease, renewed by a kubelet every `renewMs` from now on. */
  addNode(name: string, renewMs = 10_000): void {
    const wall = Date.now();
    const node: Node = {
      metadata: { name, uid: `uid-${name}`, creationTimestamp: new Date(wall - 3_600_000).toISOString() },
      spec: {},
      status: {
        // Where its kubelet would answer (never connected to: tests probe through a fake).
        addresses: [{ type: 'InternalIP', address: '127.0.0.1' }],
        daemonEndpoints: { kubeletEndpoint: { Port: 20_000 + this.kubelets.size } },
        conditions: [
          {
            type: 'Ready',
            status: 'True',
            reason: 'KubeletReady',
            lastHeartbeatTime: new Date(wall).toISOString(),
            lastTransitionTime: new Date(wall - 3_600_000).toISOString(),
          },
        ],
      },
    };
    this.store('nodes', 'ADDED', node);
    const lease: Lease = {
      metadata: { name, namespace: 'kube-node-lease', uid: `uid-lease-${name}` },
      spec: { holderIdentity: name, leaseDurationSeconds: 40, renewTime: microTime(wall) },
    };
    this.store('leases', 'ADDED', lease);
    this.lastRenewal.set(name, this.now());
    this.kubelets.set(
      name,
      setInterval(() => this.renew(name), renewMs),
    );
  }

  /** A stopped kubelet runs again: it renews now and every `renewMs` from now on. */
  startKubelet(name: string, renewMs = 10_000): void {
    if (this.kubelets.has(name)) return;
    this.renew(name);
    this.kubelets.set(
      name,
      setInterval(() => this.renew(name), renewMs),
    );
  }

  /** The kubelet stops (the node dies). Returns the monotonic time of its last renewal. */
  stopKubelet(name: string): number {
    clearInterval(this.kubelets.get(name));
    this.kubelets.delete(name);
    return this.lastRenewal.get(name)!;
  }

  lastRenewalOf(name: string): number | undefined {
    return this.lastRenewal.get(name);
  }

  /** A lease renewal by the node's kubelet, if it can reach the server. */
  renew(name: string): void {
    if (!this.kubeletsReach) return;
    const lease = this.leases.get(name);
    if (!lease) return;
    this.store('leases', 'MODIFIED', { ...lease, spec: { ...lease.spec, renewTime: microTime(Date.now()) } });
    this.lastRenewal.set(name, this.now());
  }

  /** The kubelet posts a Ready condition with this status (a node status update, heartbeat included). */
  setReady(name: string, status: 'True' | 'False'): void {
    const node = this.nodes.get(name);
    if (!node) return;
    const wall = new Date(Date.now()).toISOString();
    const conditions = (node.status?.conditions ?? []).map((c) =>
      c.type === 'Ready'
        ? {
            ...c,
            status,
            reason: status === 'True' ? 'KubeletReady' : 'KubeletNotReady',
            lastHeartbeatTime: wall,
            lastTransitionTime: c.status === status ? c.lastTransitionTime : wall,
          }
        : c,
    );
    this.store('nodes', 'MODIFIED', { ...node, status: { ...node.status, conditions } });
  }

  /** A Lease in kube-node-lease with no Node (renewed by nobody). */
  addLeaseOnly(name: string): void {
    this.store('leases', 'ADDED', {
      metadata: { name, namespace: 'kube-node-lease', uid: `uid-lease-${name}` },
      spec: { holderIdentity: name, leaseDurationSeconds: 40, renewTime: microTime(Date.now()) },
    });
  }

  /** Someone else (the provider's controller, an operator) sets the node's spec.taints. */
  setTaints(name: string, taints: Taint[]): void {
    this.updateNode(name, (node) => ({ ...node, spec: { ...node.spec, taints } }));
  }

  /** Someone else writes the node (a stored MODIFIED, as the watch shows it). */
  updateNode(name: string, change: (node: Node) => Node): void {
    const node = this.nodes.get(name);
    if (node) this.store('nodes', 'MODIFIED', change(clone(node)));
  }

  /** The node as stored at resourceVersion `rv` (undefined: no such version). */
  nodeAt(name: string, rv: string | undefined): Node | undefined {
    const c = this.history.find(
      (x) => x.resource === 'nodes' && String(x.rv) === rv && x.object.metadata.name === name,
    );
    return c?.object as Node | undefined;
  }

  /** A running, Ready pod bound to `node` (`extra` merged into it). */
  addPod(namespace: string, name: string, node: string, extra: Partial<Pod> = {}): void {
    this.pods.set(`${namespace}/${name}`, {
      ...extra,
      metadata: {
        name,
        namespace,
        uid: `uid-${name}`,
        resourceVersion: String(++this.rv),
        ...extra.metadata,
      },
      spec: { nodeName: node, ...extra.spec },
      status: {
        phase: 'Running',
        conditions: [
          { type: 'Ready', status: 'True', lastTransitionTime: new Date(Date.now()).toISOString() },
        ],
        ...extra.status,
      },
    });
  }

  podReadyOf(key: string): string | undefined {
    return this.pods.get(key)?.status?.conditions?.find((c) => c.type === 'Ready')?.status;
  }

  readyOf(name: string): string | undefined {
    return this.nodes.get(name)?.status?.conditions?.find((c) => c.type === 'Ready')?.status;
  }

  /** When the controller first wrote Ready=Unknown for this node (monotonic), if it did. */
  markedUnknownAt(name: string): number | undefined {
    return this.patches.find(
      (p) =>
        p.path === `/api/v1/nodes/${name}/status` &&
        JSON.stringify(p.body).includes('"type":"Ready","status":"Unknown"'),
    )?.at;
  }

  stopAll(): void {
    for (const t of this.kubelets.values()) clearInterval(t);
    this.kubelets.clear();
    for (const s of this.streams) s.sub.complete();
    this.streams.clear();
  }

  // ---------------------------------------------------------------- faults

  /** Every open watch of the controller breaks (a load balancer or proxy cut the connections). */
  cut(): void {
    for (const s of [...this.streams]) {
      this.streams.delete(s);
      s.sub.error(new KubeTransportError('connection reset by the test', 'ECONNRESET'));
    }
  }

  /** The controller's path: 'refuse' fails new requests at once, 'hang' answers nothing. */
  setPath(state: PathState): void {
    this.path = state;
    if (state !== 'hang') {
      for (const s of this.streams) {
        if (this.stalledWatches.has(s.resource)) continue;
        for (const line of s.held.splice(0)) s.sub.next(line);
      }
    }
  }

  /** Watch events of `resource` reach the controller `ms` late (a busy server, or paced reads). */
  delayWatch(resource: Resource, ms: number): void {
    this.watchDelayMs.set(resource, ms);
  }

  /** While on, the controller's lease watch does not show this lease's changes (its kubelet renews). */
  holdLease(name: string, on: boolean): void {
    if (on) this.heldLeases.add(name);
    else this.heldLeases.delete(name);
  }

  /**
   * While on, the controller's watches of `resource` deliver nothing and new ones are not answered
   * (a stuck watch connection); its other requests and the kubelets are not affected. Held events
   * are delivered when it ends.
   */
  stallWatch(resource: Resource, on: boolean): void {
    if (on) {
      this.stalledWatches.add(resource);
      return;
    }
    this.stalledWatches.delete(resource);
    for (const s of this.streams) {
      if (s.resource === resource && this.path !== 'hang')
        for (const line of s.held.splice(0)) s.sub.next(line);
    }
    for (const wake of this.stalledOpens.splice(0)) wake();
  }

  /** The controller's lists of `resource` are answered `ms` late. */
  delayList(resource: Resource, ms: number): void {
    this.listDelayMs.set(resource, ms);
  }

  /** The server is down for everyone, kubelets included (the controller's path refuses too). */
  setServerDown(down: boolean): void {
    this.kubeletsReach = !down;
    this.setPath(down ? 'refuse' : 'up');
  }

  /** The server hangs for everyone: kubelets cannot renew, the controller's requests get no answer. */
  setServerHung(hung: boolean): void {
    this.kubeletsReach = !hung;
    this.setPath(hung ? 'hang' : 'up');
  }

  /**
   * The server's storage is down (etcd stopped, restored, stalled) while the server runs: nothing can
   * be written, so kubelets cannot renew; the controller's requests wait for it (or time out); its
   * watches stay open and reconnect (served from the watch cache) but carry nothing new.
   * `answer: 'error'`: the controller's requests are answered 500 at once instead.
   */
  setStorageDown(down: boolean, answer: 'wait' | 'error' = 'wait'): void {
    this.kubeletsReach = !down;
    this.storageErrors = down && answer === 'error';
    if (down) {
      this.storageWaiters ??= [];
      return;
    }
    const waiters = this.storageWaiters ?? [];
    this.storageWaiters = undefined;
    for (const wake of waiters) wake();
  }

  private async storageUp(what: string, signal?: AbortSignal, timeoutMs?: number): Promise<void> {
    const waiters = this.storageWaiters;
    // kube-apiserver's answer when etcd does not answer in time: 500 "etcdserver: request timed out".
    if (waiters && this.storageErrors) throw apiError(500, 'InternalError', what);
    if (waiters) await held(what, signal, timeoutMs, (wake) => waiters.push(wake));
  }

  // ---------------------------------------------------------------- storage

  private store(resource: Resource, type: Change['type'], object: Lease | Node): void {
    const rv = ++this.rv;
    const stored = clone(object);
    stored.metadata = { ...stored.metadata, resourceVersion: String(rv) };
    const map = (resource === 'leases' ? this.leases : this.nodes) as Map<string, Lease | Node>;
    if (type === 'DELETED') map.delete(stored.metadata.name);
    else map.set(stored.metadata.name, stored);
    const change: Change = { rv, resource, type, object: stored };
    this.history.push(change);
    const line = `${JSON.stringify({ type, object: stored })}\n`;
    const delay = this.watchDelayMs.get(resource) ?? 0;
    if (resource === 'leases' && this.heldLeases.has(stored.metadata.name)) return;
    for (const s of this.streams) {
      if (s.resource !== resource) continue;
      if (this.path === 'hang' || this.stalledWatches.has(resource)) s.held.push(line);
      else if (delay > 0) setTimeout(() => s.sub.next(line), delay);
      else s.sub.next(line);
    }
  }

  // ---------------------------------------------------------------- the controller's side

  /** Waits out the controller's path: resolves when it may proceed, rejects as the network would. */
  private async pass(what: string, signal?: AbortSignal, timeoutMs?: number): Promise<void> {
    if (this.path === 'up') return;
    if (this.path === 'refuse') throw new KubeTransportError(`${what}: connection refused`, 'ECONNREFUSED');
    await held(what, signal, timeoutMs);
  }

  /** The controller's watch transport for one resource. */
  transport(resource: Resource): WatchTransport {
    return {
      list: async (_req: ListRequest, signal: AbortSignal) => {
        await this.pass(`list ${resource}`, signal);
        const delay = this.listDelayMs.get(resource) ?? 0;
        if (delay > 0) await new Promise((r) => setTimeout(r, delay));
        const map = (resource === 'leases' ? this.leases : this.nodes) as Map<string, Lease | Node>;
        return listPage(clone([...map.values()]), String(this.rv));
      },
      watch: async (req: WatchRequest, signal: AbortSignal) => {
        await this.pass(`watch ${resource}`, signal);
        if (this.stalledWatches.has(resource)) {
          await new Promise<void>((resolve, reject) => {
            this.stalledOpens.push(resolve);
            signal.addEventListener(
              'abort',
              () => reject(new KubeTransportError('watch: aborted', 'ABORTED')),
              {
                once: true,
              },
            );
          });
        }
        const from = Number(req.resourceVersion);
        return new Observable<string>((sub) => {
          const missed = this.history.filter(
            (c) =>
              c.resource === resource &&
              c.rv > from &&
              !(resource === 'leases' && this.heldLeases.has(c.object.metadata.name)),
          );
          if (missed.length > 0) {
            sub.next(missed.map((c) => `${JSON.stringify({ type: c.type, object: c.object })}\n`).join(''));
          }
          const stream: Stream = { resource, sub, held: [] };
          this.streams.add(stream);
          return () => {
            this.streams.delete(stream);
          };
        });
      },
    };
  }

  /** The controller's KubeClient (the parts it uses: request). */
  readonly client = {
    request: async <T>(req: KubeRequest): Promise<T> => {
      const what = `${req.method} ${req.path}`;
      // As the real client: the caller's fence is asked right before the request leaves.
      const refused = req.fence?.();
      if (refused !== undefined) throw new KubeFencedError(what, refused);
      req.onSend?.();
      await this.pass(what, req.signal, req.timeoutMs ?? 30_000);
      await this.storageUp(what, req.signal, req.timeoutMs ?? 30_000);
      const instead = await this.onRequest?.(req);
      if (instead !== undefined) return instead as T;
      return this.handle(req) as T;
    },
  };

  private handle(req: KubeRequest): unknown {
    const what = `${req.method} ${req.path}`;
    const lease = LEASE_PATH.exec(req.path);
    if (lease && req.method === 'GET') {
      const l = this.leases.get(decodeURIComponent(lease[1]!));
      if (!l) throw apiError(404, 'NotFound', what);
      return { kind: 'Lease', apiVersion: 'coordination.k8s.io/v1', ...clone(l) };
    }
    if (req.path === '/api/v1/pods' && req.method === 'GET') {
      const node = /^spec\.nodeName=(.*)$/.exec(String(req.query?.fieldSelector ?? ''))?.[1];
      const items = [...this.pods.values()].filter((p) => node === undefined || p.spec?.nodeName === node);
      return { metadata: { resourceVersion: String(this.rv) }, items: clone(items) };
    }
    if (req.path === '/apis/storage.k8s.io/v1/volumeattachments' && req.method === 'GET') {
      if (this.volumeAttachmentsForbidden) throw apiError(403, 'Forbidden', what);
      return { metadata: { resourceVersion: String(this.rv) }, items: clone(this.volumeAttachments) };
    }
    const pod = POD_PATH.exec(req.path);
    if (pod) return this.podRequest(req, `${pod[1]}/${pod[2]}`, pod[3] as 'status' | 'eviction' | undefined);
    if (req.method === 'POST' && req.path.endsWith('/events')) {
      this.events.push({ at: this.now(), body: req.body });
      return {};
    }
    const node = NODE_PATH.exec(req.path);
    if (node) {
      const name = decodeURIComponent(node[1]!);
      const current = this.nodes.get(name);
      if (!current) throw apiError(404, 'NotFound', what);
      if (req.method === 'GET') return clone(current);
      if (req.method === 'PATCH') {
        const body = req.body as {
          metadata?: { resourceVersion?: string; annotations?: Record<string, string | null> };
          status?: { conditions?: NodeCondition[] };
          spec?: { taints?: Taint[] };
        };
        const rv = body.metadata?.resourceVersion;
        if (rv !== undefined && rv !== current.metadata.resourceVersion)
          throw apiError(409, 'Conflict', what);
        const next = clone(current);
        if (node[2]) {
          const conditions = next.status?.conditions ?? [];
          for (const c of body.status?.conditions ?? []) {
            const i = conditions.findIndex((x) => x.type === c.type);
            // Strategic merge: {type, $patch: delete} removes the entry with that merge key.
            if ((c as { $patch?: string }).$patch === 'delete') {
              if (i >= 0) conditions.splice(i, 1);
            } else if (i >= 0) conditions[i] = { ...conditions[i]!, ...c };
            else conditions.push(c);
          }
          next.status = { ...next.status, conditions };
        } else if (body.spec?.taints) {
          next.spec = { ...next.spec, taints: body.spec.taints };
        }
        if (!node[2] && body.metadata?.annotations) {
          // Merge patch of a map: null removes the key.
          const annotations = { ...next.metadata.annotations };
          for (const [k, v] of Object.entries(body.metadata.annotations)) {
            if (v === null) delete annotations[k];
            else annotations[k] = v;
          }
          next.metadata = { ...next.metadata, annotations };
        }
        this.patches.push({ at: this.now(), path: req.path, body: req.body });
        this.store('nodes', 'MODIFIED', next);
        return clone(this.nodes.get(name));
      }
    }
    throw apiError(404, 'NotFound', what);
  }

  /** pods/status PATCH (conditions merged by type) and pods/eviction POST (a graceful delete). */
  private podRequest(req: KubeRequest, key: string, sub: 'status' | 'eviction' | undefined): unknown {
    const what = `${req.method} ${req.path}`;
    const current = this.pods.get(key);
    if (!current) throw apiError(404, 'NotFound', what);
    if (sub === undefined && req.method === 'GET') return clone(current);
    if (sub === 'eviction' && req.method === 'POST') {
      if (this.pdbBlocked.has(key)) throw apiError(429, 'TooManyRequests', what);
      const uid = (req.body as { deleteOptions?: { preconditions?: { uid?: string } } }).deleteOptions
        ?.preconditions?.uid;
      if (uid !== undefined && uid !== current.metadata.uid) throw apiError(409, 'Conflict', what);
      // The node is gone: the pod stays Terminating, as on a real cluster.
      current.metadata = { ...current.metadata, deletionTimestamp: new Date(Date.now()).toISOString() };
      this.evictions.push({ at: this.now(), pod: key });
      return { kind: 'Status', status: 'Success' };
    }
    if (sub === 'status' && req.method === 'PATCH') {
      const body = req.body as {
        metadata?: { resourceVersion?: string };
        status?: { conditions?: NodeCondition[] };
      };
      const rv = body.metadata?.resourceVersion;
      if (rv !== undefined && rv !== current.metadata.resourceVersion) throw apiError(409, 'Conflict', what);
      const conditions = [...(current.status?.conditions ?? [])];
      for (const c of body.status?.conditions ?? []) {
        const i = conditions.findIndex((x) => x.type === c.type);
        if (i >= 0) conditions[i] = { ...conditions[i]!, ...c };
        else conditions.push(c);
      }
      const next: Pod = {
        ...current,
        metadata: { ...current.metadata, resourceVersion: String(++this.rv) },
        status: { ...current.status, conditions },
      };
      this.pods.set(key, next);
      this.patches.push({ at: this.now(), path: req.path, body: req.body });
      return clone(next);
    }
    throw apiError(404, 'NotFound', what);
  }
}
