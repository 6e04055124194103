#!/usr/bin/env node
// The SBOM of one built image (CycloneDX 1.5), written by scripts/build-image.sh for each platform:
// the bundle's npm packages (the SBOM scripts/sbom.mjs wrote in the image's own build stage) plus what
// the runtime base is made of. For the stand-in bases of test/kind/offline/provision.sh that is its
// record of each (`provision.sh bases-arm64`): the Debian packages unpacked into it, with versions
// and the .deb's SHA-256, and the npm registry's Node.js package for that platform with its hashes.
// A base without a record (a real upstream image) is listed as one component by name and image ID,
// saying that its packages are not listed: an image scanner lists them (RELEASE.md).
// Deterministic (no timestamp, no serial number).
//
//   node scripts/image-sbom.mjs --bundle=F --image=NAME:TAG --image-id=ID --platform=OS/ARCH \
//     --base=NAME:TAG --base-id=ID [--record=F] --out=F
import { readFileSync, writeFileSync } from 'node:fs';
import { runAsScript } from './run-as-script.mjs';
import { cycloneDxDocument } from './sbom.mjs';

const DEBIAN_RELEASES = { bullseye: '11', bookworm: '12', trixie: '13' };

/** pkg:deb/debian/NAME@VERSION?arch=..&distro=debian-N, an epoch as the epoch qualifier. */
function debPurl(deb, codename) {
  const m = /^(\d+):(.*)$/.exec(deb.version);
  const [epoch, version] = m ? [m[1], m[2]] : [undefined, deb.version];
  const distro = `debian-${DEBIAN_RELEASES[codename] ?? codename}`;
  const q = [
    `arch=${encodeURIComponent(deb.architecture)}`,
    `distro=${distro}`,
    ...(epoch ? [`epoch=${epoch}`] : []),
  ];
  return `pkg:deb/debian/${encodeURIComponent(deb.package)}@${encodeURIComponent(version)}?${q.join('&')}`;
}

function debComponent(deb, codename) {
  const purl = debPurl(deb, codename);
  return {
    type: 'library',
    'bom-ref': purl,
    name: deb.package,
    version: deb.version,
    purl,
    hashes: [{ alg: 'SHA-256', content: deb.sha256 }],
    properties: [
      ...(deb.source ? [{ name: 'deb:source', value: deb.source }] : []),
      { name: 'deb:file', value: deb.file },
      // How many of the package's files the image holds unchanged (provision.sh checks them).
      ...(deb.filesInImage === undefined
        ? []
        : [{ name: 'nlc:files-in-image', value: String(deb.filesInImage) }]),
    ],
  };
}

function nodeComponent(node) {
  const purl = `pkg:npm/${node.package}@${node.version}`;
  const sha512 = /^sha512-(.+)$/.exec(node.integrity)?.[1];
  if (!sha512) throw new Error(`image-sbom: ${node.package}@${node.version} has no sha512 integrity`);
  return {
    type: 'application',
    'bom-ref': purl,
    name: node.package,
    version: node.version,
    purl,
    ...(node.license ? { licenses: [{ license: { id: node.license } }] } : {}),
    hashes: [
      { alg: 'SHA-512', content: Buffer.from(sha512, 'base64').toString('hex') },
      { alg: 'SHA-256', content: node.sha256 },
    ],
    properties: [{ name: 'nlc:path', value: '/nodejs/bin/node' }],
  };
}

/**
 * @param {{ bundle: any, image: { name: string, tag: string, id: string, platform: string },
 *   base: { name: string, id: string }, record?: any }} o
 */
export function imageSbom(o) {
  const { bundle, image, base, record } = o;
  if (record) {
    if (record.id !== base.id)
      throw new Error(
        `image-sbom: the record of ${record.image} is of image ${record.id}, the image was built on ${base.id}`,
      );
    if (record.platform !== image.platform)
      throw new Error(
        `image-sbom: the record of ${record.image} is for ${record.platform}, the image is ${image.platform}`,
      );
  }
  const app = bundle.metadata.component;
  const appComponent = {
    type: 'application',
    'bom-ref': app['bom-ref'],
    name: app.name,
    version: app.version,
    purl: app.purl,
    ...(app.licenses ? { licenses: app.licenses } : {}),
    properties: app.properties,
  };
  let baseComponents;
  if (record) {
    const debs = [...record.debs].sort((a, b) => a.package.localeCompare(b.package));
    baseComponents = [nodeComponent(record.node), ...debs.map((d) => debComponent(d, record.debian))];
  } else {
    const at = base.name.lastIndexOf(':');
    const [name, version] =
      at > base.name.lastIndexOf('/') ? [base.name.slice(0, at), base.name.slice(at + 1)] : [base.name, ''];
    baseComponents = [
      {
        type: 'container',
        'bom-ref': `oci:${base.id}`,
        name,
        version,
        properties: [
          { name: 'oci:image-id', value: base.id },
          { name: 'nlc:contents', value: 'not listed: scan the image (RELEASE.md)' },
        ],
      },
    ];
  }
  const imageRef = `oci:${image.id}`;
  return cycloneDxDocument({
    tool: 'scripts/image-sbom.mjs',
    component: {
      type: 'container',
      'bom-ref': imageRef,
      name: image.name,
      version: image.tag,
      properties: [
        { name: 'oci:platform', value: image.platform },
        { name: 'oci:image-id', value: image.id },
        { name: 'oci:base-image', value: base.name },
        { name: 'oci:base-image-id', value: base.id },
        ...(record?.standin ? [{ name: 'nlc:base-standin', value: record.standin }] : []),
      ],
    },
    components: [appComponent, ...bundle.components, ...baseComponents],
    dependencies: [
      { ref: imageRef, dependsOn: [appComponent['bom-ref'], ...baseComponents.map((c) => c['bom-ref'])] },
      ...bundle.dependencies,
    ],
  });
}

function main(argv) {
  const args = Object.fromEntries(
    argv.map((a) => {
      const m = /^--([a-z-]+)=(.*)$/s.exec(a);
      if (!m) throw new Error(`image-sbom: unexpected argument ${a}`);
      return [m[1], m[2]];
    }),
  );
  for (const k of ['bundle', 'image', 'image-id', 'platform', 'base', 'base-id', 'out'])
    if (!args[k]) throw new Error(`image-sbom: --${k} is required`);
  const json = (f) => JSON.parse(readFileSync(f, 'utf8'));
  const at = args.image.lastIndexOf(':');
  const bom = imageSbom({
    bundle: json(args.bundle),
    image: {
      name: args.image.slice(0, at),
      tag: args.image.slice(at + 1),
      id: args['image-id'],
      platform: args.platform,
    },
    base: { name: args.base, id: args['base-id'] },
    record: args.record ? json(args.record) : undefined,
  });
  writeFileSync(args.out, `${JSON.stringify(bom, null, 2)}\n`);
  const debs = bom.components.filter((c) => c.purl?.startsWith('pkg:deb/')).length;
  const npm = bom.components.length - 1 - (args.record ? debs + 1 : 1);
  console.log(
    `${args.out}: the application, ${npm} npm packages, ${args.record ? `Node.js and ${debs} Debian packages` : 'the base (its packages not listed)'}`,
  );
}

runAsScript(import.meta.url, main);
