/**
 * scripts/oci-layout.mjs: the multi-platform image as an OCI image layout (an image index of one
 * manifest per platform), made from `docker save` archives where no registry is at hand to hold a
 * manifest list (scripts/build-image.sh; RELEASE.md pushes it with skopeo).
 */
import { createHash } from 'node:crypto';
import { gunzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { ociLayout } from '../../scripts/oci-layout.mjs';

const sha = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;
function image(arch: string, layerTexts: string[], variant?: string) {
  const layers = layerTexts.map((t) => Buffer.from(t));
  const config = Buffer.from(
    JSON.stringify({
      architecture: arch,
      os: 'linux',
      ...(variant ? { variant } : {}),
      rootfs: { type: 'layers', diff_ids: layers.map(sha) },
    }),
  );
  return { config, layers };
}

describe('OCI image layout of several platforms', () => {
  const amd64 = image('amd64', ['base amd64', 'app']);
  const arm64 = image('arm64', ['base arm64', 'app'], 'v8');
  const layout = ociLayout([amd64, arm64], '1.2.3');
  const blob = (d: string) => {
    const b = layout.blobs.get(d);
    if (!b) throw new Error(`no blob ${d}`);
    return b;
  };
  const json = (d: string) => JSON.parse(blob(d).toString('utf8'));

  it('index.json names one image index (the multi-platform image) by the version', () => {
    expect(layout.ociLayout).toEqual({ imageLayoutVersion: '1.0.0' });
    expect(layout.index.schemaVersion).toBe(2);
    expect(layout.index.mediaType).toBe('application/vnd.oci.image.index.v1+json');
    expect(layout.index.manifests).toHaveLength(1);
    const top = layout.index.manifests[0]!;
    expect(top.mediaType).toBe('application/vnd.oci.image.index.v1+json');
    expect(top.annotations).toEqual({ 'org.opencontainers.image.ref.name': '1.2.3' });
    expect(top.size).toBe(blob(top.digest).length);
    expect(sha(blob(top.digest))).toBe(top.digest);
  });

  it('the image index holds one manifest per platform, the platform read from each config', () => {
    const list = json(layout.index.manifests[0]!.digest);
    expect(list.mediaType).toBe('application/vnd.oci.image.index.v1+json');
    expect(list.manifests.map((m: { platform: unknown }) => m.platform)).toEqual([
      { architecture: 'amd64', os: 'linux' },
      { architecture: 'arm64', os: 'linux', variant: 'v8' },
    ]);
    for (const [i, src] of [amd64, arm64].entries()) {
      const d = list.manifests[i];
      expect(d.mediaType).toBe('application/vnd.oci.image.manifest.v1+json');
      expect(d.size).toBe(blob(d.digest).length);
      const m = json(d.digest);
      expect(m.schemaVersion).toBe(2);
      expect(m.mediaType).toBe('application/vnd.oci.image.manifest.v1+json');
      // The config as Docker holds it, byte for byte: its digest is the image ID.
      expect(m.config).toEqual({
        mediaType: 'application/vnd.oci.image.config.v1+json',
        digest: sha(src.config),
        size: src.config.length,
      });
      expect(blob(m.config.digest).equals(src.config)).toBe(true);
      // Layers gzipped; each unpacks to the layer whose digest the config lists.
      expect(m.layers).toHaveLength(src.layers.length);
      for (const [j, l] of m.layers.entries()) {
        expect(l.mediaType).toBe('application/vnd.oci.image.layer.v1.tar+gzip');
        expect(sha(blob(l.digest))).toBe(l.digest);
        expect(l.size).toBe(blob(l.digest).length);
        expect(gunzipSync(blob(l.digest)).equals(src.layers[j]!)).toBe(true);
      }
    }
  });

  it('a layer both platforms share is one blob; every blob is referenced', () => {
    const list = json(layout.index.manifests[0]!.digest);
    const manifests = list.manifests.map((d: { digest: string }) => json(d.digest));
    expect(manifests[0].layers[1].digest).toBe(manifests[1].layers[1].digest);
    const referenced = new Set<string>([layout.index.manifests[0]!.digest]);
    for (const [i, m] of manifests.entries()) {
      referenced.add(list.manifests[i].digest);
      referenced.add(m.config.digest);
      for (const l of m.layers) referenced.add(l.digest);
    }
    expect(new Set(layout.blobs.keys())).toEqual(referenced);
  });

  it('is deterministic: the same images give the same bytes', () => {
    const again = ociLayout([amd64, arm64], '1.2.3');
    expect(again.index).toEqual(layout.index);
    expect([...again.blobs.keys()]).toEqual([...layout.blobs.keys()]);
  });

  it('refuses a layer that is not the one its config names, and two images of one platform', () => {
    const bad = { ...amd64, layers: [amd64.layers[0]!, Buffer.from('tampered')] };
    expect(() => ociLayout([bad], '1')).toThrow(
      /layer 2 of the linux\/amd64 image is sha256:\w+, its config says sha256:\w+/,
    );
    expect(() => ociLayout([amd64, image('amd64', ['other'])], '1')).toThrow(/two images for linux\/amd64/);
    expect(() => ociLayout([], '1')).toThrow(/no image/);
  });
});
