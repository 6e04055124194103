import { describe, expect, it } from 'vitest';
import { createBuildInfoMetric } from './build-info.js';
import { createRegistry } from './registry.js';

describe('nlc_build_info', () => {
  it('is 1, labelled with the version, the revision and the Node.js version', async () => {
    const registry = createRegistry({ defaultMetrics: false });
    createBuildInfoMetric(registry, {
      version: '1.2.3-rc.1',
      revision: 'abc123-dirty',
      nodejsVersion: 'v24.1.0',
    });
    const text = await registry.metrics();
    expect(text).toContain('# TYPE nlc_build_info gauge');
    expect(text).toContain(
      'nlc_build_info{version="1.2.3-rc.1",revision="abc123-dirty",nodejs_version="v24.1.0"} 1\n',
    );
  });
});
