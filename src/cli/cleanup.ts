import { monotonicScheduler } from '../clock/clock.js';
import { CLEANUP_FLAGS, helpText, parseArgs } from '../config/index.js';
import { KubeApiError, type KubeClient, PatchType, paths } from '../kube/client.js';
import type { KubeconfigEnv } from '../kube/kubeconfig.js';
import { RequestRateLimiter } from '../kube/rate-limit.js';
import type { List, Node } from '../kube/types.js';
import { COMPONENT_NAME } from '../names/index.js';
import { type CleanupOptions, cleanupPlan, type NodeCleanup, writes } from '../remediation/index.js';
import { apiServerProblem, connect } from './status.js';

/** Attempts of one node's write when the node changed under it (409): read again, plan again. */
const CONFLICT_ATTEMPTS = 5;
const PAGE = 500;

/**
 * `cleanup [--yes]`: after an uninstall, takes off the nodes what only this controller would have
 * taken off (src/remediation/cleanup.ts says what, and what it leaves). A dry run by default: each
 * node's plan is printed and nothing is written; `--yes` writes, through the client's rate limit
 * (--kube-api-qps/--kube-api-burst), each node with its resourceVersion as a precondition (a node
 * changed meanwhile is read and planned again). Exit codes: 0 done (or nothing to do), 1 the API
 * server could not be used or a write failed, 2 a bad flag or kubeconfig.
 */
export async function runCleanup(argv: string[], env: KubeconfigEnv): Promise<number> {
  let args: ReturnType<typeof parseArgs>;
  try {
    args = parseArgs(argv, CLEANUP_FLAGS);
  } catch (err) {
    console.error(`error: ${(err as Error).message}`);
    return 2;
  }
  if (args.help) {
    process.stdout.write(`${helpText('Usage: node-lifecycle-controller cleanup [flags]', CLEANUP_FLAGS)}\n`);
    return 0;
  }
  const limiter = new RequestRateLimiter(
    args.values['kube-api-qps'] as number,
    args.values['kube-api-burst'] as number,
    monotonicScheduler,
  );
  const connected = await connect(args, env, {
    userAgent: `${COMPONENT_NAME}/cleanup`,
    rateLimiter: limiter,
  });
  if (typeof connected === 'number') return connected;
  const { kube, client } = connected;
  const timeoutMs = args.values.timeout as number;
  const write = args.values.yes as boolean;
  const o: CleanupOptions = { companionTaintKey: args.values['companion-taint-key'] as string };
  try {
    let nodes: Node[];
    try {
      nodes = await listNodes(client, timeoutMs);
    } catch (err) {
      console.error(`error: ${apiServerProblem(kube.server, err, timeoutMs)}`);
      return 1;
    }
    const plans = nodes.map((n) => cleanupPlan(n, o)).filter((p): p is NodeCleanup => p !== undefined);
    const todo = plans.filter(writes);
    let failed = 0;
    for (const p of plans) {
      if (!writes(p)) {
        process.stdout.write(`${p.node}: left as is: ${p.kept.join(', ')} (the node is not Ready)\n`);
        continue;
      }
      if (!write) {
        process.stdout.write(`${p.node}: would remove ${describe(p)}\n`);
        continue;
      }
      const done = await clean(client, p, o, timeoutMs).then(
        (r) => ({ ok: true as const, r }),
        (err: unknown) => ({ ok: false as const, err }),
      );
      if (!done.ok) {
        failed++;
        const why = done.err instanceof Error ? done.err.message : String(done.err);
        process.stdout.write(`${p.node}: FAILED: ${why.split('\n')[0]}\n`);
      } else if (done.r === undefined) process.stdout.write(`${p.node}: node gone\n`);
      else process.stdout.write(`${p.node}: removed ${describe(done.r) || 'nothing (gone meanwhile)'}\n`);
    }
    process.stdout.write(
      `${nodes.length} nodes, ${todo.length} with something of ours to remove${
        write ? (failed ? `, ${failed} failed` : '') : ' (dry run: nothing written; --yes to write)'
      }\n`,
    );
    return failed > 0 ? 1 : 0;
  } finally {
    client.close();
  }
}

function describe(p: NodeCleanup): string {
  return [
    ...p.taintsRemoved.map((t) => `taint ${t}`),
    ...p.annotationsRemoved.map((a) => `annotation ${a}`),
    ...p.conditionsRemoved.map((c) => `condition ${c}`),
  ].join(', ');
}

async function listNodes(client: KubeClient, timeoutMs: number): Promise<Node[]> {
  const out: Node[] = [];
  let cont: string | undefined;
  do {
    const page = (await client.request({
      method: 'GET',
      path: paths.nodes(),
      query: { limit: PAGE, ...(cont ? { continue: cont } : {}) },
      timeoutMs,
    })) as List<Node>;
    out.push(...(page.items ?? []));
    cont = page.metadata?.continue || undefined;
  } while (cont);
  return out;
}

/**
 * Writes `p` to its node: its taints and annotations (a merge patch, the resourceVersion it was
 * planned on as a precondition), then its conditions (the status subresource). A 409 reads the node
 * again and plans again. Returns what was removed, or undefined when the node is gone.
 */
async function clean(
  client: KubeClient,
  first: NodeCleanup,
  o: CleanupOptions,
  timeoutMs: number,
): Promise<NodeCleanup | undefined> {
  for (let attempt = 1; ; attempt++) {
    const node = (await client
      .request({ method: 'GET', path: paths.node(first.node), timeoutMs })
      .catch((err: unknown) => {
        if (err instanceof KubeApiError && err.status === 404) return undefined;
        throw err;
      })) as Node | undefined;
    if (!node) return undefined;
    const p = cleanupPlan(node, o);
    // Taken off meanwhile (the controller still running, an operator): nothing left to write.
    if (!p || !writes(p))
      return {
        ...first,
        taintsRemoved: [],
        taints: undefined,
        annotationsRemoved: [],
        conditionsRemoved: [],
      };
    try {
      if (p.taints !== undefined || p.annotationsRemoved.length > 0) {
        await client.request({
          method: 'PATCH',
          path: paths.node(p.node),
          contentType: PatchType.merge,
          body: {
            metadata: {
              resourceVersion: node.metadata.resourceVersion,
              ...(p.annotationsRemoved.length
                ? { annotations: Object.fromEntries(p.annotationsRemoved.map((a) => [a, null])) }
                : {}),
            },
            ...(p.taints !== undefined ? { spec: { taints: p.taints } } : {}),
          },
          timeoutMs,
        });
      }
      if (p.conditionsRemoved.length > 0) {
        await client.request({
          method: 'PATCH',
          path: paths.nodeStatus(p.node),
          contentType: PatchType.strategic,
          body: { status: { conditions: p.conditionsRemoved.map((type) => ({ type, $patch: 'delete' })) } },
          timeoutMs,
        });
      }
      return p;
    } catch (err) {
      if (!(err instanceof KubeApiError && err.status === 409) || attempt >= CONFLICT_ATTEMPTS) throw err;
    }
  }
}
