import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';
import { isIP } from 'node:net';

/**
 * A self-signed serving certificate, made with Node's crypto alone (no openssl binary, no
 * dependency): an ECDSA P-256 CA and a leaf signed by it, both encoded here as DER (RFC 5280).
 * This is what kube-controller-manager does when it has no --tls-cert-file (client-go's
 * GenerateSelfSignedCertKey: a throwaway CA plus a serving certificate, chain served together).
 */

// ---------------------------------------------------------------------------------------------
// DER encoding (X.690), only the types a certificate needs.

function tlv(tag: number, content: Buffer): Buffer {
  const n = content.length;
  let len: Buffer;
  if (n < 0x80) len = Buffer.from([n]);
  else {
    const bytes: number[] = [];
    for (let v = n; v > 0; v = Math.floor(v / 256)) bytes.unshift(v & 0xff);
    len = Buffer.from([0x80 | bytes.length, ...bytes]);
  }
  return Buffer.concat([Buffer.from([tag]), len, content]);
}

const seq = (...items: Buffer[]) => tlv(0x30, Buffer.concat(items));
const set = (...items: Buffer[]) => tlv(0x31, Buffer.concat(items));
/** [n] EXPLICIT (context-specific, constructed). */
const explicit = (n: number, inner: Buffer) => tlv(0xa0 | n, inner);
const octets = (b: Buffer) => tlv(0x04, b);
const bool = (v: boolean) => tlv(0x01, Buffer.from([v ? 0xff : 0x00]));
const utf8 = (s: string) => tlv(0x0c, Buffer.from(s, 'utf8'));

/** INTEGER from unsigned big-endian bytes (minimal, positive). */
function uint(bytes: Buffer): Buffer {
  let i = 0;
  while (i < bytes.length - 1 && bytes[i] === 0) i++;
  let b = bytes.subarray(i);
  if ((b[0] ?? 0) & 0x80) b = Buffer.concat([Buffer.from([0]), b]);
  return tlv(0x02, b);
}

function oid(dotted: string): Buffer {
  const arcs = dotted.split('.').map(Number);
  const out: number[] = [40 * arcs[0]! + arcs[1]!];
  for (const arc of arcs.slice(2)) {
    const chunk: number[] = [arc & 0x7f];
    for (let v = Math.floor(arc / 128); v > 0; v = Math.floor(v / 128)) chunk.unshift(0x80 | (v & 0x7f));
    out.push(...chunk);
  }
  return tlv(0x06, Buffer.from(out));
}

/** BIT STRING of whole bytes (unused bits 0), or a named-bit list with `unused` trailing zero bits. */
function bits(b: Buffer, unused = 0): Buffer {
  return tlv(0x03, Buffer.concat([Buffer.from([unused]), b]));
}

/** UTCTime for 1950-2049, GeneralizedTime otherwise (RFC 5280 4.1.2.5). */
function time(ms: number): Buffer {
  const d = new Date(Math.floor(ms / 1000) * 1000);
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  const rest = `${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}${p(d.getUTCHours())}${p(d.getUTCMinutes())}${p(d.getUTCSeconds())}Z`;
  const y = d.getUTCFullYear();
  if (y >= 1950 && y < 2050) return tlv(0x17, Buffer.from(`${p(y % 100)}${rest}`, 'ascii'));
  return tlv(0x18, Buffer.from(`${p(y, 4)}${rest}`, 'ascii'));
}

const OID = {
  commonName: '2.5.4.3',
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  basicConstraints: '2.5.29.19',
  keyUsage: '2.5.29.15',
  extKeyUsage: '2.5.29.37',
  subjectAltName: '2.5.29.17',
  subjectKeyId: '2.5.29.14',
  authorityKeyId: '2.5.29.35',
  serverAuth: '1.3.6.1.5.5.7.3.1',
} as const;

const name = (cn: string) => seq(set(seq(oid(OID.commonName), utf8(cn))));
const ext = (id: string, critical: boolean, value: Buffer) =>
  critical ? seq(oid(id), bool(true), octets(value)) : seq(oid(id), octets(value));

function ipBytes(ip: string): Buffer {
  if (isIP(ip) === 4) return Buffer.from(ip.split('.').map(Number));
  // IPv6: expand "::" and write 8 groups of 16 bits.
  const [head = '', tail] = ip.split('::');
  const h = head ? head.split(':') : [];
  const t = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const groups = [...h, ...Array(8 - h.length - t.length).fill('0'), ...t];
  const out = Buffer.alloc(16);
  for (const [i, g] of groups.entries()) out.writeUInt16BE(Number.parseInt(g, 16), i * 2);
  return out;
}

function subjectAltName(hosts: readonly string[]): Buffer {
  return seq(
    ...hosts.map((h) => (isIP(h) ? tlv(0x87, ipBytes(h)) : tlv(0x82, Buffer.from(h.toLowerCase(), 'ascii')))),
  );
}

/** Key identifier: SHA-256 of the SubjectPublicKeyInfo, first 160 bits (RFC 7093 style). */
function keyId(spki: Buffer): Buffer {
  return createHash('sha256').update(spki).digest().subarray(0, 20);
}

function serial(): Buffer {
  const b = randomBytes(16);
  b[0] = (b[0]! & 0x7f) | 0x40; // positive, and no leading zero byte
  return b;
}

interface CertSpec {
  subject: string;
  issuer: string;
  publicKey: KeyObject;
  signingKey: KeyObject;
  issuerPublicKey: KeyObject;
  notBefore: number;
  notAfter: number;
  ca: boolean;
  hosts?: readonly string[];
}

function certificate(s: CertSpec): Buffer {
  const spki = s.publicKey.export({ type: 'spki', format: 'der' });
  const alg = seq(oid(OID.ecdsaWithSha256));
  const extensions = [
    ext(OID.basicConstraints, true, s.ca ? seq(bool(true)) : seq()),
    // digitalSignature (bit 0), plus keyCertSign (bit 5) for the CA.
    ext(OID.keyUsage, true, s.ca ? bits(Buffer.from([0x84]), 2) : bits(Buffer.from([0x80]), 7)),
    ext(OID.subjectKeyId, false, octets(keyId(spki))),
  ];
  if (!s.ca) {
    extensions.push(
      ext(OID.extKeyUsage, false, seq(oid(OID.serverAuth))),
      ext(
        OID.authorityKeyId,
        false,
        seq(tlv(0x80, keyId(s.issuerPublicKey.export({ type: 'spki', format: 'der' })))),
      ),
      ext(OID.subjectAltName, false, subjectAltName(s.hosts ?? [])),
    );
  }
  const tbs = seq(
    explicit(0, uint(Buffer.from([2]))), // v3
    uint(serial()),
    alg,
    name(s.issuer),
    seq(time(s.notBefore), time(s.notAfter)),
    name(s.subject),
    spki,
    explicit(3, seq(...extensions)),
  );
  // ECDSA signatures in DER (SEQUENCE { r, s }) are what X.509 carries.
  const signature = sign('sha256', tbs, { key: s.signingKey, dsaEncoding: 'der' });
  return seq(tbs, alg, bits(signature));
}

function pem(label: string, der: Buffer): string {
  const b64 = der.toString('base64').replace(/.{1,64}/g, '$&\n');
  return `-----BEGIN ${label}-----\n${b64}-----END ${label}-----\n`;
}

export interface SelfSignedCert {
  /** The serving certificate followed by the CA that signed it (PEM). */
  certPem: string;
  /** The CA alone (PEM), for a client that wants to verify this server. */
  caPem: string;
  /** The serving key (PKCS#8 PEM). */
  keyPem: string;
}

/**
 * A CA and a serving certificate for `hosts` (DNS names and IP addresses), valid from an hour ago
 * (clock skew) for `validDays`. The CA's key is discarded: nothing else can ever be signed by it.
 */
export function selfSignedCert(opts: {
  hosts: readonly string[];
  commonName: string;
  now: number;
  validDays?: number;
}): SelfSignedCert {
  const notBefore = opts.now - 3600_000;
  const notAfter = opts.now + (opts.validDays ?? 365) * 86_400_000;
  const ca = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const leaf = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const caName = `${opts.commonName}-ca@${Math.floor(opts.now / 1000)}`;
  const caDer = certificate({
    subject: caName,
    issuer: caName,
    publicKey: ca.publicKey,
    signingKey: ca.privateKey,
    issuerPublicKey: ca.publicKey,
    notBefore,
    notAfter,
    ca: true,
  });
  const leafDer = certificate({
    subject: `${opts.commonName}@${Math.floor(opts.now / 1000)}`,
    issuer: caName,
    publicKey: leaf.publicKey,
    signingKey: ca.privateKey,
    issuerPublicKey: ca.publicKey,
    notBefore,
    notAfter,
    ca: false,
    hosts: [...new Set(opts.hosts)],
  });
  const caPem = pem('CERTIFICATE', caDer);
  return {
    certPem: pem('CERTIFICATE', leafDer) + caPem,
    caPem,
    keyPem: leaf.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}
