import { Registry } from 'prom-client';
import { asyncScheduler } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Clock } from '../clock/clock.js';
import type { KubeRequest, KubeResponse } from '../kube/client.js';
import type { Node } from '../kube/types.js';
import { memoryLogger } from '../log/logger.js';
import { Subject } from '../rx/index.js';
import type { WatchEvent } from '../watch/types.js';
import {
  ConcurrentControllerCheck,
  createConcurrentControllerMetrics,
  EVIDENCE_WINDOW_MS,
  fixFor,
  KCM_MANAGER,
  METADATA_LIST,
  readyStatusOwners,
  startEvidence,
  watchEvidence,
} from './concurrent-controller.js';

const T0 = Date.parse('2026-12-04T12:00:00Z');
const OURS = 'node-lifecycle-controller';
const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
const READY_FIELDS = {
  'f:lastTransitionTime': {},
  'f:message': {},
  'f:reason': {},
  'f:status': {},
};

/** What kube-apiserver v1.37.2 recorded (test/e2e/concurrent-lifecycle.test.ts shows it live). */
function kcmMarked(at: number) {
  return [
    {
      manager: 'kubelet',
      operation: 'Update',
      apiVersion: 'v1',
      time: iso(at - 600_000),
      fieldsType: 'FieldsV1',
      fieldsV1: {
        'f:status': {
          'f:conditions': {
            'k:{"type":"Ready"}': { '.': {}, 'f:lastHeartbeatTime': {}, 'f:type': {} },
          },
        },
      },
      subresource: 'status',
    },
    {
      manager: KCM_MANAGER,
      operation: 'Update',
      apiVersion: 'v1',
      time: iso(at),
      fieldsType: 'FieldsV1',
      fieldsV1: {
        'f:metadata': { 'f:labels': { 'f:beta.kubernetes.io/arch': {} } },
        'f:spec': { 'f:taints': {} },
      },
    },
    {
      manager: KCM_MANAGER,
      operation: 'Update',
      apiVersion: 'v1',
      time: iso(at),
      fieldsType: 'FieldsV1',
      fieldsV1: {
        'f:status': {
          'f:conditions': { 'k:{"type":"MemoryPressure"}': READY_FIELDS, 'k:{"type":"Ready"}': READY_FIELDS },
        },
      },
      subresource: 'status',
    },
  ];
}

/** The same node after the kubelet came back: kube-controller-manager's status entry is gone. */
function recovered(at: number) {
  return kcmMarked(at).filter((e) => !(e.manager === KCM_MANAGER && e.subresource === 'status'));
}

function node(
  name: string,
  ready: string,
  managedFields: unknown,
): Node & { metadata: { managedFields: unknown } } {
  return {
    metadata: { name, managedFields },
    status: { conditions: [{ type: 'Ready', status: ready }] },
  } as Node & { metadata: { managedFields: unknown } };
}

describe('who set the Ready condition (managedFields)', () => {
  it('the owner of the Ready status is the manager that set it last; labels, taints and other conditions are not', () => {
    expect(readyStatusOwners(kcmMarked(T0))).toEqual([
      { manager: KCM_MANAGER, operation: 'Update', subresource: 'status', time: T0 },
    ]);
    expect(readyStatusOwners(recovered(T0))).toEqual([]);
    for (const junk of [undefined, null, 'x', [null, 1, {}], [{ manager: 'm', fieldsV1: 'x' }]]) {
      expect(readyStatusOwners(junk)).toEqual([]);
    }
  });

  it('at start: kube-controller-manager marks of the last hour count, older ones and other managers do not', () => {
    const items = [
      node('fresh', 'Unknown', kcmMarked(T0 - 60_000)),
      node('old', 'Unknown', kcmMarked(T0 - EVIDENCE_WINDOW_MS - 1000)),
      node('back', 'True', recovered(T0 - 60_000)),
      node(
        'ours',
        'Unknown',
        kcmMarked(T0 - 1000).map((e) => (e.subresource === 'status' ? { ...e, manager: OURS } : e)),
      ),
      node('edge', 'Unknown', kcmMarked(T0 - EVIDENCE_WINDOW_MS)),
    ];
    expect(startEvidence(items, T0, EVIDENCE_WINDOW_MS)).toEqual([
      { node: 'fresh', manager: KCM_MANAGER, ageMs: 60_000 },
      { node: 'edge', manager: KCM_MANAGER, ageMs: EVIDENCE_WINDOW_MS },
    ]);
  });

  it('while running: a node set Unknown by any manager but us (and not the kubelet) is evidence', () => {
    expect(watchEvidence(node('n', 'Unknown', kcmMarked(T0 - 2000)), T0, OURS, EVIDENCE_WINDOW_MS)).toEqual({
      node: 'n',
      manager: KCM_MANAGER,
      ageMs: 2000,
    });
    const byUs = kcmMarked(T0).map((e) => (e.subresource === 'status' ? { ...e, manager: OURS } : e));
    expect(watchEvidence(node('n', 'Unknown', byUs), T0, OURS, EVIDENCE_WINDOW_MS)).toBeUndefined();
    // The kubelet was back before we read it: its Ready is not Unknown.
    expect(watchEvidence(node('n', 'True', kcmMarked(T0)), T0, OURS, EVIDENCE_WINDOW_MS)).toBeUndefined();
    const other = kcmMarked(T0).map((e) => (e.subresource === 'status' ? { ...e, manager: 'cloud-nlc' } : e));
    expect(watchEvidence(node('n', 'Unknown', other), T0, OURS, EVIDENCE_WINDOW_MS)?.manager).toBe(
      'cloud-nlc',
    );
  });

  it('the fix names the flag change for kube-controller-manager, and companion mode', () => {
    expect(fixFor(KCM_MANAGER)).toContain('--controllers=*,-node-lifecycle-controller');
    expect(fixFor(KCM_MANAGER)).toContain(
      '--controllers=*,bootstrapsigner,tokencleaner,-node-lifecycle-controller',
    );
    expect(fixFor(KCM_MANAGER)).toContain('--mode=companion');
    expect(fixFor('cloud-nlc')).toContain('stop cloud-nlc');
  });
});

describe('ConcurrentControllerCheck', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: T0 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  /** An API server with these nodes (full objects; the metadata list gives the same managedFields). */
  function setup(o: { allow?: boolean; nodes?: ReturnType<typeof node>[]; failLists?: number } = {}) {
    const nodes = new Map((o.nodes ?? []).map((n) => [n.metadata.name, n]));
    const requests: KubeRequest[] = [];
    let failLists = o.failLists ?? 0;
    const client = {
      raw: async <T>(req: KubeRequest): Promise<KubeResponse<T>> => {
        requests.push(req);
        const headers = { date: new Date(Date.now()).toUTCString() };
        if (req.path === '/api/v1/nodes') {
          if (failLists-- > 0)
            throw Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:443'), { code: 'ECONNREFUSED' });
          const items = [...nodes.values()].map((n) => ({ metadata: n.metadata }));
          return { status: 200, headers, body: { metadata: {}, items } as T };
        }
        const n = nodes.get(req.path.split('/').at(-1)!);
        return n ? { status: 200, headers, body: n as T } : { status: 404, headers, body: {} as T };
      },
    };
    const registry = new Registry();
    const logger = memoryLogger(10);
    const clock: Clock = { scheduler: asyncScheduler, wall: () => Date.now() };
    const check = new ConcurrentControllerCheck({
      client,
      clock,
      logger,
      metrics: createConcurrentControllerMetrics(registry),
      ours: OURS,
      allow: o.allow ?? false,
    });
    const events = new Subject<WatchEvent<Node>>();
    let changes = 0;
    check.onChange(() => changes++);
    check.start(events);
    const gauge = async (manager: string) =>
      (await registry.getSingleMetric('nlc_conflicting_controller')?.get())?.values.find(
        (v) => v.labels.manager === manager,
      )?.value;
    return { check, events, requests, logs: logger.lines, nodes, gauge, changes: () => changes };
  }

  it('at start: a node kube-controller-manager marked 10 minutes ago: refuses, says so once with the node, the manager and the fix, until an hour after that mark', async () => {
    const s = setup({
      nodes: [node('a', 'True', recovered(T0)), node('b', 'Unknown', kcmMarked(T0 - 600_000))],
    });
    expect(s.check.mayAct()).toBe(false); // not checked yet
    await vi.advanceTimersByTimeAsync(10);
    expect(s.requests[0]).toMatchObject({
      path: '/api/v1/nodes',
      accept: METADATA_LIST,
      query: { limit: 500 },
    });
    expect(s.check.mayAct()).toBe(false);
    const refusal = s.check.refusal()!;
    expect(refusal).toContain(`${KCM_MANAGER} set node b's Ready condition 10m0s ago`);
    expect(refusal).toContain('--controllers=*,-node-lifecycle-controller');
    expect(s.check.readiness()).toBe(refusal);
    const errors = s.logs.filter((l) => l.level === 'error');
    expect(errors).toMatchObject([
      {
        msg: "Another node-lifecycle controller sets the nodes' Ready condition: refusing to write",
        node: 'b',
        manager: KCM_MANAGER,
        writtenAgo: '10m0s',
        seenIn: 'the node list at start',
      },
    ]);
    expect(String(errors[0]!.fix)).toContain('--mode=companion');
    expect(await s.gauge(KCM_MANAGER)).toBe(1);
    // 50 minutes later (an hour after the mark) it lapses: acting again, said once.
    await vi.advanceTimersByTimeAsync(50 * 60_000 - 1000);
    expect(s.check.mayAct()).toBe(false);
    await vi.advanceTimersByTimeAsync(2000);
    expect(s.check.mayAct()).toBe(true);
    expect(s.check.refusal()).toBeUndefined();
    expect(await s.gauge(KCM_MANAGER)).toBe(0);
    expect(
      s.logs.filter((l) => l.msg === 'No write of the other node-lifecycle controller seen for an hour'),
    ).toMatchObject([{ level: 'info', manager: KCM_MANAGER, now: 'acting again' }]);
    expect(s.logs.filter((l) => l.level === 'error')).toHaveLength(1);
  });

  it('at start: nothing found (marks older than an hour, or our own): acts once it has looked', async () => {
    const s = setup({ nodes: [node('old', 'Unknown', kcmMarked(T0 - 2 * 3_600_000))] });
    expect(s.check.mayAct()).toBe(false);
    await vi.advanceTimersByTimeAsync(10);
    expect(s.check.mayAct()).toBe(true);
    expect(s.changes()).toBe(1);
    expect(
      s.logs.find((l) => l.msg === 'Checked the nodes for another node-lifecycle controller'),
    ).toMatchObject({
      nodes: 1,
      found: 'none',
    });
  });

  it('a start check that fails is retried; until it succeeds the replica does not act and /readyz says why', async () => {
    const s = setup({ failLists: 2 });
    await vi.advanceTimersByTimeAsync(10);
    expect(s.check.mayAct()).toBe(false);
    expect(s.check.readiness()).toContain('could not yet check for another node-lifecycle controller');
    expect(s.check.readiness()).toContain('ECONNREFUSED');
    await vi.advanceTimersByTimeAsync(5_000 + 10_000);
    expect(s.check.mayAct()).toBe(true);
    expect(s.check.readiness()).toBeUndefined();
    expect(s.logs.filter((l) => String(l.msg).startsWith('Cannot check for another'))).toMatchObject([
      { retryIn: '5s' },
      { retryIn: '10s' },
    ]);
  });

  it('while running: a node that turns Unknown is read again; marked by kube-controller-manager, the replica refuses from then on', async () => {
    const s = setup({ nodes: [node('a', 'True', recovered(T0)), node('b', 'True', recovered(T0))] });
    await vi.advanceTimersByTimeAsync(10);
    const stripped = (name: string, ready: string) => node(name, ready, undefined);
    s.events.next({ type: 'Init' });
    s.events.next({ type: 'InitApply', object: stripped('a', 'True') });
    s.events.next({ type: 'InitApply', object: stripped('b', 'True') });
    s.events.next({ type: 'InitDone' });
    expect(s.check.mayAct()).toBe(true);
    // We marked a: read again, ours.
    s.nodes.set(
      'a',
      node(
        'a',
        'Unknown',
        kcmMarked(T0).map((e) => (e.subresource === 'status' ? { ...e, manager: OURS } : e)),
      ),
    );
    s.events.next({ type: 'Apply', object: stripped('a', 'Unknown') });
    await vi.advanceTimersByTimeAsync(10);
    expect(s.requests.filter((r) => r.path === '/api/v1/nodes/a')).toHaveLength(1);
    expect(s.check.mayAct()).toBe(true);
    // kube-controller-manager marked b.
    s.nodes.set('b', node('b', 'Unknown', kcmMarked(Date.now() - 1000)));
    s.events.next({ type: 'Apply', object: stripped('b', 'Unknown') });
    await vi.advanceTimersByTimeAsync(10);
    expect(s.check.mayAct()).toBe(false);
    expect(s.logs.filter((l) => l.level === 'error')).toMatchObject([
      { node: 'b', manager: KCM_MANAGER, seenIn: 'the node watch' },
    ]);
    // Still Unknown in the next event: not read again; a list does not count as a transition.
    s.events.next({ type: 'Apply', object: stripped('b', 'Unknown') });
    s.events.next({ type: 'InitApply', object: stripped('a', 'True') });
    await vi.advanceTimersByTimeAsync(10);
    expect(s.requests.filter((r) => r.path.startsWith('/api/v1/nodes/'))).toHaveLength(2);
    // It marks again half an hour later: the refusal lasts an hour from that mark.
    await vi.advanceTimersByTimeAsync(30 * 60_000);
    s.events.next({ type: 'Apply', object: stripped('a', 'True') });
    s.nodes.set('a', node('a', 'Unknown', kcmMarked(Date.now())));
    s.events.next({ type: 'Apply', object: stripped('a', 'Unknown') });
    await vi.advanceTimersByTimeAsync(40 * 60_000);
    expect(s.check.mayAct()).toBe(false);
    await vi.advanceTimersByTimeAsync(25 * 60_000);
    expect(s.check.mayAct()).toBe(true);
    expect(s.logs.filter((l) => l.level === 'error')).toHaveLength(1);
  });

  it('--allow-concurrent-node-lifecycle-controller: the same evidence is a warning and a metric, and the replica acts', async () => {
    const s = setup({ allow: true, nodes: [node('b', 'Unknown', kcmMarked(T0 - 60_000))] });
    expect(s.check.mayAct()).toBe(true);
    await vi.advanceTimersByTimeAsync(10);
    expect(s.check.mayAct()).toBe(true);
    expect(s.check.refusal()).toBeUndefined();
    expect(s.check.readiness()).toBeUndefined();
    expect(s.logs.filter((l) => l.level === 'error')).toEqual([]);
    expect(s.logs.filter((l) => l.level === 'warn')).toMatchObject([{ node: 'b', manager: KCM_MANAGER }]);
    expect(await s.gauge(KCM_MANAGER)).toBe(1);
  });
});
