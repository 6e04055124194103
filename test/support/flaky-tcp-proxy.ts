import { readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';

interface Pair {
  client: net.Socket;
  upstream: net.Socket;
}

/**
 * A TCP proxy on loopback between a client (the controller process) and kube-apiserver, that the
 * test can make misbehave the way a load balancer or a broken network does. It forwards bytes
 * only: TLS stays end to end (the API server's certificate is valid for 127.0.0.1, which is where
 * the proxy listens too).
 *
 * - `cut()`: every open connection is reset (both sides), like a load balancer dropping them.
 * - `refuse(true)`: new connections are reset as soon as they arrive.
 * - `stall(true)`: nothing is forwarded any more in either direction (a black hole); new
 *   connections are accepted and held. `stall(false)` lets everything flow again.
 * - `blackhole(true)`: new connections are accepted and never forwarded, for good, as a pod's first
 *   connections hang while its network is not ready; `blackhole(false)` lets new ones through.
 */
export class FlakyTcpProxy {
  /** Connections accepted, refused, and reset by cut(); and calls of cut(), so far. */
  readonly counts = { accepted: 0, refused: 0, cut: 0, cuts: 0, blackholed: 0 };
  private readonly pairs = new Set<Pair>();
  /** Per connection, performance.now() of every chunk the server sent towards the client (darkMs). */
  private readonly downstream: number[][] = [];
  private readonly dead = new Set<net.Socket>();
  private blackholing = false;
  private refusing = false;
  private stalled = false;
  private timers: NodeJS.Timeout[] = [];

  private constructor(
    private readonly server: net.Server,
    private readonly target: { host: string; port: number },
  ) {}

  static async start(target: { host: string; port: number }): Promise<FlakyTcpProxy> {
    const server = net.createServer();
    const proxy = new FlakyTcpProxy(server, target);
    server.on('connection', (s) => proxy.accept(s));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    return proxy;
  }

  get port(): number {
    return (this.server.address() as net.AddressInfo).port;
  }

  /** Open connections right now. */
  get open(): number {
    return this.pairs.size;
  }

  private accept(client: net.Socket): void {
    if (this.refusing) {
      this.counts.refused++;
      client.resetAndDestroy();
      return;
    }
    if (this.blackholing) {
      this.counts.blackholed++;
      this.dead.add(client);
      client.on('error', () => undefined);
      client.on('close', () => this.dead.delete(client));
      return;
    }
    this.counts.accepted++;
    const upstream = net.connect(this.target.port, this.target.host);
    const pair: Pair = { client, upstream };
    this.pairs.add(pair);
    const drop = () => {
      this.pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop);
    upstream.on('error', drop);
    client.on('close', drop);
    upstream.on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
    const chunks: number[] = [];
    this.downstream.push(chunks);
    upstream.on('data', () => chunks.push(performance.now()));
    if (this.stalled) this.pause(pair);
  }

  private pause(p: Pair): void {
    p.client.pause();
    p.upstream.pause();
    p.client.unpipe(p.upstream);
    p.upstream.unpipe(p.client);
  }

  private resume(p: Pair): void {
    p.client.pipe(p.upstream);
    p.upstream.pipe(p.client);
    p.client.resume();
    p.upstream.resume();
  }

  /**
   * How long, within [from, to] (performance.now() times), fewer than `streams` connections through
   * this proxy streamed from the server at once. A connection streams between two chunks it delivers
   * at most `maxGapMs` apart. Seen from outside the client: a watch whose events come more often than
   * `maxGapMs` streams while it is up, and a request's answer or a quiet watch's rare event covers
   * next to nothing. With `streams` = the number of watches the client needs, the result is the time
   * at least one of them was down, whichever it was (the proxy cannot tell them apart: TLS is end to
   * end).
   */
  darkMs(from: number, to: number, maxGapMs: number, streams = 1): number {
    return darkTime(this.downstream, from, to, maxGapMs, streams);
  }

  /** Resets every open connection. Returns how many. */
  cut(): number {
    const n = this.pairs.size;
    for (const p of [...this.pairs]) {
      this.pairs.delete(p);
      p.client.resetAndDestroy();
      p.upstream.destroy();
    }
    this.counts.cut += n;
    this.counts.cuts++;
    return n;
  }

  blackhole(on: boolean): void {
    this.blackholing = on;
  }

  refuse(on: boolean): void {
    this.refusing = on;
  }

  stall(on: boolean): void {
    if (this.stalled === on) return;
    this.stalled = on;
    for (const p of this.pairs) {
      if (on) this.pause(p);
      else this.resume(p);
    }
  }

  /**
   * Now and then every `everyMs`: cut all connections and refuse new ones for `refuseMs`.
   * Returns a function that stops it (and stops refusing).
   */
  flap(everyMs: number, refuseMs: number): () => void {
    const once = () => {
      this.cut();
      if (refuseMs > 0) {
        this.refuse(true);
        const t = setTimeout(() => this.refuse(false), refuseMs);
        this.timers.push(t);
      }
    };
    once();
    this.timers.push(setInterval(once, everyMs));
    return () => {
      for (const t of this.timers.splice(0)) clearTimeout(t);
      this.refuse(false);
    };
  }

  /**
   * Writes a copy of the kubeconfig at `from` to `to` whose server is this proxy (the server must
   * be `https://127.0.0.1:<port>`).
   */
  writeKubeconfig(from: string, to: string): void {
    const text = readFileSync(from, 'utf8');
    const server = `https://127.0.0.1:${this.target.port}`;
    if (!text.includes(server)) throw new Error(`${from} does not name ${server}`);
    writeFileSync(to, text.replaceAll(server, `https://127.0.0.1:${this.port}`), { mode: 0o600 });
  }

  async close(): Promise<void> {
    for (const t of this.timers.splice(0)) clearTimeout(t);
    this.cut();
    for (const s of this.dead) s.destroy();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

/**
 * FlakyTcpProxy.darkMs on recorded chunk times (one array per connection): the time within
 * [from, to] that fewer than `streams` connections streamed at once.
 */
export function darkTime(
  connections: readonly (readonly number[])[],
  from: number,
  to: number,
  maxGapMs: number,
  streams: number,
): number {
  // +1 where a connection starts streaming, -1 where it stops; sweep and add up the time below
  // `streams`.
  const edges: Array<[number, number]> = [];
  for (const chunks of connections) {
    for (let i = 1; i < chunks.length; i++) {
      const a = Math.max(chunks[i - 1]!, from);
      const b = Math.min(chunks[i]!, to);
      if (chunks[i]! - chunks[i - 1]! <= maxGapMs && b > a) edges.push([a, 1], [b, -1]);
    }
  }
  // Edges at one instant enclose no time, so their order among themselves does not matter.
  edges.sort((x, y) => x[0] - y[0]);
  let depth = 0;
  let at = from;
  let dark = 0;
  for (const [t, d] of edges) {
    if (depth < streams) dark += t - at;
    at = t;
    depth += d;
  }
  if (depth < streams) dark += to - at;
  return dark;
}
