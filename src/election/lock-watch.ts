import { KubeApiError, type KubeClient, paths } from '../kube/client.js';
import type { Lease, List, RawWatchType } from '../kube/types.js';
import type { Logger } from '../log/logger.js';
import { Observable } from '../rx/index.js';

export interface LockWatchOptions {
  logger: Logger;
  /** Pause before relisting after the watch ends or fails. */
  reconnectDelayMs?: number;
  /** Server-side watch timeout; the watch is re-established after it. */
  timeoutSeconds?: number;
}

/**
 * A deliberately small watch of ONE Lease (fieldSelector metadata.name=<name>) for the elector's
 * `lockUpdates$`: list, emit the lease (or undefined when absent), watch from the list's
 * resourceVersion, emit every change (undefined on DELETED); on any end or error wait and relist.
 * It never errors. The real watch layer (src/watch/) can replace it: the elector only needs an
 * Observable<Lease | undefined> of the lock.
 */
export function watchLease(
  client: KubeClient,
  namespace: string,
  name: string,
  o: LockWatchOptions,
): Observable<Lease | undefined> {
  const reconnectDelayMs = o.reconnectDelayMs ?? 1000;
  const timeoutSeconds = o.timeoutSeconds ?? 300;
  const log = o.logger.with({ component: 'lock-watch', lease: `${namespace}/${name}` });
  const fieldSelector = `metadata.name=${name}`;
  return new Observable<Lease | undefined>((subscriber) => {
    const ac = new AbortController();
    const sleep = (ms: number) =>
      new Promise<void>((resolve) => {
        const t = setTimeout(resolve, ms);
        ac.signal.addEventListener(
          'abort',
          () => {
            clearTimeout(t);
            resolve();
          },
          { once: true },
        );
      });

    const loop = async () => {
      while (!ac.signal.aborted) {
        try {
          const list = await client.request<List<Lease>>({
            method: 'GET',
            path: paths.leases(namespace),
            query: { fieldSelector },
            signal: ac.signal,
          });
          if (ac.signal.aborted) return;
          subscriber.next(list.items[0]);
          await watchFrom(list.metadata.resourceVersion ?? '');
        } catch (err) {
          if (ac.signal.aborted) return;
          log.debug(2, 'Lock watch interrupted; relisting', { err });
        }
        await sleep(reconnectDelayMs);
      }
    };

    const watchFrom = async (resourceVersion: string) => {
      const res = await client.stream({
        path: paths.leases(namespace),
        query: {
          watch: 'true',
          fieldSelector,
          resourceVersion,
          allowWatchBookmarks: 'true',
          timeoutSeconds,
        },
        signal: ac.signal,
      });
      await new Promise<void>((resolve) => {
        let buf = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          buf += chunk;
          for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
            const line = buf.slice(0, nl).trim();
            buf = buf.slice(nl + 1);
            if (!line) continue;
            let ev: { type: RawWatchType; object: Lease };
            try {
              ev = JSON.parse(line) as { type: RawWatchType; object: Lease };
            } catch {
              res.destroy();
              return;
            }
            if (ev.type === 'ADDED' || ev.type === 'MODIFIED') subscriber.next(ev.object);
            else if (ev.type === 'DELETED') subscriber.next(undefined);
            else if (ev.type === 'ERROR') {
              // e.g. 410 Gone: relist.
              res.destroy();
              return;
            }
          }
        });
        res.on('error', () => resolve());
        res.on('close', () => resolve());
        res.on('end', () => resolve());
      });
    };

    loop().catch((err: unknown) => {
      if (!(err instanceof KubeApiError)) log.warn('Lock watch stopped', { err });
    });
    return () => ac.abort();
  });
}
