/**
 * Structured logging in the klog/logr style: a constant message plus key/value pairs, one JSON
 * object a line (or a text line for humans). Verbosity follows klog: info logs at V(0) always show;
 * `debug(level, ...)` shows when the configured verbosity is >= level.
 */
export type LogFormat = 'json' | 'text';
export type KV = Record<string, unknown>;

export interface Logger {
  error(msg: string, kv?: KV): void;
  warn(msg: string, kv?: KV): void;
  info(msg: string, kv?: KV): void;
  /** Logged when verbosity >= level (klog's V(level).Info). */
  debug(level: number, msg: string, kv?: KV): void;
  enabled(level: number): boolean;
  /** A logger adding these pairs to every line (e.g. {component: 'watch', resource: 'leases'}). */
  with(kv: KV): Logger;
}

export interface LoggerOptions {
  format?: LogFormat;
  verbosity?: number;
  /** Line sink; defaults to stderr like klog. */
  write?: (line: string) => void;
  now?: () => number;
}

function errorValue(v: unknown): unknown {
  if (v instanceof Error) return v.message;
  return v;
}

function textValue(v: unknown): string {
  if (typeof v === 'string') return /[\s"=]/.test(v) || v === '' ? JSON.stringify(v) : v;
  if (v instanceof Error) return JSON.stringify(v.message);
  return JSON.stringify(v) ?? 'undefined';
}

class StructuredLogger implements Logger {
  constructor(
    private readonly opts: Required<LoggerOptions>,
    private readonly base: KV,
  ) {}

  enabled(level: number): boolean {
    return this.opts.verbosity >= level;
  }

  with(kv: KV): Logger {
    return new StructuredLogger(this.opts, { ...this.base, ...kv });
  }

  private emit(level: string, v: number, msg: string, kv?: KV): void {
    const ts = new Date(this.opts.now()).toISOString();
    const all: KV = { ...this.base, ...kv };
    let line: string;
    if (this.opts.format === 'json') {
      const obj: KV = { ts, level, msg };
      if (v > 0) obj.v = v;
      for (const [k, val] of Object.entries(all)) if (val !== undefined) obj[k] = errorValue(val);
      line = JSON.stringify(obj);
    } else {
      const pairs = Object.entries(all)
        .filter(([, val]) => val !== undefined)
        .map(([k, val]) => `${k}=${textValue(val)}`)
        .join(' ');
      line = `${ts} ${level.toUpperCase().padEnd(5)} ${msg}${pairs ? ` ${pairs}` : ''}`;
    }
    try {
      this.opts.write(line);
    } catch {
      /* logging must never take the controller down */
    }
  }

  error(msg: string, kv?: KV): void {
    this.emit('error', 0, msg, kv);
  }
  warn(msg: string, kv?: KV): void {
    this.emit('warn', 0, msg, kv);
  }
  info(msg: string, kv?: KV): void {
    this.emit('info', 0, msg, kv);
  }
  debug(level: number, msg: string, kv?: KV): void {
    if (this.opts.verbosity >= level) this.emit('debug', level, msg, kv);
  }
}

export function createLogger(opts: LoggerOptions = {}): Logger {
  return new StructuredLogger(
    {
      format: opts.format ?? 'json',
      verbosity: opts.verbosity ?? 0,
      write: opts.write ?? ((l) => process.stderr.write(`${l}\n`)),
      now: opts.now ?? Date.now,
    },
    {},
  );
}

/** A logger that keeps lines in memory, for tests. */
export function memoryLogger(verbosity = 10): Logger & { lines: KV[] } {
  const lines: KV[] = [];
  const logger = createLogger({ format: 'json', verbosity, write: (l) => lines.push(JSON.parse(l) as KV) });
  return Object.assign(logger, { lines });
}

export const silentLogger: Logger = createLogger({ write: () => undefined });
