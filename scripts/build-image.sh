#!/usr/bin/env bash
# Builds the controller's image for linux/amd64, linux/arm64 or both on this machine, with the Docker
# engine's own builder (BuildKit; no buildx plugin, no registry), and writes each image's SBOM and
# archive, and for both platforms one multi-platform OCI image layout.
#
#   scripts/build-image.sh [--platform linux/amd64|linux/arm64|all] [--image NAME] [--source URL] [--out DIR]
#
# Defaults: linux/amd64, node-lifecycle-controller, no source label, dist/image. The version is
# package.json's, the revision `git rev-parse HEAD` ("-dirty" when tracked files differ, as
# scripts/bundle.mjs). For each platform linux/ARCH:
#   - the image NAME:VERSION-ARCH, built with `--platform linux/ARCH` on the runtime base
#     <the Dockerfile's RUNTIME_BASE>-ARCH (distroless's per-platform tag: nonroot-amd64,
#     nonroot-arm64; without a registry, the stand-ins of `test/kind/offline/provision.sh bases-arm64`;
#     NLC_RUNTIME_BASE_AMD64 / NLC_RUNTIME_BASE_ARM64 name others, e.g. pinned by digest).
#     The Dockerfile's build stage runs on this machine's platform, so nothing is emulated here;
#   - checked: the image's os/architecture, /nodejs/bin/node in it is an ELF for ARCH (and, for a
#     stand-in base, the very binary its record names), the base's layers are the image's first;
#   - OUT/NAME-VERSION-linux-ARCH.cdx.json: the image's SBOM (scripts/image-sbom.mjs): the bundle's
#     npm packages as its build stage recorded them (Dockerfile stage bundle-sbom), and the base's
#     Debian packages and Node.js from the stand-in's record (a base without one is named, not listed);
#   - OUT/NAME-VERSION-linux-ARCH.docker.tar: `docker save` of it (`docker load` anywhere).
# With --platform all, also OUT/oci/ and OUT/NAME-VERSION.oci.tar: an OCI image layout whose
# index.json names, as VERSION, an image index of both platforms (scripts/oci-layout.mjs): the
# manifest list, which Docker 20.10 cannot assemble without a registry. skopeo checks it: each
# platform, copied from the layout back into Docker, has the ID of the image built here.
# Behind a TLS-intercepting proxy the CA in NLC_BUILD_CA_FILE or NODE_EXTRA_CA_CERTS goes to the
# build as the npm-ca secret (Dockerfile). Timings and sizes are printed at the end.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# The client: `docker`, unless it is a Docker CLI of 23 or later without the buildx plugin, which
# refuses DOCKER_BUILDKIT=1 builds ("the buildx component is missing"); then the engine's own client
# (Debian's /usr/bin/docker, as test/kind/offline/provision.sh uses). DOCKER names another.
if [ -z "${DOCKER:-}" ]; then
  DOCKER=docker
  major="$(docker version --format '{{.Client.Version}}' 2>/dev/null | cut -d. -f1)"
  if [ "${major:-0}" -ge 23 ] 2>/dev/null && ! docker buildx version >/dev/null 2>&1 && [ -x /usr/bin/docker ]; then
    DOCKER=/usr/bin/docker
  fi
fi
CACHE_ROOT="${NLC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/node-lifecycle-controller}"
RECORDS="$CACHE_ROOT/kind-offline/bases"

log() { echo "[build-image $(date +%T)] $*" >&2; }
die() { log "error: $*"; exit 1; }
usage() { die "usage: scripts/build-image.sh [--platform linux/amd64|linux/arm64|all] [--image NAME] [--source URL] [--out DIR]"; }

platforms=(linux/amd64)
image=node-lifecycle-controller
source="${NLC_IMAGE_SOURCE:-}"
out=dist/image
while [ $# -gt 0 ]; do
  case "$1" in
    --platform=*) set -- --platform "${1#*=}" "${@:2}"; continue ;;
    --image=*) set -- --image "${1#*=}" "${@:2}"; continue ;;
    --source=*) set -- --source "${1#*=}" "${@:2}"; continue ;;
    --out=*) set -- --out "${1#*=}" "${@:2}"; continue ;;
    --platform)
      case "${2:-}" in
        all) platforms=(linux/amd64 linux/arm64) ;;
        linux/amd64 | linux/arm64) platforms=("$2") ;;
        *) die "--platform ${2:-}: linux/amd64, linux/arm64 or all" ;;
      esac
      shift 2 ;;
    --image) image="${2:?}"; shift 2 ;;
    --source) source="${2?}"; shift 2 ;;
    --out) out="${2:?}"; shift 2 ;;
    *) usage ;;
  esac
done

# Files are named by the repository's last component: --image REGISTRY/PATH/node-lifecycle-controller
# writes OUT/node-lifecycle-controller-... (not into OUT/REGISTRY/PATH/).
stem="${image##*/}"
version="$(node -p 'require("./package.json").version')"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
if [ "$revision" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no)" ]; then revision="$revision-dirty"; fi
base_default="$(sed -n 's/^ARG RUNTIME_BASE=//p' Dockerfile)"
[ -n "$base_default" ] || die "Dockerfile: no ARG RUNTIME_BASE=<default>"
secret=()
ca="${NLC_BUILD_CA_FILE:-${NODE_EXTRA_CA_CERTS:-}}"
[ -n "$ca" ] && [ -s "$ca" ] && secret=(--secret "id=npm-ca,src=$ca")
mkdir -p "$out"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

timings=()
timed() { # timed LABEL CMD...: runs CMD, records its wall time
  local label="$1" t0=$SECONDS
  shift
  "$@"
  timings+=("$label $((SECONDS - t0))s")
}
build() { # build PLATFORM RUNTIME_BASE [docker build args...]
  local platform="$1" base="$2"
  shift 2
  DOCKER_BUILDKIT=1 "$DOCKER" build --platform "$platform" "${secret[@]}" \
    --build-arg VERSION="$version" --build-arg REVISION="$revision" --build-arg SOURCE="$source" \
    --build-arg RUNTIME_BASE="$base" "$@" .
}
inspect() { "$DOCKER" image inspect --format "$2" "$1"; }

# The e_machine of an ELF file (bytes 18-19, little-endian): 62 x86-64, 183 AArch64.
elf_machine() { od -An -tu2 -j18 -N2 "$1" | tr -d ' '; }
declare -A ELF=([amd64]=62 [arm64]=183)

artifacts=()
for platform in "${platforms[@]}"; do
  arch="${platform#linux/}"
  tag="$image:$version-$arch"
  base_var="NLC_RUNTIME_BASE_${arch^^}"
  base="${!base_var:-$base_default-$arch}"
  log "$tag ($platform, runtime base $base)"
  timed "build $platform" build "$platform" "$base" -t "$tag"
  [ "$(inspect "$tag" '{{.Os}}/{{.Architecture}}')" = "$platform" ] || die "$tag is $(inspect "$tag" '{{.Os}}/{{.Architecture}}'), not $platform"
  base_layers="$(inspect "$base" '{{json .RootFS.Layers}}')"
  jq -e --argjson base "$base_layers" '.[:($base | length)] == $base' <<<"$(inspect "$tag" '{{json .RootFS.Layers}}')" >/dev/null \
    || die "$tag does not start with the layers of $base"
  cid="$("$DOCKER" create "$tag")"
  "$DOCKER" cp "$cid:/nodejs/bin/node" - | tar -xOf - >"$tmp/node"
  "$DOCKER" rm "$cid" >/dev/null
  [ "$(elf_machine "$tmp/node")" = "${ELF[$arch]}" ] \
    || die "/nodejs/bin/node in $tag is an ELF for machine $(elf_machine "$tmp/node"), not $arch (${ELF[$arch]})"

  # The SBOM: the bundle's, from the build stage, and the base's record when it has one.
  timed "bundle SBOM $platform" build "$platform" "$base" --target bundle-sbom -o "type=local,dest=$tmp/sbom-$arch" -q >/dev/null
  base_id="$(inspect "$base" '{{.Id}}')"
  record="$RECORDS/$(echo "$base" | tr '/:' '__').json"
  record_arg=()
  if [ -f "$record" ]; then
    [ "$(jq -r .id "$record")" = "$base_id" ] || die "$record is of image $(jq -r .id "$record"), $base is $base_id: run test/kind/offline/provision.sh bases-arm64 again"
    [ "$(sha256sum "$tmp/node" | cut -d' ' -f1)" = "$(jq -r .node.binarySha256 "$record")" ] \
      || die "/nodejs/bin/node in $tag is not the Node.js binary $record names"
    record_arg=(--record="$record")
  elif [ -n "$(inspect "$base" '{{index .Config.Labels "org.nlc.offline-standin"}}')" ]; then
    die "$base is a stand-in without a record ($record): run test/kind/offline/provision.sh bases-arm64"
  else
    log "warning: $base has no record: the SBOM names it but does not list its packages (RELEASE.md: scan the image)"
  fi
  sbom="$out/$stem-$version-linux-$arch.cdx.json"
  node scripts/image-sbom.mjs --bundle="$tmp/sbom-$arch/sbom.cdx.json" --image="$tag" --image-id="$(inspect "$tag" '{{.Id}}')" \
    --platform="$platform" --base="$base" --base-id="$base_id" "${record_arg[@]}" --out="$sbom"
  archive="$out/$stem-$version-linux-$arch.docker.tar"
  timed "docker save $platform" "$DOCKER" save -o "$archive" "$tag"
  artifacts+=("$tag" "$sbom" "$archive")
done

if [ ${#platforms[@]} -gt 1 ]; then
  layout="$out/oci"
  archives=()
  for platform in "${platforms[@]}"; do archives+=("$out/$stem-$version-linux-${platform#linux/}.docker.tar"); done
  timed "OCI layout" node scripts/oci-layout.mjs --out="$layout" --ref="$version" "${archives[@]}"
  tar -C "$layout" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$out/$stem-$version.oci.tar" .
  command -v skopeo >/dev/null || die "skopeo is needed to check the OCI layout (Debian's skopeo; provision.sh bases-arm64 installs it)"
  check() {
    local platform arch got
    skopeo inspect --raw "oci:$layout:$version" | jq -e '.manifests | length == '"${#platforms[@]}" >/dev/null
    for platform in "${platforms[@]}"; do
      arch="${platform#linux/}"
      skopeo copy -q --override-os linux --override-arch "$arch" "oci:$layout:$version" "docker-daemon:nlc-oci-check:$arch" >/dev/null
      got="$(inspect "nlc-oci-check:$arch" '{{.Id}}')"
      "$DOCKER" rmi "nlc-oci-check:$arch" >/dev/null
      [ "$got" = "$(inspect "$image:$version-$arch" '{{.Id}}')" ] \
        || die "$platform from the OCI layout is $got, not the image built here"
    done
  }
  timed "OCI layout check (skopeo)" check
  artifacts+=("$layout" "$out/$stem-$version.oci.tar")
fi

log "timings: $(IFS=,; echo "${timings[*]}" | sed 's/,/, /g')"
for a in "${artifacts[@]}"; do
  if [ -e "$a" ]; then
    echo "$a $(du -sb "$a" | cut -f1) bytes"
  else
    echo "$a (image) $(inspect "$a" '{{.Size}}') bytes, $(inspect "$a" '{{.Id}}')"
  fi
done
