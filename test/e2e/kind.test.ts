/**
 * The kind end-to-end test (test/kind/run.sh): a real cluster, a worker stopped with `docker stop`,
 * our controller marking it. Runs only where a Docker engine, kind and kubectl exist; elsewhere it
 * is skipped and says why. The decision comes from `run.sh --preflight`, so the script and this
 * test agree on what is needed.
 */
import { spawn, spawnSync } from 'node:child_process';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const RUN = join(REPO, 'test', 'kind', 'run.sh');

/** undefined when the tools are there, else the reason run.sh gives for skipping. */
function kindSkipReason(): string | undefined {
  const r = spawnSync('bash', [RUN, '--preflight'], { encoding: 'utf8', timeout: 60_000 });
  const out = `${r.stdout ?? ''}`.trim();
  if (r.status === 0 && out.startsWith('OK')) return undefined;
  const skip = /^SKIP: (.*)$/m.exec(out)?.[1];
  return skip ?? `run.sh --preflight failed (exit ${r.status ?? r.signal}): ${out} ${r.stderr ?? ''}`.trim();
}

const skipReason = kindSkipReason();
if (skipReason) console.log(`SKIP kind e2e (test/kind/run.sh): ${skipReason}`);

describe('kind cluster (test/kind/run.sh)', () => {
  it('run.sh --preflight gives a verdict: OK, or SKIP with a reason', () => {
    const r = spawnSync('bash', [RUN, '--preflight'], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^(OK: .+|SKIP: .+)\n$/);
  });

  it.skipIf(skipReason !== undefined)(
    'a stopped worker is marked Unknown and tainted unreachable, and recovers when started',
    async () => {
      const lines: string[] = [];
      const code = await new Promise<number | null>((done) => {
        const child = spawn('bash', [RUN], { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
        const onData = (b: Buffer) => {
          const text = b.toString();
          process.stdout.write(text);
          lines.push(...text.split('\n'));
        };
        child.stdout.on('data', onData);
        child.stderr.on('data', onData);
        child.on('close', done);
      });
      const output = lines.join('\n');
      // The preflight passed, so the script must not skip now.
      expect(output).not.toMatch(/^SKIP: /m);
      expect(code, output.slice(-4000)).toBe(0);
      expect(output).toMatch(/PASS$/m);
    },
    40 * 60_000,
  );
});
