import { describe, expect, it } from 'vitest';
import { buildConfig, type Config, configWarnings, loadConfig } from './config.js';
import { DEMO_FLAGS, FLAGS, FlagError, type FlagSpec, helpText, parseArgs, STATUS_FLAGS } from './flags.js';

const env = { POD_NAME: 'nlc-0', POD_NAMESPACE: 'nlc-system' };
const load = (argv: string[]) => loadConfig(argv, env, 'host-a').config;

/** An out-of-range or malformed value for each kind of flag. */
function badValues(f: (typeof FLAGS)[number]): string[] {
  switch (f.kind) {
    case 'duration': {
      const out = ['ten', '10', '5x'];
      if (f.greaterThan !== undefined || f.min !== undefined) out.push('-1s');
      if (f.max !== undefined) out.push('100000h');
      return out;
    }
    case 'number':
      return [
        'abc',
        'NaN',
        ...(f.min !== undefined ? [String(f.min - 1)] : []),
        ...(f.max !== undefined ? [String(f.max + 1)] : []),
      ];
    case 'int':
      return [
        '1.5',
        'x',
        ...(f.min !== undefined ? [String(f.min - 1)] : []),
        ...(f.max !== undefined ? [String(f.max + 1)] : []),
      ];
    case 'bool':
      return ['yes-please'];
    case 'enum':
      return ['nope'];
    case 'address':
      return ['localhost', ':99999', 'a:b', '::1:8080', '[127.0.0.1]:8080', '[]:8080', '[::1:8080'];
    default:
      return [];
  }
}

describe('flags', () => {
  it('defaults match kube-controller-manager where names match', () => {
    const c = load([]);
    expect(c.health.monitorGraceMs).toBe(50_000);
    expect(c.health.startupGraceMs).toBe(60_000);
    expect(c.health.monitorPeriodMs).toBe(5_000);
    expect(c.disruption).toMatchObject({
      evictionRate: 0.1,
      secondaryEvictionRate: 0.01,
      largeClusterSizeThreshold: 50,
      unhealthyZoneThreshold: 0.55,
    });
    expect(c.leaderElection).toMatchObject({
      enabled: true,
      leaseDurationMs: 15_000,
      renewDeadlineMs: 10_000,
      retryPeriodMs: 2_000,
      name: 'node-lifecycle-controller',
      namespace: 'nlc-system',
      identity: 'nlc-0',
    });
    // ":8080" as Go reads it: no host, i.e. every address of both IP families (not 0.0.0.0).
    expect(c.metricsAddress).toEqual({ host: '', port: 8080 });
    expect(c.probeAddress).toEqual({ host: '', port: 8081 });
    expect(c.dryRun).toBe(false);
  });

  it('accepts Go durations, both flag spellings and boolean forms', () => {
    const c = load([
      '--node-monitor-grace-period=1m30s',
      '--node-startup-grace-period',
      '2m',
      '--dry-run',
      '--leader-elect=false',
      '-v=4',
      '--metrics-bind-address=127.0.0.1:9090',
      '--health-probe-bind-address=0',
    ]);
    expect(c.health.monitorGraceMs).toBe(90_000);
    expect(c.health.startupGraceMs).toBe(120_000);
    expect(c.dryRun).toBe(true);
    expect(c.leaderElection.enabled).toBe(false);
    expect(c.log.verbosity).toBe(4);
    expect(c.metricsAddress).toEqual({ host: '127.0.0.1', port: 9090 });
    expect(c.probeAddress).toBeUndefined();
  });

  for (const f of FLAGS) {
    for (const value of badValues(f)) {
      it(`rejects --${f.name}=${value} naming the flag, the value and what is accepted`, () => {
        let err: unknown;
        try {
          parseArgs([`--${f.name}=${value}`]);
        } catch (e) {
          err = e;
        }
        expect(err).toBeInstanceOf(FlagError);
        const msg = (err as Error).message;
        expect(msg).toContain(`--${f.name}`);
        expect(msg).toContain(JSON.stringify(value));
        expect(msg).toContain('accepted:');
      });
    }
  }

  it('--mode: upstream by default; companion takes its own flags, which need it', () => {
    const u = load([]);
    expect(u.mode).toBe('upstream');
    expect(u.companion).toEqual({
      taintKey: 'node-lifecycle-controller.io/unreachable',
      evictAfterMs: 0,
      markPodsNotReady: true,
    });
    const c = load([
      '--mode=companion',
      '--companion-taint-key=example.com/lost',
      '--companion-evict-after=2m',
      '--companion-mark-pods-not-ready=false',
    ]);
    expect(c.mode).toBe('companion');
    expect(c.companion).toEqual({
      taintKey: 'example.com/lost',
      evictAfterMs: 120_000,
      markPodsNotReady: false,
    });
    expect(() => load(['--companion-evict-after=1m', '--companion-taint-key=a.io/b'])).toThrow(
      new FlagError(
        '--companion-taint-key, --companion-evict-after are only used with --mode=companion (this is --mode=upstream): set --mode=companion or remove them',
      ),
    );
    expect(() => load(['--mode=companion', '--mark-pods-not-ready=upstream'])).toThrow(
      /--mark-pods-not-ready is for --mode=upstream; in companion mode use --companion-mark-pods-not-ready/,
    );
  });

  it("--companion-taint-key: a prefixed key under a domain that is not Kubernetes' own", () => {
    for (const [key, why] of [
      ['lost', 'it needs a prefix'],
      ['node.kubernetes.io/unreachable', "Kubernetes' own domain"],
      ['k8s.io/x', "Kubernetes' own domain"],
      ['Example.com/x', 'is not a DNS subdomain'],
      ['example.com/-x', 'must be 1-63 characters'],
      [`example.com/${'x'.repeat(64)}`, 'must be 1-63 characters'],
    ] as const) {
      expect(() => load(['--mode=companion', `--companion-taint-key=${key}`]), key).toThrow(
        `invalid value ${JSON.stringify(key)} for flag --companion-taint-key (`,
      );
      expect(() => load(['--mode=companion', `--companion-taint-key=${key}`]), key).toThrow(why);
    }
    expect(
      load(['--mode=companion', '--companion-taint-key=nodes.example.com/lease_lost.v1']).companion.taintKey,
    ).toBe('nodes.example.com/lease_lost.v1');
  });

  it("accepts kube-controller-manager's --logging-format as the same flag as --log-format", () => {
    expect(load(['--logging-format=text']).log.format).toBe('text');
    expect(load(['--logging-format', 'json']).log.format).toBe('json');
    const args = parseArgs(['--logging-format=text']);
    expect(args.values['log-format']).toBe('text');
    expect(args.values['logging-format']).toBeUndefined();
    expect([...args.explicit]).toEqual(['log-format']);
    // Like a repeated flag, the last one wins.
    expect(load(['--log-format=text', '--logging-format=json']).log.format).toBe('json');
    // A bad value is reported under the name the user typed, with what is accepted.
    expect(() => parseArgs(['--logging-format=xml'])).toThrow(
      'invalid value "xml" for flag --logging-format: accepted: one of json, text',
    );
    expect(() => parseArgs(['--logging-format'])).toThrow(/flag needs an argument: --logging-format/);
    expect(helpText('usage')).toContain('--logging-format');
  });

  it('rejects unknown flags and missing arguments', () => {
    expect(() => parseArgs(['--node-grace=5s'])).toThrow(/unknown flag: --node-grace/);
    expect(() => parseArgs(['--kubeconfig'])).toThrow(/flag needs an argument: --kubeconfig/);
  });

  it('checks leader-election timings against each other like client-go', () => {
    expect(() => load(['--leader-elect-lease-duration=10s', '--leader-elect-renew-deadline=10s'])).toThrow(
      /--leader-elect-lease-duration \(10s\) must be greater than --leader-elect-renew-deadline \(10s\)/,
    );
    expect(() => load(['--leader-elect-renew-deadline=2s', '--leader-elect-retry-period=2s'])).toThrow(
      /--leader-elect-renew-deadline \(2s\) must be greater than 1.2 x --leader-elect-retry-period/,
    );
  });

  it('requires a blind watch to be noticed before a grace period can run out (values as Go durations)', () => {
    expect(() => load(['--node-monitor-grace-period=30s', '--watch-silence-threshold=45s'])).toThrow(
      /invalid value "45s" for flag --watch-silence-threshold: it must be less than --node-monitor-grace-period \(30s\)/,
    );
    expect(() => load(['--node-monitor-grace-period=1m30s', '--watch-silence-threshold=90000ms'])).toThrow(
      'invalid value "1m30s" for flag --watch-silence-threshold: it must be less than ' +
        '--node-monitor-grace-period (1m30s); accepted: >= 1s and < 1m30s, or leave it unset',
    );
  });

  it('--watch-read-interval: 0 (as events arrive, the default) or 10ms-500ms in whole ms', () => {
    expect(load([]).health.watchReadIntervalMs).toBe(0);
    expect(load(['--watch-read-interval=100ms']).health.watchReadIntervalMs).toBe(100);
    expect(load(['--watch-read-interval=0.25s']).health.watchReadIntervalMs).toBe(250);
    expect(load(['--watch-read-interval=10.4ms']).health.watchReadIntervalMs).toBe(10);
    expect(() => load(['--watch-read-interval=5ms'])).toThrow(
      'invalid value "5ms" for flag --watch-read-interval: must be 0 (read watches as events arrive) or between 10ms and 500ms',
    );
    expect(() => load(['--watch-read-interval=1s'])).toThrow(
      /invalid value "1s" for flag --watch-read-interval/,
    );
    expect(() => load(['--watch-read-interval=1s'])).toThrow(/<= 500ms/);
    expect(() => load(['--watch-read-interval=fast'])).toThrow(/--watch-read-interval/);
  });

  it('a grace period too short for any silence threshold blames --node-monitor-grace-period, not the unset threshold', () => {
    for (const grace of ['50ms', '1s']) {
      let err: unknown;
      try {
        load([`--node-monitor-grace-period=${grace}`]);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(FlagError);
      const msg = (err as Error).message;
      expect(msg).toContain(`invalid value "${grace}" for flag --node-monitor-grace-period`);
      expect(msg).toContain('> 1s and <= 24h0m0s');
      expect(msg).not.toContain('--watch-silence-threshold');
      expect(msg).not.toMatch(/\d{4,}ms/);
    }
    // Just above it, the derived threshold (at least 1s) fits below the grace period.
    expect(load(['--node-monitor-grace-period=1001ms']).health.watchSilenceThresholdMs).toBe(1000);
  });

  it('warns, in upstream mode, of a --node-monitor-grace-period of 45s or less (the HTTP/2 health check needs 30s + 15s); not in companion mode', () => {
    const warnings = (argv: string[]) => configWarnings(load(argv));
    expect(warnings([])).toEqual([]);
    expect(warnings(['--node-monitor-grace-period=46s'])).toEqual([]);
    for (const grace of ['45s', '40s', '20s', '5s']) {
      const w = warnings([`--node-monitor-grace-period=${grace}`]);
      expect(w, grace).toHaveLength(1);
      expect(w[0]!.msg).toBe('--node-monitor-grace-period is 45s or less: live nodes will be marked Unknown');
      expect(w[0]!.fields).toMatchObject({
        flag: '--node-monitor-grace-period',
        value: grace,
        recommended: 'above 45s (default 50s)',
      });
      expect(w[0]!.fields.why).toContain('HTTP/2 health check (30s idle + 15s ping timeout)');
      expect(w[0]!.fields.why).toContain('flaps');
    }
    // Companion mode: a short grace is what it is for; the provider still decides Ready.
    expect(warnings(['--mode=companion', '--node-monitor-grace-period=20s'])).toEqual([]);
  });

  it('derives the silence threshold from a short grace period when the flag is not set (upstream flags carry over)', () => {
    expect(load([]).health.watchSilenceThresholdMs).toBe(45_000);
    expect(load(['--node-monitor-grace-period=46s']).health.watchSilenceThresholdMs).toBe(45_000);
    expect(load(['--node-monitor-grace-period=40s']).health.watchSilenceThresholdMs).toBe(30_000);
    expect(load(['--node-monitor-grace-period=45s']).health.watchSilenceThresholdMs).toBe(33_750);
    expect(load(['--node-monitor-grace-period=2s']).health.watchSilenceThresholdMs).toBe(1500);
    // An explicit value is taken as given (and checked).
    expect(
      load(['--node-monitor-grace-period=40s', '--watch-silence-threshold=39s']).health
        .watchSilenceThresholdMs,
    ).toBe(39_000);
  });

  it('--blind-step-down-after: 3 x the grace period when not set; when set, 0 or at least the grace period', () => {
    expect(load([]).leaderElection.blindStepDownMs).toBe(150_000);
    expect(load(['--node-monitor-grace-period=2m']).leaderElection.blindStepDownMs).toBe(360_000);
    expect(load(['--blind-step-down-after=10m']).leaderElection.blindStepDownMs).toBe(600_000);
    expect(load(['--blind-step-down-after=0']).leaderElection.blindStepDownMs).toBe(0);
    expect(load(['--blind-step-down-after=50s']).leaderElection.blindStepDownMs).toBe(50_000);
    expect(() => load(['--blind-step-down-after=30s'])).toThrow(
      /^--blind-step-down-after \(30s\) must be 0 \(never step down\) or at least --node-monitor-grace-period \(50s\): /,
    );
    expect(() => load(['--node-monitor-grace-period=2m', '--blind-step-down-after=1m30s'])).toThrow(
      /\(1m30s\) must be 0 .* --node-monitor-grace-period \(2m0s\)/,
    );
    expect(() => load(['--blind-step-down-after=1x'])).toThrow(
      /invalid value "1x" for flag --blind-step-down-after/,
    );
  });

  it("reads bind addresses as Go's net.SplitHostPort does (an IPv6 address in brackets)", () => {
    const addr = (v: string) => load([`--metrics-bind-address=${v}`]).metricsAddress;
    expect(addr(':9090')).toEqual({ host: '', port: 9090 });
    expect(addr('0.0.0.0:9090')).toEqual({ host: '0.0.0.0', port: 9090 });
    expect(addr('[::]:9090')).toEqual({ host: '::', port: 9090 });
    expect(addr('[::1]:9090')).toEqual({ host: '::1', port: 9090 });
    expect(addr('[fd00::2]:0')).toEqual({ host: 'fd00::2', port: 0 });
    expect(addr('127.0.0.1:9090')).toEqual({ host: '127.0.0.1', port: 9090 });
    expect(addr('localhost:9090')).toEqual({ host: 'localhost', port: 9090 });
    expect(() => addr('::1:9090')).toThrow(
      /invalid value "::1:9090" for flag --metrics-bind-address \(an IPv6 address needs brackets: \[::1\]:9090\)/,
    );
  });

  it('rejects a bad lock name and clashing ports', () => {
    expect(() => load(['--leader-elect-resource-name=Bad_Name'])).toThrow(
      /--leader-elect-resource-name must be a DNS subdomain/,
    );
    expect(() => load(['--metrics-bind-address=:9000', '--health-probe-bind-address=:9000'])).toThrow(
      /different ports/,
    );
  });

  it('serves metrics securely by default; TLS files come as a pair and need --metrics-secure', () => {
    expect(load([]).metricsSecurity).toEqual({
      secure: true,
      certFile: undefined,
      keyFile: undefined,
      staleIfErrorMs: 600_000,
    });
    expect(load(['--metrics-secure=false']).metricsSecurity.secure).toBe(false);
    expect(
      load([
        '--tls-cert-file=/c/tls.crt',
        '--tls-private-key-file=/c/tls.key',
        '--metrics-auth-stale-if-error=0',
      ]).metricsSecurity,
    ).toEqual({ secure: true, certFile: '/c/tls.crt', keyFile: '/c/tls.key', staleIfErrorMs: 0 });
    expect(() => load(['--tls-cert-file=/c/tls.crt'])).toThrow(/must be given together/);
    expect(() => load(['--tls-private-key-file=/c/tls.key'])).toThrow(/must be given together/);
    expect(() =>
      load(['--metrics-secure=false', '--tls-cert-file=/c/tls.crt', '--tls-private-key-file=/c/tls.key']),
    ).toThrow(/need --metrics-secure=true/);
  });

  it('derives an identity without POD_NAME that differs per process', () => {
    const a = buildConfig(parseArgs([]), {}, 'host-a').leaderElection;
    const b = buildConfig(parseArgs([]), {}, 'host-a').leaderElection;
    expect(a.identity).toMatch(/^host-a_[0-9a-f]{16}$/);
    expect(a.identity).not.toBe(b.identity);
    expect(a.namespace).toBe('kube-system');
  });

  it("--feature-gates=CoordinatedLeaderElection=true (kube-controller-manager's flag) turns coordinated leader election on", () => {
    expect(load([]).leaderElection).toMatchObject({ coordinated: false, emulatedVersion: '' });
    expect(load(['--feature-gates=CoordinatedLeaderElection=true']).leaderElection.coordinated).toBe(true);
    expect(load(['--feature-gates', 'kube:CoordinatedLeaderElection=true']).leaderElection.coordinated).toBe(
      true,
    );
    expect(load(['--feature-gates=CoordinatedLeaderElection=false']).leaderElection.coordinated).toBe(false);
    expect(
      load(['--feature-gates=CoordinatedLeaderElection=true', '--emulated-version=0.1']).leaderElection,
    ).toMatchObject({ coordinated: true, emulatedVersion: '0.1' });
    expect(() => load(['--feature-gates=NoSuchGate=true'])).toThrow(
      'invalid value "NoSuchGate=true" for flag --feature-gates: unrecognized feature gate: NoSuchGate (known: CoordinatedLeaderElection)',
    );
    expect(() => load(['--feature-gates=CoordinatedLeaderElection=yes'])).toThrow(
      /--feature-gates: CoordinatedLeaderElection must be true or false \(got "yes"\)/,
    );
    expect(() => load(['--feature-gates=CoordinatedLeaderElection'])).toThrow(FlagError);
    // Given more than once (the chart's gate and one in extraArgs), the occurrences merge, a later
    // pair winning, as component-base's map flag does; they do not replace each other.
    expect(parseArgs(['--feature-gates=A=true', '--feature-gates', 'B=false']).values['feature-gates']).toBe(
      'A=true,B=false',
    );
    expect(
      load(['--feature-gates=CoordinatedLeaderElection=true', '--feature-gates=']).leaderElection.coordinated,
    ).toBe(true);
    expect(
      load([
        '--feature-gates=CoordinatedLeaderElection=true',
        '--feature-gates=kube:CoordinatedLeaderElection=false',
      ]).leaderElection.coordinated,
    ).toBe(false);
    // The identity names the LeaseCandidate.
    expect(() =>
      loadConfig(['--feature-gates=CoordinatedLeaderElection=true'], { POD_NAME: 'a b' }, 'host-a'),
    ).toThrow(/cannot name a LeaseCandidate/);
  });

  it('looks for another node-lifecycle controller in upstream mode only, not in dry-run; --allow-concurrent-node-lifecycle-controller only in upstream mode', () => {
    expect(load([]).concurrentController).toEqual({ check: true, allow: false });
    expect(load(['--allow-concurrent-node-lifecycle-controller']).concurrentController).toEqual({
      check: true,
      allow: true,
    });
    expect(load(['--dry-run']).concurrentController.check).toBe(false);
    expect(load(['--mode=companion']).concurrentController.check).toBe(false);
    expect(() => load(['--mode=companion', '--allow-concurrent-node-lifecycle-controller=false'])).toThrow(
      '--allow-concurrent-node-lifecycle-controller is for --mode=upstream',
    );
  });

  it('lists every flag with its default in --help', () => {
    const text = helpText('usage');
    for (const f of FLAGS) {
      expect(text).toContain(`--${f.name}`);
      if (f.default !== '')
        expect(text).toContain(`(default ${f.kind === 'string' ? JSON.stringify(f.default) : f.default})`);
    }
  });
});

/** What `f` throws (undefined: nothing). */
function thrown(f: () => unknown): unknown {
  try {
    f();
  } catch (err) {
    return err;
  }
  return undefined;
}

/** What every duration flag's message says it accepts, before its range. */
const DUR = 'a Go duration such as "45s", "5m", "1h2m3.5s" or "300ms" (units ns, us, ms, s, m, h)';
const bad = (flag: string, value: string, accepted: string) =>
  `invalid value ${JSON.stringify(value)} for flag --${flag}: accepted: ${accepted}`;
const BOOL = 'true or false';
const ADDRESS = 'host:port, :port, [IPv6]:port, or 0 to disable';

/**
 * One row per flag of FLAGS: values at the edges of what it accepts, each with what the Config then
 * holds, and values just past them, each with the whole message. Both go through loadConfig, the
 * one path from argv to a Config, so that a row holds the flag's own range and the rules between
 * flags alike. A flag that takes any value says why (`anyValue`), and what it is checked against
 * later if it is.
 */
interface FlagRow {
  /** argv (a string: one argument), the part of the Config it sets, what that holds. */
  ok: [argv: string | string[], pick: (c: Config) => unknown, want: unknown][];
  bad: [argv: string | string[], message: string][];
  anyValue?: string;
}

const companion = (...argv: string[]) => ['--mode=companion', ...argv];
const oos = (...argv: string[]) => ['--out-of-service', ...argv];
const so = (...argv: string[]) => ['--second-opinion=kubelet', ...argv];
const boolRow = (flag: string, pick: (c: Config) => unknown, extra: string[] = []): FlagRow => ({
  ok: [
    [[...extra, `--${flag}`], pick, true],
    [[...extra, `--${flag}=false`], pick, false],
    [[...extra, `--${flag}=t`], pick, true],
    [[...extra, `--${flag}=0`], pick, false],
  ],
  bad: [[[...extra, `--${flag}=yes`], bad(flag, 'yes', BOOL)]],
});

const ROWS: Record<string, FlagRow> = {
  'node-monitor-grace-period': {
    ok: [
      ['--node-monitor-grace-period=1001ms', (c) => c.health.monitorGraceMs, 1001],
      ['--node-monitor-grace-period=24h', (c) => c.health.monitorGraceMs, 86_400_000],
    ],
    bad: [
      [
        '--node-monitor-grace-period=1s',
        bad('node-monitor-grace-period', '1s', `${DUR} > 1s and <= 24h0m0s`),
      ],
      [
        '--node-monitor-grace-period=24h1ms',
        bad('node-monitor-grace-period', '24h1ms', `${DUR} > 1s and <= 24h0m0s`),
      ],
    ],
  },
  'node-startup-grace-period': {
    ok: [
      ['--node-startup-grace-period=1ms', (c) => c.health.startupGraceMs, 1],
      ['--node-startup-grace-period=24h', (c) => c.health.startupGraceMs, 86_400_000],
    ],
    bad: [
      [
        '--node-startup-grace-period=0s',
        bad('node-startup-grace-period', '0s', `${DUR} > 0s and <= 24h0m0s`),
      ],
      [
        '--node-startup-grace-period=24h1ms',
        bad('node-startup-grace-period', '24h1ms', `${DUR} > 0s and <= 24h0m0s`),
      ],
    ],
  },
  'node-monitor-period': {
    ok: [
      ['--node-monitor-period=100ms', (c) => c.health.monitorPeriodMs, 100],
      ['--node-monitor-period=1h', (c) => c.health.monitorPeriodMs, 3_600_000],
    ],
    bad: [
      ['--node-monitor-period=99ms', bad('node-monitor-period', '99ms', `${DUR} >= 100ms and <= 1h0m0s`)],
      ['--node-monitor-period=1h1ms', bad('node-monitor-period', '1h1ms', `${DUR} >= 100ms and <= 1h0m0s`)],
    ],
  },
  'node-pool-config': {
    anyValue: 'a path: the file is read at start (openPoolConfig, src/config/pool-file.ts)',
    ok: [['--node-pool-config=/etc/nlc/pools.json', (c) => c.nodePoolConfigPath, '/etc/nlc/pools.json']],
    bad: [],
  },
  'mark-pods-not-ready': {
    ok: [
      ['--mark-pods-not-ready=upstream', (c) => c.health.markPodsNotReady, 'upstream'],
      ['--mark-pods-not-ready=always', (c) => c.health.markPodsNotReady, 'always'],
    ],
    bad: [
      ['--mark-pods-not-ready=never', bad('mark-pods-not-ready', 'never', 'one of always, upstream')],
      [
        companion('--mark-pods-not-ready=always'),
        '--mark-pods-not-ready is for --mode=upstream; in companion mode use --companion-mark-pods-not-ready',
      ],
    ],
  },
  'watch-silence-threshold': {
    ok: [
      ['--watch-silence-threshold=1s', (c) => c.health.watchSilenceThresholdMs, 1000],
      ['--watch-silence-threshold=49999ms', (c) => c.health.watchSilenceThresholdMs, 49_999],
      [
        ['--watch-silence-threshold=1h', '--node-monitor-grace-period=2h'],
        (c) => c.health.watchSilenceThresholdMs,
        3_600_000,
      ],
    ],
    bad: [
      [
        '--watch-silence-threshold=999ms',
        bad('watch-silence-threshold', '999ms', `${DUR} >= 1s and <= 1h0m0s`),
      ],
      [
        ['--watch-silence-threshold=1h1ms', '--node-monitor-grace-period=2h'],
        bad('watch-silence-threshold', '1h1ms', `${DUR} >= 1s and <= 1h0m0s`),
      ],
      [
        '--watch-silence-threshold=50s',
        'invalid value "50s" for flag --watch-silence-threshold: it must be less than --node-monitor-grace-period ' +
          '(50s); accepted: >= 1s and < 50s, or leave it unset (45s, or 3/4 of the grace period when that is 45s or less)',
      ],
    ],
  },
  'watch-read-interval': {
    ok: [
      ['--watch-read-interval=0s', (c) => c.health.watchReadIntervalMs, 0],
      ['--watch-read-interval=10ms', (c) => c.health.watchReadIntervalMs, 10],
      ['--watch-read-interval=500ms', (c) => c.health.watchReadIntervalMs, 500],
    ],
    bad: [
      [
        '--watch-read-interval=9ms',
        'invalid value "9ms" for flag --watch-read-interval: must be 0 (read watches as events arrive) or between 10ms and 500ms',
      ],
      ['--watch-read-interval=501ms', bad('watch-read-interval', '501ms', `${DUR} >= 0s and <= 500ms`)],
    ],
  },
  mode: {
    ok: [
      ['--mode=upstream', (c) => c.mode, 'upstream'],
      ['--mode=companion', (c) => c.mode, 'companion'],
    ],
    bad: [['--mode=beside', bad('mode', 'beside', 'one of upstream, companion')]],
  },
  'allow-concurrent-node-lifecycle-controller': {
    ...boolRow('allow-concurrent-node-lifecycle-controller', (c) => c.concurrentController.allow),
    bad: [
      [
        '--allow-concurrent-node-lifecycle-controller=yes',
        bad('allow-concurrent-node-lifecycle-controller', 'yes', BOOL),
      ],
      [
        companion('--allow-concurrent-node-lifecycle-controller'),
        '--allow-concurrent-node-lifecycle-controller is for --mode=upstream; companion mode runs beside the ' +
          "provider's node-lifecycle controller by design",
      ],
    ],
  },
  'companion-taint-key': {
    ok: [
      [companion('--companion-taint-key=example.com/lost'), (c) => c.companion.taintKey, 'example.com/lost'],
      [companion(), (c) => c.companion.taintKey, 'node-lifecycle-controller.io/unreachable'],
    ],
    bad: [
      [
        companion('--companion-taint-key=lost'),
        'invalid value "lost" for flag --companion-taint-key (it needs a prefix: a domain you own, e.g. ' +
          'example.com/unreachable): accepted: a prefixed key, <DNS subdomain you own>/<name>, not under ' +
          'kubernetes.io or k8s.io',
      ],
      [
        '--companion-taint-key=example.com/lost',
        '--companion-taint-key is only used with --mode=companion (this is --mode=upstream): set --mode=companion or remove it',
      ],
    ],
  },
  'companion-evict-after': {
    ok: [
      [companion('--companion-evict-after=0s'), (c) => c.companion.evictAfterMs, 0],
      [companion('--companion-evict-after=168h'), (c) => c.companion.evictAfterMs, 604_800_000],
    ],
    bad: [
      [
        companion('--companion-evict-after=168h1ms'),
        bad('companion-evict-after', '168h1ms', `${DUR} >= 0s and <= 168h0m0s`),
      ],
      [
        '--companion-evict-after=1m',
        '--companion-evict-after is only used with --mode=companion (this is --mode=upstream): set --mode=companion or remove it',
      ],
    ],
  },
  'companion-mark-pods-not-ready': {
    ...boolRow('companion-mark-pods-not-ready', (c) => c.companion.markPodsNotReady, ['--mode=companion']),
  },
  'out-of-service': {
    ok: [
      [[], (c) => c.outOfService, undefined],
      [
        '--out-of-service',
        (c) => c.outOfService,
        { signals: ['cloud-shutdown-taint', 'kubelet-shutdown', 'fence-annotation'], afterMs: 60_000 },
      ],
      ['--out-of-service=false', (c) => c.outOfService, undefined],
      [
        '--out-of-service=dry-run',
        (c) => c.outOfService,
        {
          signals: ['cloud-shutdown-taint', 'kubelet-shutdown', 'fence-annotation'],
          afterMs: 60_000,
          dryRun: true,
        },
      ],
      [['--out-of-service=dry-run', '--out-of-service-after=0s'], (c) => c.outOfService?.afterMs, 0],
    ],
    bad: [['--out-of-service=yes', bad('out-of-service', 'yes', 'true, false or dry-run')]],
  },
  'out-of-service-signals': {
    ok: [
      [
        oos('--out-of-service-signals=fence-annotation'),
        (c) => c.outOfService?.signals,
        ['fence-annotation'],
      ],
      [
        oos('--out-of-service-signals= kubelet-shutdown,cloud-shutdown-taint,kubelet-shutdown'),
        (c) => c.outOfService?.signals,
        ['kubelet-shutdown', 'cloud-shutdown-taint'],
      ],
    ],
    bad: [
      [
        oos('--out-of-service-signals=fence-annotation,lease-silence'),
        'invalid value "fence-annotation,lease-silence" for flag --out-of-service-signals (unknown signal ' +
          '"lease-silence"): accepted: a comma-separated list of cloud-shutdown-taint, kubelet-shutdown, ' +
          'fence-annotation (at least one)',
      ],
      [
        oos('--out-of-service-signals='),
        'invalid value "" for flag --out-of-service-signals (an empty item): accepted: a comma-separated list ' +
          'of cloud-shutdown-taint, kubelet-shutdown, fence-annotation (at least one)',
      ],
      [
        '--out-of-service-signals=fence-annotation',
        '--out-of-service-signals is only used with --out-of-service: add --out-of-service or remove it',
      ],
    ],
  },
  'out-of-service-after': {
    ok: [
      [oos('--out-of-service-after=0s'), (c) => c.outOfService?.afterMs, 0],
      [oos('--out-of-service-after=24h'), (c) => c.outOfService?.afterMs, 86_400_000],
    ],
    bad: [
      [
        oos('--out-of-service-after=24h1ms'),
        bad('out-of-service-after', '24h1ms', `${DUR} >= 0s and <= 24h0m0s`),
      ],
      [oos('--out-of-service-after=-1s'), bad('out-of-service-after', '-1s', `${DUR} >= 0s and <= 24h0m0s`)],
      [
        ['--out-of-service-after=1m', '--out-of-service-signals=fence-annotation'],
        '--out-of-service-signals, --out-of-service-after are only used with --out-of-service: add --out-of-service or remove them',
      ],
    ],
  },
  'second-opinion': {
    ok: [
      [[], (c) => c.secondOpinion, undefined],
      ['--second-opinion=off', (c) => c.secondOpinion, undefined],
      [
        '--second-opinion=kubelet',
        (c) => c.secondOpinion,
        { confirmAfterMs: 20_000, retryMs: 3_000, intervalMs: 10_000, timeoutMs: 3_000, holdMs: 600_000 },
      ],
    ],
    bad: [['--second-opinion=on', bad('second-opinion', 'on', 'one of off, kubelet')]],
  },
  'confirm-after': {
    ok: [
      [so('--confirm-after=10s'), (c) => c.secondOpinion?.confirmAfterMs, 10_000],
      // The confirming probe (3 s later, 3 s long) ends before the 50 s grace.
      [so('--confirm-after=43999ms'), (c) => c.secondOpinion?.confirmAfterMs, 43_999],
      [
        so('--node-monitor-grace-period=2m', '--confirm-after=1m'),
        (c) => c.secondOpinion?.confirmAfterMs,
        60_000,
      ],
    ],
    bad: [
      [so('--confirm-after=9s'), bad('confirm-after', '9s', `${DUR} >= 10s and <= 24h0m0s`)],
      [
        so('--confirm-after=44s'),
        'invalid value "44s" for flag --confirm-after: with --node-monitor-grace-period=50s accepted: 10s to ' +
          "below 44s (the grace less the confirming probe's 3s wait and 3s timeout)",
      ],
      [
        '--confirm-after=30s',
        '--confirm-after is only used with --second-opinion=kubelet: add --second-opinion=kubelet or remove it',
      ],
    ],
  },
  'cut-off-hold': {
    ok: [
      [so('--cut-off-hold=0s'), (c) => c.secondOpinion?.holdMs, 0],
      [so('--cut-off-hold=24h'), (c) => c.secondOpinion?.holdMs, 86_400_000],
    ],
    bad: [
      [so('--cut-off-hold=24h1ms'), bad('cut-off-hold', '24h1ms', `${DUR} >= 0s and <= 24h0m0s`)],
      [
        ['--second-opinion=off', '--cut-off-hold=1m', '--confirm-after=30s'],
        '--confirm-after, --cut-off-hold are only used with --second-opinion=kubelet: add --second-opinion=kubelet or remove them',
      ],
    ],
  },
  'node-eviction-rate': {
    ok: [
      ['--node-eviction-rate=0', (c) => c.disruption.evictionRate, 0],
      ['--node-eviction-rate=1000', (c) => c.disruption.evictionRate, 1000],
    ],
    bad: [
      ['--node-eviction-rate=-0.001', bad('node-eviction-rate', '-0.001', 'a number >= 0 and <= 1000')],
      ['--node-eviction-rate=1000.5', bad('node-eviction-rate', '1000.5', 'a number >= 0 and <= 1000')],
    ],
  },
  'secondary-node-eviction-rate': {
    ok: [
      ['--secondary-node-eviction-rate=0', (c) => c.disruption.secondaryEvictionRate, 0],
      ['--secondary-node-eviction-rate=1000', (c) => c.disruption.secondaryEvictionRate, 1000],
    ],
    bad: [
      [
        '--secondary-node-eviction-rate=-0.001',
        bad('secondary-node-eviction-rate', '-0.001', 'a number >= 0 and <= 1000'),
      ],
      [
        '--secondary-node-eviction-rate=1000.5',
        bad('secondary-node-eviction-rate', '1000.5', 'a number >= 0 and <= 1000'),
      ],
    ],
  },
  'large-cluster-size-threshold': {
    ok: [
      ['--large-cluster-size-threshold=0', (c) => c.disruption.largeClusterSizeThreshold, 0],
      ['--large-cluster-size-threshold=1000000', (c) => c.disruption.largeClusterSizeThreshold, 1_000_000],
    ],
    bad: [
      [
        '--large-cluster-size-threshold=-1',
        bad('large-cluster-size-threshold', '-1', 'a whole number >= 0 and <= 1000000'),
      ],
      [
        '--large-cluster-size-threshold=1000001',
        bad('large-cluster-size-threshold', '1000001', 'a whole number >= 0 and <= 1000000'),
      ],
      [
        '--large-cluster-size-threshold=1.5',
        bad('large-cluster-size-threshold', '1.5', 'a whole number >= 0 and <= 1000000'),
      ],
    ],
  },
  'unhealthy-zone-threshold': {
    ok: [
      ['--unhealthy-zone-threshold=0', (c) => c.disruption.unhealthyZoneThreshold, 0],
      ['--unhealthy-zone-threshold=1', (c) => c.disruption.unhealthyZoneThreshold, 1],
    ],
    bad: [
      [
        '--unhealthy-zone-threshold=-0.01',
        bad('unhealthy-zone-threshold', '-0.01', 'a number >= 0 and <= 1'),
      ],
      ['--unhealthy-zone-threshold=1.01', bad('unhealthy-zone-threshold', '1.01', 'a number >= 0 and <= 1')],
    ],
  },
  'max-noexecute-taints': {
    ok: [
      ['--max-noexecute-taints=0', (c) => c.disruption.capMaxNodes, 0],
      ['--max-noexecute-taints=1000000', (c) => c.disruption.capMaxNodes, 1_000_000],
    ],
    bad: [
      ['--max-noexecute-taints=-1', bad('max-noexecute-taints', '-1', 'a whole number >= 0 and <= 1000000')],
      [
        '--max-noexecute-taints=1000001',
        bad('max-noexecute-taints', '1000001', 'a whole number >= 0 and <= 1000000'),
      ],
    ],
  },
  'max-noexecute-percent': {
    ok: [
      ['--max-noexecute-percent=0', (c) => c.disruption.capMaxPercent, 0],
      ['--max-noexecute-percent=100', (c) => c.disruption.capMaxPercent, 100],
    ],
    bad: [
      ['--max-noexecute-percent=-1', bad('max-noexecute-percent', '-1', 'a number >= 0 and <= 100')],
      ['--max-noexecute-percent=100.1', bad('max-noexecute-percent', '100.1', 'a number >= 0 and <= 100')],
    ],
  },
  'max-noexecute-window': {
    ok: [
      ['--max-noexecute-window=1ms', (c) => c.disruption.capWindowMs, 1],
      ['--max-noexecute-window=168h', (c) => c.disruption.capWindowMs, 604_800_000],
    ],
    bad: [
      ['--max-noexecute-window=0s', bad('max-noexecute-window', '0s', `${DUR} > 0s and <= 168h0m0s`)],
      [
        '--max-noexecute-window=168h1ms',
        bad('max-noexecute-window', '168h1ms', `${DUR} > 0s and <= 168h0m0s`),
      ],
    ],
  },
  'leader-elect': boolRow('leader-elect', (c) => c.leaderElection.enabled),
  'leader-elect-lease-duration': {
    ok: [
      [
        [
          '--leader-elect-lease-duration=1s',
          '--leader-elect-renew-deadline=500ms',
          '--leader-elect-retry-period=100ms',
        ],
        (c) => c.leaderElection.leaseDurationMs,
        1000,
      ],
      ['--leader-elect-lease-duration=1h', (c) => c.leaderElection.leaseDurationMs, 3_600_000],
    ],
    bad: [
      [
        '--leader-elect-lease-duration=999ms',
        bad('leader-elect-lease-duration', '999ms', `${DUR} >= 1s and <= 1h0m0s`),
      ],
      [
        '--leader-elect-lease-duration=1h1ms',
        bad('leader-elect-lease-duration', '1h1ms', `${DUR} >= 1s and <= 1h0m0s`),
      ],
      [
        '--leader-elect-lease-duration=10s',
        '--leader-elect-lease-duration (10s) must be greater than --leader-elect-renew-deadline (10s)',
      ],
    ],
  },
  // The range of the three timings reaches 1h, but each must leave room for the next: a renew
  // deadline below the lease duration, a retry period below the renew deadline / 1.2.
  'leader-elect-renew-deadline': {
    ok: [
      [
        ['--leader-elect-renew-deadline=500ms', '--leader-elect-retry-period=100ms'],
        (c) => c.leaderElection.renewDeadlineMs,
        500,
      ],
      [
        ['--leader-elect-renew-deadline=3599999ms', '--leader-elect-lease-duration=1h'],
        (c) => c.leaderElection.renewDeadlineMs,
        3_599_999,
      ],
    ],
    bad: [
      [
        '--leader-elect-renew-deadline=499ms',
        bad('leader-elect-renew-deadline', '499ms', `${DUR} >= 500ms and <= 1h0m0s`),
      ],
      [
        '--leader-elect-renew-deadline=1h1ms',
        bad('leader-elect-renew-deadline', '1h1ms', `${DUR} >= 500ms and <= 1h0m0s`),
      ],
      [
        ['--leader-elect-renew-deadline=1h', '--leader-elect-lease-duration=1h'],
        '--leader-elect-lease-duration (1h0m0s) must be greater than --leader-elect-renew-deadline (1h0m0s)',
      ],
      [
        '--leader-elect-renew-deadline=2400ms',
        '--leader-elect-renew-deadline (2.4s) must be greater than 1.2 x --leader-elect-retry-period ' +
          '(1.2 x 2s = 2.4s)',
      ],
    ],
  },
  'leader-elect-retry-period': {
    ok: [
      ['--leader-elect-retry-period=100ms', (c) => c.leaderElection.retryPeriodMs, 100],
      [
        [
          '--leader-elect-retry-period=2999999ms',
          '--leader-elect-renew-deadline=3599999ms',
          '--leader-elect-lease-duration=1h',
        ],
        (c) => c.leaderElection.retryPeriodMs,
        2_999_999,
      ],
    ],
    bad: [
      [
        '--leader-elect-retry-period=99ms',
        bad('leader-elect-retry-period', '99ms', `${DUR} >= 100ms and <= 1h0m0s`),
      ],
      [
        '--leader-elect-retry-period=1h1ms',
        bad('leader-elect-retry-period', '1h1ms', `${DUR} >= 100ms and <= 1h0m0s`),
      ],
      [
        '--leader-elect-retry-period=9s',
        '--leader-elect-renew-deadline (10s) must be greater than 1.2 x --leader-elect-retry-period ' +
          '(1.2 x 9s = 10.8s)',
      ],
    ],
  },
  'leader-elect-resource-name': {
    ok: [
      ['--leader-elect-resource-name=nlc.example-1', (c) => c.leaderElection.name, 'nlc.example-1'],
      [[], (c) => c.leaderElection.name, 'node-lifecycle-controller'],
    ],
    bad: [
      [
        '--leader-elect-resource-name=Bad_Name',
        '--leader-elect-resource-name must be a DNS subdomain name (got "Bad_Name")',
      ],
    ],
  },
  'leader-elect-resource-namespace': {
    ok: [
      ['--leader-elect-resource-namespace=nlc', (c) => c.leaderElection.namespace, 'nlc'],
      [[], (c) => c.leaderElection.namespace, 'nlc-system'],
    ],
    bad: [
      [
        '--leader-elect-resource-namespace=a.b',
        '--leader-elect-resource-namespace must be a DNS label (got "a.b")',
      ],
    ],
  },
  'blind-step-down-after': {
    ok: [
      ['--blind-step-down-after=0s', (c) => c.leaderElection.blindStepDownMs, 0],
      ['--blind-step-down-after=50s', (c) => c.leaderElection.blindStepDownMs, 50_000],
      ['--blind-step-down-after=24h', (c) => c.leaderElection.blindStepDownMs, 86_400_000],
    ],
    bad: [
      [
        '--blind-step-down-after=24h1ms',
        bad('blind-step-down-after', '24h1ms', `${DUR} >= 0s and <= 24h0m0s`),
      ],
      [
        '--blind-step-down-after=49999ms',
        '--blind-step-down-after (49.999s) must be 0 (never step down) or at least --node-monitor-grace-period ' +
          '(50s): a new leader gives every node a fresh grace period, so stepping down after a shorter blind ' +
          'spell can delay detection more than the spell',
      ],
    ],
  },
  'feature-gates': {
    ok: [
      ['--feature-gates=CoordinatedLeaderElection=true', (c) => c.leaderElection.coordinated, true],
      ['--feature-gates=', (c) => c.leaderElection.coordinated, false],
    ],
    bad: [
      [
        '--feature-gates=Nope=true',
        'invalid value "Nope=true" for flag --feature-gates: unrecognized feature gate: Nope (known: ' +
          'CoordinatedLeaderElection)',
      ],
      [
        '--feature-gates=CoordinatedLeaderElection=on',
        'invalid value "CoordinatedLeaderElection=on" for flag --feature-gates: CoordinatedLeaderElection must ' +
          'be true or false (got "on")',
      ],
    ],
  },
  'emulated-version': {
    anyValue: "checked at start against the binary's version (candidateVersions, src/election/candidate.ts)",
    ok: [['--emulated-version=0.1', (c) => c.leaderElection.emulatedVersion, '0.1']],
    bad: [],
  },
  'identity-lease-gc-age': {
    ok: [
      ['--identity-lease-gc-age=1s', (c) => c.leaderElection.identityLeaseGcAgeMs, 1000],
      ['--identity-lease-gc-age=720h', (c) => c.leaderElection.identityLeaseGcAgeMs, 2_592_000_000],
    ],
    bad: [
      [
        '--identity-lease-gc-age=999ms',
        bad('identity-lease-gc-age', '999ms', `${DUR} >= 1s and <= 720h0m0s`),
      ],
      [
        '--identity-lease-gc-age=720h1ms',
        bad('identity-lease-gc-age', '720h1ms', `${DUR} >= 1s and <= 720h0m0s`),
      ],
    ],
  },
  kubeconfig: {
    anyValue: 'a path: read when the clients are made (src/kube/kubeconfig.ts; a missing file exits 2)',
    ok: [['--kubeconfig=/etc/kubeconfig', (c) => c.kubeconfig, '/etc/kubeconfig']],
    bad: [],
  },
  'dry-run': boolRow('dry-run', (c) => c.dryRun),
  'metrics-bind-address': {
    ok: [
      ['--metrics-bind-address=:0', (c) => c.metricsAddress, { host: '', port: 0 }],
      ['--metrics-bind-address=[::1]:65535', (c) => c.metricsAddress, { host: '::1', port: 65535 }],
      ['--metrics-bind-address=0', (c) => c.metricsAddress, undefined],
    ],
    bad: [
      ['--metrics-bind-address=:65536', bad('metrics-bind-address', ':65536', ADDRESS)],
      ['--metrics-bind-address=localhost', bad('metrics-bind-address', 'localhost', ADDRESS)],
      [
        '--metrics-bind-address=:8081',
        '--metrics-bind-address and --health-probe-bind-address must use different ports (both 8081)',
      ],
    ],
  },
  'metrics-secure': boolRow('metrics-secure', (c) => c.metricsSecurity.secure),
  'tls-cert-file': {
    ok: [
      [
        ['--tls-cert-file=/c/tls.crt', '--tls-private-key-file=/c/tls.key'],
        (c) => c.metricsSecurity.certFile,
        '/c/tls.crt',
      ],
    ],
    bad: [
      ['--tls-cert-file=/c/tls.crt', '--tls-cert-file and --tls-private-key-file must be given together'],
      [
        ['--tls-cert-file=/c/tls.crt', '--tls-private-key-file=/c/tls.key', '--metrics-secure=false'],
        '--tls-cert-file and --tls-private-key-file need --metrics-secure=true',
      ],
    ],
  },
  'tls-private-key-file': {
    ok: [
      [
        ['--tls-cert-file=/c/tls.crt', '--tls-private-key-file=/c/tls.key'],
        (c) => c.metricsSecurity.keyFile,
        '/c/tls.key',
      ],
    ],
    bad: [
      [
        '--tls-private-key-file=/c/tls.key',
        '--tls-cert-file and --tls-private-key-file must be given together',
      ],
    ],
  },
  'metrics-auth-stale-if-error': {
    ok: [
      ['--metrics-auth-stale-if-error=0s', (c) => c.metricsSecurity.staleIfErrorMs, 0],
      ['--metrics-auth-stale-if-error=24h', (c) => c.metricsSecurity.staleIfErrorMs, 86_400_000],
    ],
    bad: [
      [
        '--metrics-auth-stale-if-error=24h1ms',
        bad('metrics-auth-stale-if-error', '24h1ms', `${DUR} >= 0s and <= 24h0m0s`),
      ],
    ],
  },
  'health-probe-bind-address': {
    ok: [
      [
        '--health-probe-bind-address=127.0.0.1:9000',
        (c) => c.probeAddress,
        { host: '127.0.0.1', port: 9000 },
      ],
      ['--health-probe-bind-address=0', (c) => c.probeAddress, undefined],
    ],
    bad: [
      [
        '--health-probe-bind-address=::1:9000',
        'invalid value "::1:9000" for flag --health-probe-bind-address (an IPv6 address needs brackets: ' +
          `[::1]:9000): accepted: ${ADDRESS}`,
      ],
      [
        '--health-probe-bind-address=[127.0.0.1]:9000',
        'invalid value "[127.0.0.1]:9000" for flag --health-probe-bind-address (only an IPv6 address goes in ' +
          `brackets): accepted: ${ADDRESS}`,
      ],
      [
        '--health-probe-bind-address=:8080',
        '--metrics-bind-address and --health-probe-bind-address must use different ports (both 8080)',
      ],
    ],
  },
  'shutdown-grace-period': {
    ok: [
      ['--shutdown-grace-period=0s', (c) => c.shutdownGracePeriodMs, 0],
      ['--shutdown-grace-period=10m', (c) => c.shutdownGracePeriodMs, 600_000],
    ],
    bad: [
      ['--shutdown-grace-period=10m1ms', bad('shutdown-grace-period', '10m1ms', `${DUR} >= 0s and <= 10m0s`)],
      ['--shutdown-grace-period=-1s', bad('shutdown-grace-period', '-1s', `${DUR} >= 0s and <= 10m0s`)],
    ],
  },
  'kube-api-qps': {
    ok: [
      ['--kube-api-qps=0.001', (c) => c.kubeApi.qps, 0.001],
      ['--kube-api-qps=100000', (c) => c.kubeApi.qps, 100_000],
    ],
    bad: [
      ['--kube-api-qps=0', bad('kube-api-qps', '0', 'a number > 0 and <= 100000')],
      ['--kube-api-qps=100000.5', bad('kube-api-qps', '100000.5', 'a number > 0 and <= 100000')],
    ],
  },
  'kube-api-burst': {
    ok: [
      ['--kube-api-burst=1', (c) => c.kubeApi.burst, 1],
      ['--kube-api-burst=100000', (c) => c.kubeApi.burst, 100_000],
    ],
    bad: [
      ['--kube-api-burst=0', bad('kube-api-burst', '0', 'a whole number >= 1 and <= 100000')],
      ['--kube-api-burst=100001', bad('kube-api-burst', '100001', 'a whole number >= 1 and <= 100000')],
    ],
  },
  'log-format': {
    ok: [
      ['--log-format=text', (c) => c.log.format, 'text'],
      ['--logging-format=json', (c) => c.log.format, 'json'],
    ],
    bad: [
      ['--log-format=xml', bad('log-format', 'xml', 'one of json, text')],
      ['--logging-format=xml', bad('logging-format', 'xml', 'one of json, text')],
    ],
  },
  v: {
    ok: [
      ['-v=0', (c) => c.log.verbosity, 0],
      ['--v=10', (c) => c.log.verbosity, 10],
    ],
    bad: [
      ['-v=-1', bad('v', '-1', 'a whole number >= 0 and <= 10')],
      ['-v=11', bad('v', '11', 'a whole number >= 0 and <= 10')],
    ],
  },
};

describe('every flag: what it accepts, and the error past its edges (the one table of ROWS)', () => {
  it('every flag of FLAGS has a row, and every row a flag', () => {
    expect(Object.keys(ROWS).sort()).toEqual(FLAGS.map((f) => f.name).sort());
  });

  it('every row rejects something, or says why any value is taken', () => {
    const loose = Object.entries(ROWS).filter(([, r]) => r.bad.length === 0 && r.anyValue === undefined);
    expect(loose.map(([name]) => name)).toEqual([]);
  });

  for (const [name, row] of Object.entries(ROWS)) {
    it(`--${name}`, () => {
      for (const [argv, pick, want] of row.ok) {
        const args = typeof argv === 'string' ? [argv] : argv;
        expect(pick(load(args)), args.join(' ')).toEqual(want);
      }
      for (const [argv, message] of row.bad) {
        const args = typeof argv === 'string' ? [argv] : argv;
        const err = thrown(() => load(args));
        expect(err, args.join(' ')).toBeInstanceOf(FlagError);
        expect((err as Error).message, args.join(' ')).toBe(message);
      }
    });
  }
});

/** A subcommand's flag: values it takes, each with the value parsed, and values past its edges. */
interface SubRow {
  ok: [argv: string, want: unknown][];
  bad: [argv: string, message: string][];
  anyValue?: string;
}

const SUBCOMMANDS: Record<string, { flags: readonly FlagSpec[]; rows: Record<string, SubRow> }> = {
  status: {
    flags: STATUS_FLAGS,
    rows: {
      kubeconfig: {
        anyValue: 'a path, resolved as the controller resolves it (a missing file exits 2)',
        ok: [['--kubeconfig=/etc/kubeconfig', '/etc/kubeconfig']],
        bad: [],
      },
      watch: {
        ok: [
          ['--watch', true],
          ['--watch=false', false],
        ],
        bad: [['--watch=yes', bad('watch', 'yes', BOOL)]],
      },
      'companion-taint-key': {
        anyValue: 'only matched against the taints shown, never written',
        ok: [['--companion-taint-key=example.com/lost', 'example.com/lost']],
        bad: [],
      },
      lock: {
        anyValue: 'the name of a Lease read, never written',
        ok: [['--lock=my-lock', 'my-lock']],
        bad: [],
      },
      timeout: {
        ok: [
          ['--timeout=1s', 1000],
          ['--timeout=10m', 600_000],
        ],
        bad: [
          ['--timeout=999ms', bad('timeout', '999ms', `${DUR} >= 1s and <= 10m0s`)],
          ['--timeout=10m1ms', bad('timeout', '10m1ms', `${DUR} >= 1s and <= 10m0s`)],
        ],
      },
      'max-rows': {
        ok: [
          ['--max-rows=1', 1],
          ['--max-rows=100000', 100_000],
        ],
        bad: [
          ['--max-rows=0', bad('max-rows', '0', 'a whole number >= 1 and <= 100000')],
          ['--max-rows=100001', bad('max-rows', '100001', 'a whole number >= 1 and <= 100000')],
        ],
      },
    },
  },
  demo: {
    flags: DEMO_FLAGS,
    rows: {
      nodes: {
        ok: [
          ['--nodes=6', 6],
          ['--nodes=2000', 2000],
        ],
        bad: [
          ['--nodes=5', bad('nodes', '5', 'a whole number >= 6 and <= 2000')],
          ['--nodes=2001', bad('nodes', '2001', 'a whole number >= 6 and <= 2000')],
        ],
      },
      duration: {
        ok: [
          ['--duration=0s', 0],
          ['--duration=24h', 86_400_000],
        ],
        bad: [['--duration=24h1ms', bad('duration', '24h1ms', `${DUR} >= 0s and <= 24h0m0s`)]],
      },
      grace: {
        ok: [
          ['--grace=3s', 3000],
          ['--grace=10m', 600_000],
        ],
        bad: [
          ['--grace=2999ms', bad('grace', '2999ms', `${DUR} >= 3s and <= 10m0s`)],
          ['--grace=10m1ms', bad('grace', '10m1ms', `${DUR} >= 3s and <= 10m0s`)],
        ],
      },
    },
  },
};

for (const [command, { flags, rows }] of Object.entries(SUBCOMMANDS)) {
  describe(`every flag of ${command}: what it accepts, and the error past its edges`, () => {
    it('every flag has a row, and every row a flag; a row rejects something or says why not', () => {
      expect(Object.keys(rows).sort()).toEqual(flags.map((f) => f.name).sort());
      const loose = Object.entries(rows).filter(([, r]) => r.bad.length === 0 && r.anyValue === undefined);
      expect(loose.map(([name]) => name)).toEqual([]);
    });

    for (const [name, row] of Object.entries(rows)) {
      it(`--${name}`, () => {
        for (const [arg, want] of row.ok) expect(parseArgs([arg], flags).values[name], arg).toEqual(want);
        for (const [arg, message] of row.bad) {
          const err = thrown(() => parseArgs([arg], flags));
          expect(err, arg).toBeInstanceOf(FlagError);
          expect((err as Error).message, arg).toBe(message);
        }
      });
    }
  });
}
