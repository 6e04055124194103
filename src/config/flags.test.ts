import { describe, expect, it } from 'vitest';
import { buildConfig, configWarnings, loadConfig } from './config.js';
import { FLAGS, FlagError, helpText, parseArgs } from './flags.js';

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
      new FlagError('--companion-taint-key, --companion-evict-after need --mode=companion'),
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
