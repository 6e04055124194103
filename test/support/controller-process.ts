import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { lineReader } from './lines.js';
import { waitUntil } from './wait.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const MAIN = path.join(ROOT, 'dist', 'main.js');

/** The Node.js flags the image runs its bundle with: those of the Dockerfile's ENTRYPOINT. */
export function imageNodeFlags(): string[] {
  const text = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');
  const entry = /^ENTRYPOINT\s+(\[.*\])\s*$/m.exec(text)?.[1];
  if (!entry) throw new Error('Dockerfile: no ENTRYPOINT in exec form');
  return (JSON.parse(entry) as string[]).slice(1, -1);
}

export interface ControllerProcess {
  child: ChildProcess;
  metricsPort: number;
  probesPort: number;
  /** Parsed JSON log lines so far. */
  logs: Record<string, unknown>[];
  /** Raw stderr/stdout text that was not JSON. */
  text: string[];
  /** Resolves when the process exits; `at` is performance.now() at the exit event. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  metrics(): Promise<string>;
  /** Value of one sample, e.g. metric('nlc_transitions_total', {kind: 'marked_unknown'}). */
  metric(name: string, labels?: Record<string, string>): Promise<number>;
  waitForLog(
    msg: string,
    timeoutMs: number,
    pred?: (l: Record<string, unknown>) => boolean,
  ): Promise<Record<string, unknown>>;
  kill(signal?: NodeJS.Signals): Promise<void>;
  /** Warnings, errors and state changes so far, for a failing test's output. */
  summary(): string;
}

/** Parses a Prometheus text exposition and returns the sum of samples matching name + labels. */
export function sampleValue(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  let found = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const lbls: Record<string, string> = {};
    for (const pair of (m[3] ?? '').matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)) lbls[pair[1]!] = pair[2]!;
    if (Object.entries(labels).every(([k, v]) => lbls[k] === v)) {
      sum += Number(m[4]);
      found = true;
    }
  }
  return found ? sum : 0;
}

/**
 * Flags for a controller in a short e2e test: a 4 s lock lease (renew deadline 3 s, retry 0.5 s),
 * the given node-monitor grace, a 10 s startup grace and a 3 s watch-silence threshold.
 */
export function fastTestFlags(kubeconfigPath: string, graceMs: number): string[] {
  return [
    `--kubeconfig=${kubeconfigPath}`,
    '--leader-elect-lease-duration=4s',
    '--leader-elect-renew-deadline=3s',
    '--leader-elect-retry-period=500ms',
    `--node-monitor-grace-period=${graceMs / 1000}s`,
    '--node-startup-grace-period=10s',
    '--watch-silence-threshold=3s',
  ];
}

/** Runs the BUILT controller binary (dist/main.js) as a child process. */
export async function startController(
  flags: string[],
  opts: {
    env?: Record<string, string>;
    name?: string;
    /** Run another install of the controller (default: this repo's dist/main.js with this Node). */
    install?: { node: string; main: string; cwd: string };
    /**
     * Run the controller through another command, e.g. `docker run ... IMAGE`: `file args...` then
     * the controller's flags (nodeFlags and install do not apply).
     */
    command?: { file: string; args: string[] };
    /** How long start-up may take until the ports are bound and /healthz answers (default 20 s). */
    startTimeoutMs?: number;
    /** Node.js flags before the entry script (e.g. V8 heap sizing, profilers). */
    nodeFlags?: string[];
    /** Run as this user and group (the test process must be root). */
    user?: { uid: number; gid: number };
    /** The child's whole environment is `env` (no PATH or HOME of ours), as in a container. */
    bareEnv?: boolean;
    /**
     * Serve /metrics as the binary does by default (HTTPS, TokenReview + SubjectAccessReview);
     * metrics() then sends this bearer token. Without it the process runs with
     * --metrics-secure=false (plain HTTP), which most tests read without a token.
     */
    secureMetrics?: { token: string };
  } = {},
): Promise<ControllerProcess> {
  const main = opts.install?.main ?? MAIN;
  if (!opts.command && !existsSync(main)) throw new Error(`${main} is missing: run \`npm run build\` first`);
  const [file, args] = opts.command
    ? [opts.command.file, opts.command.args]
    : [opts.install?.node ?? process.execPath, [...(opts.nodeFlags ?? []), main]];
  const startTimeoutMs = opts.startTimeoutMs ?? 20_000;
  // Port 0: the process binds whatever port is free and logs it (below). A port picked here in
  // advance could be taken by another process before the child binds it (other test runs share
  // this machine; that was seen as EADDRINUSE).
  const child = spawn(
    file,
    [
      ...args,
      '--metrics-bind-address=127.0.0.1:0',
      `--metrics-secure=${opts.secureMetrics ? 'true' : 'false'}`,
      '--health-probe-bind-address=127.0.0.1:0',
      '--log-format=json',
      ...flags,
    ],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: opts.bareEnv
        ? { ...opts.env }
        : { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...opts.env },
      ...(opts.install ? { cwd: opts.install.cwd } : {}),
      ...(opts.user ? { uid: opts.user.uid, gid: opts.user.gid } : {}),
    },
  );
  const logs: Record<string, unknown>[] = [];
  const text: string[] = [];
  const onLine = (line: string) => {
    if (!line.trim()) return;
    try {
      logs.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      text.push(line);
    }
  };
  // One reader per stream: a line cut across two chunks is joined before it is parsed.
  for (const stream of [child.stdout, child.stderr]) {
    const reader = lineReader(onLine);
    stream?.on('data', (b: Buffer) => reader.push(b));
    stream?.on('end', () => reader.end());
  }
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal, at: performance.now() })),
  );
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const boundPort = (msg: string): number | undefined => {
    const m = /:(\d+)$/.exec(String(logs.find((l) => l.msg === msg)?.address ?? ''));
    return m ? Number(m[1]) : undefined;
  };
  const [metricsPort, probesPort] = await waitUntil(
    () => {
      if (child.exitCode !== null)
        throw new Error(`controller exited early: ${text.join('\n')} ${JSON.stringify(logs)}`);
      const ports = [boundPort('Serving metrics'), boundPort('Serving health probes')];
      return ports.every((p) => p !== undefined) ? (ports as [number, number]) : undefined;
    },
    { timeoutMs: startTimeoutMs, what: 'the ports the controller bound (its "Serving ..." logs)' },
  );
  const cp: ControllerProcess = {
    child,
    metricsPort,
    probesPort,
    logs,
    text,
    exited,
    async metrics() {
      if (!opts.secureMetrics) return await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
      const r = await scrape(metricsPort, opts.secureMetrics.token);
      if (r.status !== 200)
        throw new Error(`GET https://127.0.0.1:${metricsPort}/metrics: ${r.status} ${r.body}`);
      return r.body;
    },
    async metric(name, labels) {
      return sampleValue(await this.metrics(), name, labels);
    },
    async waitForLog(msg, timeoutMs, pred) {
      return await waitUntil(() => logs.find((l) => l.msg === msg && (!pred || pred(l))), {
        timeoutMs,
        what: `log "${msg}" from ${opts.name ?? 'controller'} (last lines: ${JSON.stringify(logs.slice(-5))} ${text.slice(-5).join(' | ')})`,
      });
    },
    summary() {
      const interesting = logs.filter(
        (l) =>
          l.level !== 'info' ||
          /Acting|Blind|Not leading|leader|Leader|Marked|Shutting|Stopped/.test(String(l.msg)),
      );
      return [...interesting.map((l) => JSON.stringify(l)), ...text].join('\n');
    },
    async kill(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(t);
      process.off('exit', killOnExit);
    },
  };
  // Ready when the probe port answers.
  await waitUntil(
    async () => {
      if (child.exitCode !== null)
        throw new Error(`controller exited early: ${text.join('\n')} ${JSON.stringify(logs)}`);
      return (await fetch(`http://127.0.0.1:${probesPort}/healthz`).catch(() => undefined))?.status === 200;
    },
    { timeoutMs: startTimeoutMs, what: 'controller /healthz' },
  );
  return cp;
}

/**
 * GET /metrics of a controller serving HTTPS (its self-signed certificate is not verified: the
 * tests that care verify it separately), with a bearer token if given.
 */
export async function scrape(
  port: number,
  token?: string,
  path = '/metrics',
): Promise<{ status: number; body: string }> {
  return await new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        path,
        headers: token ? { authorization: `Bearer ${token}` } : {},
        rejectUnauthorized: false,
        agent: false,
      },
      (res) => {
        let body = '';
        res.on('data', (c: Buffer) => {
          body += c.toString('utf8');
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
        res.on('error', reject);
      },
    );
    req.setTimeout(30_000, () => req.destroy(new Error(`GET ${path}: no answer in 30 s`)));
    req.on('error', reject);
    req.end();
  });
}

/** One parsed sample of a Prometheus text exposition. */
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Every sample named exactly `name` (e.g. all `_bucket` lines of a histogram), in order. */
export function samples(text: string, name: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const labels: Record<string, string> = {};
    for (const pair of (m[3] ?? '').matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g))
      labels[pair[1]!] = pair[2]!;
    out.push({ name, labels, value: Number(m[4]) });
  }
  return out;
}

/** GET a probe path (/healthz, /readyz?verbose, ...) of a running controller. */
export async function probe(
  cp: ControllerProcess,
  pathAndQuery: string,
): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${cp.probesPort}${pathAndQuery}`);
  return { status: res.status, body: await res.text() };
}

/** Resolves with the exit of the process, or rejects after `timeoutMs` (the process is left running). */
export async function exitWithin(
  cp: ControllerProcess,
  timeoutMs: number,
): Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      // Stamped at the exit event, not here: the process may have exited before this call.
      cp.exited,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new Error(`process did not exit within ${timeoutMs} ms:\n${cp.summary()}`)),
          timeoutMs,
        );
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Sends SIGTERM and waits (at most `timeoutMs`) for the exit: its code, how long it took from the
 * signal (ms), and the shutdown's `Stopped` log line (undefined when it was not logged).
 */
export async function sigtermAndExit(
  cp: ControllerProcess,
  timeoutMs = 30_000,
): Promise<{ code: number | null; took: number; stopped: Record<string, unknown> | undefined }> {
  const t0 = performance.now();
  cp.child.kill('SIGTERM');
  const exit = await exitWithin(cp, timeoutMs);
  return { code: exit.code, took: exit.at - t0, stopped: cp.logs.find((l) => l.msg === 'Stopped') };
}

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the built CLI (`node dist/main.js <args>`) to completion, capturing its output. The child's
 * environment is exactly `env` (default: PATH and HOME of this process), so KUBECONFIG and
 * KUBERNETES_SERVICE_HOST are only set when the caller passes them. Killed after `timeoutMs`.
 */
export async function runCli(
  args: string[],
  opts: { env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<CliResult> {
  if (!existsSync(MAIN)) throw new Error(`${MAIN} is missing: run \`npm run build\` first`);
  const child = spawn(process.execPath, [MAIN, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: opts.env ?? { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
  });
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (b: Buffer) => {
    stdout += b.toString('utf8');
  });
  child.stderr?.on('data', (b: Buffer) => {
    stderr += b.toString('utf8');
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 30_000);
  const { code, signal } = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>(
    (resolve) => child.once('close', (c, s) => resolve({ code: c, signal: s })),
  );
  clearTimeout(timer);
  return { code, signal, stdout, stderr };
}
