// Types of scripts/image-sbom.mjs for the tests that import it.
import type { Sbom, SbomComponent } from './sbom.mjs';

export interface BaseRecord {
  image: string;
  id: string;
  platform: string;
  debian: string;
  standin?: string;
  node: {
    package: string;
    version: string;
    license?: string;
    integrity: string;
    sha256: string;
    /** SHA-256 of package/bin/node, the binary the image holds at /nodejs/bin/node. */
    binarySha256?: string;
  };
  debs: {
    package: string;
    version: string;
    architecture: string;
    source: string;
    file: string;
    sha256: string;
    filesInImage?: number;
  }[];
}
export interface ImageSbomComponent extends Omit<SbomComponent, 'purl'> {
  purl?: string;
  properties?: { name: string; value: string }[];
}
export interface ImageSbom {
  bomFormat: 'CycloneDX';
  specVersion: string;
  version: number;
  metadata: {
    component: {
      type: string;
      'bom-ref': string;
      name: string;
      version: string;
      properties: { name: string; value: string }[];
    };
  };
  components: ImageSbomComponent[];
  dependencies: { ref: string; dependsOn: string[] }[];
}
export function imageSbom(o: {
  bundle: Sbom;
  image: { name: string; tag: string; id: string; platform: string };
  base: { name: string; id: string };
  record?: BaseRecord;
}): ImageSbom;
