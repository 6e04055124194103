import { paths } from '../kube/client.js';
import { parseSkippingManagedFields } from '../kube/json.js';
import type { KubeObject, Lease } from '../kube/types.js';
import { filter, map, type Observable } from '../rx/index.js';
import {
  kubeTransport,
  Reflector,
  type ResourceWatchDeps,
  type StripFn,
  stripLease,
} from '../watch/index.js';

/**
 * A watch of one named object (fieldSelector metadata.name=<name>) in the list at `path`, on the
 * same watch layer as nodes and leases: resume, relist, backoff, health and the shared rewind
 * signal included (etcd restored from a backup: when the lease or node watch finds the server
 * behind, this one relists too, its resourceVersion being from the lost history as well). Not
 * started. `resource` labels the watch metrics.
 */
export function watchNamed<T extends KubeObject>(
  deps: ResourceWatchDeps,
  o: { resource: string; path: string; name: string; strip: StripFn<T> },
): Reflector<T> {
  const base = kubeTransport(
    deps.client,
    { path: o.path, fieldSelector: `metadata.name=${o.name}` },
    { parseList: parseSkippingManagedFields },
  );
  return new Reflector<T>({
    resource: o.resource,
    transport: deps.wrapTransport ? deps.wrapTransport(base) : base,
    scheduler: deps.clock.scheduler,
    strip: o.strip,
    parse: parseSkippingManagedFields,
    logger: deps.logger,
    metrics: deps.metrics,
    rewind: deps.rewind,
  });
}

/** The object named `name` on every add or change, undefined when it is deleted. */
export function namedUpdates<T extends KubeObject>(w: Reflector<T>, name: string): Observable<T | undefined> {
  return w.events$.pipe(
    filter(
      (ev) =>
        (ev.type === 'Apply' || ev.type === 'InitApply' || ev.type === 'Delete') &&
        ev.object.metadata.name === name,
    ),
    map((ev) => (ev.type === 'Delete' ? undefined : (ev as { object: T }).object)),
  );
}

/** A watch of the leader-election lock Lease alone (resource label "lock"). Not started. */
export function watchLock(deps: ResourceWatchDeps, namespace: string, name: string): Reflector<Lease> {
  return watchNamed(deps, { resource: 'lock', path: paths.leases(namespace), name, strip: stripLease });
}

/** The elector's `lockUpdates$`: the lock on every add or change, undefined when it is deleted. */
export function lockUpdates(lock: Reflector<Lease>, name: string): Observable<Lease | undefined> {
  return namedUpdates(lock, name);
}
