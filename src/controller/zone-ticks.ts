import { type Clock, timerDelay } from '../clock/clock.js';
import { type DisruptionController, type DisruptionUpdate, zoneDisplay } from '../disruption/index.js';
import type { EventRecord } from '../health/index.js';
import type { Logger } from '../log/logger.js';
import type { Subscription } from '../rx/index.js';

export interface ZoneTicksOptions {
  clock: Clock;
  log: Logger;
  disruption: DisruptionController;
  /** Whether we lead and see: only then are NoExecute steps admitted. */
  acting: () => boolean;
  stopped: () => boolean;
  /** The zone pass admitted this node's rate-limited step (NoExecute): reconcile it. */
  admitted: (name: string) => void;
  /** Master disruption began: every node is reconciled (its NoExecute taints come off). */
  reconcileAll: () => void;
  /** Master disruption is over: every node gets a fresh grace period from `now`. */
  freshGrace: (now: number) => void;
  emit: (e: EventRecord) => void;
}

/**
 * The zone pass of the disruption controller: zone states evaluated, new NoExecute steps admitted
 * at the zones' rates, on its own timer for the next admission (and after node changes, on a 0 ms
 * one: after the turn's other events).
 */
export class ZoneTicks {
  private timer: { at: number; sub: Subscription } | undefined;
  private pending = false;

  constructor(private readonly o: ZoneTicksOptions) {}

  /** Runs the zone pass after the current turn's other events (once, however often asked). */
  soon(): void {
    if (this.pending || this.o.stopped()) return;
    this.pending = true;
    this.o.clock.scheduler.schedule(() => {
      this.pending = false;
      this.tick();
    }, 0);
  }

  /** Runs the zone pass in this turn (already a turn of its own) unless one is due soon anyway. */
  now(): void {
    // A 0 ms timer would be one more wake-up every period for what can run now.
    if (!this.pending) this.tick();
    else this.soon();
  }

  stop(): void {
    this.timer?.sub.unsubscribe();
  }

  private tick(): void {
    if (this.o.stopped()) return;
    const { disruption } = this.o;
    const now = this.o.clock.scheduler.now();
    this.onUpdate(disruption.evaluate(now), now);
    if (this.o.acting()) {
      const { admitted, events } = disruption.admit(now);
      for (const a of admitted) this.o.admitted(a.name);
      for (const e of events) this.o.emit(e as unknown as EventRecord);
    }
    const wake = disruption.nextWakeup(now);
    if (wake === undefined) {
      this.timer?.sub.unsubscribe();
      this.timer = undefined;
    } else if (!this.timer || this.timer.at !== wake) {
      this.timer?.sub.unsubscribe();
      const sub = this.o.clock.scheduler.schedule(
        () => {
          this.timer = undefined;
          this.tick();
        },
        timerDelay(wake - now),
      );
      this.timer = { at: wake, sub };
    }
  }

  private onUpdate(update: DisruptionUpdate, now: number): void {
    const { log } = this.o;
    for (const t of update.transitions) {
      log.info('Zone state changed', {
        zone: zoneDisplay(t.zone),
        from: t.from,
        to: t.to,
        size: t.size,
        notReady: t.notReady,
        rate: t.rate,
      });
    }
    for (const d of update.decisions) {
      if (d.kind === 'RemoveAllNoExecuteTaints') {
        log.warn(
          'Master disruption: every zone is fully disrupted; removing NoExecute taints, tainting nothing',
        );
        this.o.reconcileAll();
      } else if (d.kind === 'ResetAllProbeTimestamps') {
        log.info('Master disruption over: fresh grace period for every node');
        this.o.freshGrace(now);
      }
    }
  }
}
