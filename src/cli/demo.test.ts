import { createWriteStream, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { stopRig } from './demo.js';

const made: string[] = [];
afterEach(() => {
  for (const p of made.splice(0)) rmSync(p, { recursive: true, force: true });
});

/** A rig whose control plane's folder (holding the controller log) is removed by its stop, as LocalControlPlane's is. */
function rig() {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'nlc-demo-test-'));
  made.push(dir);
  const logPath = path.join(dir, 'controller.log');
  const logFile = createWriteStream(logPath, { flags: 'a' });
  logFile.write('{"msg":"the last line before the failure"}\n');
  const stopped = { value: false };
  const part = { stop: () => undefined };
  return {
    stopped,
    rig: {
      nodes: part,
      leases: part,
      fleet: part,
      replicas: [{ ctl: { shutdown: async () => undefined } }],
      admin: { close: () => undefined },
      logFile,
      logPath,
      cp: {
        stop: async () => {
          stopped.value = true;
          rmSync(dir, { recursive: true, force: true });
        },
      },
    } as unknown as Parameters<typeof stopRig>[0],
  };
}

describe('the demo stops', () => {
  it('a failed run keeps its controller log outside the control plane folder, whole', async () => {
    const { rig: r, stopped } = rig();
    const kept = path.join(os.tmpdir(), `nlc-demo-test-kept-${process.pid}.log`);
    made.push(kept);
    await stopRig(r, kept);
    expect(stopped.value).toBe(true);
    expect(existsSync(r.logPath)).toBe(false);
    expect(readFileSync(kept, 'utf8')).toBe('{"msg":"the last line before the failure"}\n');
  });

  it('a passed run keeps nothing', async () => {
    const { rig: r } = rig();
    await stopRig(r);
    expect(existsSync(r.logPath)).toBe(false);
  });
});
