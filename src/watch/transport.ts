import type { IncomingMessage } from 'node:http';
import { type KubeClient, KubeTransportError, paths } from '../kube/client.js';
import { type List, NODE_LEASE_NAMESPACE } from '../kube/types.js';
import { Observable } from '../rx/index.js';
import type { WatchReadPacer } from './read-pacer.js';
import type { ListRequest, WatchRequest, WatchTransport } from './types.js';

/** What to list and watch: a collection path plus optional selectors. */
export interface WatchTarget {
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
}

export { NODE_LEASE_NAMESPACE };

/** Leases in kube-node-lease (one per node, renewed by its kubelet). */
export function leaseTarget(namespace = NODE_LEASE_NAMESPACE): WatchTarget {
  return { path: paths.leases(namespace) };
}

export function nodeTarget(opts: { labelSelector?: string } = {}): WatchTarget {
  return { path: paths.nodes(), labelSelector: opts.labelSelector };
}

/** Pods in all namespaces (or one), optionally narrowed, e.g. fieldSelector `spec.nodeName=n1`. */
export function podTarget(
  opts: { namespace?: string; fieldSelector?: string; labelSelector?: string } = {},
): WatchTarget {
  return {
    path: paths.pods(opts.namespace),
    fieldSelector: opts.fieldSelector,
    labelSelector: opts.labelSelector,
  };
}

export interface KubeTransportOptions {
  /** Deadline for the watch response headers (the watcher's idle timeout also covers it). */
  connectTimeoutMs?: number;
  /** Parses a list page (default JSON.parse); see parseSkippingManagedFields. */
  parseList?: (text: string) => unknown;
  /** Reads the watch responses on this pacer's cadence (default: as bytes arrive). */
  readPacer?: WatchReadPacer;
}

const noop = () => undefined;

/** The real transport: KubeClient.request for list pages, KubeClient.stream for watches. */
export function kubeTransport(
  client: KubeClient,
  target: WatchTarget,
  opts: KubeTransportOptions = {},
): WatchTransport {
  const selectors = { labelSelector: target.labelSelector, fieldSelector: target.fieldSelector };
  return {
    list(req: ListRequest, signal: AbortSignal): Promise<List<unknown>> {
      return client.request<List<unknown>>({
        method: 'GET',
        path: target.path,
        query: {
          limit: req.limit,
          continue: req.continue,
          resourceVersion: req.resourceVersion,
          resourceVersionMatch: req.resourceVersionMatch,
          ...selectors,
        },
        // A little above the watcher's own deadline, which normally fires first.
        timeoutMs: req.timeoutMs + 1000,
        signal,
        parse: opts.parseList,
      });
    },
    async watch(req: WatchRequest, signal: AbortSignal): Promise<Observable<string>> {
      const res = await client.stream({
        path: target.path,
        query: {
          watch: true,
          resourceVersion: req.resourceVersion,
          allowWatchBookmarks: req.allowWatchBookmarks,
          timeoutSeconds: req.timeoutSeconds,
          ...selectors,
        },
        signal,
        connectTimeoutMs: opts.connectTimeoutMs,
      });
      return responseChunks(res, opts.readPacer);
    },
  };
}

/**
 * The body of a watch response as UTF-8 text chunks. Completes on a clean end, errors when the
 * connection breaks first. Unsubscribing destroys the response (frees the socket). With a pacer, the
 * socket is read on its cadence while subscribed.
 */
export function responseChunks(res: IncomingMessage, pacer?: WatchReadPacer): Observable<string> {
  // An 'error' after we stopped listening (abort, reset) must never become an uncaught exception.
  res.on('error', noop);
  res.setEncoding('utf8');
  return new Observable<string>((subscriber) => {
    let ended = false;
    const onData = (chunk: string) => subscriber.next(chunk);
    const onEnd = () => {
      ended = true;
      subscriber.complete();
    };
    const onError = (err: Error) => {
      subscriber.error(
        err instanceof KubeTransportError
          ? err
          : new KubeTransportError(
              `watch stream: ${err.message}`,
              (err as NodeJS.ErrnoException).code ?? 'ECONNRESET',
              {
                cause: err,
              },
            ),
      );
    };
    const onClose = () => {
      if (!ended)
        subscriber.error(new KubeTransportError('watch stream closed before its end', 'ECONNRESET'));
    };
    res.on('data', onData);
    res.once('end', onEnd);
    res.on('error', onError);
    res.once('close', onClose);
    const unpace = pacer?.attach(res.socket);
    return () => {
      unpace?.();
      res.off('data', onData);
      res.off('end', onEnd);
      res.off('error', onError);
      res.off('close', onClose);
      if (!res.destroyed) res.destroy();
    };
  });
}
