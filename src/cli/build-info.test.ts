import { describe, expect, it } from 'vitest';
import { buildInfo, parseBuildStamp, resolveBuildInfo, UNKNOWN_REVISION, versionLine } from './build-info.js';

describe('build info', () => {
  it('a stamped build (the bundle) reports its stamp', () => {
    const b = resolveBuildInfo({ version: '0.3.0', revision: 'f00d' }, () => '9.9.9', 'v24.0.0');
    expect(b).toEqual({ version: '0.3.0', revision: 'f00d', nodejsVersion: 'v24.0.0' });
  });

  it('an unstamped build (tsc output) reports package.json and an unknown revision', () => {
    expect(resolveBuildInfo(undefined, () => '0.2.0-dev', 'v24.0.0')).toEqual({
      version: '0.2.0-dev',
      revision: UNKNOWN_REVISION,
      nodejsVersion: 'v24.0.0',
    });
    expect(resolveBuildInfo(undefined, () => undefined, 'v24.0.0').version).toBe('unknown');
  });

  it('this process, unbundled, reads the repository package.json', async () => {
    const pkg = (await import('../../package.json', { with: { type: 'json' } })).default as {
      version: string;
    };
    expect(buildInfo()).toEqual({
      version: pkg.version,
      revision: 'unknown',
      nodejsVersion: process.version,
    });
  });

  it('a stamp file that is not one (scripts/build-stamp.mjs writes {version, revision}) is ignored', () => {
    expect(parseBuildStamp('{"version":"0.2.0","revision":"abc"}\n')).toEqual({
      version: '0.2.0',
      revision: 'abc',
    });
    for (const bad of [
      '',
      'null',
      '{"version":"0.2.0"}',
      '{"version":1,"revision":"a"}',
      '{"version":"","revision":"a"}',
    ]) {
      expect(parseBuildStamp(bad), bad).toBeUndefined();
    }
  });

  it('--version prints one line', () => {
    expect(versionLine({ version: '0.2.0', revision: 'abc', nodejsVersion: 'v24.1.0' })).toBe(
      'node-lifecycle-controller 0.2.0 (revision abc, Node.js v24.1.0)',
    );
  });
});
