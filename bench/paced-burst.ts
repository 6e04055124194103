/**
 * How far the node watch falls behind a burst with paced reads (--watch-read-interval): a local
 * control plane with N Nodes shaped like a kubelet's (50 images in status, about 20 KB of JSON
 * each), the controller's node watch (the real Reflector, transport and WatchReadPacer, ticked every
 * D ms as the controller's one tick does), then a mass status flip: every Node's Ready condition
 * patched by 32 writers at once. Live: per node, the time from its PATCH's answer to the watch
 * showing it (lag). Replayed: the flip is written first and the watch then resumes from the list
 * taken before it, so the server sends all of it at once (as after a reconnect during a mass
 * change): the time until the watch showed every node, and the rate. One cluster, two flips per
 * variant, variants in the order given.
 *
 *   npx tsx bench/paced-burst.ts [--nodes=3000] [--variants=0,100,500] [--pacer=src/watch/read-pacer.ts]
 *
 * A variant is a read interval in ms (0: read as events arrive), optionally `@<file>`: the pacer
 * module to use for it (default --pacer), e.g. `500@.tmp/read-pacer-before.ts` for another version
 * (`git show <commit>:src/watch/read-pacer.ts > .tmp/read-pacer-before.ts`).
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { monotonicScheduler } from '../src/clock/clock.js';
import type { KubeClient } from '../src/kube/client.js';
import { PatchType, paths } from '../src/kube/client.js';
import type { List, Node } from '../src/kube/types.js';
import { watchNodes } from '../src/watch/reflector.js';
import { startCluster } from '../test/support/cluster.js';
import { sleep } from '../test/support/wait.js';

function arg(name: string, dflt: string): string {
  const hit = process.argv.find((a) => a.startsWith(`--${name}=`));
  return hit ? hit.slice(name.length + 3) : dflt;
}
const nodes = Number(arg('nodes', '3000'));
const defaultPacer = arg('pacer', 'src/watch/read-pacer.ts');
const variants = arg('variants', '0,100,500')
  .split(',')
  .map((v) => {
    const [ms, file] = v.split('@');
    return { intervalMs: Number(ms), pacer: file ?? defaultPacer };
  });
if (!(nodes > 0) || variants.some((v) => !(v.intervalMs >= 0))) {
  console.error('usage: --nodes=N --variants=MS[@pacer.ts],...');
  process.exit(2);
}
const WRITERS = 32;

const name = (i: number) => `burst-${String(i).padStart(5, '0')}`;
/** A kubelet reports up to 50 images (--node-status-max-images); they make most of a Node's bytes. */
const images = Array.from({ length: 50 }, (_, i) => ({
  names: [
    `registry.example.com/team-${i % 7}/service-${i}@sha256:${'0123456789abcdef'.repeat(4)}`,
    `registry.example.com/team-${i % 7}/service-${i}:v1.${i}.0`,
  ],
  sizeBytes: 10_000_000 + i * 1_000_003,
}));
function statusPatch(ready: 'True' | 'False') {
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  return {
    status: {
      conditions: [
        {
          type: 'Ready',
          status: ready,
          reason: ready === 'True' ? 'KubeletReady' : 'KubeletNotReady',
          message: ready === 'True' ? 'kubelet is posting ready status' : 'burst',
          lastHeartbeatTime: now,
          lastTransitionTime: now,
        },
      ],
    },
  };
}

/** Runs `fn` for 0..n-1 with `width` at a time. */
async function pool(n: number, width: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, n) }, async () => {
      while (next < n) await fn(next++);
    }),
  );
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
};

const cluster = await startCluster();
const { admin } = cluster;
try {
  const t0 = performance.now();
  await pool(nodes, WRITERS, async (i) => {
    await admin.request({
      method: 'POST',
      path: paths.nodes(),
      body: { metadata: { name: name(i), labels: { 'topology.kubernetes.io/zone': `zone-${i % 3}` } } },
      timeoutMs: 60_000,
    });
    await admin.request({
      method: 'PATCH',
      path: paths.nodeStatus(name(i)),
      contentType: PatchType.strategic,
      body: { status: { ...statusPatch('True').status, images } },
      timeoutMs: 60_000,
    });
  });
  const one = JSON.stringify(await admin.request<Node>({ method: 'GET', path: paths.node(name(0)) })).length;
  console.log(
    `${nodes} nodes in ${((performance.now() - t0) / 1000).toFixed(0)} s; a Node is ${(one / 1024).toFixed(1)} KiB of JSON, a flip's events about ${((one * nodes) / 1e6).toFixed(0)} MB`,
  );

  let ready: 'True' | 'False' = 'True';
  const flip = async (want: 'True' | 'False', writtenAt: Map<string, number>) =>
    await pool(nodes, WRITERS, async (i) => {
      await admin.request({
        method: 'PATCH',
        path: paths.nodeStatus(name(i)),
        contentType: PatchType.strategic,
        body: statusPatch(want),
        timeoutMs: 60_000,
      });
      writtenAt.set(name(i), performance.now());
    });
  for (const v of variants) {
    const mod = (await import(
      pathToFileURL(path.resolve(v.pacer)).href
    )) as typeof import('../src/watch/read-pacer.js');
    const label = `${v.intervalMs === 0 ? 'read as events arrive' : `every ${v.intervalMs}ms`} (${v.pacer})`;
    for (const mode of ['live', 'replay'] as const) {
      const pacer = v.intervalMs > 0 ? new mod.WatchReadPacer() : undefined;
      const tick = pacer ? setInterval(() => pacer.tick(), v.intervalMs) : undefined;
      const client: KubeClient = await cluster.cp.client();
      ready = ready === 'True' ? 'False' : 'True';
      const want = ready;
      const writtenAt = new Map<string, number>();
      // replay: the flip happens first; the watch then resumes from the list taken before it, and
      // the server sends every flip at once (as after a reconnect during a mass change).
      let before: List<unknown> | undefined;
      if (mode === 'replay') {
        before = await admin.request<List<unknown>>({
          method: 'GET',
          path: paths.nodes(),
          timeoutMs: 120_000,
        });
        await flip(want, writtenAt);
      }
      const watch = watchNodes({
        client,
        clock: { scheduler: monotonicScheduler },
        readPacer: pacer,
        wrapTransport: before
          ? (t) => ({ list: async () => before, watch: (r, sig) => t.watch(r, sig) })
          : undefined,
      });
      const seenAt = new Map<string, number>();
      watch.events$.subscribe((e) => {
        if (e.type !== 'Apply') return;
        const r = e.object.status?.conditions?.find((c) => c.type === 'Ready')?.status;
        if (r === want && !seenAt.has(e.object.metadata.name))
          seenAt.set(e.object.metadata.name, performance.now());
      });
      const startedAt = performance.now();
      watch.start();
      await watch.whenSynced();
      if (mode === 'live') {
        await sleep(2000);
        const flipFrom = performance.now();
        await flip(want, writtenAt);
        const writesDone = performance.now();
        const deadline = writesDone + 180_000;
        while (seenAt.size < nodes && performance.now() < deadline) await sleep(50);
        const allSeen = performance.now();
        const lags = [...writtenAt].map(([n, at]) => Math.max(0, (seenAt.get(n) ?? Number.NaN) - at) / 1000);
        console.log(
          `${label}, live flip: writes ${((writesDone - flipFrom) / 1000).toFixed(1)} s; seen ${seenAt.size}/${nodes}, the last ${((allSeen - writesDone) / 1000).toFixed(1)} s after the last write; lag p50 ${pct(lags, 50).toFixed(2)} s, p99 ${pct(lags, 99).toFixed(2)} s, max ${Math.max(...lags).toFixed(2)} s`,
        );
      } else {
        const deadline = performance.now() + 180_000;
        while (seenAt.size < nodes && performance.now() < deadline) await sleep(20);
        const s = (Math.max(...seenAt.values()) - startedAt) / 1000;
        console.log(
          `${label}, replayed flip: seen ${seenAt.size}/${nodes} ${s.toFixed(2)} s after the watch started, ${((one * seenAt.size) / 1e6 / s).toFixed(1)} MB/s`,
        );
      }
      watch.dispose();
      pacer?.close();
      if (tick) clearInterval(tick);
      client.close();
      await sleep(3000);
    }
  }
} finally {
  await cluster.stop();
}
