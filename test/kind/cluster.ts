/**
 * The kind cluster under test, one for the suite: created with kube-controller-manager's own
 * node-lifecycle controller turned off, the controller image built from the Dockerfile (or a
 * prebuilt one) and loaded; the upstream-mode scenarios install manifests/overlays/kind (then the
 * chart) and remove it all; then the companion scenarios turn kube-controller-manager's controller
 * on in place. Deleted at the end unless NLC_KIND_KEEP=1.
 */

import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { dump as dumpYaml, load as loadYaml } from 'js-yaml';
import { projectHelm } from '../support/helm.js';
import {
  builtToolDir,
  condition,
  DEPLOYMENT,
  type DeploymentObj,
  hasTaint,
  healthTaints,
  IMAGE,
  type KindSettings,
  type LeaseObj,
  LOCK,
  NOT_READY,
  type NodeObj,
  NS,
  type PodObj,
  REPO,
  secs,
  Tools,
  writeDiagnostics,
} from './support.js';

/** Polls until `check` returns a truthy value; returns it and the milliseconds it took. */
export async function waitFor<T>(
  what: string,
  timeoutMs: number,
  check: () => Promise<T | undefined | false | null>,
  intervalMs = 500,
): Promise<{ value: T; ms: number }> {
  const start = performance.now();
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return { value: v, ms: performance.now() - start };
    } catch (err) {
      last = err;
    }
    if (performance.now() - start > timeoutMs) {
      throw new Error(
        `FAIL: ${what}: not within ${Math.round(timeoutMs / 1000)}s${last ? ` (last error: ${String(last)})` : ''}`,
      );
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

export function pass(line: string): void {
  console.log(`PASS: ${line}`);
}

/** The kind config: the given file or test/kind/kind-config.yaml, plus what a cgroup v1 host needs. */
export function kindConfig(s: KindSettings): string {
  const file = s.configFile ?? path.join(REPO, 'test', 'kind', 'kind-config.yaml');
  const config = loadYaml(readFileSync(file, 'utf8')) as { kubeadmConfigPatches?: string[] };
  if (s.cgroupVersion === '1') {
    // kubelet >= 1.35 refuses to start on cgroup v1 unless told (a host fact, not a test choice).
    config.kubeadmConfigPatches = [
      ...(config.kubeadmConfigPatches ?? []),
      'kind: KubeletConfiguration\napiVersion: kubelet.config.k8s.io/v1beta1\nfailCgroupV1: false\n',
    ];
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nlc-kind-'));
  const out = path.join(dir, 'kind-config.yaml');
  writeFileSync(out, dumpYaml(config));
  return out;
}

export class KindCluster {
  readonly t: Tools;
  /** Nodes by name, and the worker names. */
  workers: string[] = [];
  controlPlane = '';

  constructor(readonly s: KindSettings) {
    this.t = new Tools(s);
  }

  async exists(): Promise<boolean> {
    const out = await this.t.sh('kind', ['get', 'clusters']);
    return out.split('\n').includes(this.s.cluster);
  }

  /** Builds the image from the Dockerfile (BuildKit; the CA as a secret when there is one). */
  async buildImage(): Promise<{ ms: number; bytes: number }> {
    const start = performance.now();
    if (this.s.prebuiltImage) {
      await this.t.docker(['tag', this.s.prebuiltImage, IMAGE]);
    } else {
      const secret = this.s.buildCaFile ? ['--secret', `id=npm-ca,src=${this.s.buildCaFile}`] : [];
      await this.t.stream('docker', ['build', ...secret, '-t', IMAGE, REPO], { DOCKER_BUILDKIT: '1' });
    }
    const bytes = Number((await this.t.docker(['image', 'inspect', IMAGE, '--format', '{{.Size}}'])).trim());
    return { ms: performance.now() - start, bytes };
  }

  async create(): Promise<void> {
    if (await this.exists()) {
      console.log(`deleting the leftover cluster ${this.s.cluster}`);
      await this.t.sh('kind', ['delete', 'cluster', '--name', this.s.cluster], { timeoutMs: 180_000 });
    }
    const config = kindConfig(this.s);
    await this.t.stream('kind', [
      'create',
      'cluster',
      '--name',
      this.s.cluster,
      '--config',
      config,
      '--kubeconfig',
      this.s.kubeconfig,
      '--wait',
      '180s',
      ...(this.s.nodeImage ? ['--image', this.s.nodeImage] : []),
    ]);
    rmSync(path.dirname(config), { recursive: true, force: true });
    const nodes = await this.t.getJson<{
      items: { metadata: { name: string; labels?: Record<string, string> } }[];
    }>(['nodes']);
    for (const n of nodes.items) {
      if (n.metadata.labels?.['node-role.kubernetes.io/control-plane'] !== undefined)
        this.controlPlane = n.metadata.name;
      else this.workers.push(n.metadata.name);
    }
    this.workers.sort();
  }

  async loadImage(image: string): Promise<void> {
    await this.t.stream('kind', ['load', 'docker-image', image, '--name', this.s.cluster]);
  }

  async install(): Promise<void> {
    await this.t.kubectl(['apply', '-k', path.join(REPO, 'manifests', 'overlays', 'kind')], {
      timeoutMs: 120_000,
    });
  }

  /** Removes what install() applied, and waits until it is gone (the namespace included). */
  async uninstall(): Promise<void> {
    await this.t.kubectl(['delete', '-k', path.join(REPO, 'manifests', 'overlays', 'kind'), '--wait=true'], {
      timeoutMs: 180_000,
    });
  }

  /**
   * Where `installChart` takes the chart from: the repository's folder, or (the release
   * rehearsal) a chart in an OCI registry, by version.
   */
  chartSource: { ref: string; version?: string; plainHttp?: boolean } = {
    ref: path.join(REPO, 'charts', 'node-lifecycle-controller'),
  };

  /**
   * `helm install` (or `upgrade --reuse-values`) of the chart (chartSource) with the project's Helm,
   * the repository's ci/kind-values.yaml and `extra` arguments.
   */
  async installChart(extra: string[] = [], verb: 'install' | 'upgrade' = 'install'): Promise<void> {
    const values = path.join(REPO, 'charts', 'node-lifecycle-controller', 'ci', 'kind-values.yaml');
    const { ref, version, plainHttp } = this.chartSource;
    await this.t.sh(
      projectHelm(),
      [
        verb,
        ...(verb === 'upgrade' ? ['--reuse-values'] : []),
        DEPLOYMENT,
        ref,
        ...(version ? ['--version', version] : []),
        ...(plainHttp ? ['--plain-http'] : []),
        '--kubeconfig',
        this.s.kubeconfig,
        '--namespace',
        NS,
        '--create-namespace',
        '-f',
        values,
        '--wait',
        '--timeout',
        '180s',
        ...extra,
      ],
      { timeoutMs: 240_000 },
    );
  }

  async rolloutStatus(timeoutS: number): Promise<void> {
    try {
      await this.t.kubectl(
        ['-n', NS, 'rollout', 'status', `deploy/${DEPLOYMENT}`, `--timeout=${timeoutS}s`],
        {
          timeoutMs: (timeoutS + 30) * 1000,
        },
      );
    } catch (err) {
      throw new Error(
        `FAIL: the rollout of deploy/${DEPLOYMENT} did not complete in ${timeoutS}s: ${String(err)}`,
      );
    }
  }

  async deployment(): Promise<DeploymentObj> {
    return this.t.getJson<DeploymentObj>(['-n', NS, `deploy/${DEPLOYMENT}`]);
  }

  async controllerPods(): Promise<PodObj[]> {
    const list = await this.t.getJson<{ items: PodObj[] }>([
      '-n',
      NS,
      'pods',
      '-l',
      'app.kubernetes.io/name=node-lifecycle-controller',
    ]);
    return list.items;
  }

  async lease(): Promise<LeaseObj> {
    return this.t.getJson<LeaseObj>(['-n', NS, `lease/${LOCK}`]);
  }

  /** The leading pod and its node, when the lock's holder is a running pod. */
  async leader(): Promise<{ pod: string; node: string } | undefined> {
    const holder = (await this.lease()).spec.holderIdentity;
    if (!holder) return undefined;
    const pod = (await this.controllerPods()).find((p) => p.metadata.name === holder);
    return pod?.spec.nodeName ? { pod: holder, node: pod.spec.nodeName } : undefined;
  }

  /**
   * Starts a node's container again if a case stopped or killed it (`docker start` of a running
   * one does nothing) and waits for the node Ready with no health taints: what a case that failed
   * half-way must leave behind, so that the cases after it meet the cluster they expect.
   */
  async bringBack(node: string, timeoutMs = 180_000): Promise<void> {
    await this.t.docker(['start', node]);
    await waitFor(`${node} back: Ready=True with no health taints`, timeoutMs, async () => {
      const n = await this.t.getJson<NodeObj>(['node', node]);
      return condition(n, 'Ready')?.status === 'True' && healthTaints(n).length === 0;
    });
  }

  /**
   * The API server's addresses as `node`'s kubelet dials them (its kubeconfig's server, resolved
   * inside the node: a name may have an IPv4 and an IPv6 address): what a cut from the control
   * plane drops.
   */
  private async apiServerSeenFrom(node: string): Promise<{ ips: string[]; port: string }> {
    const conf = await this.t.docker(['exec', node, 'cat', '/etc/kubernetes/kubelet.conf']);
    const server = /server:\s*https:\/\/(\[[^\]]+\]|[^:/\s]+):(\d+)/.exec(conf);
    if (!server) throw new Error(`no API server address in ${node}'s /etc/kubernetes/kubelet.conf`);
    const host = server[1]!.replace(/^\[|\]$/g, '');
    const ips = /^[\d.]+$|:/.test(host)
      ? [host]
      : [
          ...new Set(
            (await this.t.docker(['exec', node, 'getent', 'ahosts', host]))
              .split('\n')
              .map((l) => l.trim().split(/\s+/)[0])
              .filter((a): a is string => !!a),
          ),
        ];
    if (ips.length === 0) throw new Error(`${node} cannot resolve the API server's name ${host}`);
    return { ips, port: server[2]! };
  }

  /** The iptables rules that cut `node` from the API server, as commands without -I/-D. */
  private async cutRules(node: string): Promise<[string, string[]][]> {
    const { ips, port } = await this.apiServerSeenFrom(node);
    return ips.map((ip) => [
      ip.includes(':') ? 'ip6tables' : 'iptables',
      [
        'OUTPUT',
        '-p',
        'tcp',
        '-d',
        ip,
        '--dport',
        port,
        '-m',
        'comment',
        '--comment',
        'nlc-kind-cut',
        '-j',
        'DROP',
      ],
    ]);
  }

  /**
   * Cuts `node` from the control plane only: rules in its container's OUTPUT chains drop what its
   * own processes (the kubelet, kube-proxy, the CNI agent) send to the API server, on every address
   * it resolves to. The node network stays up: pod traffic is forwarded (not OUTPUT), and the
   * kubelet's port still answers.
   */
  async cutFromApiServer(node: string): Promise<void> {
    for (const [cmd, rule] of await this.cutRules(node))
      await this.t.docker(['exec', node, cmd, '-I', ...rule]);
  }

  /** Removes every cut rule from `node` (none there: nothing to do). */
  async reconnect(node: string): Promise<void> {
    for (const [cmd, rule] of await this.cutRules(node)) {
      for (let i = 0; i < 10; i++) {
        const removed = await this.t
          .docker(['exec', node, cmd, '-D', ...rule])
          .then(() => true)
          .catch(() => false);
        if (!removed) break;
      }
    }
  }

  /** Both replicas Ready, on different nodes, one of them leading. */
  async steady(timeoutMs: number): Promise<{ leader: { pod: string; node: string }; standby: PodObj }> {
    const { value } = await waitFor('two Ready replicas on two nodes, one leading', timeoutMs, async () => {
      const pods = (await this.controllerPods()).filter(
        (p) =>
          !p.metadata.deletionTimestamp &&
          p.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
      );
      const leader = await this.leader();
      if (pods.length !== 2 || !leader || pods[0]?.spec.nodeName === pods[1]?.spec.nodeName) return undefined;
      const standby = pods.find((p) => p.metadata.name !== leader.pod);
      return standby ? { leader, standby } : undefined;
    });
    return value;
  }

  /** Pod logs, /metrics of every replica, nodes, pods, events: into .tmp/kind-diagnostics/<name>/. */
  async diagnostics(name: string): Promise<string> {
    const dir = path.join(this.s.diagnosticsDir, name.replace(/[^a-zA-Z0-9-]+/g, '-').slice(0, 80));
    const safe = async (what: string, f: () => Promise<string>) => {
      try {
        return await f();
      } catch (err) {
        return `(${what} failed: ${String(err)})`;
      }
    };
    const k = (args: string[]) => safe(args.join(' '), () => this.t.kubectl(args, { timeoutMs: 30_000 }));
    writeDiagnostics(dir, 'nodes.txt', await k(['get', 'nodes', '-o', 'wide']));
    writeDiagnostics(dir, 'nodes.yaml', await k(['get', 'nodes', '-o', 'yaml']));
    writeDiagnostics(dir, 'pods.txt', await k(['get', 'pods', '-A', '-o', 'wide']));
    writeDiagnostics(dir, 'lease.yaml', await k(['-n', NS, 'get', 'lease', LOCK, '-o', 'yaml']));
    writeDiagnostics(dir, 'events.txt', await k(['get', 'events', '-A', '--sort-by=.lastTimestamp']));
    // kube-controller-manager's own log (a restart or a lost lease gives every node a fresh grace).
    writeDiagnostics(
      dir,
      'kube-controller-manager.log',
      `${await k(['-n', 'kube-system', 'logs', '-l', 'component=kube-controller-manager', '--tail=400'])}\n--- leases ---\n${await k(['-n', 'kube-system', 'get', 'lease', 'kube-controller-manager', '-o', 'yaml'])}`,
    );
    // The cluster's own slowness, for a late figure: etcd's slow requests and fdatasyncs, the API
    // server's traces of requests over 500 ms (printed below too).
    const slowLines = (log: string, re: RegExp) =>
      log
        .split('\n')
        .filter((l) => re.test(l))
        .slice(-40)
        .join('\n');
    const slow = `--- etcd\n${slowLines(
      await k(['-n', 'kube-system', 'logs', '-l', 'component=etcd', '--tail=5000']),
      /took too long|slow fdatasync/,
    )}\n--- kube-apiserver\n${slowLines(
      await k(['-n', 'kube-system', 'logs', '-l', 'component=kube-apiserver', '--tail=5000']),
      /Trace\[|total time/,
    )}`;
    writeDiagnostics(dir, 'slow-requests.txt', slow);
    const pods = await safe('pods', async () =>
      (await this.controllerPods()).map((p) => p.metadata.name).join('\n'),
    );
    let summary = `--- the cluster's slow requests (last 40 of each)\n${slow}\n`;
    for (const pod of pods.split('\n').filter((p) => p && !p.startsWith('('))) {
      const logs = await k(['-n', NS, 'logs', pod, '--tail=400']);
      const previous = await k(['-n', NS, 'logs', pod, '--previous', '--tail=200']);
      const metrics = await safe('/metrics', () => this.scrape(pod));
      writeDiagnostics(dir, `${pod}.log`, `${logs}\n--- previous container ---\n${previous}`);
      writeDiagnostics(dir, `${pod}.metrics`, metrics);
      summary += `--- ${pod}: last log lines\n${logs.split('\n').slice(-25).join('\n')}\n`;
    }
    console.log(`diagnostics written to ${dir}\n${summary}`);
    return dir;
  }

  /**
   * One replica's /metrics as a scraper sees it: through `kubectl port-forward`, over HTTPS, with the
   * token of monitoring/prometheus (bound to the shipped metrics-reader ClusterRole).
   */
  async scrape(pod: string): Promise<string> {
    const token = (await this.t.kubectl(['-n', 'monitoring', 'create', 'token', 'prometheus'])).trim();
    const child = spawn(
      'kubectl',
      ['--kubeconfig', this.s.kubeconfig, '-n', NS, 'port-forward', `pod/${pod}`, ':8080'],
      {
        env: this.s.env,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    try {
      const port = await new Promise<number>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('kubectl port-forward did not start')), 20_000);
        child.stdout.on('data', (b: Buffer) => {
          const m = /Forwarding from 127\.0\.0\.1:(\d+)/.exec(b.toString());
          if (m?.[1]) {
            clearTimeout(timer);
            resolve(Number(m[1]));
          }
        });
        child.on('exit', (code) => reject(new Error(`kubectl port-forward exited ${code}`)));
      });
      return await new Promise<string>((resolve, reject) => {
        const req = https.get(
          {
            host: '127.0.0.1',
            port,
            path: '/metrics',
            rejectUnauthorized: false,
            headers: { Authorization: `Bearer ${token}` },
          },
          (res) => {
            let body = '';
            res.on('data', (c: Buffer) => {
              body += c.toString();
            });
            res.on('end', () => resolve(`HTTP ${res.statusCode}\n${body}`));
          },
        );
        req.setTimeout(15_000, () => req.destroy(new Error('timed out')));
        req.on('error', reject);
      });
    } finally {
      child.kill();
    }
  }

  /** monitoring/prometheus, bound to the shipped metrics-reader ClusterRole: who scrapes. */
  async installScraperAccount(): Promise<void> {
    const docs = prometheusManifests([]).filter((d) =>
      ['Namespace', 'ServiceAccount', 'ClusterRoleBinding'].includes((d as { kind: string }).kind),
    );
    await this.t.kubectl(['apply', '-f', '-'], {
      input: JSON.stringify({ apiVersion: 'v1', kind: 'List', items: docs }),
    });
  }

  /**
   * Turns kube-controller-manager's own node-lifecycle-controller on in place, as a managed control
   * plane has it: its static pod manifest on the control-plane node loses `-node-lifecycle-controller`
   * from --controllers and the kubelet restarts it. Resolves once the new process leads (its lock has
   * a new holder, renewed) and returns the milliseconds that took.
   */
  async enableProviderNodeLifecycle(): Promise<number> {
    const start = performance.now();
    const manifest = '/etc/kubernetes/manifests/kube-controller-manager.yaml';
    const holder = async () =>
      (
        await this.t
          .getJson<LeaseObj>(['-n', 'kube-system', 'lease', 'kube-controller-manager'])
          .catch(() => ({ spec: {} }) as LeaseObj)
      ).spec.holderIdentity ?? '';
    const before = await holder();
    // Written beside the manifests folder and renamed into it: the kubelet reads every file in that
    // folder as a pod, so no temporary file (sed -i makes one) may appear there.
    await this.t.docker([
      'exec',
      this.controlPlane,
      'sh',
      '-c',
      `sed 's/,-node-lifecycle-controller//' ${manifest} > /etc/kubernetes/kcm.yaml.new && mv /etc/kubernetes/kcm.yaml.new ${manifest}`,
    ]);
    await waitFor(
      'kube-controller-manager restarted with its node-lifecycle-controller, leading',
      240_000,
      async () => {
        const pods = await this.t.getJson<{
          items: {
            spec: { containers: { command: string[] }[] };
            status: { conditions?: { type: string; status: string }[] };
          }[];
        }>(['-n', 'kube-system', 'pods', '-l', 'component=kube-controller-manager']);
        const pod = pods.items[0];
        const command = pod?.spec.containers[0]?.command ?? [];
        const ready = pod?.status.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
        if (!ready || command.some((f) => f.includes('-node-lifecycle-controller'))) return undefined;
        const now = await holder();
        return now !== '' && now !== before ? now : undefined;
      },
    );
    return performance.now() - start;
  }

  /**
   * Removes what the upstream-mode scenarios installed (the Helm release, its namespace, the
   * scraper's namespace, their test pods) so that the next mode starts from a bare cluster; every
   * worker is started and Ready.
   */
  async removeInstalls(): Promise<void> {
    for (const w of this.workers) await this.t.docker(['start', w]).catch(() => undefined);
    await this.t
      .sh(
        projectHelm(),
        ['uninstall', DEPLOYMENT, '--kubeconfig', this.s.kubeconfig, '--namespace', NS, '--wait'],
        {
          timeoutMs: 180_000,
        },
      )
      .catch(() => undefined);
    await this.t.kubectl(['delete', 'namespace', NS, 'monitoring', '--ignore-not-found', '--wait=true'], {
      timeoutMs: 240_000,
    });
    await this.t.kubectl(['-n', 'default', 'delete', 'pods', '--all', '--wait=true'], { timeoutMs: 120_000 });
    await waitFor('every node Ready', 240_000, async () => {
      const nodes = await this.t.getJson<{ items: NodeObj[] }>(['nodes']);
      return nodes.items.every((n) => condition(n, 'Ready')?.status === 'True') || undefined;
    });
  }

  async delete(): Promise<void> {
    if (this.s.keep) {
      console.log(`keeping cluster ${this.s.cluster} (kind delete cluster --name ${this.s.cluster})`);
      return;
    }
    await this.t.sh('kind', ['delete', 'cluster', '--name', this.s.cluster], { timeoutMs: 180_000 });
    rmSync(this.s.kubeconfig, { force: true });
  }
}

/**
 * The suite's one cluster (test/kind/kind.test.ts runs both modes on it, in order): the image
 * built and the cluster created by the first file that asks, with kube-controller-manager's own
 * node-lifecycle-controller off; the nodes still tainted not-ready when it was created (the
 * bootstrap scenario's premise, read before any controller exists). Deleted by the suite's last hook.
 */
export interface SharedCluster {
  cluster: KindCluster;
  bootstrapTainted: string[];
}
let shared: Promise<SharedCluster> | undefined;

export function sharedCluster(s: KindSettings): Promise<SharedCluster> {
  shared ??= (async () => {
    const cluster = new KindCluster(s);
    const built = await cluster.buildImage();
    pass(
      `image ${IMAGE} ${s.prebuiltImage ? `tagged from ${s.prebuiltImage}` : 'built from the Dockerfile'} in ${secs(built.ms)}s, ${(built.bytes / 1e6).toFixed(1)} MB`,
    );
    const created = performance.now();
    await cluster.create();
    pass(
      `kind cluster ${s.cluster} created in ${secs(performance.now() - created)}s: ${cluster.controlPlane} + ${cluster.workers.join(', ')}`,
    );
    const nodes = await cluster.t.getJson<{ items: NodeObj[] }>(['nodes']);
    const bootstrapTainted = nodes.items
      .filter((n) => hasTaint(n, NOT_READY, 'NoSchedule'))
      .map((n) => n.metadata.name);
    await cluster.loadImage(IMAGE);
    return { cluster, bootstrapTainted };
  })();
  return shared;
}

/** Deletes the suite's cluster, if one was created (every worker started first). */
export async function deleteSharedCluster(): Promise<void> {
  if (!shared) return;
  const { cluster } = await shared;
  for (const w of cluster.workers) await cluster.t.docker(['start', w]).catch(() => undefined);
  await cluster.delete();
}

export const PROMETHEUS_IMAGE = 'nlc-e2e/prometheus:v3.16.0';
/** The sha256 of the binary an image was built from. */
const CONTENT_LABEL = 'org.nlc.content-sha256';

/**
 * A Prometheus image from the binary scripts/build-prometheus.sh builds (the one the loopback e2e
 * suite runs): a static binary in a tree of its own, user nobody. Built here on every machine so
 * the suite needs no registry.
 */
export async function buildPrometheusImage(t: Tools): Promise<void> {
  const dir = await builtToolDir(t, 'build-prometheus.sh');
  // Cached by content: the image of this very binary is kept (re-importing it each run would only
  // leave the last one behind as a dangling image).
  const content = createHash('sha256')
    .update(readFileSync(path.join(dir, 'prometheus')))
    .digest('hex');
  const have = await t
    .sh('docker', [
      'image',
      'inspect',
      '--format',
      `{{index .Config.Labels "${CONTENT_LABEL}"}}`,
      PROMETHEUS_IMAGE,
    ])
    .catch(() => '');
  if (have.trim() === content) return;
  const tree = mkdtempSync(path.join(os.tmpdir(), 'nlc-prometheus-image-'));
  try {
    for (const d of ['bin', 'etc', 'prometheus', 'tmp']) mkdirSync(path.join(tree, d));
    copyFileSync(path.join(dir, 'prometheus'), path.join(tree, 'bin', 'prometheus'));
    chmodSync(path.join(tree, 'bin', 'prometheus'), 0o755);
    writeFileSync(
      path.join(tree, 'etc', 'passwd'),
      'root:x:0:0::/:/nonexistent\nnobody:x:65534:65534::/:/nonexistent\n',
    );
    writeFileSync(path.join(tree, 'etc', 'group'), 'root:x:0:\nnobody:x:65534:\n');
    const tar = path.join(os.tmpdir(), `nlc-prometheus-${process.pid}.tar`);
    await t.sh('tar', ['-C', tree, '--numeric-owner', '--owner=0', '--group=0', '-cf', tar, '.']);
    await t.sh('docker', [
      'import',
      '--change',
      'USER 65534',
      '--change',
      'ENTRYPOINT ["/bin/prometheus"]',
      '--change',
      `LABEL ${CONTENT_LABEL}=${content}`,
      tar,
      PROMETHEUS_IMAGE,
    ]);
    rmSync(tar, { force: true });
  } finally {
    rmSync(tree, { recursive: true, force: true });
  }
}

/**
 * Prometheus in `monitoring`, as kube-prometheus runs it (pods labelled app.kubernetes.io/name=
 * prometheus, its ServiceAccount bound to the shipped metrics-reader ClusterRole), scraping each
 * replica over HTTPS with its ServiceAccount token, and once more without a token (must be refused).
 */
export function prometheusManifests(targets: string[]): object[] {
  const config = {
    global: { scrape_interval: '5s', scrape_timeout: '4s' },
    scrape_configs: [
      {
        job_name: 'node-lifecycle-controller',
        scheme: 'https',
        authorization: { credentials_file: '/var/run/secrets/kubernetes.io/serviceaccount/token' },
        // The controller's self-signed certificate, as the shipped ServiceMonitor accepts it.
        tls_config: { insecure_skip_verify: true },
        static_configs: [{ targets }],
      },
      {
        job_name: 'no-token',
        scheme: 'https',
        tls_config: { insecure_skip_verify: true },
        static_configs: [{ targets }],
      },
    ],
  };
  const labels = { 'app.kubernetes.io/name': 'prometheus' };
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'monitoring' } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'prometheus', namespace: 'monitoring' } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'nlc-e2e-prometheus-metrics-reader' },
      roleRef: {
        apiGroup: 'rbac.authorization.k8s.io',
        kind: 'ClusterRole',
        name: 'node-lifecycle-controller-metrics-reader',
      },
      subjects: [{ kind: 'ServiceAccount', name: 'prometheus', namespace: 'monitoring' }],
    },
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'prometheus', namespace: 'monitoring' },
      data: { 'prometheus.yml': JSON.stringify(config) },
    },
    {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'prometheus', namespace: 'monitoring', labels },
      spec: {
        serviceAccountName: 'prometheus',
        securityContext: { runAsUser: 65534, runAsGroup: 65534, fsGroup: 65534 },
        containers: [
          {
            name: 'prometheus',
            image: PROMETHEUS_IMAGE,
            imagePullPolicy: 'Never',
            args: [
              '--config.file=/etc/prometheus/prometheus.yml',
              '--storage.tsdb.path=/prometheus',
              '--web.listen-address=:9090',
            ],
            ports: [{ name: 'web', containerPort: 9090 }],
            volumeMounts: [
              { name: 'config', mountPath: '/etc/prometheus' },
              { name: 'data', mountPath: '/prometheus' },
            ],
          },
        ],
        volumes: [
          { name: 'config', configMap: { name: 'prometheus' } },
          { name: 'data', emptyDir: {} },
        ],
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'prometheus', namespace: 'monitoring' },
      spec: { selector: labels, ports: [{ name: 'web', port: 9090, targetPort: 'web' }] },
    },
  ];
}

/** Prometheus's HTTP API, through the API server's service proxy. */
export async function prometheusApi<T>(t: Tools, pathAndQuery: string): Promise<T> {
  const out = await t.kubectl([
    'get',
    '--raw',
    `/api/v1/namespaces/monitoring/services/prometheus:9090/proxy${pathAndQuery}`,
  ]);
  return (JSON.parse(out) as { data: T }).data;
}
