/**
 * Main-thread side of the independent observer (see observer-worker.ts): keeps, per node, the last
 * heartbeat the observer saw (a lease renewTime change or a Ready lastHeartbeatTime change), the Ready
 * status history and the taint history, and per pod the Ready history.
 */
import { Worker } from 'node:worker_threads';

export interface ObserverWorkerData {
  server: string;
  caData: string;
  token: string;
}

export type ObserverMessage =
  | { k: 'L'; n: string; at: number; init: boolean }
  | { k: 'N'; n: string; at: number; init: boolean; ready: string; hb: string; taints: string }
  | { k: 'P'; n: string; node: string; at: number; init: boolean; ready: string }
  | { k: 'S'; what: string; at: number }
  | { k: 'R'; at: number }
  | { k: 'E'; what: string; at: number; msg: string };

export interface ReadyChange {
  at: number;
  from: string;
  to: string;
  /** Last heartbeat seen before this change (absolute ms), if any. */
  lastBeatAt: number | undefined;
}

export interface TaintChange {
  at: number;
  taints: string;
}

export interface NodeTrack {
  name: string;
  ready: string;
  hb: string;
  taints: string;
  lastBeatAt: number | undefined;
  beats: number;
  readyChanges: ReadyChange[];
  taintChanges: TaintChange[];
}

export interface PodTrack {
  id: string;
  node: string;
  ready: string;
  changes: Array<{ at: number; ready: string }>;
}

export const UNREACHABLE = 'node.kubernetes.io/unreachable';

export class Observer {
  readonly nodes = new Map<string, NodeTrack>();
  readonly pods = new Map<string, PodTrack>();
  /** Absolute ms of every heartbeat (lease renewal) seen after the initial list, in arrival order. */
  readonly beatTimes: number[] = [];
  readonly errors: Array<{ what: string; at: number; msg: string }> = [];
  private readonly worker: Worker;
  private readyResolve: (() => void) | undefined;
  private readonly waiters = new Set<() => void>();

  private constructor(data: ObserverWorkerData) {
    this.worker = new Worker(new URL('./observer-worker.ts', import.meta.url), { workerData: data });
    this.worker.on('message', (m: ObserverMessage) => this.onMessage(m));
    this.worker.on('error', (err) => {
      this.errors.push({ what: 'worker', at: Date.now(), msg: String(err) });
      console.error(`[observer] worker error: ${String(err)}`);
    });
  }

  static async start(data: ObserverWorkerData): Promise<Observer> {
    const o = new Observer(data);
    await new Promise<void>((resolve, reject) => {
      o.readyResolve = resolve;
      const t = setTimeout(() => reject(new Error('observer did not sync within 120 s')), 120_000);
      t.unref();
    });
    return o;
  }

  private track(name: string): NodeTrack {
    let t = this.nodes.get(name);
    if (!t) {
      t = {
        name,
        ready: '',
        hb: '',
        taints: '',
        lastBeatAt: undefined,
        beats: 0,
        readyChanges: [],
        taintChanges: [],
      };
      this.nodes.set(name, t);
    }
    return t;
  }

  private onMessage(m: ObserverMessage): void {
    switch (m.k) {
      case 'L': {
        const t = this.track(m.n);
        t.lastBeatAt = m.at;
        t.beats++;
        if (!m.init) this.beatTimes.push(m.at);
        break;
      }
      case 'N': {
        const t = this.track(m.n);
        if (m.hb !== t.hb && t.hb !== '' && m.hb !== '' && m.ready !== 'Unknown') t.lastBeatAt = m.at;
        if (m.init && t.lastBeatAt === undefined) t.lastBeatAt = m.at;
        t.hb = m.hb;
        if (m.ready !== t.ready) {
          t.readyChanges.push({ at: m.at, from: t.ready, to: m.ready, lastBeatAt: t.lastBeatAt });
          t.ready = m.ready;
        }
        if (m.taints !== t.taints) {
          t.taintChanges.push({ at: m.at, taints: m.taints });
          t.taints = m.taints;
        }
        break;
      }
      case 'P': {
        let p = this.pods.get(m.n);
        if (!p) {
          p = { id: m.n, node: m.node, ready: '', changes: [] };
          this.pods.set(m.n, p);
        }
        if (m.node) p.node = m.node;
        p.ready = m.ready;
        p.changes.push({ at: m.at, ready: m.ready });
        break;
      }
      case 'R':
        this.readyResolve?.();
        break;
      case 'E':
        this.errors.push({ what: m.what, at: m.at, msg: m.msg });
        break;
      case 'S':
        break;
    }
    for (const w of [...this.waiters]) w();
  }

  /** Resolves when `check()` is true (re-checked on every observed change), or rejects on timeout. */
  async until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
    if (check()) return;
    await new Promise<void>((resolve, reject) => {
      const waiter = () => {
        if (check()) {
          done();
          resolve();
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`timed out after ${Math.round(timeoutMs / 1000)} s waiting for ${what}`));
      }, timeoutMs);
      const poll = setInterval(waiter, 1000);
      const done = () => {
        clearTimeout(timer);
        clearInterval(poll);
        this.waiters.delete(waiter);
      };
      this.waiters.add(waiter);
    });
  }

  /** Heartbeats (lease renewals) seen in [from, to). */
  beatsBetween(from: number, to: number): number {
    let n = 0;
    for (const t of this.beatTimes) if (t >= from && t < to) n++;
    return n;
  }

  /** First change of `name` to Ready=`status` at or after `after`. */
  firstReady(name: string, status: string, after: number): ReadyChange | undefined {
    return this.nodes.get(name)?.readyChanges.find((c) => c.to === status && c.at >= after);
  }

  /** First time at or after `after` that the node's taints satisfy `pred`. */
  firstTaints(name: string, after: number, pred: (taints: string) => boolean): TaintChange | undefined {
    return this.nodes.get(name)?.taintChanges.find((c) => c.at >= after && pred(c.taints));
  }

  podsOf(node: string): PodTrack[] {
    return [...this.pods.values()].filter((p) => p.node === node);
  }

  async stop(): Promise<void> {
    this.worker.postMessage({ k: 'stop' });
    await new Promise((r) => setTimeout(r, 200));
    await this.worker.terminate();
  }
}

export function hasTaint(taints: string, key: string, effect: string): boolean {
  return taints.split(',').includes(`${key}:${effect}`);
}
