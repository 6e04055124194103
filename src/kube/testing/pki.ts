import { generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import net from 'node:net';

/**
 * Test helper (not built into dist): a throw-away PKI made at test time with node:crypto, so tests
 * need no openssl and the repository holds no keys. ECDSA P-256 keys, X.509 v3 certificates
 * encoded by hand in DER (only what TLS peers check: names, validity, basic constraints, key
 * usage, extended key usage, subject alternative names).
 */

function derLength(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}
const tlv = (tag: number, content: Buffer) =>
  Buffer.concat([Buffer.from([tag]), derLength(content.length), content]);
const seq = (...parts: Buffer[]) => tlv(0x30, Buffer.concat(parts));
const set = (...parts: Buffer[]) => tlv(0x31, Buffer.concat(parts));
const explicit = (n: number, content: Buffer) => tlv(0xa0 + n, content);
const utf8 = (s: string) => tlv(0x0c, Buffer.from(s, 'utf8'));
const octets = (b: Buffer) => tlv(0x04, b);
const bits = (b: Buffer, unused = 0) => tlv(0x03, Buffer.concat([Buffer.from([unused]), b]));
const bool = (v: boolean) => tlv(0x01, Buffer.from([v ? 0xff : 0]));

function integer(b: Buffer): Buffer {
  let i = 0;
  while (i < b.length - 1 && b[i] === 0) i++;
  const v = b.subarray(i);
  return tlv(0x02, v[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), v]) : v);
}

function oid(dotted: string): Buffer {
  const arcs = dotted.split('.').map(Number);
  const out = [40 * arcs[0]! + arcs[1]!];
  for (const arc of arcs.slice(2)) {
    const chunk: number[] = [arc & 0x7f];
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) chunk.unshift(0x80 | (v & 0x7f));
    out.push(...chunk);
  }
  return tlv(0x06, Buffer.from(out));
}

function time(d: Date): Buffer {
  const iso = d.toISOString().replace(/[-:T]/g, '').slice(0, 14);
  return d.getUTCFullYear() < 2050
    ? tlv(0x17, Buffer.from(`${iso.slice(2)}Z`))
    : tlv(0x18, Buffer.from(`${iso}Z`));
}

function name(cn: string, orgs: string[] = []): Buffer {
  return seq(...orgs.map((o) => set(seq(oid('2.5.4.10'), utf8(o)))), set(seq(oid('2.5.4.3'), utf8(cn))));
}

const ext = (id: string, critical: boolean, value: Buffer) =>
  seq(oid(id), ...(critical ? [bool(true)] : []), octets(value));

const ECDSA_SHA256 = seq(oid('1.2.840.10045.4.3.2'));

export interface Issued {
  /** PEM certificate. */
  cert: string;
  /** PEM PKCS#8 private key. */
  key: string;
  keyObject: KeyObject;
  subject: Buffer;
}

export interface CertSpec {
  cn: string;
  /** Organisations: Kubernetes groups for a client certificate. */
  orgs?: string[];
  ca?: boolean;
  /** serverAuth and/or clientAuth. */
  usage?: ('server' | 'client')[];
  /** DNS names and IPs for a server certificate. */
  sans?: string[];
  notBefore?: Date;
  notAfter?: Date;
}

function pem(label: string, der: Buffer): string {
  const b64 = der
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .replace(/\n$/, '');
  return `-----BEGIN ${label}-----\n${b64}\n-----END ${label}-----\n`;
}

/** Issues a certificate, self-signed when `issuer` is absent. */
/** The 16 bytes of an IPv6 literal (no embedded IPv4 form). */
function ipv6Bytes(ip: string): Buffer {
  const [head, tail] = ip.includes('::') ? ip.split('::') : [ip, undefined];
  const groups = (part: string | undefined) => (part ? part.split(':') : []);
  const h = groups(head);
  const t = groups(tail);
  const all = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  return Buffer.from(all.flatMap((g) => [Number.parseInt(g, 16) >> 8, Number.parseInt(g, 16) & 0xff]));
}

export function issue(spec: CertSpec, issuer?: Issued): Issued {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const subject = name(spec.cn, spec.orgs);
  const now = Date.now();
  const exts: Buffer[] = [
    ext('2.5.29.19', true, spec.ca ? seq(bool(true)) : seq()),
    // CA: keyCertSign + cRLSign + digitalSignature; leaf: digitalSignature.
    ext('2.5.29.15', true, spec.ca ? bits(Buffer.from([0x86]), 1) : bits(Buffer.from([0x80]), 7)),
  ];
  if (spec.usage?.length) {
    const ids = spec.usage.map((u) => oid(u === 'server' ? '1.3.6.1.5.5.7.3.1' : '1.3.6.1.5.5.7.3.2'));
    exts.push(ext('2.5.29.37', false, seq(...ids)));
  }
  if (spec.sans?.length) {
    const names = spec.sans.map((s) => {
      if (net.isIPv4(s)) return tlv(0x87, Buffer.from(s.split('.').map(Number)));
      if (net.isIPv6(s)) return tlv(0x87, ipv6Bytes(s));
      return tlv(0x82, Buffer.from(s, 'ascii'));
    });
    exts.push(ext('2.5.29.17', false, seq(...names)));
  }
  const tbs = seq(
    explicit(0, integer(Buffer.from([2]))),
    integer(Buffer.concat([Buffer.from([0x01]), randomBytes(15)])),
    ECDSA_SHA256,
    issuer ? issuer.subject : subject,
    seq(time(spec.notBefore ?? new Date(now - 60_000)), time(spec.notAfter ?? new Date(now + 24 * 3600_000))),
    subject,
    publicKey.export({ type: 'spki', format: 'der' }),
    explicit(3, seq(...exts)),
  );
  const signature = sign('sha256', tbs, { key: issuer?.keyObject ?? privateKey, dsaEncoding: 'der' });
  const der = seq(tbs, ECDSA_SHA256, bits(signature));
  return {
    cert: pem('CERTIFICATE', der),
    key: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
    keyObject: privateKey,
    subject,
  };
}

/** A CA plus a loopback server certificate signed by it (for localhost, 127.0.0.1 and `names`). */
export function loopbackServerPki(names: string[] = []): { ca: Issued; server: Issued } {
  const ca = issue({ cn: 'nlc-test-ca', ca: true });
  const server = issue(
    { cn: 'localhost', usage: ['server'], sans: ['localhost', '127.0.0.1', ...names] },
    ca,
  );
  return { ca, server };
}
