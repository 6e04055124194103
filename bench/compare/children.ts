/**
 * Child processes of the harness (controllers, kwok) must not outlive it: killed on normal exit,
 * and by a detached watchdog if the harness itself is SIGKILLed.
 */
import { type ChildProcess, spawn } from 'node:child_process';

const live = new Set<ChildProcess>();
let hooked = false;

export function trackChild(child: ChildProcess): ChildProcess {
  const pid = child.pid;
  if (pid === undefined) return child;
  live.add(child);
  child.once('exit', () => live.delete(child));
  if (!hooked) {
    hooked = true;
    process.on('exit', () => {
      for (const c of live) {
        try {
          c.kill('SIGKILL');
        } catch {
          /* gone */
        }
      }
    });
  }
  const script = `while kill -0 ${process.pid} 2>/dev/null && kill -0 ${pid} 2>/dev/null; do sleep 1; done; kill -9 ${pid} 2>/dev/null`;
  spawn('bash', ['-c', script], { detached: true, stdio: 'ignore' }).unref();
  return child;
}
