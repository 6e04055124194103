import { paths } from '../kube/client.js';
import { parseSkippingManagedFields } from '../kube/json.js';
import type { Lease } from '../kube/types.js';
import { filter, map, type Observable } from '../rx/index.js';
import { Reflector, type ResourceWatchDeps } from '../watch/reflector.js';
import { stripLease } from '../watch/strip.js';
import { kubeTransport } from '../watch/transport.js';

/**
 * A watch of the leader-election lock Lease alone (fieldSelector metadata.name=<name>, resource
 * label "lock" in the watch metrics), on the same watch layer as nodes and leases: resume, relist,
 * backoff, health and the shared rewind signal included. Not started.
 */
export function watchLock(deps: ResourceWatchDeps, namespace: string, name: string): Reflector<Lease> {
  const base = kubeTransport(
    deps.client,
    {
      path: paths.leases(namespace),
      fieldSelector: `metadata.name=${name}`,
    },
    { parseList: parseSkippingManagedFields },
  );
  return new Reflector<Lease>({
    resource: 'lock',
    transport: deps.wrapTransport ? deps.wrapTransport(base) : base,
    scheduler: deps.clock.scheduler,
    strip: stripLease,
    parse: parseSkippingManagedFields,
    logger: deps.logger,
    metrics: deps.metrics,
    // etcd restored from a backup: when the lease or node watch finds the server behind, the lock
    // watch relists too (its resourceVersion is from the lost history as well).
    rewind: deps.rewind,
  });
}

/** The elector's `lockUpdates$`: the lock on every add or change, undefined when it is deleted. */
export function lockUpdates(lock: Reflector<Lease>, name: string): Observable<Lease | undefined> {
  return lock.events$.pipe(
    filter(
      (ev) =>
        (ev.type === 'Apply' || ev.type === 'InitApply' || ev.type === 'Delete') &&
        ev.object.metadata.name === name,
    ),
    map((ev) => (ev.type === 'Delete' ? undefined : (ev as { object: Lease }).object)),
  );
}
