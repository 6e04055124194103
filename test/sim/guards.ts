/**
 * The safety guards the fault simulator must prove it needs: each entry says where a guard is in
 * the source and what the code does without it. Only the `sim-guards` test project rewrites the
 * source (test/sim/guard-plugin.ts): each edit's `find` must occur exactly once in its file (a
 * table out of step with the code fails there), and is replaced by `off`, in which `OFF` is true
 * while the test has removed that guard. The budget never runs rewritten code.
 *
 * `found` is where the CI budget's seeds first find a violation with the guard removed (family and
 * seed, in the budget's order: `./dev run sim -- --guards` searches and prints them); the sim-guards
 * test replays exactly that seed with the guard removed and fails unless a violation shows.
 */

export interface GuardEdit {
  file: string;
  find: string;
  off: string;
}

export interface Guard {
  id: string;
  /** What the guard does, as docs/guarantees.md's table says it. */
  what: string;
  edits: GuardEdit[];
  /** The first seed of the CI budget that finds a violation without it (undefined: none yet). */
  found?: { family: string; seed: number; invariant: string; hoursSearched: number };
}

export const GUARDS: Guard[] = [
  {
    id: 'writer-still-wanted',
    what: "the writer's re-check after every wait (a node that renewed meanwhile is not marked)",
    edits: [
      {
        file: 'src/apply/writer.ts',
        find: 'const gone = opts.stillWanted?.();',
        off: 'const gone = OFF ? undefined : opts.stillWanted?.();',
      },
    ],
  },
  {
    id: 'lease-reread',
    what: 'the quorum re-read of the lease before a node is marked',
    edits: [
      {
        file: 'src/controller/node-reconcile.ts',
        find: "if (write.kind === 'lost' && !(await this.o.recheckLease.confirmStale(name))) return undefined;",
        off: "if (write.kind === 'lost' && !OFF && !(await this.o.recheckLease.confirmStale(name))) return undefined;",
      },
    ],
  },
  {
    id: 'blind-gating',
    what: 'nothing is done while a watch is blind (disconnected, unsynced, silent)',
    edits: [
      {
        file: 'src/controller/node-lifecycle.ts',
        find: 'return this.sightDriver.machine.blind === undefined;',
        off: 'return OFF ? this.sightDriver.machine.isLeading : this.sightDriver.machine.blind === undefined;',
      },
      {
        // The same question the steps ask after their waits (stillWanted, the out-of-service step).
        file: 'src/controller/node-lifecycle.ts',
        find: 'blind: () => this.sightDriver.machine.blind,',
        off: 'blind: () => (OFF && this.sightDriver.machine.isLeading ? undefined : this.sightDriver.machine.blind),',
      },
    ],
  },
  {
    id: 'writer-fence',
    what: "the writer's leadership fence (checked after every wait and as the request leaves)",
    edits: [
      {
        file: 'src/apply/writer.ts',
        find: '  private budget(term?: number): number | string {\n',
        off: '  private budget(term?: number): number | string {\n    if (OFF) return WRITE_TIMEOUT_MS;\n',
      },
    ],
  },
  {
    id: 'zone-token',
    what: "a NoExecute taint waits for its zone's token (the eviction rate)",
    edits: [
      {
        file: 'src/disruption/controller.ts',
        find: 'if (z.queue.size === 0 || !z.bucket.available(now)) continue;',
        off: 'if (z.queue.size === 0 || (!OFF && !z.bucket.available(now))) continue;',
      },
    ],
  },
  {
    id: 'cap',
    what: 'the blast-radius cap (--max-noexecute-taints within its window)',
    edits: [
      {
        file: 'src/disruption/controller.ts',
        find: 'if (!this.cap.allows(now, fleet, head.secondOf)) continue;',
        off: 'if (!OFF && !this.cap.allows(now, fleet, head.secondOf)) continue;',
      },
    ],
  },
  {
    id: 'master-disruption',
    what: 'no NoExecute taint while every zone is fully disrupted',
    edits: [
      {
        file: 'src/disruption/controller.ts',
        find: '  admit(now: number): AdmitResult {\n    if (this.master) {',
        off: '  admit(now: number): AdmitResult {\n    if (this.master && !OFF) {',
      },
    ],
  },
  {
    id: 'storage-outage',
    what: "an outage of the API server's storage does not count against any node",
    edits: [
      {
        file: 'src/controller/lease-recheck.ts',
        find: 'this.o.tracker.forgiveOutage(outageMs + allowanceMs, this.now());',
        off: 'if (!OFF) this.o.tracker.forgiveOutage(outageMs + allowanceMs, this.now());',
      },
    ],
  },
  {
    id: 'fleet-silence',
    what: 'a fleet silent at once is given the kubelets\u2019 reconnect time before it is judged',
    edits: [
      {
        file: 'src/controller/lease-recheck.ts',
        find: 'this.o.tracker.holdAll(now + KUBELET_RECONNECT_MS, now);',
        off: 'if (!OFF) this.o.tracker.holdAll(now + KUBELET_RECONNECT_MS, now);',
      },
    ],
  },
  {
    id: 'blind-time',
    what: "a blind spell's time does not count against any node",
    edits: [
      {
        file: 'src/controller/node-lifecycle.ts',
        find: 'this.o.tracker.extendBlind(c.leaseBlindMs, now);',
        off: 'if (!OFF) this.o.tracker.extendBlind(c.leaseBlindMs, now);',
      },
    ],
  },
  {
    id: 'forgiveness-cap',
    what: 'no chain of inferred forgiveness (storage outages, fleet silences) moves a deadline more than a grace',
    edits: [
      {
        file: 'src/health/tracker.ts',
        find: 'const room = Math.max(0, forgivenessCapOf(entry) - entry.forgiven);',
        off: 'const room = OFF ? Number.POSITIVE_INFINITY : Math.max(0, forgivenessCapOf(entry) - entry.forgiven);',
      },
    ],
  },
  {
    id: 'stall-on-time',
    what: 'renewals a stalled watch delivers late, made on time, count as no storage outage',
    edits: [
      {
        file: 'src/controller/storage-sight.ts',
        find: 'const onTime = silence !== undefined && (write.renewGapMs ?? Number.POSITIVE_INFINITY) <= silence.spanMs;',
        off: 'const onTime = !OFF && silence !== undefined && (write.renewGapMs ?? Number.POSITIVE_INFINITY) <= silence.spanMs;',
      },
    ],
  },
  {
    id: 'marked-lost-renewed',
    what: 'a node marked lost whose lease renewed since gets no NoExecute taint and no pod marks (the seam the simulator found)',
    edits: [
      {
        file: 'src/controller/node-reconcile.ts',
        find: 'const lost = this.o.tracker.isTimedOut(name, this.now()) || this.o.policy.markedLost(node);',
        off: 'const lost = this.o.tracker.isTimedOut(name, this.now()) || (!OFF && this.o.policy.markedLost(node));',
      },
      {
        file: 'src/controller/node-reconcile.ts',
        find: 'const lost = this.o.tracker.isTimedOut(name, this.now()) || this.o.policy.markedLost(decided);',
        off: 'const lost = this.o.tracker.isTimedOut(name, this.now()) || (!OFF && this.o.policy.markedLost(decided));',
      },
    ],
  },
  {
    id: 'swap-renewed',
    what: 'a NoExecute taint swapped in (not-ready for unreachable) needs the node lost on our clock (the third finding)',
    edits: [
      {
        file: 'src/controller/taints.ts',
        find: 'introduces = added || introducesNoExecute(current, t.taints);',
        off: 'introduces = added || (!OFF && introducesNoExecute(current, t.taints));',
      },
    ],
  },
  {
    id: 'cap-handover',
    what: 'a new leader counts the NoExecute taints in place against the cap and the zone rates (the second finding)',
    edits: [
      {
        file: 'src/controller/node-lifecycle.ts',
        find: '    this.countTaintsInPlace(now);\n',
        off: '    if (!OFF) this.countTaintsInPlace(now);\n',
      },
    ],
  },
  {
    id: 'defect-1',
    what: "out-of-service after a 409: the fresh copy is asked the whole question (issue 47's defect 1)",
    edits: [
      {
        file: 'src/controller/out-of-service.ts',
        find: 'if (current !== node) this.fresh(current);\n        const s = this.core.warranted(this.check(name, current));',
        off: 'if (current !== node && !OFF) this.fresh(current);\n        const s = OFF ? (current === node ? signal : this.core.signal(current)) : this.core.warranted(this.check(name, current));',
      },
    ],
  },
  {
    id: 'defect-2',
    what: "a slow re-read with no write meanwhile counts only its own wait as an outage (issue 47's defect 2)",
    edits: [
      {
        file: 'src/controller/storage-sight.ts',
        find: 'const slowMs = now - Math.max(sentAt, this.coveredUntil);',
        off: 'const slowMs = now - Math.max(OFF ? (this.lastProofAt ?? sentAt) : sentAt, this.coveredUntil);',
      },
    ],
  },
  {
    id: 'defect-3',
    what: "one lease write after a counted outage is enough for the next fleet-wide silence (issue 47's defect 3)",
    edits: [
      {
        file: 'src/controller/storage-sight.ts',
        find: 'if (this.leaseWatchBlind || !last || last.at < this.silenceCountedAt) return undefined;',
        off: 'if (this.leaseWatchBlind || !last || last.at < this.silenceCountedAt || (OFF && last.at <= this.coveredUntil)) return undefined;',
      },
    ],
  },
  {
    id: 'defect-4',
    what: "a node back gives up its queued out-of-service request and admission (issue 47's defect 4)",
    edits: [
      {
        file: 'src/controller/out-of-service.ts',
        find: "if (d.kind !== 'request' && d.kind !== 'apply') this.release(name);",
        off: "if (!OFF && d.kind !== 'request' && d.kind !== 'apply') this.release(name);",
      },
    ],
  },
  {
    id: 'defect-5',
    what: "the writer asks its re-check after each attempt's mutate, the first included (issue 47's defect 5)",
    edits: [
      {
        file: 'src/apply/writer.ts',
        find: 'const body = opts.mutate(current);\n',
        off: 'const early = OFF ? opts.stillWanted?.() : undefined;\n      const body = opts.mutate(current);\n',
      },
      {
        file: 'src/apply/writer.ts',
        find: "if (gone !== undefined) return { kind: 'withdrawn', reason: gone };\n      if (body === undefined) return { kind: 'unchanged' };",
        off: "if ((OFF ? early : gone) !== undefined) return { kind: 'withdrawn', reason: String(OFF ? early : gone) };\n      if (body === undefined) return { kind: 'unchanged' };",
      },
    ],
  },
  {
    id: 'defect-6',
    what: "a failed re-read before the out-of-service taint settles its admission (issue 47's defect 6)",
    edits: [
      {
        file: 'src/controller/out-of-service.ts',
        find: "    } catch (err) {\n      this.settle(name, 'failed');\n      throw err;",
        off: "    } catch (err) {\n      if (!OFF) this.settle(name, 'failed');\n      throw err;",
      },
    ],
  },
  {
    id: 'defect-7',
    what: "a node's pods count as listed only once the list answered (issue 47's defect 7)",
    edits: [
      {
        file: 'src/controller/pods.ts',
        find: '    const pods = await this.list(name, flipped ? undefined : last?.rv, trigger, last);',
        off: '    if (OFF) this.checkedAt.set(name, { at: now, everyMs: last?.everyMs ?? this.o.podRecheckMs, rv: last?.rv, stepped });\n    const pods = await this.list(name, flipped ? undefined : last?.rv, trigger, last);',
      },
    ],
  },
];

/** The expression `OFF` stands for in an edit: true while the test removed guard `id`. */
export function offExpression(id: string): string {
  return `((globalThis as { __nlcGuardsOff?: Set<string> }).__nlcGuardsOff?.has(${JSON.stringify(id)}) === true)`;
}

/** The source of `file` with every edit of every guard applied (throws when an edit does not fit). */
export function rewrite(file: string, code: string): string {
  let out = code;
  for (const g of GUARDS) {
    for (const e of g.edits) {
      if (e.file !== file) continue;
      const n = out.split(e.find).length - 1;
      if (n !== 1) {
        throw new Error(
          `guard ${g.id}: its code occurs ${n} times in ${file} (expected once): test/sim/guards.ts is out of step with the code`,
        );
      }
      out = out.replace(e.find, e.off.replaceAll('OFF', offExpression(g.id)));
    }
  }
  return out;
}

export const GUARDED_FILES = new Set(GUARDS.flatMap((g) => g.edits.map((e) => e.file)));
