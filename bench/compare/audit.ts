/**
 * Reads kube-apiserver's JSON-lines audit log (LocalControlPlane {audit: true}) and counts the
 * writes made by one identity: per object, per resource and verb, and per time window.
 */
import { closeSync, createReadStream, existsSync, openSync, readSync, statSync } from 'node:fs';
import { createInterface } from 'node:readline';

export const WRITE_VERBS = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);

export interface AuditWrite {
  /** Absolute ms when the request was received. */
  at: number;
  verb: string;
  /** resource[/subresource], e.g. nodes/status, pods/status, events, leases. */
  resource: string;
  namespace: string;
  name: string;
  code: number;
  userAgent: string;
  /** kube-apiserver's own time for it: ResponseComplete's stageTimestamp - requestReceivedTimestamp (ms). */
  serverMs?: number;
}

interface AuditEvent {
  stage?: string;
  verb?: string;
  user?: { username?: string };
  userAgent?: string;
  objectRef?: { resource?: string; subresource?: string; namespace?: string; name?: string };
  responseStatus?: { code?: number };
  requestReceivedTimestamp?: string;
  stageTimestamp?: string;
}

/** ms between two RFC 3339 times with microseconds (Date.parse keeps only milliseconds). */
export function microsBetween(from: string, to: string): number | undefined {
  const us = (t: string) => {
    const m = /^(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$/.exec(t);
    if (!m) return undefined;
    const whole = Date.parse(`${m[1]}${m[3]}`);
    if (Number.isNaN(whole)) return undefined;
    return whole * 1000 + Number(((m[2] ?? '') + '000000').slice(0, 6));
  };
  const a = us(from);
  const b = us(to);
  return a === undefined || b === undefined ? undefined : (b - a) / 1000;
}

/** All completed writes by `username`, in log order. */
export async function readWrites(auditLogPath: string, username: string): Promise<AuditWrite[]> {
  const out: AuditWrite[] = [];
  const needle = `"username":"${username}"`;
  const rl = createInterface({
    input: createReadStream(auditLogPath, 'utf8'),
    crlfDelay: Number.POSITIVE_INFINITY,
  });
  for await (const line of rl) {
    if (!line.includes(needle)) continue;
    let ev: AuditEvent;
    try {
      ev = JSON.parse(line) as AuditEvent;
    } catch {
      continue;
    }
    if (ev.stage !== 'ResponseComplete' || ev.user?.username !== username) continue;
    const verb = ev.verb ?? '';
    if (!WRITE_VERBS.has(verb)) continue;
    const ref = ev.objectRef ?? {};
    out.push({
      at: Date.parse(ev.requestReceivedTimestamp ?? '') || 0,
      verb,
      resource: ref.subresource ? `${ref.resource}/${ref.subresource}` : (ref.resource ?? ''),
      namespace: ref.namespace ?? '',
      name: ref.name ?? '',
      code: ev.responseStatus?.code ?? 0,
      userAgent: ev.userAgent ?? '',
      serverMs: microsBetween(ev.requestReceivedTimestamp ?? '', ev.stageTimestamp ?? ''),
    });
  }
  return out;
}

/**
 * The node a write concerns: the Node itself, one of its pods (name prefix `<node>-`), or an event
 * about either (event names are `<involved object>.<suffix>`). undefined when not attributable.
 */
export function attributeToNode(
  w: AuditWrite,
  nodes: ReadonlySet<string>,
  podNode: ReadonlyMap<string, string>,
) {
  if (w.resource.startsWith('nodes')) return nodes.has(w.name) ? w.name : undefined;
  if (w.resource.startsWith('pods')) return podNode.get(`${w.namespace}/${w.name}`);
  if (w.resource === 'events') {
    const involved = w.name.includes('.') ? w.name.slice(0, w.name.lastIndexOf('.')) : w.name;
    if (nodes.has(involved)) return involved;
    return podNode.get(`${w.namespace}/${involved}`);
  }
  return undefined;
}

/** Counts keyed "resource verb" (e.g. "nodes/status update") with failures split out. */
export function countByKind(writes: readonly AuditWrite[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const w of writes) {
    const failed = w.code >= 400 ? ` (${w.code})` : '';
    const key = `${w.resource} ${w.verb}${failed}`;
    out[key] = (out[key] ?? 0) + 1;
  }
  return Object.fromEntries(Object.entries(out).sort((a, b) => b[1] - a[1]));
}

/**
 * Follows the audit log while a run is in progress and remembers when `username` last wrote, so the
 * harness can wait until a controller's start-up work (taint clean-up, labels, events) has drained.
 */
export class AuditTail {
  private offset: number;
  private rest = '';
  /** Absolute ms (our clock) when the last write by `username` was seen in the log. */
  lastWriteAt: number | undefined;
  writes = 0;

  constructor(
    private readonly file: string,
    private readonly username: string,
  ) {
    this.offset = existsSync(file) ? statSync(file).size : 0;
  }

  /** Reads what was appended since the last call. */
  poll(now: number): void {
    if (!existsSync(this.file)) return;
    const size = statSync(this.file).size;
    if (size <= this.offset) return;
    const fd = openSync(this.file, 'r');
    try {
      const buf = Buffer.alloc(size - this.offset);
      readSync(fd, buf, 0, buf.length, this.offset);
      this.offset = size;
      const text = this.rest + buf.toString('utf8');
      const lines = text.split('\n');
      this.rest = lines.pop() ?? '';
      const needle = `"username":"${this.username}"`;
      for (const line of lines) {
        if (!line.includes(needle) || !line.includes('"stage":"ResponseComplete"')) continue;
        const verb = /"verb":"([a-z]+)"/.exec(line)?.[1] ?? '';
        if (!WRITE_VERBS.has(verb)) continue;
        this.writes++;
        this.lastWriteAt = now;
      }
    } finally {
      closeSync(fd);
    }
  }
}
