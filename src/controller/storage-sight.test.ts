import { describe, expect, it } from 'vitest';
import { renewGapOf, renewIntervalOf } from './lease-recheck.js';
import { StorageSight } from './storage-sight.js';

const SLOW = 1_000;
/** A write of one lease (a fleet of one: it shows no fleet-wide silence). */
const one = { lease: 'a', renewIntervalMs: 10_000 };

describe('StorageSight', () => {
  it('a prompt answer is trusted; so is a slow one while writes kept arriving', () => {
    const s = new StorageSight(SLOW);
    s.writeSeen(100, one);
    expect(s.readAnswered(1_000, 1_999)).toStrictEqual({});
    s.writeSeen(2_500, one);
    expect(s.readAnswered(2_000, 4_000)).toStrictEqual({});
  });

  it('a slow answer with no write meanwhile: its own wait counts, not the time since the last write (issue 47, defect 2)', () => {
    const s = new StorageSight(SLOW);
    s.writeSeen(10_000, one);
    expect(s.readAnswered(14_000, 15_000)).toStrictEqual({ slowMs: 1_000 });
    // Another read that waited through the same time counts nothing twice.
    expect(s.readAnswered(13_000, 15_000)).toStrictEqual({});
    // One sent during it but answered promptly is trusted (the caller checks the moved deadline).
    expect(s.readAnswered(14_500, 15_000)).toStrictEqual({});
    expect(s.readAnswered(15_100, 15_200)).toStrictEqual({});
    // A fleet that died a whole grace ago, behind a server that answers in 1.5 s: each re-read
    // counts its 1.5 s, never the 50 s since the last write.
    expect(s.readAnswered(60_000, 61_500)).toStrictEqual({ slowMs: 1_500 });
    expect(s.readAnswered(70_000, 71_500)).toStrictEqual({ slowMs: 1_500 });
  });

  it('a prompt answer is proof too: an outage after it counts from it, not from the last write', () => {
    const s = new StorageSight(SLOW);
    s.writeSeen(0, one);
    expect(s.readAnswered(50_000, 50_010)).toStrictEqual({});
    expect(s.readFailed(60_000)).toBe(true);
    expect(s.readAnswered(70_000, 70_010)).toStrictEqual({ outageMs: 20_000 });
    expect(s.readAnswered(80_000, 82_000)).toStrictEqual({ slowMs: 2_000 });
  });

  it('without any write seen, a slow read counts from when it was sent', () => {
    const s = new StorageSight(SLOW);
    expect(s.readAnswered(3_000, 7_000)).toStrictEqual({ slowMs: 4_000 });
  });

  it('a failed read opens an outage from the last write; the next write or answer ends it', () => {
    const s = new StorageSight(SLOW);
    s.writeSeen(20_000, one);
    expect(s.readFailed(70_000)).toBe(true);
    expect(s.readFailed(75_050)).toBe(false); // already open
    expect(s.writeSeen(80_000, one)).toBe(60_000); // a write ends it
    expect(s.readFailed(80_500)).toBe(true);
    expect(s.readAnswered(81_000, 81_010)).toStrictEqual({ outageMs: 1_010 }); // from the end of the last one
    expect(s.readAnswered(81_020, 81_030)).toStrictEqual({});

    expect(s.readFailed(90_000)).toBe(true);
    expect(s.writeSeen(96_000, one)).toBe(14_970); // from the last proof (the prompt answer at 81.03 s)
    expect(s.writeSeen(97_000, one)).toBeUndefined();
    // A slow answer ends an open outage too: from its start, not the read's own wait.
    expect(s.readFailed(100_000)).toBe(true);
    expect(s.readAnswered(105_000, 107_000)).toStrictEqual({ outageMs: 10_000 });
  });

  it('a slow read that overlapped proof of the storage working shows no outage', () => {
    const s = new StorageSight(SLOW);
    s.writeSeen(0, one);
    expect(s.readAnswered(5_000, 8_000)).toStrictEqual({ slowMs: 3_000 });
    expect(s.readAnswered(7_500, 9_000)).toStrictEqual({}); // the answer at 8 s proved it
    s.writeSeen(9_500, one);
    expect(s.readAnswered(9_400, 11_000)).toStrictEqual({}); // so did the write at 9.5 s
    expect(s.readAnswered(11_500, 13_000)).toStrictEqual({ slowMs: 1_500 }); // nothing since the write at 9.5 s
  });

  it("a slow read whose wait the lease watch's blind spell already covers counts nothing", () => {
    const s = new StorageSight(SLOW);
    s.writeSeen(0, one);
    expect(s.readFailed(10_000)).toBe(true);
    expect(s.watchBlind(20_000)).toBe(20_000);
    expect(s.readAnswered(12_000, 20_000)).toStrictEqual({});
  });

  it('an open outage ends where the lease watch goes blind (the spell counts from there)', () => {
    const s = new StorageSight(SLOW);
    s.writeSeen(10_000, one);
    expect(s.watchBlind(12_000)).toBeUndefined(); // none open
    expect(s.readFailed(14_000)).toBe(true);
    expect(s.watchBlind(16_000)).toBe(6_000);
    // A slow read sent before the end of what was counted counts only the time after it.
    expect(s.readAnswered(15_000, 17_000)).toStrictEqual({ slowMs: 1_000 });
    expect(s.readAnswered(30_000, 32_000)).toStrictEqual({ slowMs: 2_000 });
  });

  describe('a fleet-wide silence of lease writes (no re-read fell into it)', () => {
    const R = 10_000; // the kubelets' renew interval (leaseDurationSeconds 40)
    const w = (lease: string) => ({ lease, renewIntervalMs: R });

    it('no write for longer than 1.5 renew intervals after two leases renewed: an outage from the last write to the next', () => {
      const s = new StorageSight(SLOW);
      s.writeSeen(10_000, w('a'));
      s.writeSeen(10_500, w('b'));
      expect(s.writeSeen(25_500, w('a'))).toBeUndefined(); // 15 s: not longer than 1.5 intervals
      expect(s.writeSeen(41_001, w('b'))).toBe(15_501);
      expect(s.writeSeen(41_002, w('a'))).toBeUndefined(); // counted once
    });

    it('one lease renewing alone shows nothing: its silence is its own', () => {
      const s = new StorageSight(SLOW);
      s.writeSeen(0, w('a'));
      s.writeSeen(10_000, w('a'));
      expect(s.writeSeen(60_000, w('a'))).toBeUndefined();
      // Another lease after it, long after: the two were not renewing together.
      expect(s.writeSeen(90_000, w('b'))).toBeUndefined();
      expect(s.writeSeen(100_000, w('a'))).toBeUndefined();
      expect(s.writeSeen(130_000, w('b'))).toBe(30_000); // now they were (within 10 s)
    });

    it("the span follows the leases' renew interval (leaseDurationSeconds / 4)", () => {
      const s = new StorageSight(SLOW);
      const short = (lease: string) => ({ lease, renewIntervalMs: 1_000 });
      s.writeSeen(0, short('a'));
      s.writeSeen(100, short('b'));
      expect(s.writeSeen(1_600, short('a'))).toBeUndefined(); // 1.5 s
      expect(s.writeSeen(3_101, short('b'))).toBe(1_501);
    });

    it('a silence still going when a re-read is answered, promptly or slowly, is reported once', () => {
      const s = new StorageSight(SLOW);
      s.writeSeen(0, w('a'));
      s.writeSeen(1_000, w('b'));
      expect(s.readAnswered(10_000, 10_010)).toStrictEqual({}); // 9 s: not longer than 1.5 intervals
      expect(s.readAnswered(30_000, 30_010)).toStrictEqual({ silentMs: 29_010 });
      expect(s.readAnswered(31_000, 31_010)).toStrictEqual({});
      const slow = new StorageSight(SLOW);
      slow.writeSeen(0, w('a'));
      slow.writeSeen(1_000, w('b'));
      expect(slow.readAnswered(30_000, 31_500)).toStrictEqual({ slowMs: 1_500, silentMs: 30_500 });
      expect(slow.readAnswered(40_000, 41_500)).toStrictEqual({ slowMs: 1_500 });
      // An outage a failed re-read opened covers the silence: the answer ends that alone.
      const failed = new StorageSight(SLOW);
      failed.writeSeen(0, w('a'));
      failed.writeSeen(1_000, w('b'));
      expect(failed.readFailed(20_000)).toBe(true);
      expect(failed.readAnswered(30_000, 30_010)).toStrictEqual({ outageMs: 29_010 });
      expect(failed.readAnswered(31_000, 31_010)).toStrictEqual({});
    });

    it("an open outage a re-read showed ends at the write, from the earlier of its start and the silence's", () => {
      const s = new StorageSight(SLOW);
      s.writeSeen(0, w('a'));
      s.writeSeen(1_000, w('b'));
      expect(s.readFailed(30_000)).toBe(true); // from the last proof: the write at 1 s
      expect(s.writeSeen(50_000, w('a'))).toBe(49_000);
    });

    it('one write after a counted outage is enough: a second silence right after it counts, from that write (issue 47, defect 3)', () => {
      const s = new StorageSight(SLOW);
      for (const at of [10_000, 20_000]) for (const l of ['a', 'b', 'c']) s.writeSeen(at, w(l));
      expect(s.writeSeen(64_500, w('a'))).toBe(44_500); // etcd away 21-64 s: counted from 20 s
      // etcd away again from 64.7 s: no write until the deadlines' re-reads (114.5 s).
      expect(s.readAnswered(114_500, 114_510)).toStrictEqual({ silentMs: 50_010 });
      // Ended by a write instead, it counts as an outage, from that one write.
      const byWrite = new StorageSight(SLOW);
      for (const at of [10_000, 20_000]) for (const l of ['a', 'b', 'c']) byWrite.writeSeen(at, w(l));
      expect(byWrite.writeSeen(64_500, w('a'))).toBe(44_500);
      expect(byWrite.writeSeen(108_500, w('b'))).toBe(44_000);
    });

    it('a silence starts no earlier than the end of the last outage counted', () => {
      const s = new StorageSight(SLOW);
      s.writeSeen(0, w('a'));
      s.writeSeen(1_000, w('b'));
      expect(s.readFailed(5_000)).toBe(true);
      expect(s.readAnswered(8_000, 8_010)).toStrictEqual({ outageMs: 7_010 }); // from the write at 1 s
      // No write since: the silence runs from the end of that outage (8.01 s), once.
      expect(s.readAnswered(20_000, 20_010)).toStrictEqual({});
      expect(s.readAnswered(30_000, 30_010)).toStrictEqual({ silentMs: 22_000 });
      expect(s.readAnswered(60_000, 60_010)).toStrictEqual({});
    });

    it('a fleet that died is counted once: after a silence counted at a re-read, none without a write', () => {
      const s = new StorageSight(SLOW);
      s.writeSeen(0, w('a'));
      s.writeSeen(1_000, w('b'));
      expect(s.readAnswered(30_000, 30_010)).toStrictEqual({ silentMs: 29_010 });
      for (const at of [60_000, 600_000, 6_000_000]) expect(s.readAnswered(at, at + 10)).toStrictEqual({});
      expect(s.readAnswered(6_100_000, 6_101_500)).toStrictEqual({ slowMs: 1_500 });
      // A write starts the count again.
      s.writeSeen(7_000_000, w('a'));
      expect(s.writeSeen(7_020_000, w('b'))).toBe(20_000);
    });

    it('the fleet need only have been seen renewing once, not right before the silence: the silences of its last live node count', () => {
      const s = new StorageSight(SLOW);
      s.writeSeen(0, w('a'));
      s.writeSeen(1_000, w('b')); // then b dies
      s.writeSeen(10_000, w('a'));
      s.writeSeen(20_000, w('a'));
      expect(s.writeSeen(50_000, w('a'))).toBe(30_000);
      // Not while the lease watch is blind: writes it replays together do not show a fleet renewing.
      const replayed = new StorageSight(SLOW);
      replayed.leaseWatchLost();
      replayed.writeSeen(0, w('a'));
      replayed.writeSeen(0, w('b'));
      replayed.leaseWatchSees(0);
      replayed.writeSeen(20_000, w('a'));
      replayed.writeSeen(30_000, w('a'));
      expect(replayed.writeSeen(60_000, w('a'))).toBeUndefined();
    });

    it("a write its kubelet made on time ends no silence: the silence was the watch's, not the storage's (issue 47, suspected point)", () => {
      const gap = (lease: string, renewGapMs: number | undefined) => ({
        lease,
        renewIntervalMs: R,
        renewGapMs,
      });
      const s = new StorageSight(SLOW);
      s.writeSeen(0, w('a'));
      s.writeSeen(1_000, w('b'));
      // A watch stalled 30 s delivers the renewals it held at once: the first was written 10 s after
      // the one before it, on its kubelet's clock.
      expect(s.writeSeen(31_000, gap('a', 10_000))).toBeUndefined();
      expect(s.writeSeen(31_000, gap('b', 10_000))).toBeUndefined();
      // Up to the silence's span (1.5 intervals) is on time; longer is a renewal that failed meanwhile.
      expect(s.writeSeen(47_000, gap('a', 15_000))).toBeUndefined();
      expect(s.writeSeen(62_001, gap('b', 15_001))).toBe(15_001);
      // A gap not known (no renewal before, or none that parses) shows nothing: the silence counts.
      s.writeSeen(63_000, w('a'));
      expect(s.writeSeen(80_000, gap('b', undefined))).toBe(17_000);
      // An outage a failed re-read showed ends at such a write all the same.
      expect(s.readFailed(85_000)).toBe(true);
      expect(s.writeSeen(100_001, gap('a', 10_000))).toBe(20_001);
    });

    it('two leases renewing together: within 1.5 of the longer of their intervals, the bound included', () => {
      const s = new StorageSight(SLOW);
      s.writeSeen(0, w('a'));
      s.writeSeen(15_000, w('b')); // exactly 1.5 intervals apart: renewing together
      expect(s.writeSeen(40_000, w('a'))).toBe(25_000);
      const mixed = new StorageSight(SLOW);
      mixed.writeSeen(0, { lease: 'a', renewIntervalMs: 10_000 });
      mixed.writeSeen(12_000, { lease: 'b', renewIntervalMs: 1_000 }); // within 1.5 x 10 s
      expect(mixed.writeSeen(30_000, w('a'))).toBe(18_000); // silent for longer than 1.5 x 10 s
    });

    it("the silence's span is 1.5 of the longer of the fleet's and the last writer's intervals", () => {
      const s = new StorageSight(SLOW);
      s.writeSeen(0, w('a'));
      s.writeSeen(1_000, w('b'));
      s.writeSeen(2_000, { lease: 'a', renewIntervalMs: 1_000 });
      expect(s.writeSeen(10_000, w('b'))).toBeUndefined(); // 8 s: not longer than 1.5 x 10 s
    });

    it("a silence that breaks an outage a re-read opened later starts the outage from the silence's start", () => {
      const s = new StorageSight(SLOW);
      s.writeSeen(0, w('a'));
      s.writeSeen(1_000, w('b'));
      expect(s.readAnswered(10_000, 10_010)).toStrictEqual({}); // a prompt answer, 9 s into the quiet
      expect(s.readFailed(20_000)).toBe(true); // from that answer
      expect(s.writeSeen(40_000, w('a'))).toBe(39_000); // from the last write (the silence's start)
    });

    it('after a blind spell in which nothing was replayed, the silence runs from when the watch sees again', () => {
      const s = new StorageSight(SLOW);
      s.writeSeen(0, w('a'));
      s.writeSeen(1_000, w('b'));
      s.leaseWatchLost();
      s.leaseWatchSees(40_000);
      expect(s.writeSeen(50_000, w('a'))).toBeUndefined(); // 10 s after the spell
    });

    it("a silence the lease watch was blind for is the spell's: counted only from when it sees again", () => {
      const s = new StorageSight(SLOW);
      s.writeSeen(0, w('a'));
      s.writeSeen(1_000, w('b'));
      s.leaseWatchLost();
      // Writes replayed as the watch comes back end nothing.
      expect(s.writeSeen(40_000, w('a'))).toBeUndefined();
      s.leaseWatchSees(40_000);
      expect(s.writeSeen(50_000, w('b'))).toBeUndefined(); // the fleet is seen renewing again first
      s.writeSeen(51_000, w('a'));
      expect(s.writeSeen(80_000, w('b'))).toBe(29_000);
    });
  });
});

describe("renewIntervalOf: the kubelet's renew interval, from two renewals on its own clock", () => {
  const lease = (renewTime: string, leaseDurationSeconds?: number) => ({
    metadata: { name: 'n' },
    spec: { renewTime, ...(leaseDurationSeconds !== undefined ? { leaseDurationSeconds } : {}) },
  });
  it('the time between this renewal and the one before, at most a quarter of the lease duration, at least 1 s', () => {
    expect(renewIntervalOf(lease('2026-01-01T00:00:11.000000Z'), '2026-01-01T00:00:10.000000Z')).toBe(1_000);
    expect(renewIntervalOf(lease('2026-01-01T00:00:12.500000Z', 40), '2026-01-01T00:00:10.000000Z')).toBe(
      2_500,
    );
    expect(renewIntervalOf(lease('2026-01-01T00:01:10.000000Z', 40), '2026-01-01T00:00:10.000000Z')).toBe(
      10_000,
    );
    expect(renewIntervalOf(lease('2026-01-01T00:01:10.000000Z', 8), '2026-01-01T00:00:10.000000Z')).toBe(
      2_000,
    );
    expect(renewIntervalOf(lease('2026-01-01T00:00:10.200000Z'), '2026-01-01T00:00:10.000000Z')).toBe(1_000);
  });
  it("renewGapOf: the time between the two renewTimes, on the kubelet's clock; undefined when either does not parse or it is not later", () => {
    expect(renewGapOf(lease('2026-01-01T00:01:10.250000Z'), '2026-01-01T00:00:10.000000Z')).toBe(60_250);
    expect(renewGapOf(lease('2026-01-01T00:00:10.000100Z'), '2026-01-01T00:00:10.000000Z')).toBe(0.1);
    expect(renewGapOf(lease('2026-01-01T00:00:10.000000Z'), undefined)).toBeUndefined();
    expect(renewGapOf(lease('2026-01-01T00:00:10.000000Z'), '2026-01-01T00:00:10.000000Z')).toBeUndefined();
    expect(renewGapOf(lease('2026-01-01T00:00:09.000000Z'), '2026-01-01T00:00:10.000000Z')).toBeUndefined();
    expect(renewGapOf(lease('garbage'), '2026-01-01T00:00:10.000000Z')).toBeUndefined();
  });
  it('a lease duration that is not a positive finite number, or no spec at all: the default (40 s)', () => {
    const gap = '2026-01-01T00:00:10.000000Z';
    expect(renewIntervalOf(lease('2026-01-01T00:01:10.000000Z', 0), gap)).toBe(10_000);
    expect(renewIntervalOf(lease('2026-01-01T00:01:10.000000Z', Number.POSITIVE_INFINITY), gap)).toBe(10_000);
    const bare = { metadata: { name: 'n' } };
    expect(renewIntervalOf(bare, gap)).toBe(10_000);
    expect(renewGapOf(bare, gap)).toBeUndefined();
  });
  it('no previous renewal, one not before it, or none parseable: a quarter of the lease duration (40 s by default)', () => {
    expect(renewIntervalOf(lease('2026-01-01T00:00:10.000000Z'), undefined)).toBe(10_000);
    expect(renewIntervalOf(lease('2026-01-01T00:00:10.000000Z', 20), '2026-01-01T00:00:11.000000Z')).toBe(
      5_000,
    );
    expect(renewIntervalOf(lease('garbage', -1), '2026-01-01T00:00:11.000000Z')).toBe(10_000);
  });
});
