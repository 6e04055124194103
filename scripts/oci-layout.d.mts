// Types of scripts/oci-layout.mjs for the tests that import it.
export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  annotations?: Record<string, string>;
}
export interface OciLayout {
  ociLayout: { imageLayoutVersion: string };
  index: { schemaVersion: number; mediaType: string; manifests: Descriptor[] };
  blobs: Map<string, Buffer>;
}
export function ociLayout(images: { config: Buffer; layers: Buffer[] }[], ref: string): OciLayout;
export function writeLayout(out: string, layout: OciLayout): void;
