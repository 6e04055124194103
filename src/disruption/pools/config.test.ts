import { describe, expect, it } from 'vitest';
import {
  MAX_POOL_CONFIG_BYTES,
  type PoolConfig,
  PoolConfigError,
  parsePoolConfig,
  resolveGrace,
  validatePoolConfig,
} from './config.js';
import { type LabelSelector, matchesSelector } from './selector.js';

const defaults = { monitorGraceMs: 50_000, startupGraceMs: 60_000 };

function valid(doc: unknown): PoolConfig {
  const r = validatePoolConfig(doc);
  if (!r.ok) throw new Error(r.errors.map((e) => e.text).join('\n'));
  return r.config;
}

function errorsOf(doc: unknown): string[] {
  const r = validatePoolConfig(doc);
  expect(r.ok).toBe(false);
  return r.ok ? [] : r.errors.map((e) => e.text);
}

describe('matchesSelector', () => {
  const labels = { pool: 'gpu', zone: 'a', spot: '' };
  it.each([
    [{}, true],
    [{ matchLabels: { pool: 'gpu' } }, true],
    [{ matchLabels: { pool: 'cpu' } }, false],
    [{ matchLabels: { missing: '' } }, false],
    [{ matchLabels: { spot: '' } }, true],
    [{ matchExpressions: [{ key: 'pool', operator: 'In', values: ['gpu', 'ml'] }] }, true],
    [{ matchExpressions: [{ key: 'pool', operator: 'In', values: ['ml'] }] }, false],
    [{ matchExpressions: [{ key: 'nope', operator: 'In', values: ['x'] }] }, false],
    [{ matchExpressions: [{ key: 'pool', operator: 'NotIn', values: ['ml'] }] }, true],
    [{ matchExpressions: [{ key: 'pool', operator: 'NotIn', values: ['gpu'] }] }, false],
    [{ matchExpressions: [{ key: 'nope', operator: 'NotIn', values: ['gpu'] }] }, true],
    [{ matchExpressions: [{ key: 'spot', operator: 'Exists' }] }, true],
    [{ matchExpressions: [{ key: 'nope', operator: 'Exists' }] }, false],
    [{ matchExpressions: [{ key: 'nope', operator: 'DoesNotExist' }] }, true],
    [{ matchExpressions: [{ key: 'pool', operator: 'DoesNotExist' }] }, false],
    [
      { matchLabels: { pool: 'gpu' }, matchExpressions: [{ key: 'zone', operator: 'In', values: ['b'] }] },
      false,
    ],
  ] as const)('%j -> %s', (selector, expected) => {
    expect(matchesSelector(selector as LabelSelector, labels)).toBe(expected);
  });
});

describe('validatePoolConfig', () => {
  it('accepts a full config and converts durations', () => {
    const config = valid({
      pools: [
        {
          name: 'gpu',
          selector: {
            matchLabels: { 'node.kubernetes.io/instance-type': 'p4d.24xlarge' },
            matchExpressions: [{ key: 'pool', operator: 'In', values: ['gpu', 'ml'] }],
          },
          nodeMonitorGracePeriod: '5m',
          nodeStartupGracePeriod: '10m',
        },
        {
          name: 'edge',
          selector: { matchExpressions: [{ key: 'edge', operator: 'Exists' }] },
          nodeMonitorGracePeriod: '2m30s',
        },
      ],
    });
    expect(config.pools).toEqual([
      {
        name: 'gpu',
        index: 0,
        selector: {
          matchLabels: { 'node.kubernetes.io/instance-type': 'p4d.24xlarge' },
          matchExpressions: [{ key: 'pool', operator: 'In', values: ['gpu', 'ml'] }],
        },
        monitorGraceMs: 300_000,
        startupGraceMs: 600_000,
      },
      {
        name: 'edge',
        index: 1,
        selector: { matchExpressions: [{ key: 'edge', operator: 'Exists' }] },
        monitorGraceMs: 150_000,
      },
    ]);
  });

  it('accepts an empty pool list', () => {
    expect(valid({ pools: [] }).pools).toEqual([]);
  });

  it('names the pool index, name, field, value and what is accepted', () => {
    const errors = errorsOf({
      pools: [
        { name: 'ok', selector: {}, nodeMonitorGracePeriod: '1m' },
        { name: 'gpu', selector: {}, nodeMonitorGracePeriod: '5x' },
      ],
    });
    expect(errors).toEqual([
      'pools[1] "gpu": nodeMonitorGracePeriod: "5x": unknown unit "x" in duration "5x"; accepted: a Go duration ' +
        'such as "45s", "5m", "1h2m3.5s" or "300ms" (units ns, us, ms, s, m, h), greater than 0 and at most 24h0m0s',
    ]);
    const r = validatePoolConfig({ pools: [{ name: 'gpu', selector: {}, nodeMonitorGracePeriod: '5x' }] });
    expect(r.ok ? undefined : r.errors[0]).toMatchObject({
      path: 'pools[0].nodeMonitorGracePeriod',
      poolIndex: 0,
      poolName: 'gpu',
      field: 'nodeMonitorGracePeriod',
      value: '5x',
    });
  });

  it.each([
    [
      { name: 'a', selector: {}, nodeMonitorGracePeriod: '0s' },
      /nodeMonitorGracePeriod: "0s": must be greater than 0/,
    ],
    [
      { name: 'a', selector: {}, nodeStartupGracePeriod: '-1m' },
      /nodeStartupGracePeriod: "-1m": must be greater than 0/,
    ],
    [
      { name: 'a', selector: {}, nodeMonitorGracePeriod: 60 },
      /nodeMonitorGracePeriod: 60: must be a duration string/,
    ],
    [{ name: 'a', selector: {}, nodeMonitorGracePeriod: '5' }, /missing unit in duration "5"/],
    [{ name: 'a', selector: {} }, /pools\[0\] "a": nodeMonitorGracePeriod: <missing>: a pool must set/],
    [
      { selector: {}, nodeMonitorGracePeriod: '1m' },
      /^pools\[0\]: name: <missing>: accepted: 1-63 characters/,
    ],
    [{ name: 'default', selector: {}, nodeMonitorGracePeriod: '1m' }, /"default" is reserved/],
    [{ name: 'a', nodeMonitorGracePeriod: '1m' }, /selector: <missing>: required/],
    [{ name: 'a', selector: [], nodeMonitorGracePeriod: '1m' }, /selector: \[\]: must be an object/],
    [
      { name: 'a', selector: { matchLabel: {} }, nodeMonitorGracePeriod: '1m' },
      /selector.matchLabel: \{\}: unknown field/,
    ],
    [
      { name: 'a', selector: {}, grace: '1m', nodeMonitorGracePeriod: '1m' },
      /pools\[0\] "a": grace: "1m": unknown field; accepted fields: name, selector/,
    ],
    [
      {
        name: 'a',
        selector: { matchExpressions: [{ key: 'k', operator: 'Equals', values: ['x'] }] },
        nodeMonitorGracePeriod: '1m',
      },
      /matchExpressions\[0\]\.operator: "Equals": accepted: In, NotIn, Exists, DoesNotExist/,
    ],
    [
      {
        name: 'a',
        selector: { matchExpressions: [{ key: 'k', operator: 'In' }] },
        nodeMonitorGracePeriod: '1m',
      },
      /matchExpressions\[0\]\.values: <missing>: operator In needs a non-empty list/,
    ],
    [
      {
        name: 'a',
        selector: { matchExpressions: [{ key: 'k', operator: 'Exists', values: ['x'] }] },
        nodeMonitorGracePeriod: '1m',
      },
      /operator Exists takes no values/,
    ],
    [
      { name: 'a', selector: { matchLabels: { 'bad key!': 'x' } }, nodeMonitorGracePeriod: '1m' },
      /matchLabels: "bad key!": invalid label key/,
    ],
    [
      { name: 'a', selector: { matchLabels: { k: 'bad value!' } }, nodeMonitorGracePeriod: '1m' },
      /matchLabels.k: "bad value!": invalid label value/,
    ],
  ])('rejects %j', (pool, pattern) => {
    const errors = errorsOf({ pools: [pool] });
    expect(
      errors.some((e) => pattern.test(e)),
      errors.join('\n'),
    ).toBe(true);
  });

  const NAME_RULE = 'accepted: 1-63 characters of [A-Za-z0-9-_.], starting and ending with an alphanumeric';
  const inA = (selector: unknown) => ({ pools: [{ name: 'a', selector, nodeMonitorGracePeriod: '1m' }] });
  it.each([
    [
      inA({ matchLabels: ['a'] }),
      ['selector.matchLabels: ["a"]: must be an object of label key -> value strings'],
    ],
    [inA({ matchLabels: { k: 1 } }), ['selector.matchLabels.k: 1: label value must be a string']],
    [
      inA({ matchLabels: { k: 'v'.repeat(100) } }),
      [
        `selector.matchLabels.k: "${'v'.repeat(76)}...: invalid label value: must be empty or at most 63 ` +
          'characters of [A-Za-z0-9-_.], starting and ending with an alphanumeric',
      ],
    ],
    [
      inA({ matchExpressions: {} }),
      ['selector.matchExpressions: {}: must be a list of {key, operator, values?}'],
    ],
    [
      inA({ matchExpressions: ['x'] }),
      ['selector.matchExpressions[0]: "x": must be an object {key, operator, values?}'],
    ],
    [
      inA({ matchExpressions: [{ key: 'k', operator: 'Exists', value: 'x' }] }),
      ['selector.matchExpressions[0].value: "x": unknown field; accepted fields: key, operator, values'],
    ],
    [
      inA({ matchExpressions: [{ operator: 'Exists' }] }),
      ['selector.matchExpressions[0].key: <missing>: must be a label key string'],
    ],
    [
      inA({ matchExpressions: [{ key: 'bad key!', operator: 'Exists' }] }),
      [
        'selector.matchExpressions[0].key: "bad key!": invalid label key: name must be at most 63 characters ' +
          'of [A-Za-z0-9-_.], starting and ending with an alphanumeric',
      ],
    ],
    [
      inA({ matchExpressions: [{ key: 'k', operator: 1 }] }),
      ['selector.matchExpressions[0].operator: 1: accepted: In, NotIn, Exists, DoesNotExist'],
    ],
    [
      inA({ matchExpressions: [{ key: 'k', operator: 'NotIn', values: [] }] }),
      ['selector.matchExpressions[0].values: []: operator NotIn needs a non-empty list of label values'],
    ],
    [
      inA({ matchExpressions: [{ key: 'k', operator: 'In', values: [1, 'ok', 'bad value!'] }] }),
      [
        'selector.matchExpressions[0].values[0]: 1: invalid label value: must be a string',
        'selector.matchExpressions[0].values[2]: "bad value!": invalid label value: must be empty or at most 63 ' +
          'characters of [A-Za-z0-9-_.], starting and ending with an alphanumeric',
      ],
    ],
    [{ pools: [{ name: '-a', selector: {}, nodeMonitorGracePeriod: '1m' }] }, [`name: "-a": ${NAME_RULE}`]],
    [{ pools: [{ name: 'a-', selector: {}, nodeMonitorGracePeriod: '1m' }] }, [`name: "a-": ${NAME_RULE}`]],
    [
      { pools: [{ name: 'n'.repeat(64), selector: {}, nodeMonitorGracePeriod: '1m' }] },
      [`name: "${'n'.repeat(64)}": ${NAME_RULE}`],
    ],
  ])('rejects a malformed pool with exactly these errors %#', (doc, errors) => {
    const name = (doc as { pools: Array<{ name: string }> }).pools[0]!.name;
    expect(errorsOf(doc)).toEqual(errors.map((e) => `pools[0] ${JSON.stringify(name)}: ${e}`));
  });

  it('names a pool that is not an object by its index only', () => {
    expect(errorsOf({ pools: ['x'] })).toEqual([
      'pools[0]: "x": must be an object {name, selector, nodeMonitorGracePeriod?, nodeStartupGracePeriod?}',
    ]);
  });

  it('accepts a 63-character name, and Exists or DoesNotExist with an empty value list', () => {
    expect(
      valid({ pools: [{ name: 'n'.repeat(63), selector: {}, nodeMonitorGracePeriod: '1m' }] }).pools,
    ).toHaveLength(1);
    const [pool] = valid(
      inA({ matchExpressions: [{ key: 'k', operator: 'DoesNotExist', values: [] }] }),
    ).pools;
    expect(pool?.selector).toEqual({ matchExpressions: [{ key: 'k', operator: 'DoesNotExist' }] });
  });

  it('warns at exactly 45s and for a startup grace below the monitor grace, not at equal ones', () => {
    const warnings = (pool: object) => {
      const r = validatePoolConfig({ pools: [{ name: 'a', selector: {}, ...pool }] });
      return r.warnings.map((w) => w.text);
    };
    expect(warnings({ nodeMonitorGracePeriod: '45s', nodeStartupGracePeriod: '45s' })).toEqual([
      'pools[0] "a": nodeMonitorGracePeriod: "45s": at or below 45s: client-go\'s HTTP/2 health check needs ' +
        '30s + 15s to notice a dead connection, so nodes may flap NotReady (upstream default is 50s)',
    ]);
    expect(warnings({ nodeMonitorGracePeriod: '46s', nodeStartupGracePeriod: '10s' })).toEqual([
      'pools[0] "a": nodeStartupGracePeriod: "10s": shorter than nodeMonitorGracePeriod: new nodes get less ' +
        'time than running ones',
    ]);
    expect(warnings({ nodeStartupGracePeriod: '10s' })).toEqual([]);
    expect(warnings({ nodeMonitorGracePeriod: '46s' })).toEqual([]);
  });

  it('with the second opinion on, warns for a grace at or below --confirm-after + the confirming probe, not above it', () => {
    const warnings = (grace: string, bounds: { confirmDownMs?: number }) =>
      validatePoolConfig(
        { pools: [{ name: 'a', selector: {}, nodeMonitorGracePeriod: grace, nodeStartupGracePeriod: '1h' }] },
        bounds,
      ).warnings.map((w) => w.text);
    const tooShort =
      'pools[0] "a": nodeMonitorGracePeriod: "1m6s": at or below 1m6s (--confirm-after and the confirming probe): ' +
      'the second opinion cannot confirm a node down before this grace, so its nodes are marked at the grace ' +
      '(their NoExecute still held while their kubelets answer)';
    expect(warnings('1m6s', { confirmDownMs: 66_000 })).toEqual([tooShort]);
    expect(warnings('1m7s', { confirmDownMs: 66_000 })).toEqual([]);
    // Off: no such bound.
    expect(warnings('1m6s', {})).toEqual([]);
  });

  it('rejects duplicate names, naming both entries', () => {
    const errors = errorsOf({
      pools: [
        { name: 'a', selector: {}, nodeMonitorGracePeriod: '1m' },
        { name: 'a', selector: {}, nodeMonitorGracePeriod: '2m' },
      ],
    });
    expect(errors).toEqual(['pools[1] "a": name: "a": duplicate pool name (also pools[0])']);
  });

  it('collects every error, not just the first', () => {
    const errors = errorsOf({
      pools: [
        { name: 'a', selector: {}, nodeMonitorGracePeriod: 'x' },
        { name: 'b', selector: {}, nodeStartupGracePeriod: '0' },
      ],
    });
    expect(errors).toHaveLength(2);
    expect(errors[0]).toMatch(/^pools\[0\] "a"/);
    expect(errors[1]).toMatch(/^pools\[1\] "b"/);
  });

  it('rejects a bad document shape', () => {
    expect(errorsOf([])).toEqual(['[]: the pool config must be a JSON object {"pools": [...]}']);
    expect(errorsOf({ pools: {} })).toEqual(['pools: {}: must be a list of pools']);
    expect(errorsOf({ pools: [], extra: 1 })[0]).toMatch(/^extra: 1: unknown field/);
  });

  it('bounds the grace periods: at most 24h (a timer cannot wait 720h), nodeMonitorGracePeriod above --watch-silence-threshold', () => {
    const pool = (grace: Record<string, string>) => ({ pools: [{ name: 'edge', selector: {}, ...grace }] });
    expect(errorsOf(pool({ nodeMonitorGracePeriod: '720h' }))).toEqual([
      'pools[0] "edge": nodeMonitorGracePeriod: "720h": out of range; accepted: a Go duration such as "45s", "5m", ' +
        '"1h2m3.5s" or "300ms" (units ns, us, ms, s, m, h), greater than 0 and at most 24h0m0s',
    ]);
    expect(errorsOf(pool({ nodeStartupGracePeriod: '24h0m1s' }))).toEqual([
      expect.stringMatching(
        /^pools\[0\] "edge": nodeStartupGracePeriod: "24h0m1s": out of range; .* at most 24h0m0s$/,
      ),
    ]);
    expect(
      valid(pool({ nodeMonitorGracePeriod: '24h', nodeStartupGracePeriod: '24h' })).pools[0],
    ).toMatchObject({
      monitorGraceMs: 24 * 3_600_000,
      startupGraceMs: 24 * 3_600_000,
    });
    // The silence threshold the controller runs with: a pool grace must be above it, as the
    // global one is (a blind watch must be noticed before a grace can run out on stale data).
    const bounds = { watchSilenceThresholdMs: 45_000 };
    const r = validatePoolConfig(pool({ nodeMonitorGracePeriod: '45s' }), bounds);
    expect(r.ok ? [] : r.errors.map((e) => e.text)).toEqual([
      'pools[0] "edge": nodeMonitorGracePeriod: "45s": out of range; accepted: a Go duration such as "45s", "5m", ' +
        '"1h2m3.5s" or "300ms" (units ns, us, ms, s, m, h), above --watch-silence-threshold (45s) and at most 24h0m0s',
    ]);
    expect(validatePoolConfig(pool({ nodeMonitorGracePeriod: '46s' }), bounds).ok).toBe(true);
    // The startup grace has no such bound (neither has --node-startup-grace-period).
    expect(validatePoolConfig(pool({ nodeStartupGracePeriod: '10s' }), bounds).ok).toBe(true);
    expect(parsePoolConfig(JSON.stringify(pool({ nodeMonitorGracePeriod: '30s' })), bounds).ok).toBe(false);
  });

  it('warns below the HTTP/2 health-check sum, for short startup grace, and for shadowed pools', () => {
    const r = validatePoolConfig({
      pools: [
        {
          name: 'fast',
          selector: { matchLabels: { a: 'b' } },
          nodeMonitorGracePeriod: '40s',
          nodeStartupGracePeriod: '30s',
        },
        { name: 'all', selector: {}, nodeMonitorGracePeriod: '1m' },
        { name: 'never', selector: { matchLabels: { x: 'y' } }, nodeMonitorGracePeriod: '1m' },
      ],
    });
    expect(r.ok).toBe(true);
    expect(r.warnings.map((w) => w.text)).toEqual([
      'pools[0] "fast": nodeMonitorGracePeriod: "40s": at or below 45s: client-go\'s HTTP/2 health check needs ' +
        '30s + 15s to notice a dead connection, so nodes may flap NotReady (upstream default is 50s)',
      'pools[0] "fast": nodeStartupGracePeriod: "30s": shorter than nodeMonitorGracePeriod: new nodes get less time than running ones',
      'pools[2] "never": selector: {"matchLabels":{"x":"y"}}: never used: pools[1] "all" has an empty selector and matches every node first',
    ]);
    expect(
      validatePoolConfig({ pools: [{ name: 'ok', selector: {}, nodeMonitorGracePeriod: '46s' }] }).warnings,
    ).toEqual([]);
  });
});

describe('PoolConfigError', () => {
  it('names the source and every problem', () => {
    const r = validatePoolConfig({ pools: ['x', 'y'] });
    const err = new PoolConfigError('pools.json', r.ok ? [] : r.errors);
    expect(err.name).toBe('PoolConfigError');
    expect(err.message).toBe(
      'invalid pool config pools.json: pools[0]: "x": must be an object {name, selector, ' +
        'nodeMonitorGracePeriod?, nodeStartupGracePeriod?}; pools[1]: "y": must be an object {name, selector, ' +
        'nodeMonitorGracePeriod?, nodeStartupGracePeriod?}',
    );
  });
});

describe('parsePoolConfig', () => {
  it.each(['pools:\n  - name: a', '  ---\n', '# comment\n'])('hints that %j looks like YAML', (text) => {
    const r = parsePoolConfig(text);
    expect(r.ok ? '' : r.errors[0]?.text).toMatch(
      /^not valid JSON: .* \(this looks like YAML: only JSON is supported\)$/s,
    );
  });

  it('gives no YAML hint for other text', () => {
    const r = parsePoolConfig('nope #');
    expect(r.ok ? '' : r.errors[0]?.text).toMatch(/^not valid JSON: /);
    expect(r.ok ? '' : r.errors[0]?.text).not.toMatch(/YAML/);
  });

  it('parses JSON text', () => {
    const r = parsePoolConfig('{"pools":[{"name":"a","selector":{},"nodeMonitorGracePeriod":"1m"}]}');
    expect(r.ok && r.config.pools[0]?.monitorGraceMs).toBe(60_000);
  });
  it('reports invalid JSON and hints at YAML', () => {
    const r = parsePoolConfig('pools:\n  - name: a\n');
    expect(r.ok).toBe(false);
    expect(r.ok ? '' : r.errors[0]!.text).toMatch(/^not valid JSON: .*only JSON is supported\)$/s);
  });
});

describe('pool config input that breaks recursion or memory', () => {
  /** `levels` lists (or objects) nested in each other; the innermost is empty. */
  const nested = (levels: number, kind: 'array' | 'object'): string =>
    kind === 'array'
      ? `${'['.repeat(levels)}${']'.repeat(levels)}`
      : `${'{"a":'.repeat(levels - 1)}{}${'}'.repeat(levels - 1)}`;
  const texts = (r: ReturnType<typeof parsePoolConfig>) => (r.ok ? [] : r.errors.map((e) => e.text));

  it.each([
    ['lists as a pool', (n: number) => `{"pools":[${nested(n, 'array')}]}`, 'pools[0][0][0]'],
    ['objects in an unknown field', (n: number) => `{"pools":[],"x":${nested(n, 'object')}}`, 'x.a.a.a'],
    [
      'lists as a label value',
      (n: number) =>
        `{"pools":[{"name":"a","selector":{"matchLabels":{"k":${nested(n, 'array')}}},"nodeMonitorGracePeriod":"1m"}]}`,
      'pools[0].selector.matchLabels.k[0][0]',
    ],
  ])('refuses 100,000 nested %s with an error, not a RangeError', (_what, make, at) => {
    const r = parsePoolConfig(make(100_000));
    expect(r.ok).toBe(false);
    const [text, ...rest] = texts(r);
    expect(rest).toEqual([]);
    expect(text).toMatch(
      /^nested deeper than 32 levels of objects and lists \(at .*; a pool config needs 7\)$/,
    );
    expect(text).toContain(`(at ${at}`);
  });

  it('accepts 32 levels and refuses 33 (the document is level 1)', () => {
    // {"pools":[],"x":<31 nested lists>}: the innermost list is level 32.
    expect(texts(parsePoolConfig(`{"pools":[],"x":${nested(31, 'array')}}`))).toEqual([
      expect.stringMatching(/^x: \[\[\[.*: unknown field; accepted fields: pools$/),
    ]);
    expect(texts(parsePoolConfig(`{"pools":[],"x":${nested(32, 'array')}}`))).toEqual([
      // The path (x and 31 indices) is cut to 80 characters, as values are.
      `nested deeper than 32 levels of objects and lists (at x${'[0]'.repeat(25)}[...; a pool config needs 7)`,
    ]);
  });

  it('validates a document whose values are too deep to quote, or that throws, into errors', () => {
    let deep: unknown = [];
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(validatePoolConfig({ pools: [deep] }).ok).toBe(false);
    const cyclic: Record<string, unknown> = { pools: [] };
    cyclic.x = cyclic;
    const c = validatePoolConfig(cyclic);
    expect(c.ok ? [] : c.errors.map((e) => e.text)).toEqual([
      expect.stringMatching(/^cannot validate the pool config: Converting circular structure to JSON/),
    ]);
    const throwing = {
      get pools(): unknown {
        throw new RangeError('boom');
      },
    };
    const t = validatePoolConfig(throwing);
    expect(t.ok ? [] : t.errors.map((e) => e.text)).toEqual(['cannot validate the pool config: boom']);
  });

  it('refuses text over 1 MiB (counted in UTF-8 bytes) and accepts 1 MiB', () => {
    const good = '{"pools":[]}';
    const padded = (bytes: number, pad = ' ') =>
      good + pad.repeat((bytes - good.length) / Buffer.byteLength(pad));
    expect(parsePoolConfig(padded(MAX_POOL_CONFIG_BYTES)).ok).toBe(true);
    expect(texts(parsePoolConfig(padded(MAX_POOL_CONFIG_BYTES + 1)))).toEqual([
      'too large: 1048577 bytes; a pool config may have at most 1048576 bytes (1 MiB, what a ConfigMap holds)',
    ]);
    // 2-byte characters: fewer characters than the limit, more bytes.
    const wide = `{"pools":[],"x":"${'é'.repeat(MAX_POOL_CONFIG_BYTES / 2)}"}`;
    expect(wide.length).toBeLessThan(MAX_POOL_CONFIG_BYTES);
    expect(texts(parsePoolConfig(wide))).toEqual([expect.stringMatching(/^too large: 1048595 bytes;/)]);
  });

  it('reports the first 50 errors and warnings of a huge file and counts the rest', () => {
    const bad = parsePoolConfig(JSON.stringify({ pools: Array.from({ length: 20_000 }, () => 'x') }));
    const errors = texts(bad);
    expect(errors).toHaveLength(51);
    expect(errors[49]).toMatch(/^pools\[49\]: "x": must be an object/);
    expect(errors[50]).toBe('19950 more errors not shown (20000 in all)');
    const warned = parsePoolConfig(
      JSON.stringify({
        pools: Array.from({ length: 60 }, (_, i) => ({
          name: `p${i}`,
          selector: {},
          nodeMonitorGracePeriod: '10s',
        })),
      }),
    );
    expect(warned.ok).toBe(true);
    // Each pool warns for its 10s grace, each after the first for being shadowed by pools[0].
    expect(warned.warnings).toHaveLength(51);
    expect(warned.warnings[50]?.text).toBe('69 more warnings not shown (119 in all)');
    expect(warned.ok && warned.config.pools).toHaveLength(60);
  });
});

describe('resolveGrace', () => {
  const config = valid({
    pools: [
      {
        name: 'gpu',
        selector: { matchLabels: { pool: 'gpu' } },
        nodeMonitorGracePeriod: '5m',
        nodeStartupGracePeriod: '10m',
      },
      {
        name: 'big',
        selector: { matchExpressions: [{ key: 'size', operator: 'In', values: ['xl'] }] },
        nodeMonitorGracePeriod: '2m',
      },
      {
        name: 'spot',
        selector: { matchExpressions: [{ key: 'spot', operator: 'Exists' }] },
        nodeStartupGracePeriod: '3m',
      },
    ],
  });

  it('first match wins', () => {
    expect(resolveGrace(config, defaults, { pool: 'gpu', size: 'xl', spot: '' })).toEqual({
      monitorGraceMs: 300_000,
      startupGraceMs: 600_000,
      pool: 'gpu',
    });
    expect(resolveGrace(config, defaults, { size: 'xl', spot: '' })).toEqual({
      monitorGraceMs: 120_000,
      startupGraceMs: 60_000, // not set by the pool: default
      pool: 'big',
    });
    expect(resolveGrace(config, defaults, { spot: 'true' })).toEqual({
      monitorGraceMs: 50_000,
      startupGraceMs: 180_000,
      pool: 'spot',
    });
  });

  it('uses the defaults when no pool matches', () => {
    expect(resolveGrace(config, defaults, { pool: 'cpu' })).toEqual({ ...defaults, pool: null });
    expect(resolveGrace(config, defaults, undefined)).toEqual({ ...defaults, pool: null });
  });
});
