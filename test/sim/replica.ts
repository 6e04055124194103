/**
 * One controller replica in the simulator, wired exactly as src/cli/run.ts wires the process
 * (assembleController: ticker, watches, leader election, node lifecycle, manager) from its real
 * flags, on clients of the simulated API server. Only the HTTP serving and the signal handling are
 * left out. A crash is abrupt (nothing it sends afterwards lands, nothing is released); a stop is
 * the graceful shutdown (SIGTERM).
 */
import { Registry } from 'prom-client';
import type { AssembledController } from '../../src/cli/assemble/controller.js';
import { assembleController } from '../../src/cli/assemble/controller.js';
import type { Clock } from '../../src/clock/clock.js';
import { buildConfig, parseArgs } from '../../src/config/index.js';
import type { Probe } from '../../src/controller/second-opinion.js';
import type { KubeClient } from '../../src/kube/client.js';
import { RequestRateLimiter } from '../../src/kube/rate-limit.js';
import { createLogger } from '../../src/log/logger.js';
import { asyncScheduler } from '../../src/rx/index.js';
import type { SimServer } from './api-server.js';

/** The last lines a replica logged, kept for a failure's report. */
export class LogTail {
  private readonly lines: string[] = [];
  constructor(private readonly keep: number) {}
  push(line: string): void {
    this.lines.push(line);
    if (this.lines.length > this.keep * 2) this.lines.splice(0, this.lines.length - this.keep);
  }
  tail(n = this.keep): string[] {
    return this.lines.slice(-n);
  }
}

export class SimReplica {
  private assembled: AssembledController | undefined;
  /** Set once it crashed or stopped: the instance is over (a restart is a new SimReplica). */
  over = false;
  /** Why the process ended, if it did by itself (exit code). */
  exited: number | undefined;
  readonly log: LogTail;

  constructor(
    readonly id: string,
    private readonly server: SimServer,
    private readonly o: {
      flags: string[];
      /** Ms this replica's wall clock is off (lease times it writes; never its judgements). */
      wallSkewMs: number;
      verbosity: number;
      logLines: number;
      /** --second-opinion's probe of a kubelet (the simulated node network). */
      kubeletProbe?: Probe;
      onExit: (code: number) => void;
    },
  ) {
    this.log = new LogTail(o.logLines);
  }

  async start(): Promise<void> {
    const config = buildConfig(
      parseArgs([...this.o.flags, '--leader-elect=true']),
      { POD_NAME: this.id, POD_NAMESPACE: 'kube-system' },
      this.id,
    );
    const skew = this.o.wallSkewMs;
    const clock: Clock = {
      scheduler: { now: () => asyncScheduler.now(), schedule: asyncScheduler.schedule.bind(asyncScheduler) },
      wall: () => Date.now() + skew,
    };
    const logger = createLogger({
      format: 'text',
      verbosity: this.o.verbosity,
      write: (line) => this.log.push(line),
      now: () => Date.now(),
    }).with({ replica: this.id });
    const { qps, burst } = config.kubeApi;
    const limiter = new RequestRateLimiter(qps, burst, clock.scheduler);
    const client = this.server.clientFor(this.id, limiter) as unknown as KubeClient;
    const electionClient = this.server.clientFor(
      this.id,
      new RequestRateLimiter(qps, burst, clock.scheduler),
    ) as unknown as KubeClient;
    this.assembled = await assembleController({
      config,
      logger,
      clock,
      build: { version: '0.0.0-sim' },
      registry: new Registry(),
      api: { client, limiter, electionClient, runnable: { name: 'api-clients', group: 'process' } },
      tickIntervalMs: 1_000,
      ...(this.o.kubeletProbe ? { kubeletProbe: this.o.kubeletProbe } : {}),
      exit: (code) => {
        if (this.over) return;
        this.exited = code;
        this.crash();
        this.o.onExit(code);
      },
    });
    await this.assembled.manager.start();
  }

  get manager(): AssembledController['manager'] | undefined {
    return this.assembled?.manager;
  }

  get controller(): AssembledController['lifecycle']['controller'] | undefined {
    return this.assembled?.lifecycle.controller;
  }

  get nodeStore(): { get(key: string): unknown } | undefined {
    return this.assembled?.watches.nodes.store;
  }

  get leaseStore(): { get(key: string): unknown } | undefined {
    return this.assembled?.watches.leases.store;
  }

  get tracker(): AssembledController['health']['tracker'] | undefined {
    return this.assembled?.health.tracker;
  }

  get writer(): AssembledController['lifecycle']['writer'] | undefined {
    return this.assembled?.lifecycle.writer;
  }

  /**
   * The process dies at once: nothing it sends from now on lands, its watches end, it releases
   * nothing. Its timers are stopped by a shutdown whose writes go nowhere (the process is gone).
   */
  crash(): void {
    if (this.over) return;
    this.over = true;
    this.server.kill(this.id);
    void this.assembled?.manager.stop('crashed (simulated)');
  }

  /** SIGTERM: the graceful shutdown (drain, release the lease). Resolves when it is over. */
  async stop(): Promise<void> {
    if (this.over) return;
    this.over = true;
    await this.assembled?.manager.stop('SIGTERM (simulated)');
    this.server.kill(this.id);
  }
}
