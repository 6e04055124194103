import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
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

  it('names a missing --kubeconfig file instead of falling through', () => {
    expect(() =>
      resolveKubeconfig({ flag: path.join(dir, 'nope'), env: { KUBECONFIG: envFile }, homeDir: home }),
    ).toThrow(/--kubeconfig .*nope: file does not exist/);
  });
});
