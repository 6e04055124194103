import type { Clock } from '../clock/clock.js';
import type { KubeClient } from '../kube/client.js';
import { parseSkippingManagedFields } from '../kube/json.js';
import type { KubeObject, Lease, Node, Pod } from '../kube/types.js';
import { type Logger, silentLogger } from '../log/logger.js';
import { type Observable, type SchedulerLike, Subject, type Subscription } from '../rx/index.js';
import { isolateConsumers } from './isolate.js';
import type { WatchMetrics } from './metrics.js';
import type { WatchReadPacer } from './read-pacer.js';
import type { ServerRewindSignal } from './rewind.js';
import { WatchStatus } from './status.js';
import { type IndexFunc, Store } from './store.js';
import { stripLease, stripNode, stripNodeWithKubelet, stripPod } from './strip.js';
import { kubeTransport, leaseTarget, nodeTarget, podTarget, type WatchTarget } from './transport.js';
import type { StripFn, WatchEvent, WatchHealth, WatchTransport, WatchTuningOverrides } from './types.js';
import { consumerErrorReporter, rawWatch } from './watcher.js';

export interface ReflectorOptions<T extends KubeObject> {
  /** Label for metrics and logs, e.g. `leases`. */
  resource: string;
  transport: WatchTransport;
  scheduler: SchedulerLike;
  strip?: StripFn<T>;
  /** See WatchOptions.parse. */
  parse?: (line: string) => unknown;
  keyOf?: (obj: T) => string;
  indexers?: Record<string, IndexFunc<T>>;
  logger?: Logger;
  metrics?: WatchMetrics;
  random?: () => number;
  tuning?: WatchTuningOverrides;
  /** Shared by the watches of one API server (see ServerRewindSignal). */
  rewind?: ServerRewindSignal;
}

/**
 * A watch stream feeding a Store, with its health: the unit the reconciler consumes.
 * `start()` subscribes once; events reach `events$` subscribers after the store applied them.
 */
export class Reflector<T extends KubeObject> {
  readonly resource: string;
  readonly store: Store<T>;
  readonly status: WatchStatus;
  /** Hot: events after the store has applied them (Init..InitDone, Apply, Delete). */
  readonly events$: Observable<WatchEvent<T>>;
  /** Connected / synced / last data time; see isHealthy(). */
  readonly health$: Observable<WatchHealth>;

  private readonly source: Observable<WatchEvent<T>>;
  private readonly subject = new Subject<WatchEvent<T>>();
  private readonly log: Logger;
  private readonly untrack: (() => void) | undefined;
  private subscription: Subscription | undefined;

  constructor(opts: ReflectorOptions<T>) {
    this.resource = opts.resource;
    this.log = (opts.logger ?? silentLogger).with({ component: 'watch', resource: opts.resource });
    this.store = new Store<T>({ keyOf: opts.keyOf, indexers: opts.indexers });
    this.status = new WatchStatus(opts.resource, opts.scheduler, {
      emitIntervalMs: opts.tuning?.healthEmitIntervalMs,
    });
    this.status.objects = () => this.store.size;
    this.untrack = opts.metrics?.track(this.status);
    this.source = rawWatch<T>(
      {
        resource: opts.resource,
        transport: opts.transport,
        scheduler: opts.scheduler,
        strip: opts.strip,
        parse: opts.parse,
        keyOf: this.store.keyOf,
        known: this.store,
        random: opts.random,
        tuning: opts.tuning,
        rewind: opts.rewind,
      },
      this.status,
      this.log,
    );
    const report = consumerErrorReporter(this.status, this.log, opts.scheduler);
    this.events$ = isolateConsumers(this.subject.asObservable(), report);
    this.health$ = this.status.health$;
  }

  /** Current health (exact lastEventAt; health$ throttles data-only updates). */
  health(): WatchHealth {
    return this.status.snapshot();
  }

  get running(): boolean {
    return this.subscription !== undefined;
  }

  /** Starts listing and watching (idempotent). */
  start(): this {
    if (this.subscription) return this;
    const store = this.store;
    const subject = this.subject;
    this.subscription = this.source.subscribe({
      next: (ev) => {
        // A throwing indexer must not take the stream down: count it and keep the object out.
        try {
          store.apply(ev);
        } catch (err) {
          this.status.countError('store');
          this.log.error('store rejected an event', { err, type: ev.type });
        }
        subject.next(ev);
      },
    });
    return this;
  }

  /** Stops the watch: aborts the request in flight, clears timers. The store keeps its content. */
  stop(): void {
    const sub = this.subscription;
    this.subscription = undefined;
    sub?.unsubscribe();
  }

  /** stop() and stop exporting metrics; events$ completes. */
  dispose(): void {
    this.stop();
    this.untrack?.();
    this.subject.complete();
  }

  whenSynced(): Promise<void> {
    return this.store.whenSynced();
  }
}

/** What the convenience constructors need. */
export interface ResourceWatchDeps {
  client: KubeClient;
  clock: Pick<Clock, 'scheduler'>;
  logger?: Logger;
  metrics?: WatchMetrics;
  random?: () => number;
  tuning?: WatchTuningOverrides;
  /** Wraps the real transport (tests: gates, fault injection). */
  wrapTransport?: (t: WatchTransport) => WatchTransport;
  /** Reads the watch responses on this pacer's cadence (default: as bytes arrive). */
  readPacer?: WatchReadPacer;
  /** Shared by the watches of one API server (see ServerRewindSignal). */
  rewind?: ServerRewindSignal;
}

function reflectorFor<T extends KubeObject>(
  deps: ResourceWatchDeps,
  resource: string,
  target: WatchTarget,
  strip: StripFn<T>,
  indexers?: Record<string, IndexFunc<T>>,
): Reflector<T> {
  // Every strip used here drops managedFields, so neither list pages nor watch lines need it built.
  const base = kubeTransport(deps.client, target, {
    parseList: parseSkippingManagedFields,
    readPacer: deps.readPacer,
  });
  return new Reflector<T>({
    resource,
    transport: deps.wrapTransport ? deps.wrapTransport(base) : base,
    scheduler: deps.clock.scheduler,
    strip,
    parse: parseSkippingManagedFields,
    indexers,
    logger: deps.logger,
    metrics: deps.metrics,
    random: deps.random,
    tuning: deps.tuning,
    rewind: deps.rewind,
  });
}

/** Node leases in kube-node-lease, keyed `kube-node-lease/<node>`. Not started. */
export function watchNodeLeases(
  deps: ResourceWatchDeps,
  opts: { namespace?: string } = {},
): Reflector<Lease> {
  return reflectorFor(deps, 'leases', leaseTarget(opts.namespace), stripLease);
}

/** Nodes, keyed by name. Not started. */
export function watchNodes(
  deps: ResourceWatchDeps,
  opts: { labelSelector?: string; kubeletEndpoint?: boolean } = {},
): Reflector<Node> {
  return reflectorFor(
    deps,
    'nodes',
    nodeTarget(opts),
    opts.kubeletEndpoint ? stripNodeWithKubelet : stripNode,
  );
}

/** Name of the pods-by-node index: `store.byIndex(POD_NODE_INDEX, nodeName)`. */
export const POD_NODE_INDEX = 'nodeName';

/** Pods in all namespaces (or one), optionally by field selector, indexed by spec.nodeName. Not started. */
export function watchPods(
  deps: ResourceWatchDeps,
  opts: { namespace?: string; fieldSelector?: string; labelSelector?: string } = {},
): Reflector<Pod> {
  return reflectorFor(deps, 'pods', podTarget(opts), stripPod, {
    [POD_NODE_INDEX]: (p) => p.spec?.nodeName || undefined,
  });
}
