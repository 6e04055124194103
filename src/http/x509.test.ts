import { createPrivateKey, X509Certificate } from 'node:crypto';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import { afterEach, describe, expect, it } from 'vitest';
import { selfSignedCert } from './x509.js';

const NOW = Date.UTC(2026, 10, 30, 12, 0, 0);

function certsOf(pem: string): X509Certificate[] {
  return (pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n/g) ?? []).map(
    (p) => new X509Certificate(p),
  );
}

let server: https.Server | undefined;
afterEach(async () => {
  server?.closeAllConnections();
  await new Promise((r) => (server ? server.close(r) : r(undefined)));
  server = undefined;
});

/** A TLS client's verdict on the server at `host` with `ca` as the only trusted root. */
async function handshake(
  port: number,
  host: string,
  ca: string,
): Promise<{ ok: true; peer: tls.PeerCertificate } | { ok: false; error: string }> {
  return await new Promise((resolve) => {
    const sock = tls.connect({ host: '127.0.0.1', port, ca, servername: isIp(host) ? undefined : host });
    // Node checks the server identity against `host` (servername for names, the IP otherwise).
    sock.once('secureConnect', () => {
      const err = tls.checkServerIdentity(host, sock.getPeerCertificate());
      const peer = sock.getPeerCertificate();
      sock.destroy();
      resolve(err ? { ok: false, error: err.message } : { ok: true, peer });
    });
    sock.once('error', (e) => resolve({ ok: false, error: e.message }));
  });
}
const isIp = (h: string) => /^[\d.]+$|:/.test(h);

describe('selfSignedCert', () => {
  it('is a CA plus a serving certificate signed by it, parsed and verified by Node (OpenSSL)', () => {
    const c = selfSignedCert({
      hosts: ['localhost', 'nlc-0', '127.0.0.1', '::1'],
      commonName: 'nlc',
      now: NOW,
    });
    const [leaf, ca] = certsOf(c.certPem);
    expect(certsOf(c.caPem)[0]!.fingerprint256).toBe(ca!.fingerprint256);
    expect(ca!.ca).toBe(true);
    expect(leaf!.ca).toBe(false);
    expect(ca!.subject).toBe(ca!.issuer);
    expect(leaf!.issuer).toBe(ca!.subject);
    expect(leaf!.subject).toMatch(/^CN=nlc@\d+$/);
    expect(leaf!.verify(ca!.publicKey)).toBe(true);
    expect(ca!.verify(ca!.publicKey)).toBe(true);
    expect(leaf!.checkIssued(ca!)).toBe(true);
    // A different CA did not sign it.
    const other = certsOf(selfSignedCert({ hosts: ['x'], commonName: 'o', now: NOW }).caPem)[0]!;
    expect(leaf!.verify(other.publicKey)).toBe(false);
    expect(leaf!.subjectAltName).toBe(
      'DNS:localhost, DNS:nlc-0, IP Address:127.0.0.1, IP Address:0:0:0:0:0:0:0:1',
    );
    expect(leaf!.checkHost('nlc-0')).toBe('nlc-0');
    expect(leaf!.checkHost('elsewhere')).toBeUndefined();
    expect(leaf!.checkIP('127.0.0.1')).toBe('127.0.0.1');
    expect(leaf!.checkIP('::1')).toBe('::1');
    expect(leaf!.checkIP('10.0.0.1')).toBeUndefined();
    expect(leaf!.keyUsage).toEqual(['1.3.6.1.5.5.7.3.1']); // extended key usage: serverAuth
    expect(leaf!.checkPrivateKey(createPrivateKey(c.keyPem))).toBe(true);
    expect(
      leaf!.checkPrivateKey(
        createPrivateKey(selfSignedCert({ hosts: ['x'], commonName: 'o', now: NOW }).keyPem),
      ),
    ).toBe(false);
    // Valid from an hour before `now` for a year (UTCTime).
    expect(new Date(leaf!.validFrom).getTime()).toBe(NOW - 3600_000);
    expect(new Date(leaf!.validTo).getTime()).toBe(NOW + 365 * 86_400_000);
    expect(leaf!.serialNumber).not.toBe(ca!.serialNumber);
  });

  it('writes dates from 2050 on as GeneralizedTime', () => {
    const c = selfSignedCert({ hosts: ['localhost'], commonName: 'nlc', now: NOW, validDays: 365 * 40 });
    const [leaf] = certsOf(c.certPem);
    expect(new Date(leaf!.validTo).getUTCFullYear()).toBe(2066);
    expect(new Date(leaf!.validTo).getTime()).toBe(NOW + 365 * 40 * 86_400_000);
  });

  it('a TLS client trusting only the CA connects by name and by IP; other names and other CAs fail', async () => {
    const c = selfSignedCert({ hosts: ['localhost', '127.0.0.1'], commonName: 'nlc', now: Date.now() });
    server = https.createServer({ cert: c.certPem, key: c.keyPem }, (_req, res) => res.end('ok'));
    await new Promise<void>((r) => server!.listen(0, '127.0.0.1', r));
    const { port } = server.address() as AddressInfo;

    const byIp = await handshake(port, '127.0.0.1', c.caPem);
    expect(byIp.ok, JSON.stringify(byIp)).toBe(true);
    const byName = await handshake(port, 'localhost', c.caPem);
    expect(byName.ok, JSON.stringify(byName)).toBe(true);

    const wrongName = await handshake(port, 'nlc.example', c.caPem);
    expect(wrongName.ok).toBe(false);
    const otherCa = selfSignedCert({ hosts: ['localhost'], commonName: 'nlc', now: Date.now() }).caPem;
    const wrongCa = await handshake(port, 'localhost', otherCa);
    expect(wrongCa.ok).toBe(false);
    expect(wrongCa.ok === false && wrongCa.error).toMatch(/certificate/i);
  });
});
