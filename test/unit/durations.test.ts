import { readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { formatDuration } from '../../src/clock/duration.js';
import { REPO, walkFiles } from './manifests.support.js';

/**
 * Durations in logs, errors and flag messages read as Go durations (`50s`, `1m30s`, `800ms`), the
 * way the flags take them, all produced by one formatter (src/clock/duration.ts). These checks
 * scan the sources so that a new `${ms}ms` or a `retryInMs: 800` log key does not creep back in.
 */

const SRC = join(REPO, 'src');
const FORMATTER = join(SRC, 'clock', 'duration.ts');
const sources = walkFiles(SRC, (p) => p.endsWith('.ts') && !p.endsWith('.test.ts') && p !== FORMATTER).map(
  (p) => ({ file: relative(REPO, p), text: readFileSync(p, 'utf8') }),
);

/** The argument text of every logger call (`.info(`, `.warn(`, `.error(`, `.debug(`). */
function logCalls(text: string): string[] {
  const out: string[] = [];
  const re = /\.(?:info|warn|error|debug)\(/g;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    let depth = 1;
    let i = m.index + m[0].length;
    let quote: string | undefined;
    for (; i < text.length && depth > 0; i++) {
      const c = text[i];
      if (quote) {
        if (c === '\\') i++;
        else if (c === quote) quote = undefined;
      } else if (c === "'" || c === '"' || c === '`') quote = c;
      else if (c === '(') depth++;
      else if (c === ')') depth--;
    }
    out.push(text.slice(m.index + m[0].length, i - 1));
  }
  return out;
}

describe('durations in logs and messages', () => {
  it('the scan is real: it finds the log calls and what they log', () => {
    const calls = logCalls(
      "log.info('Acting', { blindFor: x, retryInMs: y }); log.debug(2, 'a (b)', { idleSeconds: f(1) });",
    );
    expect(calls).toEqual(["'Acting', { blindFor: x, retryInMs: y }", "2, 'a (b)', { idleSeconds: f(1) }"]);
    expect(sources.length).toBeGreaterThan(50);
    expect(sources.flatMap((s) => logCalls(s.text)).length).toBeGreaterThan(100);
  });

  it('no message appends "ms" to a number: they use formatDuration', () => {
    const found = sources.flatMap(({ file, text }) =>
      [...text.matchAll(/\$\{[^}]*\}ms\b/g)].map((m) => `${file}: ${m[0]}`),
    );
    expect(found).toEqual([]);
  });

  it('no log line carries a duration as a bare number of ms or seconds (keys ending in Ms or Seconds)', () => {
    const found = sources.flatMap(({ file, text }) =>
      logCalls(text).flatMap((args) =>
        [...args.matchAll(/\b([A-Za-z]+(?:Ms|Seconds))\s*:/g)].map((m) => `${file}: ${m[1]}`),
      ),
    );
    expect(found).toEqual([]);
  });

  it('the formatter writes what Go writes', () => {
    expect(formatDuration(50_000)).toBe('50s');
    expect(formatDuration(90_000)).toBe('1m30s');
    expect(formatDuration(800)).toBe('800ms');
    expect(formatDuration(2_400)).toBe('2.4s');
    expect(formatDuration(3_600_000)).toBe('1h0m0s');
  });
});
