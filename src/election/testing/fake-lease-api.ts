/**
 * TEST SUPPORT ONLY (used by src/election/*.test.ts and src/apply/writer-fence.test.ts): an
 * in-memory kube-apiserver for Leases with resourceVersion preconditions, latency on timers (run it
 * under vi.useFakeTimers), per-request timeouts and aborts, fault injection and a change stream
 * that can stand in for a watch.
 */

import { formatDuration } from '../../clock/duration.js';
import { KubeApiError, type KubeRequest, KubeTransportError } from '../../kube/client.js';
import type { Lease, List } from '../../kube/types.js';
import { Observable, Subject } from '../../rx/index.js';
import type { KubeRequester } from '../lease-api.js';

/** 'hang': never reaches the server; 'lose-response': applied, but the answer never comes back. */
export type Fault = 'hang' | 'lose-response' | Error | undefined;

export interface Call {
  method: string;
  name: string | undefined;
  at: number;
  /** Identifies the caller when several electors share the server (set by `as()`). */
  who: string;
  status: number | string;
}

const LEASE_PATH = /^\/apis\/coordination\.k8s\.io\/v1\/namespaces\/([^/]+)\/leases(?:\/([^/]+))?$/;

function apiError(status: number, reason: string, message: string, what: string): KubeApiError {
  return new KubeApiError(status, { kind: 'Status', reason, message, code: status }, {}, what);
}

function clone<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

function matches(lease: Lease, selector: string | undefined): boolean {
  if (!selector) return true;
  return selector.split(',').every((term) => {
    const [k, v] = term.split('=');
    return k !== undefined && lease.metadata.labels?.[k] === v;
  });
}

export class FakeLeaseServer {
  readonly leases = new Map<string, Lease>();
  readonly calls: Call[] = [];
  /** Every stored change: the new object, or undefined with the key on delete. */
  readonly changes = new Subject<{ ns: string; name: string; lease: Lease | undefined }>();
  /** Time from request to the server applying it; the response takes as long again. */
  halfLatencyMs = 2;
  /** Decides per request whether it fails ('hang' = never answered). */
  fault: ((req: KubeRequest, who: string) => Fault) | undefined;
  private rv = 100;

  /** A client bound to a caller name (for call accounting and per-caller faults). */
  as(who: string): KubeRequester {
    return { request: <T>(req: KubeRequest) => this.handle(req, who) as Promise<T> };
  }

  /** Store a lease directly (as another writer would), bumping resourceVersion. */
  put(ns: string, lease: Lease): Lease {
    const stored = clone(lease);
    stored.metadata = { ...stored.metadata, namespace: ns, resourceVersion: String(++this.rv) };
    stored.metadata.uid ??= `uid-${stored.metadata.name}-${this.rv}`;
    this.leases.set(`${ns}/${stored.metadata.name}`, stored);
    this.changes.next({ ns, name: stored.metadata.name, lease: clone(stored) });
    return clone(stored);
  }

  remove(ns: string, name: string): void {
    if (this.leases.delete(`${ns}/${name}`)) this.changes.next({ ns, name, lease: undefined });
  }

  get(ns: string, name: string): Lease | undefined {
    const l = this.leases.get(`${ns}/${name}`);
    return l ? clone(l) : undefined;
  }

  /** A watch of one lease: every change, `delayMs` after it was stored. */
  watch(ns: string, name: string, delayMs = 1): Observable<Lease | undefined> {
    return new Observable<Lease | undefined>((sub) => {
      const timers = new Set<ReturnType<typeof setTimeout>>();
      const s = this.changes.subscribe((c) => {
        if (c.ns !== ns || c.name !== name) return;
        const t = setTimeout(() => {
          timers.delete(t);
          sub.next(c.lease);
        }, delayMs);
        timers.add(t);
      });
      return () => {
        s.unsubscribe();
        for (const t of timers) clearTimeout(t);
      };
    });
  }

  private handle(req: KubeRequest, who: string): Promise<unknown> {
    const m = LEASE_PATH.exec(req.path);
    const ns = decodeURIComponent(m?.[1] ?? '');
    const name = m?.[2] ? decodeURIComponent(m[2]) : undefined;
    const call: Call = { method: req.method, name, at: Date.now(), who, status: 'pending' };
    this.calls.push(call);
    const fault = this.fault?.(req, who);
    return new Promise((resolve, reject) => {
      let done = false;
      const timers: ReturnType<typeof setTimeout>[] = [];
      const finish = (err: Error | undefined, value?: unknown) => {
        if (done) return;
        done = true;
        for (const t of timers) clearTimeout(t);
        req.signal?.removeEventListener('abort', onAbort);
        call.status = err
          ? err instanceof KubeApiError
            ? err.status
            : (err as KubeTransportError).code
          : 200;
        if (err) reject(err);
        else resolve(value);
      };
      const onAbort = () => finish(new KubeTransportError(`${req.method} ${req.path}: aborted`, 'ABORTED'));
      if (req.signal?.aborted) return onAbort();
      req.signal?.addEventListener('abort', onAbort, { once: true });
      const timeoutMs = req.timeoutMs;
      if (timeoutMs !== undefined) {
        timers.push(
          setTimeout(
            () =>
              finish(
                new KubeTransportError(
                  `${req.method} ${req.path}: timed out after ${formatDuration(timeoutMs)}`,
                  'TIMEOUT',
                ),
              ),
            timeoutMs,
          ),
        );
      }
      if (fault === 'hang') return;
      timers.push(
        setTimeout(() => {
          if (done) return;
          let result: { err?: Error; value?: unknown };
          if (fault instanceof Error) result = { err: fault };
          else {
            try {
              result = { value: this.apply(req, ns, name) };
            } catch (err) {
              result = { err: err as Error };
            }
          }
          if (fault === 'lose-response') return;
          timers.push(setTimeout(() => finish(result.err, result.value), this.halfLatencyMs));
        }, this.halfLatencyMs),
      );
    });
  }

  private apply(req: KubeRequest, ns: string, name: string | undefined): unknown {
    const what = `${req.method} ${req.path}`;
    const key = `${ns}/${name ?? ''}`;
    const existing = this.leases.get(key);
    const body = req.body as Lease | undefined;
    switch (req.method) {
      case 'GET': {
        if (name === undefined) {
          const items = [...this.leases.entries()]
            .filter(
              ([k, l]) =>
                k.startsWith(`${ns}/`) && matches(l, req.query?.labelSelector as string | undefined),
            )
            .map(([, l]) => clone(l));
          const list: List<Lease> = { metadata: { resourceVersion: String(this.rv) }, items };
          return list;
        }
        if (!existing) throw apiError(404, 'NotFound', `leases "${name}" not found`, what);
        return clone(existing);
      }
      case 'POST': {
        if (!body) throw apiError(400, 'BadRequest', 'no body', what);
        if (this.leases.has(`${ns}/${body.metadata.name}`)) {
          throw apiError(409, 'AlreadyExists', `leases "${body.metadata.name}" already exists`, what);
        }
        const { resourceVersion: _, ...meta } = body.metadata;
        return this.put(ns, { ...body, metadata: meta });
      }
      case 'PUT': {
        if (!body) throw apiError(400, 'BadRequest', 'no body', what);
        if (!existing) throw apiError(404, 'NotFound', `leases "${name}" not found`, what);
        if (body.metadata.resourceVersion !== existing.metadata.resourceVersion) {
          throw apiError(
            409,
            'Conflict',
            'the object has been modified; please apply your changes to the latest version and try again',
            what,
          );
        }
        return this.put(ns, { ...body, metadata: { ...body.metadata, uid: existing.metadata.uid } });
      }
      case 'PATCH': {
        if (!existing) throw apiError(404, 'NotFound', `leases "${name}" not found`, what);
        const patch = req.body as {
          metadata?: { resourceVersion?: string; labels?: Record<string, string> };
        };
        const rv = patch.metadata?.resourceVersion;
        if (rv !== undefined && rv !== existing.metadata.resourceVersion) {
          throw apiError(409, 'Conflict', 'the object has been modified', what);
        }
        return this.put(ns, {
          ...existing,
          metadata: {
            ...existing.metadata,
            labels: { ...existing.metadata.labels, ...patch.metadata?.labels },
          },
        });
      }
      case 'DELETE': {
        if (!existing || name === undefined)
          throw apiError(404, 'NotFound', `leases "${name}" not found`, what);
        const pre = (req.body as { preconditions?: { resourceVersion?: string } } | undefined)?.preconditions;
        if (pre?.resourceVersion !== undefined && pre.resourceVersion !== existing.metadata.resourceVersion) {
          throw apiError(409, 'Conflict', 'Precondition failed: ResourceVersion', what);
        }
        this.remove(ns, name);
        return { kind: 'Status', status: 'Success' };
      }
    }
    throw apiError(405, 'MethodNotAllowed', req.method, what);
  }
}
