#!/usr/bin/env node
// A multi-platform image as an OCI image layout (image-spec v1.0 "image-layout"), made from the
// `docker save` archive of each platform's image: what a registry would hold as a manifest list, for
// a machine without a registry (Docker 20.10's `docker manifest create` only combines manifests
// already pushed to one, and its image store holds one platform per tag). index.json names one image
// index by the version; that index lists one image manifest per platform (read from each image's
// config); configs are Docker's own bytes (so each manifest's config digest is the image ID), layers
// are gzipped and checked against the config's diff_ids. Deterministic: the same images give the same
// bytes. `skopeo copy --all oci:DIR:VERSION docker://REGISTRY/NAME:VERSION` pushes all of it
// (RELEASE.md).
//
//   node scripts/oci-layout.mjs --out=DIR --ref=VERSION IMAGE.docker.tar...
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { runAsScript } from './run-as-script.mjs';

const INDEX = 'application/vnd.oci.image.index.v1+json';
const MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const CONFIG = 'application/vnd.oci.image.config.v1+json';
const LAYER = 'application/vnd.oci.image.layer.v1.tar+gzip';

const digestOf = (b) => `sha256:${createHash('sha256').update(b).digest('hex')}`;
const jsonBytes = (o) => Buffer.from(JSON.stringify(o));

/**
 * @param {{ config: Buffer, layers: Buffer[] }[]} images the config and uncompressed layers of each
 * @param {string} ref the name index.json gives the image index (the version)
 * @returns {{ ociLayout: object, index: any, blobs: Map<string, Buffer> }}
 */
export function ociLayout(images, ref) {
  if (images.length === 0) throw new Error('oci-layout: no image');
  const blobs = new Map();
  const put = (bytes) => {
    const digest = digestOf(bytes);
    blobs.set(digest, bytes);
    return { digest, size: bytes.length };
  };
  const seen = new Set();
  const manifests = images.map(({ config, layers }) => {
    const c = JSON.parse(config.toString('utf8'));
    const platform = { architecture: c.architecture, os: c.os, ...(c.variant ? { variant: c.variant } : {}) };
    const name = [platform.os, platform.architecture, platform.variant].filter(Boolean).join('/');
    if (seen.has(name)) throw new Error(`oci-layout: two images for ${name}`);
    seen.add(name);
    const diffIds = c.rootfs?.diff_ids ?? [];
    if (diffIds.length !== layers.length)
      throw new Error(
        `oci-layout: the ${name} image has ${layers.length} layers, its config lists ${diffIds.length}`,
      );
    const layerDescs = layers.map((tar, i) => {
      const diffId = digestOf(tar);
      if (diffId !== diffIds[i])
        throw new Error(
          `oci-layout: layer ${i + 1} of the ${name} image is ${diffId}, its config says ${diffIds[i]}`,
        );
      return { mediaType: LAYER, ...put(gzipSync(tar)) };
    });
    const manifest = {
      schemaVersion: 2,
      mediaType: MANIFEST,
      config: { mediaType: CONFIG, ...put(config) },
      layers: layerDescs,
    };
    return { mediaType: MANIFEST, ...put(jsonBytes(manifest)), platform };
  });
  const list = put(jsonBytes({ schemaVersion: 2, mediaType: INDEX, manifests }));
  return {
    ociLayout: { imageLayoutVersion: '1.0.0' },
    index: {
      schemaVersion: 2,
      mediaType: INDEX,
      manifests: [{ mediaType: INDEX, ...list, annotations: { 'org.opencontainers.image.ref.name': ref } }],
    },
    blobs,
  };
}

/** The config and layers of the one image in a `docker save` archive. */
function readDockerArchive(file) {
  const dir = mkdtempSync(path.join(tmpdir(), 'nlc-oci-'));
  try {
    execFileSync('tar', ['-xf', file, '-C', dir]);
    const entries = JSON.parse(readFileSync(path.join(dir, 'manifest.json'), 'utf8'));
    if (entries.length !== 1) throw new Error(`oci-layout: ${file} holds ${entries.length} images, not one`);
    const [{ Config, Layers }] = entries;
    return {
      config: readFileSync(path.join(dir, Config)),
      layers: Layers.map((l) => readFileSync(path.join(dir, l))),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export function writeLayout(out, layout) {
  rmSync(out, { recursive: true, force: true });
  mkdirSync(path.join(out, 'blobs', 'sha256'), { recursive: true });
  writeFileSync(path.join(out, 'oci-layout'), JSON.stringify(layout.ociLayout));
  writeFileSync(path.join(out, 'index.json'), JSON.stringify(layout.index));
  for (const [digest, bytes] of layout.blobs)
    writeFileSync(path.join(out, 'blobs', 'sha256', digest.slice('sha256:'.length)), bytes);
}

function main(argv) {
  const flags = Object.fromEntries(
    argv.filter((a) => a.startsWith('--')).map((a) => a.slice(2).split(/=(.*)/s, 2)),
  );
  const archives = argv.filter((a) => !a.startsWith('--'));
  if (!flags.out || !flags.ref || archives.length === 0)
    throw new Error('usage: node scripts/oci-layout.mjs --out=DIR --ref=VERSION IMAGE.docker.tar...');
  const layout = ociLayout(archives.map(readDockerArchive), flags.ref);
  writeLayout(flags.out, layout);
  const list = JSON.parse(layout.blobs.get(layout.index.manifests[0].digest).toString('utf8'));
  const platforms = list.manifests.map((m) => `${m.platform.os}/${m.platform.architecture}`).join(', ');
  console.log(
    `${flags.out}: OCI image layout, ${flags.ref} = image index ${layout.index.manifests[0].digest} (${platforms})`,
  );
}

runAsScript(import.meta.url, main);
