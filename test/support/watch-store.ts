import type { KubeClient, KubeRequest } from '../../src/kube/client.js';
import type { KubeObject, List } from '../../src/kube/types.js';
import type { Store } from '../../src/watch/store.js';
import { waitUntil } from './wait.js';

/** name -> resourceVersion of every object a fresh LIST returns. */
export async function listVersions(client: KubeClient, path: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  let cont: string | undefined;
  do {
    const page = await client.request<List<KubeObject>>({
      method: 'GET',
      path,
      query: { limit: 500, continue: cont },
    });
    for (const o of page.items) out.set(o.metadata.name, o.metadata.resourceVersion ?? '');
    cont = page.metadata.continue;
  } while (cont);
  return out;
}

export function storeVersions(store: Store<KubeObject>): Map<string, string> {
  const out = new Map<string, string>();
  for (const o of store.values()) out.set(o.metadata.name, o.metadata.resourceVersion ?? '');
  return out;
}

/** Differences between the store and the list, for a readable failure. */
export function diffVersions(store: Map<string, string>, list: Map<string, string>): string[] {
  const d: string[] = [];
  for (const [n, rv] of list) {
    const s = store.get(n);
    if (s === undefined) d.push(`missing ${n}@${rv}`);
    else if (s !== rv) d.push(`stale ${n}: store ${s}, list ${rv}`);
  }
  for (const [n, rv] of store) if (!list.has(n)) d.push(`extra ${n}@${rv}`);
  return d;
}

/**
 * Waits (writers stopped) until the store holds exactly what a fresh LIST returns: same names, same
 * resourceVersions. Throws with the differences if it never does.
 */
export async function expectStoreEqualsList(
  client: KubeClient,
  path: string,
  store: Store<KubeObject>,
  timeoutMs = 15_000,
): Promise<number> {
  let size = 0;
  await waitUntil(
    async () => {
      const list = await listVersions(client, path);
      const d = diffVersions(storeVersions(store), list);
      if (d.length > 0) throw new Error(`${d.length} differences: ${d.slice(0, 5).join('; ')}`);
      size = list.size;
      return true;
    },
    { timeoutMs, intervalMs: 250, what: 'store to equal a fresh LIST' },
  );
  return size;
}

/** Value of one series from the API server's /metrics (summed over matching label sets). */
export async function apiserverMetric(
  client: KubeClient,
  name: string,
  labels: Record<string, string>,
): Promise<number> {
  const text = await client.request<string>({ method: 'GET', path: '/metrics' });
  let sum = 0;
  for (const line of String(text).split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    const labelText = line.slice(name.length + 1, line.lastIndexOf('}'));
    if (Object.entries(labels).every(([k, v]) => labelText.includes(`${k}="${v}"`))) {
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
    }
  }
  return sum;
}

/** A version of an object as a list+watch consumer got it: from a (re)list or from a watch event. */
export interface Delivery {
  rv: bigint;
  via: 'list' | 'event';
}

/**
 * Judges what a list+watch consumer was given against the writes that were made, exactly (no slack
 * for timing). `writes`: name -> every resourceVersion the API server answered a write with.
 * `seen`: name -> the versions delivered, in arrival order. Wrong, and reported:
 * - an event that does not move its object forward (a replay, or a step back; a list may repeat the
 *   version last seen);
 * - a write that is not delivered itself and is not covered by a list: the first delivery at or past
 *   it must be the write itself or a list item (a relist returns the latest version, folding what the
 *   watch missed). An event first means the watch went on past the write: it was lost;
 * - a write newer than everything delivered.
 * `folded` counts the writes a list covered, `delivered` those that arrived themselves.
 */
export function judgeDeliveries(
  writes: Map<string, bigint[]>,
  seen: Map<string, Delivery[]>,
): { problems: string[]; delivered: number; folded: number } {
  const problems: string[] = [];
  let delivered = 0;
  let folded = 0;
  for (const [name, got] of seen) {
    for (let i = 1; i < got.length; i++) {
      const [prev, cur] = [got[i - 1]!, got[i]!];
      if (cur.via === 'event' ? cur.rv <= prev.rv : cur.rv < prev.rv)
        problems.push(`${name}: ${cur.via} ${cur.rv} after ${prev.via} ${prev.rv}`);
    }
  }
  for (const [name, rvs] of writes) {
    const got = seen.get(name) ?? [];
    for (const rv of [...rvs].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))) {
      const first = got.find((d) => d.rv >= rv);
      if (!first) problems.push(`${name}: write ${rv} never delivered`);
      else if (first.rv === rv) delivered++;
      else if (first.via === 'list') folded++;
      else problems.push(`${name}: write ${rv} lost (next delivered: event ${first.rv})`);
    }
  }
  return { problems, delivered, folded };
}

/**
 * `client` for writers under test (a simulated fleet): every object written with POST or PUT under
 * `collection` is recorded with the resourceVersion the server answered (name -> versions).
 * `settled()` resolves once no such write is on the wire.
 */
export function recordWrites(
  client: KubeClient,
  collection: string,
): { client: KubeClient; writes: Map<string, bigint[]>; settled(): Promise<void> } {
  const writes = new Map<string, bigint[]>();
  let pending = 0;
  const request = async (req: KubeRequest): Promise<unknown> => {
    const write = (req.method === 'POST' || req.method === 'PUT') && req.path.startsWith(collection);
    if (!write) return await client.request(req);
    pending++;
    try {
      const obj = await client.request<KubeObject>(req);
      const name = obj.metadata.name;
      writes.set(name, [...(writes.get(name) ?? []), BigInt(obj.metadata.resourceVersion ?? '')]);
      return obj;
    } finally {
      pending--;
    }
  };
  const recording = new Proxy(client, {
    get(target, prop) {
      if (prop === 'request') return request;
      const v = Reflect.get(target, prop, target) as unknown;
      return typeof v === 'function' ? v.bind(target) : v;
    },
  });
  return {
    client: recording,
    writes,
    async settled() {
      await waitUntil(() => pending === 0, { timeoutMs: 15_000, what: 'writes on the wire to end' });
    },
  };
}
