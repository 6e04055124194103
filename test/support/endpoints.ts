import type { KubeClient } from '../../src/kube/client.js';
import { rawWatch } from './raw-watch.js';

interface SliceObj {
  metadata: { labels?: Record<string, string> };
  endpoints?: { conditions?: { ready?: boolean } }[];
}

/**
 * The test's own watch of EndpointSlices (all namespaces): for each Service, every change of how
 * many of its endpoints are ready, with the time (performance.now()) the watch saw it. That is when
 * traffic to a pod stops: the EndpointSlice controller follows the pod's Ready condition.
 */
export class EndpointsWatch {
  /** Service name -> [time, ready endpoints] on each change of its slices. */
  readonly ready = new Map<string, { at: number; ready: number }[]>();
  private stop: () => void = () => {};

  static async start(client: KubeClient): Promise<EndpointsWatch> {
    const w = new EndpointsWatch();
    w.stop = await rawWatch<SliceObj>(client, '/apis/discovery.k8s.io/v1/endpointslices', (e) => {
      const svc = e.object.metadata.labels?.['kubernetes.io/service-name'];
      if (!svc) return;
      const ready =
        e.type === 'DELETED' ? 0 : (e.object.endpoints ?? []).filter((x) => x.conditions?.ready).length;
      w.ready.set(svc, [...(w.ready.get(svc) ?? []), { at: e.at, ready }]);
    });
    return w;
  }

  /** Ready endpoints of the Service now (as last seen). */
  readyNow(service: string): number | undefined {
    return this.ready.get(service)?.at(-1)?.ready;
  }

  /** First time at or after `since` that the Service had no ready endpoint. */
  goneAt(service: string, since: number): number | undefined {
    return this.ready.get(service)?.find((x) => x.at >= since && x.ready === 0)?.at;
  }

  close(): void {
    this.stop();
  }
}
