/** Polls `check` until it returns a truthy value or the deadline passes; returns that value. */
export async function waitUntil<T>(
  check: () => T | Promise<T>,
  opts: { timeoutMs: number; intervalMs?: number; what: string },
): Promise<NonNullable<T>> {
  const deadline = performance.now() + opts.timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (performance.now() > deadline) {
      throw new Error(
        `timed out after ${opts.timeoutMs}ms waiting for ${opts.what}${last ? `: ${String(last)}` : ''}`,
      );
    }
    await sleep(opts.intervalMs ?? 100);
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
