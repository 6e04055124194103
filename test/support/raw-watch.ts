import type { KubeClient } from '../../src/kube/client.js';

export interface RawWatchEvent<T> {
  type: string;
  object: T;
  /** performance.now() when the event line arrived. */
  at: number;
}

/**
 * A deliberately small watch used by tests as an independent observer of the API server (it is not
 * the controller's watch layer). Returns a stop function.
 */
export async function rawWatch<T>(
  client: KubeClient,
  path: string,
  onEvent: (e: RawWatchEvent<T>) => void,
  query: Record<string, string> = {},
): Promise<() => void> {
  const ac = new AbortController();
  const res = await client.stream({
    path,
    query: { watch: 'true', allowWatchBookmarks: 'false', ...query },
    signal: ac.signal,
  });
  res.setEncoding('utf8');
  res.on(
    'data',
    lineSplitter((line) => {
      const ev = JSON.parse(line) as { type: string; object: T };
      onEvent({ ...ev, at: performance.now() });
    }),
  );
  res.on('error', () => undefined);
  return () => ac.abort();
}

/** Turns string chunks into complete, non-blank lines (a chunk may end mid-line). */
export function lineSplitter(onLine: (line: string) => void): (chunk: string) => void {
  let buf = '';
  return (chunk) => {
    buf += chunk;
    let nl = buf.indexOf('\n');
    while (nl >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line.trim()) onLine(line);
      nl = buf.indexOf('\n');
    }
  };
}
