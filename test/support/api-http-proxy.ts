import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import type { LocalControlPlane } from '../../src/localcluster/control-plane.js';

/** One request as the proxy saw it. */
export interface ProxiedRequest {
  method: string;
  /** Path and query, as sent. */
  url: string;
}

/**
 * A plain-HTTP reverse proxy on loopback in front of the real kube-apiserver, for the controller
 * under test only (kubelets and the test's own observer talk to the API server directly). Every
 * request is forwarded as it is (the controller's admin token included) over TLS to the API
 * server; the test can make the path misbehave in ways a TCP proxy cannot, because it sees each
 * request and each watch event:
 *
 * - `hold(name)`: the Lease and Node watch events of that node are not passed on (dropped), while
 *   every other event and bookmark is: the controller's watches stay in contact and healthy, they
 *   just never show that node's renewals. Its GETs are answered as usual.
 * - `delay(pred, ms)`: requests matching `pred` are forwarded only after `ms` (a slow API server
 *   for those requests); one the client gives up on is dropped.
 * - `answer(pred, fn)`: requests matching `pred` are answered by the proxy itself with the status
 *   and JSON body `fn` returns (an API server failing those requests, or showing another object),
 *   never forwarded.
 */
export class ApiHttpProxy {
  /** Requests seen, in arrival order. */
  readonly requests: ProxiedRequest[] = [];
  /** Watch events dropped by hold(), per node name. */
  readonly dropped = new Map<string, number>();
  private readonly held = new Set<string>();
  private delays: Array<{ pred: (r: ProxiedRequest) => boolean; ms: number }> = [];
  private answers: Array<{
    pred: (r: ProxiedRequest) => boolean;
    fn: (r: ProxiedRequest) => { status: number; body: unknown };
  }> = [];
  private readonly pending = new Set<ProxiedRequest>();
  private readonly agent: https.Agent;

  private constructor(
    private readonly server: http.Server,
    private readonly target: URL,
    ca: Buffer,
  ) {
    this.agent = new https.Agent({ keepAlive: true, ca });
  }

  static async start(cp: LocalControlPlane): Promise<ApiHttpProxy> {
    const ca = readFileSync(path.join(cp.dir, 'certs', 'apiserver.crt'));
    const server = http.createServer();
    const proxy = new ApiHttpProxy(server, new URL(cp.server), ca);
    server.on('request', (req, res) => proxy.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return proxy;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as { port: number }).port}`;
  }

  /** Requests held back by delay() right now. */
  get delayed(): ProxiedRequest[] {
    return [...this.pending];
  }

  hold(name: string, on = true): void {
    if (on) this.held.add(name);
    else this.held.delete(name);
  }

  /** Requests matching `pred` wait `ms` before they are forwarded (until cleared). */
  delay(pred: (r: ProxiedRequest) => boolean, ms: number): () => void {
    const d = { pred, ms };
    this.delays.push(d);
    return () => {
      this.delays = this.delays.filter((x) => x !== d);
    };
  }

  /** Requests matching `pred` are answered with `fn`'s status and JSON body (until cleared). */
  answer(
    pred: (r: ProxiedRequest) => boolean,
    fn: (r: ProxiedRequest) => { status: number; body: unknown },
  ): () => void {
    const a = { pred, fn };
    this.answers.push(a);
    return () => {
      this.answers = this.answers.filter((x) => x !== a);
    };
  }

  /** A kubeconfig for the controller: this proxy as the server, with the admin token. */
  writeKubeconfig(cp: LocalControlPlane, to: string): void {
    const text = [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      `- name: via-proxy\n  cluster:\n    server: ${this.url}`,
      'users:',
      `- name: admin\n  user:\n    token: ${cp.adminToken}`,
      'contexts:',
      '- name: via-proxy\n  context:\n    cluster: via-proxy\n    user: admin',
      'current-context: via-proxy',
      '',
    ].join('\n');
    writeFileSync(to, text, { mode: 0o600 });
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    this.agent.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const seen: ProxiedRequest = { method: req.method ?? 'GET', url: req.url ?? '/' };
    this.requests.push(seen);
    const answer = this.answers.find((a) => a.pred(seen));
    if (answer) {
      const { status, body } = answer.fn(seen);
      req.resume();
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
      return;
    }
    const ms = this.delays.find((d) => d.pred(seen))?.ms ?? 0;
    let gone = false;
    res.on('close', () => {
      gone = true;
      this.pending.delete(seen);
    });
    const forward = () => {
      this.pending.delete(seen);
      if (gone) return;
      const headers = { ...req.headers, host: this.target.host };
      const up = https.request(
        {
          host: this.target.hostname,
          port: this.target.port,
          method: req.method,
          path: req.url,
          headers,
          agent: this.agent,
        },
        (upRes) => this.respond(seen, upRes, res),
      );
      up.on('error', () => res.destroy());
      res.on('close', () => up.destroy());
      req.pipe(up);
    };
    if (ms > 0) {
      this.pending.add(seen);
      const timer = setTimeout(forward, ms);
      res.on('close', () => clearTimeout(timer));
    } else {
      forward();
    }
  }

  private respond(seen: ProxiedRequest, upRes: http.IncomingMessage, res: http.ServerResponse): void {
    const u = new URL(seen.url, 'http://x');
    const watch = u.searchParams.get('watch') === 'true' || u.searchParams.get('watch') === '1';
    const filtered =
      watch && (u.pathname.endsWith('/namespaces/kube-node-lease/leases') || u.pathname === '/api/v1/nodes');
    const headers = { ...upRes.headers };
    if (filtered) {
      delete headers['content-length'];
      delete headers['transfer-encoding'];
    }
    res.writeHead(upRes.statusCode ?? 502, headers);
    // A watch with nothing to tell (an empty namespace) must still get its headers now, as from
    // kube-apiserver; Node sends them with the first body byte otherwise.
    res.flushHeaders();
    if (!filtered) {
      upRes.pipe(res);
      return;
    }
    let partial = '';
    upRes.setEncoding('utf8');
    upRes.on('data', (chunk: string) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      const out: string[] = [];
      for (const line of lines) {
        if (!line) continue;
        const name = (JSON.parse(line) as { object?: { metadata?: { name?: string } } }).object?.metadata
          ?.name;
        if (name !== undefined && this.held.has(name)) {
          this.dropped.set(name, (this.dropped.get(name) ?? 0) + 1);
          continue;
        }
        out.push(`${line}\n`);
      }
      if (out.length > 0) res.write(out.join(''));
    });
    upRes.on('end', () => res.end());
    upRes.on('error', () => res.destroy());
  }
}
