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
  /** Other guards removed with it: two that cover for each other are caught together. */
  alsoOff?: string[];
  /** The first seed of the CI budget that finds a violation without it (undefined: none yet). */
  found?: { family: string; seed: number; invariant: string; hoursSearched: number };
  /**
   * Why the budget finds nothing without it (the search ran the whole budget): another guard covers
   * the same faults. docs/guarantees.md lists it so; CI does not ask the budget to catch it.
   */
  notCaught?: string;
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
    found: { family: 'network', seed: 1, invariant: 'S2 acts on what it saw', hoursSearched: 7.2 },
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
    found: { family: 'mixed', seed: 1, invariant: 'S1 live node untouched', hoursSearched: 0.1 },
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
    found: { family: 'network', seed: 1, invariant: 'S5 acts on nothing it cannot see', hoursSearched: 6.8 },
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
    found: { family: 'threshold', seed: 24, invariant: 'S3 one writer', hoursSearched: 417.9 },
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
    found: { family: 'network', seed: 1, invariant: 'S4 zone rate', hoursSearched: 7.2 },
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
    found: { family: 'network', seed: 1, invariant: 'S4 cap', hoursSearched: 7.1 },
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
      {
        // Entering it stops every zone's rate too: both go, or the other holds the taints back alone.
        file: 'src/disruption/controller.ts',
        find: '    this.master = true;\n    for (const z of this.zones.values()) this.setRate(z, 0, now);',
        off: '    this.master = true;\n    if (!OFF) for (const z of this.zones.values()) this.setRate(z, 0, now);',
      },
    ],
    found: { family: 'threshold', seed: 1, invariant: 'S4 master disruption', hoursSearched: 16.0 },
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
    notCaught:
      'Behind the hold a silent fleet gets (fleet-silence): inside the model every outage long enough to need forgiving silences the whole fleet at once, and that hold covers it; forgiving a counted outage is the second line, for outages no fleet-wide silence shows (a fleet of one node, out of the model). src/controller/storage-forgiveness.test.ts holds it.',
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
    found: { family: 'network', seed: 12, invariant: 'S2 acts on what it saw', hoursSearched: 197.9 },
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
    found: { family: 'network', seed: 12, invariant: 'S2 acts on what it saw', hoursSearched: 197.9 },
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
    notCaught:
      "L2's allowance counts each control-plane fault's time plus a margin (test/sim/injector.ts, HINDERING), looser than the cap: inside the model (at most 60 s of outage in any 2 x G) no chain of forgiveness outgrows it. src/health/tracker.property.test.ts holds the cap ('inferred forgiveness is capped').",
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
    notCaught:
      "Its removal forgives too much, never too little: a dead node is marked later, no live node sooner, and the forgiveness cap keeps the delay under a grace, which L2's allowance (each control-plane fault's time plus a margin) does not tell apart. src/controller/storage-sight.test.ts holds it.",
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
    found: { family: 'network', seed: 1, invariant: 'S2 acts on what it saw', hoursSearched: 7.2 },
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
    found: { family: 'storage', seed: 14, invariant: 'S2 acts on what it saw', hoursSearched: 230.2 },
  },
  {
    id: 'fresh-after-409',
    what: "a taint write's 409 re-read counts what it shows (a heartbeat) before the steps after it ask whether the node is lost (the fourth finding)",
    edits: [
      {
        file: 'src/controller/taints.ts',
        find: 'if (current !== node) this.o.observeFresh(current);',
        off: 'if (current !== node && !OFF) this.o.observeFresh(current);',
      },
    ],
    found: { family: 'threshold', seed: 12, invariant: 'S2 acts on what it saw', hoursSearched: 208.0 },
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
    found: { family: 'network', seed: 1, invariant: 'S4 cap', hoursSearched: 7.1 },
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
    found: { family: 'threshold', seed: 4, invariant: 'S2 acts on what it saw', hoursSearched: 67.7 },
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
    found: { family: 'seams', seed: 3, invariant: 'L1 slow mark', hoursSearched: 57.9 },
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
    notCaught:
      "Its history has 86 s of outage within 2 x G (21-64 s and 64.7-108 s at G = 50 s), beyond the model's 60 s; the budget's pairs of outages a moment apart (at most 60 s together) have not needed it. src/controller/storage-forgiveness.test.ts and storage-sight.test.ts hold it.",
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
      {
        // Before the fix no admission expired either (the time limit came with admission-ttl).
        file: 'src/controller/out-of-service.ts',
        find: 'if (heldSince !== undefined && now - heldSince > ADMISSION_TTL_MS) {',
        off: 'if (!OFF && heldSince !== undefined && now - heldSince > ADMISSION_TTL_MS) {',
      },
    ],
    found: { family: 'threshold', seed: 1, invariant: 'S4 zone rate', hoursSearched: 16.1 },
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
    found: { family: 'network', seed: 1, invariant: 'S2 acts on what it saw', hoursSearched: 7.2 },
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
    found: { family: 'seams', seed: 2, invariant: 'L5 out-of-service', hoursSearched: 39.1 },
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
      {
        // Before the fix a failed list owed nothing: the record made before it stood.
        file: 'src/controller/pods.ts',
        find: '      // resource version" after an etcd restore). The last list\'s time is kept.\n      this.owe(name, trigger, {',
        off: '      // resource version" after an etcd restore). The last list\'s time is kept.\n      if (!OFF) this.owe(name, trigger, {',
      },
    ],
    found: { family: 'seams', seed: 1, invariant: 'L4 pods marked', hoursSearched: 17.6 },
  },
  {
    id: 'admission-ttl',
    what: "an admission its node's run could not use within 20 s (a blind spell held the run back) is given back and asked for again (the fifth finding)",
    edits: [
      {
        file: 'src/controller/taints.ts',
        find: 'if (admittedAt !== undefined && this.now() - admittedAt > ADMISSION_TTL_MS) {',
        off: 'if (!OFF && admittedAt !== undefined && this.now() - admittedAt > ADMISSION_TTL_MS) {',
      },
    ],
    found: { family: 'storage', seed: 6, invariant: 'S4 zone rate', hoursSearched: 103.0 },
  },
  {
    id: 'second-opinion-hold',
    what: "a node past its grace whose kubelet answers gets no NoExecute (the taint policy) and a NoExecute write waiting for its token is withdrawn once it is heard answering (--second-opinion's hold; each covers for the other)",
    edits: [
      {
        file: 'src/policy/upstream.ts',
        find: 'if (add && !master && view.heldMs !== undefined) {',
        off: 'if (!OFF && add && !master && view.heldMs !== undefined) {',
      },
      {
        file: 'src/controller/taints.ts',
        find: "if (view.heldMs !== undefined) return 'its kubelet still answers (NoExecute held)';",
        off: "if (!OFF && view.heldMs !== undefined) return 'its kubelet still answers (NoExecute held)';",
      },
    ],
    found: { family: 'second-opinion', seed: 1, invariant: 'S6 cut off, not evicted', hoursSearched: 20.1 },
  },
  {
    id: 'second-opinion-pods-held',
    what: "a held node's pods are left Ready, and pod marks waiting for their tokens are withdrawn once its kubelet is heard answering (each covers for the other: removed together)",
    edits: [
      {
        file: 'src/controller/node-reconcile.ts',
        find: '    if (heldMs !== undefined) {',
        off: '    if (!OFF && heldMs !== undefined) {',
      },
      {
        file: 'src/controller/node-reconcile.ts',
        find: "if (this.view(name, this.now()).heldMs !== undefined) return 'its kubelet still answers (pods held)';",
        off: "if (!OFF && this.view(name, this.now()).heldMs !== undefined) return 'its kubelet still answers (pods held)';",
      },
    ],
    found: { family: 'second-opinion', seed: 1, invariant: 'S6 cut off, not evicted', hoursSearched: 20.1 },
  },
  {
    id: 'second-opinion-two-failures',
    what: 'a node is confirmed down by two failed probes in a row, an answer between them starts over (--second-opinion)',
    edits: [
      {
        file: 'src/second-opinion/verdict.ts',
        find: "      if (results[i]!.outcome === 'answers') return false;",
        off: "      if (!OFF && results[i]!.outcome === 'answers') return false;",
      },
    ],
    found: { family: 'second-opinion', seed: 1, invariant: 'S2 acts on what it saw', hoursSearched: 20.1 },
  },
  {
    id: 'second-opinion-same-silence',
    what: 'a confirmation times a node out only for the silence its probes judged (a renewal since starts over: --second-opinion)',
    edits: [
      {
        file: 'src/health/tracker.ts',
        find: '    if (!entry?.hasNode || entry.probe !== silentSince || !Number.isFinite(now)) return false;',
        off: '    if (!entry?.hasNode || (!OFF && entry.probe !== silentSince) || !Number.isFinite(now)) return false;',
      },
    ],
    found: { family: 'second-opinion', seed: 7, invariant: 'S2 acts on what it saw', hoursSearched: 156.9 },
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
