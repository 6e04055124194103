// Types of scripts/sbom.mjs for the tests that import it.
export interface LockEntry {
  version?: string;
  integrity?: string;
  license?: string;
}
export interface SbomComponent {
  type: string;
  'bom-ref': string;
  name: string;
  version: string;
  purl: string;
  licenses?: ({ license: { id: string } } | { expression: string })[];
  hashes?: { alg: string; content: string }[];
}
export interface Sbom {
  bomFormat: 'CycloneDX';
  specVersion: string;
  version: number;
  metadata: {
    component: { name: string; version: string; purl: string; properties: { name: string; value: string }[] };
  };
  components: SbomComponent[];
  dependencies: { ref: string; dependsOn: string[] }[];
}
export function packageKeyOf(inputPath: string): string | undefined;
export function cycloneDx(o: {
  name: string;
  version: string;
  revision: string;
  license?: string;
  inputs: string[];
  lock: { packages: Record<string, LockEntry> };
}): Sbom;
