/**
 * The independent observer, in its own thread (own event loop, own KubeClient): list + watch of
 * node leases, nodes and pods. It posts only CHANGES that matter, each stamped with an absolute
 * time taken the moment the watch line was parsed here, so a busy main thread (the simulated fleet)
 * cannot skew the timestamps.
 */
import type { IncomingMessage } from 'node:http';
import { parentPort, workerData } from 'node:worker_threads';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeApiError, KubeClient, paths } from '../../src/kube/client.js';
import { lineSplitter } from '../../test/support/raw-watch.js';
import type { ObserverMessage, ObserverWorkerData } from './observer.js';

const nowMs = (): number => performance.timeOrigin + performance.now();
const data = workerData as ObserverWorkerData;
const port = parentPort!;
const post = (m: ObserverMessage) => port.postMessage(m);

interface Meta {
  name?: string;
  namespace?: string;
  resourceVersion?: string;
}
interface Obj {
  metadata?: Meta;
  spec?: {
    renewTime?: string;
    nodeName?: string;
    taints?: Array<{ key: string; effect: string }>;
  };
  status?: { conditions?: Array<{ type: string; status: string; lastHeartbeatTime?: string }> };
}

const kc = new KubeConfig();
kc.loadFromOptions({
  clusters: [{ name: 'c', server: data.server, caData: data.caData }],
  users: [{ name: 'observer', token: data.token }],
  contexts: [{ name: 'c', cluster: 'c', user: 'observer' }],
  currentContext: 'c',
});
const client = await KubeClient.fromKubeConfig(kc, { userAgent: 'nlc-bench-observer', maxSockets: 8 });
const stops: Array<() => void> = [];

// ------------------------------------------------------------------ per-resource change detection

const leaseRenew = new Map<string, string>();
function onLease(type: string, o: Obj, at: number, init: boolean): void {
  const name = o.metadata?.name;
  if (!name) return;
  if (type === 'DELETED') {
    leaseRenew.delete(name);
    return;
  }
  const rt = o.spec?.renewTime ?? '';
  if (leaseRenew.get(name) === rt) return;
  leaseRenew.set(name, rt);
  post({ k: 'L', n: name, at, init });
}

const nodeKey = new Map<string, string>();
function onNode(type: string, o: Obj, at: number, init: boolean): void {
  const name = o.metadata?.name;
  if (!name) return;
  if (type === 'DELETED') {
    nodeKey.delete(name);
    return;
  }
  const ready = o.status?.conditions?.find((c) => c.type === 'Ready');
  const taints = (o.spec?.taints ?? [])
    .map((t) => `${t.key}:${t.effect}`)
    .sort()
    .join(',');
  const key = `${ready?.status ?? ''}|${ready?.lastHeartbeatTime ?? ''}|${taints}`;
  if (nodeKey.get(name) === key) return;
  nodeKey.set(name, key);
  post({ k: 'N', n: name, at, init, ready: ready?.status ?? '', hb: ready?.lastHeartbeatTime ?? '', taints });
}

const podReady = new Map<string, string>();
function onPod(type: string, o: Obj, at: number, init: boolean): void {
  const name = o.metadata?.name;
  if (!name) return;
  const id = `${o.metadata?.namespace ?? ''}/${name}`;
  if (type === 'DELETED') {
    podReady.delete(id);
    post({ k: 'P', n: id, node: o.spec?.nodeName ?? '', at, init, ready: 'Deleted' });
    return;
  }
  const ready = o.status?.conditions?.find((c) => c.type === 'Ready')?.status ?? '';
  if (podReady.get(id) === ready) return;
  podReady.set(id, ready);
  post({ k: 'P', n: id, node: o.spec?.nodeName ?? '', at, init, ready });
}

// ------------------------------------------------------------------ list + watch with resume

async function listWatch(
  what: string,
  path: string,
  handle: (type: string, o: Obj, at: number, init: boolean) => void,
): Promise<void> {
  let stopped = false;
  let current: IncomingMessage | undefined;
  stops.push(() => {
    stopped = true;
    current?.destroy();
  });
  let rv = '';
  const list = async () => {
    const res = await client.request<{ metadata?: Meta; items?: Obj[] }>({
      method: 'GET',
      path,
      timeoutMs: 120_000,
    });
    const at = nowMs();
    for (const o of res.items ?? []) handle('ADDED', o, at, true);
    rv = res.metadata?.resourceVersion ?? '';
  };
  await list();
  post({ k: 'S', what, at: nowMs() });
  void (async () => {
    while (!stopped) {
      try {
        const res = await client.stream({
          path,
          query: { watch: 'true', allowWatchBookmarks: 'true', resourceVersion: rv, timeoutSeconds: 600 },
          connectTimeoutMs: 30_000,
        });
        current = res;
        await new Promise<void>((resolve) => {
          res.setEncoding('utf8');
          res.on(
            'data',
            lineSplitter((line) => {
              const at = nowMs();
              const ev = JSON.parse(line) as { type: string; object: Obj & KubeStatusLike };
              if (ev.type === 'ERROR') {
                if (ev.object.code === 410) rv = '';
                post({ k: 'E', what, at, msg: `watch error ${ev.object.code}: ${ev.object.message ?? ''}` });
                res.destroy();
                return;
              }
              const objRv = ev.object.metadata?.resourceVersion;
              if (objRv) rv = objRv;
              if (ev.type !== 'BOOKMARK') handle(ev.type, ev.object, at, false);
            }),
          );
          res.on('error', () => resolve());
          res.on('close', () => resolve());
          res.on('end', () => resolve());
        });
      } catch (err) {
        if (stopped) return;
        if (err instanceof KubeApiError && err.status === 410) rv = '';
        post({ k: 'E', what, at: nowMs(), msg: String(err) });
        await new Promise((r) => setTimeout(r, 500));
      }
      if (!stopped && rv === '') {
        try {
          await list();
        } catch (err) {
          post({ k: 'E', what, at: nowMs(), msg: `relist: ${String(err)}` });
          await new Promise((r) => setTimeout(r, 1000));
        }
      }
    }
  })();
}
interface KubeStatusLike {
  code?: number;
  message?: string;
}

port.on('message', (m: { k: string }) => {
  if (m.k === 'stop') {
    for (const s of stops) s();
    client.close();
    port.close();
  }
});

try {
  await listWatch('leases', paths.leases('kube-node-lease'), onLease);
  await listWatch('nodes', paths.nodes(), onNode);
  await listWatch('pods', paths.pods(), onPod);
  post({ k: 'R', at: nowMs() });
} catch (err) {
  post({ k: 'E', what: 'start', at: nowMs(), msg: String(err) });
}
