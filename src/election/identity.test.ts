import { createHash } from 'node:crypto';
import { Registry } from 'prom-client';
import { asyncScheduler, BehaviorSubject } from 'rxjs';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../log/logger.js';
import {
  HOSTNAME_ANNOTATION,
  HOSTNAME_LABEL,
  IDENTITY_LABEL,
  IdentityLeases,
  identityLeaseName,
  LEADER_LABEL,
  labelValue,
} from './identity.js';
import { createLeaderElectionMetrics } from './metrics.js';
import { microTime } from './record.js';
import { FakeLeaseServer } from './testing/fake-lease-api.js';

const NS = 'nlc-system';
const T0 = Date.parse('2026-03-01T12:00:00.000Z');
const SELECTOR = `${IDENTITY_LABEL}=node-lifecycle-controller`;

/** RFC 4648 base32 via BigInt: an independent check of the name encoding. */
function base32Reference(bytes: Buffer): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  const bits = bytes.length * 8;
  const chars = Math.ceil(bits / 5);
  let n = BigInt(`0x${bytes.toString('hex')}`) << BigInt(chars * 5 - bits);
  let out = '';
  for (let i = 0; i < chars; i++) {
    out = alphabet[Number(n & 31n)] + out;
    n >>= 5n;
  }
  return out;
}

let server: FakeLeaseServer;
const running: IdentityLeases[] = [];
beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
  server = new FakeLeaseServer();
});
afterEach(() => {
  for (const r of running.splice(0)) r.stop();
  vi.useRealTimers();
});

function replica(
  hostname: string,
  holder: string,
  o: {
    leading?: BehaviorSubject<boolean>;
    leader?: () => string;
    gcAgeMs?: number;
    registry?: Registry;
    /** undefined: use the default (derived from gcAge). */
    renewIntervalMs?: number | undefined;
  } = {},
): IdentityLeases {
  const r = new IdentityLeases({
    client: server.as(holder),
    clock: { scheduler: asyncScheduler, wall: () => Date.now() },
    logger: silentLogger,
    metrics: createLeaderElectionMetrics(o.registry ?? new Registry()),
    namespace: NS,
    hostname,
    holderIdentity: holder,
    renewIntervalMs: 'renewIntervalMs' in o ? o.renewIntervalMs : 1_000,
    gcAgeMs: o.gcAgeMs ?? 10_000,
    gcCheckIntervalMs: 1_000,
    elector: o.leading ? { leading$: o.leading, getLeader: o.leader ?? (() => '') } : undefined,
    random: () => 0,
  });
  running.push(r);
  return r;
}

const list = () => [...server.leases.values()].filter((l) => l.metadata.labels?.[IDENTITY_LABEL]);
const advance = (ms: number) => vi.advanceTimersByTimeAsync(ms);

describe('identityLeaseName', () => {
  it('is <component>-<base32(sha256(len-prefixed host, len-prefixed component))[:16 bytes]>, like kube-apiserver', () => {
    const name = identityLeaseName('node-lifecycle-controller', 'nlc-0');
    const data = Buffer.concat([
      Buffer.from([0, 5]),
      Buffer.from('nlc-0'),
      Buffer.from([0, 25]),
      Buffer.from('node-lifecycle-controller'),
    ]);
    const expected = base32Reference(createHash('sha256').update(data).digest().subarray(0, 16));
    expect(name).toBe(`node-lifecycle-controller-${expected}`);
    expect(name).toMatch(/^node-lifecycle-controller-[a-z2-7]{26}$/);
    expect(identityLeaseName('node-lifecycle-controller', 'nlc-0')).toBe(name);
    expect(identityLeaseName('node-lifecycle-controller', 'nlc-1')).not.toBe(name);
    // The length prefix keeps ("ab","c") and ("a","bc") apart.
    expect(identityLeaseName('c', 'ab')).not.toBe(identityLeaseName('bc', 'a').replace(/^bc/, 'c'));
  });

  it('labelValue trims to a valid label value', () => {
    expect(labelValue('nlc-0')).toBe('nlc-0');
    expect(labelValue(`-${'x'.repeat(70)}`)).toBe('x'.repeat(62));
    expect(labelValue('host.example.com_')).toBe('host.example.com');
    expect(labelValue('a b/c')).toBe('a-b-c');
  });
});

describe('IdentityLeases', () => {
  it('publishes a labelled lease, renews it, and keeps the leader label current', async () => {
    const leading = new BehaviorSubject(false);
    const r = replica('nlc-0', 'nlc-0_aaa', { leading });
    r.start();
    await advance(10);
    const l = server.get(NS, r.leaseName)!;
    expect(l.metadata.labels).toEqual({
      [IDENTITY_LABEL]: 'node-lifecycle-controller',
      [HOSTNAME_LABEL]: 'nlc-0',
      [LEADER_LABEL]: 'false',
    });
    expect(l.metadata.annotations).toEqual({ [HOSTNAME_ANNOTATION]: 'nlc-0' });
    expect(l.spec).toMatchObject({ holderIdentity: 'nlc-0_aaa', leaseDurationSeconds: 3600 });
    const firstRenew = l.spec?.renewTime;
    await advance(1_000);
    expect(server.get(NS, r.leaseName)?.spec?.renewTime).not.toBe(firstRenew);
    leading.next(true);
    await advance(10); // immediately, not at the next renewal
    expect(server.get(NS, r.leaseName)?.metadata.labels?.[LEADER_LABEL]).toBe('true');
    leading.next(false);
    await advance(10);
    expect(server.get(NS, r.leaseName)?.metadata.labels?.[LEADER_LABEL]).toBe('false');
  });

  it('a replica restarted with the same host name takes over its lease in place', async () => {
    const first = replica('nlc-0', 'nlc-0_aaa');
    first.start();
    await advance(10);
    const before = server.get(NS, first.leaseName)!;
    first.stop(); // crash
    const second = replica('nlc-0', 'nlc-0_bbb');
    expect(second.leaseName).toBe(first.leaseName);
    second.start();
    await advance(10);
    const after = server.get(NS, second.leaseName)!;
    expect(after.metadata.uid).toBe(before.metadata.uid);
    expect(after.spec?.holderIdentity).toBe('nlc-0_bbb');
    expect(list()).toHaveLength(1);
  });

  it('collects a dead replica only after seeing its renewTime unchanged for gcAge, whatever the timestamps say', async () => {
    const registry = new Registry();
    const live = replica('nlc-0', 'nlc-0_aaa', { gcAgeMs: 10_000, registry });
    const renewing = replica('nlc-1', 'nlc-1_bbb', { gcAgeMs: 3_600_000 }); // collects nothing here
    renewing.start();
    // Two dead replicas left before we started: one renewed "3 years ago", one "in 5 hours" (skew).
    const old = identityLeaseName('node-lifecycle-controller', 'dead-old');
    const future = identityLeaseName('node-lifecycle-controller', 'dead-future');
    for (const [name, renew] of [
      [old, T0 - 3 * 365 * 24 * 3_600_000],
      [future, T0 + 5 * 3_600_000],
    ] as const) {
      server.put(NS, {
        metadata: { name, labels: { [IDENTITY_LABEL]: 'node-lifecycle-controller' } },
        spec: { holderIdentity: `${name}_x`, leaseDurationSeconds: 3600, renewTime: microTime(renew) },
      });
    }
    live.start();
    await advance(9_500);
    // Not before we have watched them for gcAge (upstream would delete the "old" one at once).
    expect(server.get(NS, old)).toBeDefined();
    expect(server.get(NS, future)).toBeDefined();
    await advance(1_100);
    expect(server.get(NS, old)).toBeUndefined();
    expect(server.get(NS, future)).toBeUndefined();
    // The replica that keeps renewing is never collected, nor our own.
    await advance(30_000);
    expect(server.get(NS, renewing.leaseName)).toBeDefined();
    expect(server.get(NS, live.leaseName)).toBeDefined();
    const collected = (await registry.getSingleMetric('nlc_identity_leases_collected_total')?.get())
      ?.values[0]?.value;
    expect(collected).toBe(2);
  });

  it('with only a short gcAge (--identity-lease-gc-age=5s), renews often enough that no live replica is collected', async () => {
    const registry = new Registry();
    const a = replica('nlc-0', 'nlc-0_aaa', { gcAgeMs: 5_000, renewIntervalMs: undefined, registry });
    const b = replica('nlc-1', 'nlc-1_bbb', { gcAgeMs: 5_000, renewIntervalMs: undefined, registry });
    a.start();
    b.start();
    const uids = () => [a, b].map((r) => server.get(NS, r.leaseName)?.metadata.uid);
    await advance(10);
    const before = uids();
    expect(before.every(Boolean)).toBe(true);
    await advance(60_000);
    // Same objects (never deleted and recreated), and nothing counted as collected.
    expect(uids()).toEqual(before);
    const collected = (await registry.getSingleMetric('nlc_identity_leases_collected_total')?.get())
      ?.values[0]?.value;
    expect(collected ?? 0).toBe(0);
  });

  it('does not delete a lease renewed between the listing and the delete', async () => {
    const r = replica('nlc-0', 'nlc-0_aaa', { gcAgeMs: 5_000 });
    const name = identityLeaseName('node-lifecycle-controller', 'slow');
    const put = (renew: number) =>
      server.put(NS, {
        metadata: { name, labels: { [IDENTITY_LABEL]: 'node-lifecycle-controller' } },
        spec: { holderIdentity: 'slow_1', renewTime: microTime(renew) },
      });
    put(T0);
    const first = r.collect();
    await advance(10);
    expect(await first).toEqual([]);
    await advance(6_000);
    // It renews right after our listing judged it stale: the fresh GET sees the change.
    server.fault = (req) => {
      if (req.method === 'GET' && req.path.endsWith(`/${name}`)) put(T0 + 6_000);
      return undefined;
    };
    const collecting = r.collect();
    await advance(50);
    expect(await collecting).toEqual([]);
    expect(server.get(NS, name)).toBeDefined();
  });

  it('while leading, resets a stale leader=true left by a dead leader', async () => {
    const leading = new BehaviorSubject(true);
    const r = replica('nlc-0', 'nlc-0_aaa', { leading, leader: () => 'nlc-0_aaa' });
    const dead = identityLeaseName('node-lifecycle-controller', 'old-leader');
    server.put(NS, {
      metadata: {
        name: dead,
        labels: { [IDENTITY_LABEL]: 'node-lifecycle-controller', [LEADER_LABEL]: 'true' },
      },
      spec: { holderIdentity: 'old-leader_1', renewTime: microTime(T0) },
    });
    r.start();
    await advance(50);
    expect(server.get(NS, dead)?.metadata.labels?.[LEADER_LABEL]).toBe('false');
    expect(server.get(NS, r.leaseName)?.metadata.labels?.[LEADER_LABEL]).toBe('true');
  });

  it('shutdown deletes our own lease; stop keeps it', async () => {
    const a = replica('nlc-0', 'nlc-0_aaa');
    const b = replica('nlc-1', 'nlc-1_bbb');
    a.start();
    b.start();
    await advance(10);
    const done = a.shutdown();
    await advance(50);
    await done;
    b.stop();
    expect(server.get(NS, a.leaseName)).toBeUndefined();
    expect(server.get(NS, b.leaseName)).toBeDefined();
    const listed = server.as('x').request<{ items: unknown[] }>({
      method: 'GET',
      path: `/apis/coordination.k8s.io/v1/namespaces/${NS}/leases`,
      query: { labelSelector: SELECTOR },
    });
    await advance(10);
    expect((await listed).items).toHaveLength(1);
  });
});
