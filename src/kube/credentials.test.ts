import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import type http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { KubeClient, KubeTransportError } from './client.js';
import { CertKeyFiles, ExecCredentials, execStatusOf, expiryMarginMs, TokenFile } from './credentials.js';
import { resolveKubeconfig } from './kubeconfig.js';
import { issue, loopbackServerPki } from './testing/pki.js';
import { type StubServer, startStubServer } from './testing.js';

/**
 * Credentials that change while the controller runs: exec plugins (401 -> run again, expiry,
 * certificates, deadlines), client certificate files, the in-cluster token file. Against a loopback
 * stub server (https with a client-certificate check where certificates matter).
 */

let dir: string;
const pki = loopbackServerPki();
const clientCa = issue({ cn: 'nlc-test-client-ca', ca: true });
const clientPair = (cn: string) => issue({ cn, orgs: ['system:masters'], usage: ['client'] }, clientCa);

beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'nlc-creds-'));
});

const stubs: StubServer[] = [];
const clients: KubeClient[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const s of stubs.splice(0)) await s.close();
});

interface Seen {
  auth: string | undefined;
  cn: string | undefined;
  url: string | undefined;
  at: number;
}

/** A stub API server; `allow` decides per request (by token and client-certificate CN). */
async function stub(
  allow: (auth: string | undefined, cn: string | undefined, req: http.IncomingMessage) => boolean,
  opts: {
    tls?: boolean;
    clientCert?: boolean;
    onRequest?: (req: http.IncomingMessage, res: http.ServerResponse) => boolean;
  } = {},
): Promise<{ server: StubServer; seen: Seen[] }> {
  const seen: Seen[] = [];
  const server = await startStubServer(
    (req, res) => {
      const peer = opts.clientCert ? (req.socket as TLSSocket).getPeerCertificate() : undefined;
      const cn =
        peer && (req.socket as TLSSocket).authorized ? (peer.subject?.CN as string | undefined) : undefined;
      seen.push({ auth: req.headers.authorization, cn, url: req.url, at: Date.now() });
      if (!allow(req.headers.authorization, cn, req)) {
        res.writeHead(401, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ kind: 'Status', reason: 'Unauthorized', code: 401 }));
        return;
      }
      if (opts.onRequest?.(req, res)) return;
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ ok: true }));
    },
    opts.tls || opts.clientCert
      ? {
          cert: pki.server.cert,
          key: pki.server.key,
          ...(opts.clientCert ? { clientCa: clientCa.cert } : {}),
        }
      : undefined,
  );
  stubs.push(server);
  return { server, seen };
}

const PLUGIN = `
import { appendFileSync, readFileSync } from 'node:fs';
const dir = process.argv[2];
appendFileSync(dir + '/runs', 'x\\n');
const s = JSON.parse(readFileSync(dir + '/state.json', 'utf8'));
const status = {};
const exp = s.expiresInMs === undefined ? undefined : Date.now() + s.expiresInMs;
if (s.token) status.token = s.token === 'embed-expiry' ? 'tok-' + exp : s.token;
if (s.certFile) {
  status.clientCertificateData = readFileSync(s.certFile, 'utf8');
  status.clientKeyData = readFileSync(s.keyFile, 'utf8');
}
if (s.certData !== undefined) {
  status.clientCertificateData = s.certData;
  status.clientKeyData = s.keyData;
}
if (exp !== undefined) status.expirationTimestamp = new Date(exp).toISOString();
if (s.expirationTimestamp !== undefined) status.expirationTimestamp = s.expirationTimestamp;
setTimeout(() => process.stdout.write(JSON.stringify({
  apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status })), s.sleepMs ?? 0);
`;

interface PluginState {
  token?: string;
  certFile?: string;
  keyFile?: string;
  expiresInMs?: number;
  sleepMs?: number;
  /** Printed as is (not read from files): a pair that may not load. */
  certData?: string;
  keyData?: string;
  /** Printed as is, instead of one computed from expiresInMs. */
  expirationTimestamp?: string;
}

/** A plugin directory: state.json drives what the next run prints; `runs` counts runs. */
function execPlugin(name: string, state: PluginState) {
  const d = path.join(dir, name);
  mkdirSync(d, { recursive: true });
  writeFileSync(path.join(d, 'plugin.mjs'), PLUGIN);
  const set = (s: PluginState) => writeFileSync(path.join(d, 'state.json'), JSON.stringify(s));
  set(state);
  return {
    dir: d,
    set,
    runs: () =>
      existsSync(path.join(d, 'runs'))
        ? readFileSync(path.join(d, 'runs'), 'utf8').trim().split('\n').length
        : 0,
    user: `exec: {apiVersion: client.authentication.k8s.io/v1, command: "${process.execPath}", args: ["${path.join(d, 'plugin.mjs')}", "${d}"]}`,
  };
}

function kubeconfig(name: string, server: StubServer, user: string): string {
  const cluster = server.url.startsWith('https')
    ? `server: "${server.url}", certificate-authority-data: ${Buffer.from(pki.ca.cert).toString('base64')}`
    : `server: "${server.url}", insecure-skip-tls-verify: true`;
  const p = path.join(dir, `${name}.kubeconfig`);
  writeFileSync(
    p,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: c, cluster: {${cluster}}}]`,
      `users: [{name: u, user: {${user}}}]`,
      'contexts: [{name: x, context: {cluster: c, user: u}}]',
      'current-context: x',
    ].join('\n'),
  );
  return p;
}

async function clientFor(file: string, opts: { defaultTimeoutMs?: number } = {}): Promise<KubeClient> {
  const r = resolveKubeconfig({ flag: file, env: {}, homeDir: dir, processEnv: { PATH: process.env.PATH } });
  const client = await KubeClient.fromCredentials(await r.credentials(), opts);
  clients.push(client);
  return client;
}

const get = (c: KubeClient, p = '/api/v1/nodes', timeoutMs?: number) =>
  c.request({ method: 'GET', path: p, ...(timeoutMs ? { timeoutMs } : {}) });

describe('execStatusOf: what a plugin printed', () => {
  const cred = (status: unknown) => JSON.stringify({ kind: 'ExecCredential', status });
  it('takes a token, or a certificate with its key, and says which plugin printed something else', () => {
    expect(execStatusOf(cred({ token: 't' }), 'p')).toEqual({ token: 't' });
    expect(execStatusOf(cred({ clientCertificateData: 'c', clientKeyData: 'k' }), 'p')).toMatchObject({
      clientCertificateData: 'c',
    });
    expect(() => execStatusOf('not json', './p')).toThrow(
      'exec credential plugin ./p did not print an ExecCredential as JSON',
    );
    expect(() => execStatusOf(cred(undefined), 'p')).toThrow(
      'exec credential plugin p returned no token or client certificate',
    );
    expect(() => execStatusOf(cred({ clientKeyData: 'k', token: 't' }), 'p')).toThrow(
      'exec credential plugin p returned a client certificate without its key, or a key without its certificate',
    );
    expect(() => execStatusOf(cred({ clientCertificateData: 'c' }), 'p')).toThrow(/without its key/);
  });
});

describe('exec credential plugin', () => {
  it('runs the plugin again on a 401 and retries the request once (token without expiry: cached until then)', async () => {
    const valid = new Set(['Bearer one']);
    const { server, seen } = await stub((auth) => valid.has(auth ?? ''));
    const plugin = execPlugin('rerun', { token: 'one' });
    const client = await clientFor(kubeconfig('rerun', server, plugin.user));
    for (let i = 0; i < 3; i++) await get(client);
    expect(plugin.runs()).toBe(1); // no expirationTimestamp: cached
    // The server stops accepting the token; the plugin now issues another.
    valid.clear();
    valid.add('Bearer two');
    plugin.set({ token: 'two' });
    const before = seen.length;
    await expect(get(client)).resolves.toEqual({ ok: true });
    expect(seen.slice(before).map((s) => s.auth)).toEqual(['Bearer one', 'Bearer two']);
    expect(plugin.runs()).toBe(2);
    await get(client);
    expect(plugin.runs()).toBe(2);
  });

  it('concurrent 401s for the same credential share one plugin run', async () => {
    const valid = new Set(['Bearer a']);
    const { server } = await stub((auth) => valid.has(auth ?? ''));
    const plugin = execPlugin('shared', { token: 'a' });
    const client = await clientFor(kubeconfig('shared', server, plugin.user));
    await get(client);
    valid.clear();
    valid.add('Bearer b');
    plugin.set({ token: 'b', sleepMs: 200 });
    const results = await Promise.all(Array.from({ length: 6 }, () => get(client)));
    expect(results).toHaveLength(6);
    expect(plugin.runs()).toBe(2);
  });

  it('a 401 that new credentials cannot fix is returned after one plugin run, not retried forever', async () => {
    const { server, seen } = await stub(() => false, {});
    const plugin = execPlugin('dead', { token: 'dead' });
    const client = await clientFor(kubeconfig('dead', server, plugin.user));
    const err = await get(client).catch((e: unknown) => e);
    expect((err as { status?: number }).status).toBe(401);
    // One request; the plugin ran again and returned the same token, so no retry was sent.
    expect(seen).toHaveLength(1);
    expect(plugin.runs()).toBe(2);
  });

  it('a plugin that fails when run again after a 401 leaves the 401 as the answer; the next request runs it again', async () => {
    const { server, seen } = await stub((auth) => auth === 'Bearer good');
    const plugin = execPlugin('fails-later', { token: 'stale' });
    const client = await clientFor(kubeconfig('fails-later', server, plugin.user));
    writeFileSync(path.join(plugin.dir, 'state.json'), 'not json');
    const err = await get(client).catch((e: unknown) => e);
    expect((err as { status?: number }).status).toBe(401);
    expect(plugin.runs()).toBe(2);
    plugin.set({ token: 'good' });
    await expect(get(client)).resolves.toEqual({ ok: true });
    expect(plugin.runs()).toBe(3);
    expect(seen.map((s) => s.auth)).toEqual(['Bearer stale', 'Bearer good']);
  });

  it('a certificate and key that do not load, or an unparseable expirationTimestamp: an error naming the plugin and the problem, nothing sent', async () => {
    const { server, seen } = await stub(() => true, { tls: true });
    const badPair = execPlugin('bad-pair', { certData: 'not a certificate', keyData: 'not a key' });
    const err = await clientFor(kubeconfig('bad-pair', server, badPair.user))
      .then((c) => get(c))
      .catch((e: unknown) => e);
    expect(String(err)).toMatch(
      /exec credential plugin \S+ returned a client certificate and key that do not load: /,
    );
    const badExpiry = execPlugin('bad-expiry', { token: 't', expirationTimestamp: 'next tuesday' });
    const err2 = await clientFor(kubeconfig('bad-expiry', server, badExpiry.user))
      .then((c) => get(c))
      .catch((e: unknown) => e);
    expect(String(err2)).toMatch(
      /exec credential plugin \S+ returned an unparseable expirationTimestamp "next tuesday"/,
    );
    expect(seen).toEqual([]);
  });

  it('a plugin whose new certificate pair does not load after a 401: the 401 is the answer; a good pair later works', async () => {
    const refuse = { now: false };
    const { server, seen } = await stub((_auth, cn) => cn === 'pair-a' && !refuse.now, { clientCert: true });
    const a = clientPair('pair-a');
    writeFileSync(path.join(dir, 'pair-a.crt'), a.cert);
    writeFileSync(path.join(dir, 'pair-a.key'), a.key);
    const good = { certFile: path.join(dir, 'pair-a.crt'), keyFile: path.join(dir, 'pair-a.key') };
    const plugin = execPlugin('pair-then-junk', good);
    const client = await clientFor(kubeconfig('pair-then-junk', server, plugin.user));
    await expect(get(client)).resolves.toEqual({ ok: true });
    expect(plugin.runs()).toBe(1);
    // The server refuses the pair; the plugin, run again on the 401, prints a pair that does not load.
    refuse.now = true;
    plugin.set({ certData: 'junk', keyData: 'junk' });
    const err = await get(client).catch((e: unknown) => e);
    expect((err as { status?: number }).status).toBe(401);
    expect(plugin.runs()).toBe(2);
    // The plugin prints the good pair again and the server takes it: the next request works.
    refuse.now = false;
    plugin.set(good);
    await expect(get(client)).resolves.toEqual({ ok: true });
    expect(seen.map((x) => x.cn)).toEqual(['pair-a', 'pair-a', 'pair-a']);
  });

  it('never sends a token after its expirationTimestamp', async () => {
    // Tokens carry their expiry; the server refuses (and records) any that arrives expired.
    const late: number[] = [];
    const { server } = await stub((auth) => {
      const exp = Number(/^Bearer tok-(\d+)$/.exec(auth ?? '')?.[1]);
      if (!(Date.now() < exp)) {
        late.push(Date.now() - exp);
        return false;
      }
      return true;
    });
    const plugin = execPlugin('expiry', { token: 'embed-expiry', expiresInMs: 4000 });
    const client = await clientFor(kubeconfig('expiry', server, plugin.user));
    const started = performance.now();
    while (performance.now() - started < 6500) {
      await get(client);
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(late).toEqual([]);
    expect(plugin.runs()).toBeGreaterThanOrEqual(2);
  });

  it('the plugin run counts against the request deadline; concurrent requests share the run', async () => {
    const { server } = await stub(() => true);
    const plugin = execPlugin('slow', { token: 'fast', expiresInMs: 1500 });
    const client = await clientFor(kubeconfig('slow', server, plugin.user));
    expect(plugin.runs()).toBe(1);
    // The token is due for renewal; the next run takes 3 s.
    await new Promise((r) => setTimeout(r, 1500));
    plugin.set({ token: 'slow', sleepMs: 3000 });
    const t0 = performance.now();
    const errs = await Promise.all(
      Array.from({ length: 3 }, () => get(client, '/api/v1/nodes', 300).catch((e: unknown) => e)),
    );
    const elapsed = performance.now() - t0;
    for (const e of errs) {
      expect(e).toBeInstanceOf(KubeTransportError);
      expect((e as KubeTransportError).code).toBe('TIMEOUT');
    }
    expect(elapsed).toBeLessThan(2500);
    expect(plugin.runs()).toBe(2);
    // The run goes on; its result serves the next request without another run.
    await expect(get(client, '/api/v1/nodes', 10_000)).resolves.toEqual({ ok: true });
    expect(plugin.runs()).toBe(2);
  });

  it('applies the client certificate of every rotation: new connections use the new pair, an open stream keeps its own', async () => {
    const allowed = new Set(['user-1']);
    let streamRes: http.ServerResponse | undefined;
    const { server, seen } = await stub((_auth, cn) => allowed.has(cn ?? ''), {
      clientCert: true,
      onRequest: (req, res) => {
        if (!req.url?.includes('watch=true')) return false;
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"type":"ADDED"}\n');
        streamRes = res;
        return true;
      },
    });
    const write = (cn: string) => {
      const pair = clientPair(cn);
      writeFileSync(path.join(dir, 'exec-cert.pem'), pair.cert);
      writeFileSync(path.join(dir, 'exec-key.pem'), pair.key);
    };
    write('user-1');
    const plugin = execPlugin('certs', {
      certFile: path.join(dir, 'exec-cert.pem'),
      keyFile: path.join(dir, 'exec-key.pem'),
    });
    const client = await clientFor(kubeconfig('certs', server, plugin.user));
    await get(client);
    const watch = await client.stream({ path: '/api/v1/nodes', query: { watch: true } });
    expect(seen.at(-1)?.cn).toBe('user-1');

    // Rotation: the server now accepts only user-2; the plugin returns user-2's pair.
    write('user-2');
    allowed.clear();
    allowed.add('user-2');
    const before = seen.length;
    await expect(get(client)).resolves.toEqual({ ok: true });
    expect(seen.slice(before).map((s) => s.cn)).toEqual(['user-1', 'user-2']);
    expect(plugin.runs()).toBe(2);
    // The open stream (user-1's connection) still delivers.
    const chunk = new Promise<string>((resolve) => {
      let text = '';
      watch.on('data', (c: Buffer) => {
        text += c.toString();
        if (text.includes('MODIFIED')) resolve(text);
      });
    });
    streamRes!.write('{"type":"MODIFIED"}\n');
    expect(await chunk).toContain('MODIFIED');
    watch.destroy();
    // And the next rotation too.
    write('user-3');
    allowed.clear();
    allowed.add('user-3');
    await expect(get(client)).resolves.toEqual({ ok: true });
    expect(seen.at(-1)?.cn).toBe('user-3');
    expect(plugin.runs()).toBe(3);
  });
});

describe('client certificate and key files', () => {
  const writePair = (cn: string, certFile: string, keyFile: string) => {
    const pair = clientPair(cn);
    writeFileSync(`${certFile}.tmp`, pair.cert);
    writeFileSync(`${keyFile}.tmp`, pair.key);
    renameSync(`${certFile}.tmp`, certFile);
    renameSync(`${keyFile}.tmp`, keyFile);
    return pair;
  };

  it('a rotated pair is used after a 401 at once, and by new connections', async () => {
    const certFile = path.join(dir, 'files-cert.pem');
    const keyFile = path.join(dir, 'files-key.pem');
    writePair('files-1', certFile, keyFile);
    const allowed = new Set(['files-1']);
    const { server, seen } = await stub((_auth, cn) => allowed.has(cn ?? ''), { clientCert: true });
    const client = await clientFor(
      kubeconfig('files', server, `client-certificate: "${certFile}", client-key: "${keyFile}"`),
    );
    await get(client);
    expect(seen.at(-1)?.cn).toBe('files-1');
    writePair('files-2', certFile, keyFile);
    allowed.clear();
    allowed.add('files-2');
    await expect(get(client)).resolves.toEqual({ ok: true });
    expect(seen.at(-1)?.cn).toBe('files-2');
  });

  it('is re-checked every 5 s, reloaded on change, and a half-written pair keeps the previous one', () => {
    const certFile = path.join(dir, 'ckf-cert.pem');
    const keyFile = path.join(dir, 'ckf-key.pem');
    const one = writePair('ckf-1', certFile, keyFile);
    let now = 0;
    const files = new CertKeyFiles(certFile, keyFile, { now: () => now });
    const first = files.current();
    expect(first.cert.toString()).toBe(one.cert);
    const two = clientPair('ckf-2');
    writeFileSync(certFile, two.cert); // the key is still the old one: not a pair
    now = 5_000;
    expect(files.current()).toBe(first);
    writeFileSync(keyFile, two.key);
    now = 9_999;
    expect(files.current()).toBe(first); // not checked again yet
    now = 10_000;
    expect(files.current().cert.toString()).toBe(two.cert);
    expect(files.current().key.toString()).toBe(two.key);
    // Unchanged files: the same Buffers (connections stay reusable).
    const cur = files.current();
    now = 20_000;
    expect(files.current()).toBe(cur);
  });
});

describe('in-cluster token file', () => {
  it('is re-read at once after a 401 (not a minute later)', async () => {
    const sa = path.join(dir, 'sa');
    mkdirSync(sa, { recursive: true });
    writeFileSync(path.join(sa, 'token'), 'sa-one\n');
    writeFileSync(path.join(sa, 'ca.crt'), pki.ca.cert);
    const valid = new Set(['Bearer sa-one']);
    const { server, seen } = await stub((auth) => valid.has(auth ?? ''), { tls: true });
    const r = resolveKubeconfig({
      flag: undefined,
      env: { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(server.port) },
      homeDir: undefined,
      serviceAccountDir: sa,
    });
    expect(r.source).toBe('in-cluster');
    const client = await KubeClient.fromCredentials(await r.credentials());
    clients.push(client);
    await get(client);
    // The kubelet rotates the projected token; the API server stops accepting the old one.
    writeFileSync(path.join(sa, 'token'), 'sa-two\n');
    valid.clear();
    valid.add('Bearer sa-two');
    const before = seen.length;
    await expect(get(client)).resolves.toEqual({ ok: true });
    expect(seen.slice(before).map((s) => s.auth)).toEqual(['Bearer sa-one', 'Bearer sa-two']);
  });

  it('rate-limits forced re-reads and keeps the last token when a re-read fails', async () => {
    let now = 0;
    let content: string | Error = 'one';
    const reads: number[] = [];
    const file = new TokenFile('/token', {
      now: () => now,
      read: () => {
        reads.push(now);
        if (content instanceof Error) throw content;
        return content;
      },
    });
    const a = await file.auth();
    expect(a.headers.Authorization).toBe('Bearer one');
    // A 401: read again at once (same token: nothing to retry with).
    expect(await file.unauthorized(a)).toBe(false);
    expect(reads).toEqual([0, 0]);
    // Another 401 within a second: no read.
    now = 999;
    content = 'two';
    expect(await file.unauthorized(a)).toBe(false);
    expect(reads).toEqual([0, 0]);
    now = 1_000;
    expect(await file.unauthorized(a)).toBe(true);
    const b = await file.auth();
    expect(b.headers.Authorization).toBe('Bearer two');
    // A request that left with the old token learns a newer one exists without another read.
    const n = reads.length;
    expect(await file.unauthorized(a)).toBe(true);
    expect(reads.length).toBe(n);
    content = new Error('ENOENT');
    now = 61_000;
    expect((await file.auth()).headers.Authorization).toBe('Bearer two');
  });
});

describe('exec expiry margin', () => {
  it('is 10 s for long-lived tokens and a tenth of a short lifetime', () => {
    expect(expiryMarginMs(3_600_000)).toBe(10_000);
    expect(expiryMarginMs(60_000)).toBe(6_000);
    expect(expiryMarginMs(4_000)).toBe(400);
    expect(expiryMarginMs(-5)).toBe(0);
  });

  it('refreshes on the monotonic clock from the moment the credential arrived', async () => {
    const plugin = execPlugin('mono', { token: 'm', expiresInMs: 100_000 });
    let mono = 1_000_000;
    const creds = new ExecCredentials(
      {
        apiVersion: 'client.authentication.k8s.io/v1',
        command: process.execPath,
        args: [path.join(plugin.dir, 'plugin.mjs'), plugin.dir],
      },
      { PATH: process.env.PATH },
      { now: () => mono },
    );
    await creds.auth();
    expect(creds.runs).toBe(1);
    mono += 89_000; // 100 s lifetime, 10 s margin: still good
    await creds.auth();
    expect(creds.runs).toBe(1);
    mono += 1_500;
    await creds.auth();
    expect(creds.runs).toBe(2);
  });
});
