import { systemClock } from '../clock/clock.js';
import { type FlagSpec, helpText, parseArgs } from '../config/flags.js';
import { Companion } from '../health/index.js';
import { KubeClient } from '../kube/client.js';
import { homeDirectory, type KubeconfigEnv, resolveKubeconfig } from '../kube/kubeconfig.js';
import { proxyEnvOf } from '../kube/proxy.js';
import { watchNodeLeases, watchNodes } from '../watch/index.js';
import { FleetView } from './view.js';

const STATUS_FLAGS: readonly FlagSpec[] = [
  {
    group: 'Status',
    name: 'kubeconfig',
    kind: 'string',
    default: '',
    help: 'Path to a kubeconfig (same resolution order as the controller).',
  },
  {
    group: 'Status',
    name: 'watch',
    kind: 'bool',
    default: 'false',
    help: 'Keep the view open and refresh it every second.',
  },
  {
    group: 'Status',
    name: 'companion-taint-key',
    kind: 'string',
    default: Companion.DefaultTaintKey,
    help: "The companion mode's taint key (--companion-taint-key of the controller): shown in full, with its value.",
  },
  {
    group: 'Status',
    name: 'lock',
    kind: 'string',
    default: 'node-lifecycle-controller',
    help: 'Name of the leader-election Lease.',
  },
  {
    group: 'Status',
    name: 'max-rows',
    kind: 'int',
    default: '40',
    min: 1,
    max: 100000,
    help: 'Rows shown (not-Ready nodes first).',
  },
];

/**
 * `status [--watch]`: a read-only view of any cluster: node heartbeat ages as this process observes
 * them, Ready states, node.kubernetes.io and companion taints, controller replicas and the leader. Needs only
 * read access (nodes, leases).
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
  const kube = resolveKubeconfig({
    flag: (args.values.kubeconfig as string) || undefined,
    env,
    homeDir: homeDirectory(),
    processEnv: env as NodeJS.ProcessEnv,
    proxyEnv: proxyEnvOf(env as Record<string, string | undefined>),
  });
  const client = await KubeClient.fromCredentials(await kube.credentials(), {
    userAgent: 'node-lifecycle-controller/status',
  });
  const clock = systemClock;
  const nodes = watchNodes({ client, clock });
  const leases = watchNodeLeases({ client, clock });
  const view = new FleetView(clock, nodes, leases, args.values['companion-taint-key'] as string);
  nodes.start();
  leases.start();
  await Promise.all([nodes.whenSynced(), leases.whenSynced()]);
  const lock = args.values.lock as string;
  const maxRows = args.values['max-rows'] as number;
  const title = `node-lifecycle-controller status: ${kube.server} (kubeconfig from ${kube.source})`;
  const refresh = () => view.refreshReplicas(client, lock).catch(() => undefined);
  await refresh();
  if (!args.values.watch) {
    process.stdout.write(`${view.render({ title, maxRows })}\n`);
    nodes.stop();
    leases.stop();
    client.close();
    return 0;
  }
  const tty = process.stdout.isTTY === true;
  let tick = 0;
  const timer = setInterval(() => {
    if (++tick % 2 === 0) void refresh();
    const text = view.render({ title, maxRows, colour: tty });
    process.stdout.write(tty ? `\x1b[H\x1b[2J${text}\n` : `${text}\n\n`);
  }, 1000);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  clearInterval(timer);
  nodes.stop();
  leases.stop();
  client.close();
  return 0;
}
