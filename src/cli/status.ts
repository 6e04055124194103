import { systemClock } from '../clock/clock.js';
import { formatDuration } from '../clock/duration.js';
import { helpText, parseArgs, STATUS_FLAGS } from '../config/index.js';
import { KubeApiError, KubeClient, KubeTransportError, paths } from '../kube/client.js';
import {
  homeDirectory,
  type KubeconfigEnv,
  KubeconfigError,
  type KubeconfigResolution,
  resolveKubeconfig,
} from '../kube/kubeconfig.js';
import { proxyEnvOf } from '../kube/proxy.js';
import type { RequestRateLimiter } from '../kube/rate-limit.js';
import { COMPONENT_NAME } from '../names/index.js';
import { watchNodeLeases, watchNodes } from '../watch/index.js';
import { FleetView } from './view.js';

/** Why the API server could not be used, on one line: the server, then the cause. */
export function apiServerProblem(server: string, err: unknown, timeoutMs: number): string {
  if (err instanceof KubeApiError) {
    return `the API server ${server} refused the request: ${err.message}`;
  }
  const code = err instanceof KubeTransportError ? err.code : (err as NodeJS.ErrnoException)?.code;
  const detail = (err instanceof Error ? err.message : String(err)).split('\n')[0];
  const cause =
    code === 'TIMEOUT'
      ? `no answer within ${formatDuration(timeoutMs)} (timed out)`
      : code === 'ECONNREFUSED'
        ? `connection refused (${detail})`
        : code === 'ETIMEDOUT'
          ? `timed out (${detail})`
          : code === 'ENOTFOUND' || code === 'EAI_AGAIN'
            ? `host not found (${detail})`
            : code === 'ECONNRESET'
              ? `connection reset (${detail})`
              : detail;
  return `cannot reach the API server ${server}: ${cause}`;
}

/** `p`, or undefined once `ms` have passed (the timer does not keep the process alive after). */
async function within<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const late = new Promise<undefined>((r) => {
      timer = setTimeout(() => r(undefined), ms);
    });
    return await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `status [--watch]`: a read-only view of any cluster: node heartbeat ages as this process observes
 * them, Ready states, node.kubernetes.io and companion taints, controller replicas and the leader. Needs only
 * read access (nodes, leases). Exit codes: 0 shown, 1 the API server could not be used (one line
 * naming it and the cause, after at most --timeout), 2 a bad flag or kubeconfig (one line naming
 * the flag or the file and the problem).
 */
export async function runStatus(argv: string[], env: KubeconfigEnv): Promise<number> {
  let args: ReturnType<typeof parseArgs>;
  try {
    args = parseArgs(argv, STATUS_FLAGS);
  } catch (err) {
    console.error(`error: ${(err as Error).message}`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(`${helpText('Usage: node-lifecycle-controller status [flags]', STATUS_FLAGS)}\n`);
    return 0;
  }
  const connected = await connect(args, env);
  if (typeof connected === 'number') return connected;
  const { kube, client } = connected;
  const timeoutMs = args.values.timeout as number;
  const started = performance.now();
  // One bounded request first: an address where nothing listens, or something that never answers,
  // is reported with its cause instead of a watch retrying for ever.
  try {
    await client.request({ method: 'GET', path: paths.nodes(), query: { limit: 1 }, timeoutMs });
  } catch (err) {
    console.error(`error: ${apiServerProblem(kube.server, err, timeoutMs)}`);
    client.close();
    return 1;
  }
  const clock = systemClock;
  const nodes = watchNodes({ client, clock });
  const leases = watchNodeLeases({ client, clock });
  const view = new FleetView(clock, nodes, leases, args.values['companion-taint-key'] as string);
  const stop = () => {
    nodes.stop();
    leases.stop();
    client.close();
  };
  nodes.start();
  leases.start();
  const problem = await syncProblem(kube.server, [nodes, leases], timeoutMs, started);
  if (problem) {
    console.error(`error: ${problem}`);
    stop();
    return 1;
  }
  const title = `node-lifecycle-controller status: ${kube.server} (kubeconfig from ${kube.source})`;
  const shown = { view, title, maxRows: args.values['max-rows'] as number };
  const refresh = () => view.refreshReplicas(client, args.values.lock as string).catch(() => undefined);
  await refresh();
  if (args.values.watch) await showUntilSignal(shown, refresh);
  else process.stdout.write(`${view.render({ title, maxRows: shown.maxRows })}\n`);
  stop();
  return 0;
}

/** The kubeconfig and a client, or exit code 2 after one line naming the problem. */
export async function connect(
  args: ReturnType<typeof parseArgs>,
  env: KubeconfigEnv,
  opts: { userAgent: string; rateLimiter?: RequestRateLimiter } = { userAgent: `${COMPONENT_NAME}/status` },
): Promise<{ kube: KubeconfigResolution; client: KubeClient } | number> {
  try {
    const kube = resolveKubeconfig({
      flag: (args.values.kubeconfig as string) || undefined,
      env,
      homeDir: homeDirectory(),
      processEnv: env as NodeJS.ProcessEnv,
      proxyEnv: proxyEnvOf(env as Record<string, string | undefined>),
    });
    const client = await KubeClient.fromCredentials(await kube.credentials(), opts);
    return { kube, client };
  } catch (err) {
    if (!(err instanceof KubeconfigError)) throw err;
    console.error(`error: ${err.message}`);
    return 2;
  }
}

/** Waits for both lists within what is left of --timeout; what did not complete, or undefined. */
async function syncProblem(
  server: string,
  watches: readonly (ReturnType<typeof watchNodes> | ReturnType<typeof watchNodeLeases>)[],
  timeoutMs: number,
  started: number,
): Promise<string | undefined> {
  const left = Math.max(1, timeoutMs - (performance.now() - started));
  const synced = await within(
    Promise.all(watches.map((w) => w.whenSynced())).then(() => true),
    left,
  );
  if (synced) return undefined;
  const pending = watches
    .map((w) => w.health())
    .filter((h) => !h.synced)
    .map((h) => `${h.resource}${h.lastError ? ` (last error: ${h.lastError})` : ''}`);
  return (
    `the API server ${server} answered, but the list of ${pending.join(' and ')} did not ` +
    `complete within ${formatDuration(timeoutMs)} (timed out)`
  );
}

/** --watch: redraws every second (replicas every two) until SIGINT or SIGTERM. */
async function showUntilSignal(
  shown: { view: FleetView; title: string; maxRows: number },
  refresh: () => Promise<unknown>,
): Promise<void> {
  const tty = process.stdout.isTTY === true;
  let tick = 0;
  const timer = setInterval(() => {
    if (++tick % 2 === 0) void refresh();
    const text = shown.view.render({ title: shown.title, maxRows: shown.maxRows, colour: tty });
    process.stdout.write(tty ? `\x1b[H\x1b[2J${text}\n` : `${text}\n\n`);
  }, 1000);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  clearInterval(timer);
}
