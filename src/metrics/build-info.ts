import { Gauge, type Registry } from 'prom-client';

/** The labels of nlc_build_info: what the process is (src/cli/build-info.ts). */
export interface BuildLabels {
  version: string;
  revision: string;
  nodejsVersion: string;
}

/**
 * nlc_build_info = 1, labelled with the build, as Kubernetes components export kubernetes_build_info
 * and Prometheus exporters *_build_info: join on it to see which version each replica runs
 * (`... * on (pod) group_left (version) nlc_build_info`).
 */
export function createBuildInfoMetric(registry: Registry, build: BuildLabels): void {
  const gauge = new Gauge({
    name: 'nlc_build_info',
    help: 'A metric with a constant value of 1, labelled by the version and git revision this controller was built from and the Node.js version running it.',
    labelNames: ['version', 'revision', 'nodejs_version'] as const,
    registers: [registry],
  });
  gauge.set({ version: build.version, revision: build.revision, nodejs_version: build.nodejsVersion }, 1);
}
