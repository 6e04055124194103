/**
 * The release rehearsal's registry (issue 50): the CNCF Distribution registry that
 * scripts/build-registry.sh builds, serving on loopback, where scripts/release.sh pushes the image
 * and the chart. The kind nodes reach it through a TCP relay on the kind network's gateway (the
 * project's own bridge; nothing listens anywhere else), and each node's containerd is told, in
 * certs.d/<host:port>/hosts.toml, to fetch that loopback name through the relay over plain HTTP:
 * image references are the same inside and outside the cluster, as they are with a real registry.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { waitFor } from './cluster.js';
import { builtToolDir, type Tools } from './support.js';

/** A port the kernel says is free on `host` now. */
function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, host, () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export class LoopbackRegistry {
  private constructor(
    /** host:port, the name images and charts are pushed to and pulled from. */
    readonly host: string,
    private readonly child: ChildProcess,
    private readonly relay: net.Server,
    private readonly dir: string,
  ) {}

  static async start(t: Tools, nodes: string[]): Promise<LoopbackRegistry> {
    const bin = path.join(await builtToolDir(t, 'build-registry.sh'), 'registry');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'nlc-registry-'));
    const port = await freePort('127.0.0.1');
    const config = path.join(dir, 'config.yml');
    writeFileSync(
      config,
      [
        'version: 0.1',
        'log:',
        '  level: warn',
        'storage:',
        '  filesystem:',
        `    rootdirectory: ${path.join(dir, 'data')}`,
        'http:',
        `  addr: 127.0.0.1:${port}`,
        '',
      ].join('\n'),
    );
    // Its tracing exports to localhost:4318 unless told not to.
    const child = spawn(bin, ['serve', config], {
      env: { ...process.env, OTEL_TRACES_EXPORTER: 'none' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (b: Buffer) => {
      stderr = (stderr + b.toString()).slice(-4000);
    });
    const host = `127.0.0.1:${port}`;
    try {
      await waitFor(`the registry answering on ${host}`, 30_000, async () => {
        if (child.exitCode !== null) throw new Error(`registry exited ${child.exitCode}: ${stderr}`);
        const r = await fetch(`http://${host}/v2/`).catch(() => undefined);
        return r?.status === 200;
      });
    } catch (err) {
      child.kill('SIGKILL');
      throw err;
    }
    // The relay, on the kind network's IPv4 gateway only.
    const gateways = (
      await t.docker(['network', 'inspect', 'kind', '-f', '{{range .IPAM.Config}}{{.Gateway}} {{end}}'])
    )
      .trim()
      .split(/\s+/);
    const gateway = gateways.find((g) => /^\d+\.\d+\.\d+\.\d+$/.test(g));
    if (!gateway) throw new Error(`the kind network has no IPv4 gateway (${gateways.join(', ')})`);
    const relay = net.createServer((inbound) => {
      const outbound = net.connect(port, '127.0.0.1');
      inbound.pipe(outbound).pipe(inbound);
      const close = () => {
        inbound.destroy();
        outbound.destroy();
      };
      inbound.on('error', close);
      outbound.on('error', close);
    });
    const relayPort = await new Promise<number>((resolve, reject) => {
      relay.once('error', reject);
      relay.listen(0, gateway, () => resolve((relay.address() as net.AddressInfo).port));
    });
    const via = `http://${gateway}:${relayPort}`;
    const hostsToml = [
      `server = "${via}"`,
      '',
      `[host."${via}"]`,
      '  capabilities = ["pull", "resolve"]',
      '',
    ].join('\n');
    for (const node of nodes) {
      const certsDir = `/etc/containerd/certs.d/${host}`;
      await t.docker(['exec', node, 'mkdir', '-p', certsDir]);
      await t.sh('docker', ['exec', '-i', node, 'sh', '-c', `cat > '${certsDir}/hosts.toml'`], {
        input: hostsToml,
      });
    }
    return new LoopbackRegistry(host, child, relay, dir);
  }

  stop(): void {
    this.relay.close();
    this.child.kill('SIGTERM');
    rmSync(this.dir, { recursive: true, force: true });
  }
}
