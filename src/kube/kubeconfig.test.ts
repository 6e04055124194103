import { chmodSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { KubeconfigError, resolveKubeconfig } from './kubeconfig.js';

function kubeconfigFile(dir: string, name: string, server: string): string {
  const p = path.join(dir, name);
  writeFileSync(
    p,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: c, cluster: {server: "${server}", insecure-skip-tls-verify: true}}]`,
      'users: [{name: u, user: {token: t}}]',
      'contexts: [{name: x, context: {cluster: c, user: u}}]',
      'current-context: x',
    ].join('\n'),
  );
  return p;
}

describe('kubeconfig resolution order', () => {
  let dir: string;
  let flagFile: string;
  let envFile: string;
  let home: string;
  let saDir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'nlc-kc-'));
    flagFile = kubeconfigFile(dir, 'flag.yaml', 'https://flag.example:6443');
    envFile = kubeconfigFile(dir, 'env.yaml', 'https://env.example:6443');
    home = path.join(dir, 'home');
    mkdirSync(path.join(home, '.kube'), { recursive: true });
    kubeconfigFile(path.join(home, '.kube'), 'config', 'https://home.example:6443');
    saDir = path.join(dir, 'sa');
    mkdirSync(saDir);
    writeFileSync(path.join(saDir, 'token'), 'sa-token');
    writeFileSync(path.join(saDir, 'ca.crt'), '');
  });
  const inCluster = { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443' };

  it('1. --kubeconfig wins over everything', () => {
    const r = resolveKubeconfig({
      flag: flagFile,
      env: { KUBECONFIG: envFile, ...inCluster },
      homeDir: home,
      serviceAccountDir: saDir,
    });
    expect(r.source).toBe('flag');
    expect(r.server).toBe('https://flag.example:6443');
  });

  it('2. then $KUBECONFIG (first file of the list wins for the current context)', () => {
    const r = resolveKubeconfig({
      flag: undefined,
      env: { KUBECONFIG: `${path.join(dir, 'missing.yaml')}${path.delimiter}${envFile}`, ...inCluster },
      homeDir: home,
      serviceAccountDir: saDir,
    });
    expect(r.source).toBe('env');
    expect(r.server).toBe('https://env.example:6443');
    expect(r.paths).toEqual([envFile]);
  });

  it('3. then the in-cluster service account', () => {
    const r = resolveKubeconfig({ flag: undefined, env: inCluster, homeDir: home, serviceAccountDir: saDir });
    expect(r.source).toBe('in-cluster');
    expect(r.server).toBe('https://10.0.0.1:443');
  });

  it('4. then ~/.kube/config', () => {
    const r = resolveKubeconfig({ flag: undefined, env: {}, homeDir: home, serviceAccountDir: saDir });
    expect(r.source).toBe('home');
    expect(r.server).toBe('https://home.example:6443');
  });

  it('never falls back to localhost:8080', () => {
    expect(() =>
      resolveKubeconfig({
        flag: undefined,
        env: {},
        homeDir: path.join(dir, 'nohome'),
        serviceAccountDir: saDir,
      }),
    ).toThrow(KubeconfigError);
    expect(() =>
      resolveKubeconfig({
        flag: undefined,
        env: {},
        homeDir: path.join(dir, 'nohome'),
        serviceAccountDir: saDir,
      }),
    ).toThrow(/no localhost:8080 fallback/);
  });

  it('without a home directory (container user with no passwd entry) it still resolves, and says so when nothing is found', () => {
    const r = resolveKubeconfig({ flag: flagFile, env: {}, homeDir: undefined, serviceAccountDir: saDir });
    expect(r.source).toBe('flag');
    expect(() =>
      resolveKubeconfig({ flag: undefined, env: {}, homeDir: undefined, serviceAccountDir: saDir }),
    ).toThrow(/no home directory.*no localhost:8080 fallback/);
  });

  it('names a missing --kubeconfig file instead of falling through', () => {
    expect(() =>
      resolveKubeconfig({ flag: path.join(dir, 'nope'), env: { KUBECONFIG: envFile }, homeDir: home }),
    ).toThrow(/--kubeconfig .*nope: file does not exist/);
  });
});

describe('our kubeconfig loader (no @kubernetes/client-node at runtime)', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'nlc-kc2-'));
  });
  const write = (name: string, yaml: string) => {
    const p = path.join(dir, name);
    writeFileSync(p, yaml);
    return p;
  };
  const cfg = (user: string, cluster = 'server: https://s.example:6443') =>
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: c, cluster: {${cluster}}}]`,
      `users: [{name: u, user: {${user}}}]`,
      'contexts: [{name: x, context: {cluster: c, user: u}}]',
      'current-context: x',
    ].join('\n');

  it('token, basic auth and client certificates; CA files resolve relative to the kubeconfig', async () => {
    mkdirSync(path.join(dir, 'pki'), { recursive: true });
    writeFileSync(path.join(dir, 'pki', 'ca.crt'), 'CA-PEM');
    const tok = resolveKubeconfig({
      flag: write(
        'tok.yaml',
        cfg('token: abc', 'server: https://s.example:6443, certificate-authority: pki/ca.crt'),
      ),
      env: {},
      homeDir: dir,
    });
    expect(tok.auth).toBe('token');
    const c = await tok.credentials();
    expect((await c.auth()).headers).toEqual({ Authorization: 'Bearer abc' });
    expect(c.tls.ca?.toString()).toBe('CA-PEM');
    expect(c.server.toString()).toBe('https://s.example:6443/');

    const basic = await resolveKubeconfig({
      flag: write('basic.yaml', cfg('username: me, password: pw')),
      env: {},
      homeDir: dir,
    }).credentials();
    expect((await basic.auth()).headers).toEqual({
      Authorization: `Basic ${Buffer.from('me:pw').toString('base64')}`,
    });

    const certs = resolveKubeconfig({
      flag: write(
        'cert.yaml',
        cfg(
          `client-certificate-data: ${Buffer.from('CERT').toString('base64')}, client-key-data: ${Buffer.from('KEY').toString('base64')}`,
          'server: https://s.example:6443, insecure-skip-tls-verify: true, tls-server-name: api.internal',
        ),
      ),
      env: {},
      homeDir: dir,
    });
    expect(certs.auth).toBe('client-certificate');
    const cc = await certs.credentials();
    expect(cc.tls).toMatchObject({ rejectUnauthorized: false, servername: 'api.internal' });
    const ccAuth = await cc.auth();
    expect(ccAuth.cert?.toString()).toBe('CERT');
    expect(ccAuth.key?.toString()).toBe('KEY');
    expect(ccAuth.headers).toEqual({});
  });

  it('re-reads a token file (rotating service-account tokens)', async () => {
    const tokenPath = path.join(dir, 'token');
    writeFileSync(tokenPath, 'one\n');
    let now = 0;
    const { staticAuthSource } = await import('./credentials.js');
    const src = staticAuthSource({ kind: 'token-file', tokenFile: tokenPath }, { now: () => now });
    const h = async () => (await src.auth()).headers;
    expect(await h()).toEqual({ Authorization: 'Bearer one' });
    writeFileSync(tokenPath, 'two\n');
    now = 59_000;
    expect(await h()).toEqual({ Authorization: 'Bearer one' });
    now = 60_000;
    expect(await h()).toEqual({ Authorization: 'Bearer two' });
  });

  it('runs an exec credential plugin and caches its token until shortly before it expires', async () => {
    const counter = path.join(dir, 'exec-count');
    writeFileSync(counter, '');
    const script = write(
      'plugin.sh',
      [
        '#!/bin/sh',
        `echo x >> "${counter}"`,
        'test "$MY_ENV" = "set-by-kubeconfig" || exit 3',
        'echo "$KUBERNETES_EXEC_INFO" | grep -q ExecCredential || exit 4',
        `echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"from-exec","expirationTimestamp":"'$EXPIRY'"}}'`,
      ].join('\n'),
    );
    chmodSync(script, 0o755);
    const expiry = new Date(Date.now() + 3600_000).toISOString();
    const r = resolveKubeconfig({
      flag: write(
        'exec.yaml',
        cfg(
          `exec: {apiVersion: client.authentication.k8s.io/v1, command: ./plugin.sh, env: [{name: MY_ENV, value: set-by-kubeconfig}]}`,
        ),
      ),
      env: {},
      homeDir: dir,
      processEnv: { PATH: process.env.PATH, EXPIRY: expiry },
    });
    expect(r.auth).toBe('exec');
    const c = await r.credentials();
    expect((await c.auth()).headers).toEqual({ Authorization: 'Bearer from-exec' });
    expect((await c.auth()).headers).toEqual({ Authorization: 'Bearer from-exec' });
    expect(readFileSync(counter, 'utf8').trim().split('\n')).toHaveLength(1);

    // A plugin that fails says so.
    const bad = resolveKubeconfig({
      flag: write('exec-bad.yaml', cfg('exec: {apiVersion: v1, command: /bin/false}')),
      env: {},
      homeDir: dir,
    });
    await expect(bad.credentials()).rejects.toThrow(/exec credential plugin \/bin\/false failed/);
  });

  it('merges $KUBECONFIG files like kubectl: for each name the first file wins', () => {
    const a = write(
      'a.yaml',
      ['clusters: [{name: c, cluster: {server: "https://first:6443"}}]', 'current-context: x'].join('\n'),
    );
    const b = write('b.yaml', cfg('token: t', 'server: https://second:6443'));
    const r = resolveKubeconfig({
      flag: undefined,
      env: { KUBECONFIG: `${a}${path.delimiter}${b}` },
      homeDir: dir,
    });
    expect(r.server).toBe('https://first:6443');
    expect(r.auth).toBe('token');
  });

  it('names what is wrong: no current context, unknown context, unreadable CA', () => {
    expect(() =>
      resolveKubeconfig({ flag: write('noctx.yaml', 'clusters: []'), env: {}, homeDir: dir }),
    ).toThrow(/has no current-context/);
    expect(() =>
      resolveKubeconfig({ flag: write('badctx.yaml', 'current-context: nope'), env: {}, homeDir: dir }),
    ).toThrow(/current-context "nope" is not defined/);
    expect(() =>
      resolveKubeconfig({
        flag: write('badca.yaml', cfg('token: t', 'server: https://s:1, certificate-authority: missing.crt')),
        env: {},
        homeDir: dir,
      }),
    ).toThrow(/certificate-authority .*missing\.crt/);
  });

  it('a file that is not YAML: one line naming the file, the problem and where (no source snippet)', () => {
    const file = write('broken.yaml', 'apiVersion: v1\nclusters: [\n');
    let err: unknown;
    try {
      resolveKubeconfig({ flag: file, env: {}, homeDir: dir });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(KubeconfigError);
    const msg = (err as Error).message;
    expect(msg).toMatch(new RegExp(`^kubeconfig ${file}: not valid YAML: .+ at line 3, column 1$`));
    expect(msg).not.toContain('\n');
  });

  it('leaves auth providers (oidc, gcp, azure) to @kubernetes/client-node, loaded only then', () => {
    const r = resolveKubeconfig({
      flag: write('oidc.yaml', cfg('auth-provider: {name: oidc, config: {id-token: x}}')),
      env: {},
      homeDir: dir,
    });
    expect(r.auth).toBe('auth-provider:oidc');
  });

  it('says clearly when an auth provider needs @kubernetes/client-node and the build left it out', async () => {
    let loads = 0;
    const r = resolveKubeconfig({
      flag: write('oidc-missing.yaml', cfg('auth-provider: {name: oidc, config: {id-token: x}}')),
      env: {},
      homeDir: dir,
      loadClientNode: () => {
        loads++;
        return Promise.reject(
          Object.assign(new Error("Cannot find package '@kubernetes/client-node'"), {
            code: 'ERR_MODULE_NOT_FOUND',
          }),
        );
      },
    });
    await expect(r.credentials()).rejects.toThrow(
      /uses auth-provider "oidc", which needs the optional package @kubernetes\/client-node.*exec credential plugin/,
    );
    expect(loads).toBe(1);
    // Any other failure to load is not disguised as a missing package.
    const other = resolveKubeconfig({
      flag: write('oidc-broken.yaml', cfg('auth-provider: {name: oidc, config: {id-token: x}}')),
      env: {},
      homeDir: dir,
      loadClientNode: () => Promise.reject(new SyntaxError('broken module')),
    });
    await expect(other.credentials()).rejects.toThrow(/broken module/);
  });
});
