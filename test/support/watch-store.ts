import type { KubeClient } from '../../src/kube/client.js';
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
