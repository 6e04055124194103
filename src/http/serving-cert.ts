import { X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import tls from 'node:tls';
import { Counter, Gauge, type Registry } from 'prom-client';
import { type Clock, timerDelay } from '../clock/clock.js';
import type { Logger } from '../log/logger.js';
import { COMPONENT_NAME } from '../names/index.js';
import type { Subscription } from '../rx/index.js';
import { selfSignedCert } from './x509.js';

/**
 * The metrics server's certificate: from --tls-cert-file/--tls-private-key-file (re-read when
 * either file changes, as kube-controller-manager's dynamic serving certificate does, so that
 * cert-manager or a rotated Secret needs no restart), or self-signed at start.
 */

export interface CertKey {
  cert: string;
  key: string;
}

export interface ServingCertMetrics {
  reloads: Counter<'result'>;
  notAfter: Gauge;
}

export function createServingCertMetrics(registry: Registry): ServingCertMetrics {
  return {
    reloads: new Counter({
      name: 'nlc_metrics_tls_reloads_total',
      help: 'Changes of --tls-cert-file/--tls-private-key-file seen, by result (success: now served; error: unreadable or not a matching pair, the previous certificate stays).',
      labelNames: ['result'] as const,
      registers: [registry],
    }),
    notAfter: new Gauge({
      name: 'nlc_metrics_tls_cert_not_after_timestamp_seconds',
      help: 'Expiry (NotAfter, Unix seconds) of the certificate the metrics server presents.',
      registers: [registry],
    }),
  };
}

export class CertificateError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CertificateError';
  }
}

/** Checks that `cert` and `key` are PEM and belong together; returns the leaf's NotAfter (ms). */
export function validateCertKey(pair: CertKey): number {
  try {
    tls.createSecureContext({ cert: pair.cert, key: pair.key });
  } catch (err) {
    throw new CertificateError((err as Error).message);
  }
  try {
    return new Date(new X509Certificate(pair.cert).validTo).getTime();
  } catch (err) {
    throw new CertificateError((err as Error).message);
  }
}

export class ServingCertificate {
  private pair: CertKey;
  private readonly listeners = new Set<(pair: CertKey) => void>();
  private poll: Subscription | undefined;
  private lastRaw: string;
  private closed = false;

  private constructor(
    pair: CertKey,
    readonly source: 'self-signed' | 'files',
    private readonly metrics: ServingCertMetrics | undefined,
  ) {
    this.pair = pair;
    this.lastRaw = pair.cert + pair.key;
    metrics?.notAfter.set(Math.floor(validateCertKey(pair) / 1000));
  }

  /** A new CA and serving certificate for `hosts`, kept in memory only. */
  static selfSigned(opts: {
    hosts: readonly string[];
    now: number;
    metrics?: ServingCertMetrics;
  }): ServingCertificate {
    const c = selfSignedCert({ hosts: opts.hosts, commonName: COMPONENT_NAME, now: opts.now });
    return new ServingCertificate({ cert: c.certPem, key: c.keyPem }, 'self-signed', opts.metrics);
  }

  /**
   * Reads the pair (throws CertificateError naming the files when unusable) and re-reads it every
   * `pollMs`; a changed, valid pair replaces the served one.
   */
  static async fromFiles(opts: {
    certFile: string;
    keyFile: string;
    clock: Clock;
    logger: Logger;
    metrics?: ServingCertMetrics;
    pollMs?: number;
  }): Promise<ServingCertificate> {
    const read = async () => ({
      cert: await readFile(opts.certFile, 'utf8'),
      key: await readFile(opts.keyFile, 'utf8'),
    });
    let pair: CertKey;
    try {
      pair = await read();
      validateCertKey(pair);
    } catch (err) {
      throw new CertificateError(
        `--tls-cert-file=${opts.certFile} / --tls-private-key-file=${opts.keyFile}: ${(err as Error).message}`,
      );
    }
    const sc = new ServingCertificate(pair, 'files', opts.metrics);
    const log = opts.logger.with({ certFile: opts.certFile, keyFile: opts.keyFile });
    const pollMs = opts.pollMs ?? 10_000;
    let busy = false;
    const tick = async () => {
      if (busy || sc.closed) return;
      busy = true;
      try {
        let next: CertKey;
        try {
          next = await read();
        } catch (err) {
          if (sc.lastRaw !== '') {
            opts.metrics?.reloads.inc({ result: 'error' });
            log.error('Cannot read the serving certificate; keeping the one in use', { err });
          }
          sc.lastRaw = '';
          return;
        }
        const raw = next.cert + next.key;
        if (raw === sc.lastRaw) return;
        sc.lastRaw = raw;
        let notAfter: number;
        try {
          notAfter = validateCertKey(next);
        } catch (err) {
          // A half-written rotation (new cert, old key) is caught here and retried at the next tick.
          opts.metrics?.reloads.inc({ result: 'error' });
          log.error('Serving certificate changed but is not usable; keeping the one in use', { err });
          return;
        }
        sc.pair = next;
        opts.metrics?.reloads.inc({ result: 'success' });
        opts.metrics?.notAfter.set(Math.floor(notAfter / 1000));
        log.info('Reloaded the serving certificate', { notAfter: new Date(notAfter).toISOString() });
        for (const l of sc.listeners) l(next);
      } finally {
        busy = false;
      }
    };
    sc.poll = opts.clock.scheduler.schedule(function repeat(this: {
      schedule(state?: unknown, delay?: number): void;
    }) {
      void tick();
      this.schedule(undefined, timerDelay(pollMs));
    }, timerDelay(pollMs));
    return sc;
  }

  current(): CertKey {
    return this.pair;
  }

  /** Called with each new pair (files source only). */
  onChange(listener: (pair: CertKey) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  close(): void {
    this.closed = true;
    this.poll?.unsubscribe();
    this.listeners.clear();
  }
}
