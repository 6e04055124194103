#!/usr/bin/env bash
# The release command: builds the image, pushes it and the Helm chart (OCI) to a registry, names the
# image only by the digest the registry holds from then on, signs both with cosign and a key, attests
# the image's SBOMs, and writes the files a release ships, checksummed and signed. It then verifies
# what it published, as a user would before installing. Rehearsable against any registry (an OCI
# registry on loopback: RELEASE.md, "Rehearse it").
#
#   scripts/release.sh --registry HOST[:PORT][/PATH] [--platform linux/amd64|all] [--key FILE]
#                      [--out DIR] [--plain-http] [--source URL]
#
# --registry    where the image and the chart go: REGISTRY/node-lifecycle-controller:VERSION and
#               oci://REGISTRY/charts/node-lifecycle-controller (VERSION: package.json's; a -dev
#               version is a rehearsal and the output says so)
# --platform    linux/amd64 (default; `docker push`) or all (linux/amd64 and linux/arm64: the
#               multi-platform OCI layout scripts/build-image.sh writes, pushed with `skopeo copy --all`)
# --key         the cosign private key (COSIGN_PASSWORD in the environment). Without it an ephemeral
#               key pair is generated in OUT (cosign.key, empty password): for a rehearsal only
# --out         the release files (default dist/release/VERSION; must be empty or absent):
#               install.yaml (scripts/render-install.mjs, the image by digest), the chart's .tgz, one
#               CycloneDX SBOM per platform, cosign.pub, SHA256SUMS and its cosign bundle
#               SHA256SUMS.sigstore.json, release.json
# --plain-http  the registry speaks http (helm --plain-http, cosign --allow-http-registry, skopeo
#               --dest-tls-verify=false; the Docker engine must list it in insecure-registries, as it
#               does 127.0.0.0/8)
# --source      the repository's URL, for the image's org.opencontainers.image.source label
#
# Signing is keyed and offline: no transparency log, no Fulcio, no TUF (a signing config without
# services and a trusted root without authorities); verify with --insecure-ignore-tlog. The
# workflow .github/workflows/release.yml signs keyless instead. Tools: docker, jq, curl, Node.js 24,
# and from the per-user cache helm (scripts/build-helm.sh), cosign (scripts/build-cosign.sh), kubectl
# (scripts/build-control-plane.sh --with-kubectl); for --platform all, skopeo
# (test/kind/offline/provision.sh bases-arm64 installs it). No network but the registry's (the image
# build's own npm ci stage aside, when Docker's build cache does not have it).
# Exit 2 on bad arguments, 1 on any other failure. The summary (with timings) goes to standard
# output, the progress log to standard error.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CACHE_ROOT="${NLC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/node-lifecycle-controller}"
NAME=node-lifecycle-controller
USAGE="usage: scripts/release.sh --registry HOST[:PORT][/PATH] [--platform linux/amd64|all] [--key FILE] [--out DIR] [--plain-http] [--source URL]"

log() { echo "[release $(date +%T)] $*" >&2; }
die() { log "error: $*"; exit 1; }
bad() { echo "release: $*" >&2; echo "$USAGE" >&2; exit 2; }

registry="" platform=linux/amd64 key="" out="" plain_http=0 source=""
# need_value FLAG WHAT [VALUE]: VALUE is there and is not the next flag.
need_value() { [ $# -ge 3 ] && [ -n "$3" ] && [ "${3#--}" = "$3" ] || bad "$1 needs a value: $2"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --registry=* | --platform=* | --key=* | --out=* | --source=*) set -- "${1%%=*}" "${1#*=}" "${@:2}"; continue ;;
    --registry) need_value "$1" "HOST[:PORT][/PATH]" "${@:2:1}"; registry="$2"; shift 2 ;;
    --platform)
      need_value "$1" "linux/amd64 or all" "${@:2:1}"
      case "$2" in
        linux/amd64 | all) platform="$2" ;;
        *) bad "--platform $2: accepted values are linux/amd64 and all" ;;
      esac
      shift 2 ;;
    --key) need_value "$1" "a cosign private key file" "${@:2:1}"; key="$2"; shift 2 ;;
    --out) need_value "$1" "a directory, empty or absent" "${@:2:1}"; out="$2"; shift 2 ;;
    --source) need_value "$1" "the repository's URL" "${@:2:1}"; source="$2"; shift 2 ;;
    --plain-http) plain_http=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) bad "unknown flag $1 (accepted: --registry, --platform, --key, --out, --plain-http, --source)" ;;
  esac
done
[ -n "$registry" ] || bad "--registry is required (HOST[:PORT][/PATH], e.g. ghcr.io/OWNER or 127.0.0.1:5000/nlc)"
# A reference's registry and path (lower case, no scheme, no tag): what `docker push` takes.
[[ "$registry" =~ ^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$ ]] \
  || bad "--registry $registry: accepted values are HOST[:PORT][/PATH] in lower case, without a scheme, tag or trailing slash (e.g. ghcr.io/owner, 127.0.0.1:5000/nlc)"
if [ -n "$key" ] && [ ! -f "$key" ]; then bad "--key $key: no such file (a cosign private key: cosign generate-key-pair)"; fi

# --------------------------------------------------------------------------------------- tools
have() { command -v "$1" >/dev/null 2>&1; }
# cached_tool NAME SCRIPT VAR [SCRIPT-ARGS]: NAME as SCRIPT builds it into the cache, by the version
# SCRIPT defaults to (VAR in the environment names another, as for SCRIPT). Never builds it here.
cached_tool() {
  local name="$1" script="$2" var="$3" hint="${4:-}" v
  v="${!var:-$(sed -n 's/^'"$var"'="${'"$var"':-\([^}]*\)}"$/\1/p' "scripts/$script")}"
  [ -n "$v" ] || die "cannot read $var from scripts/$script"
  local bin="$CACHE_ROOT/bin/$name-$v/$name"
  [ -x "$bin" ] || die "no $name $v in $CACHE_ROOT/bin: run scripts/$script${hint:+ $hint} (builds it once into the cache)"
  echo "$bin"
}
for t in docker jq curl sha256sum git; do have "$t" || die "$t is needed and not on PATH"; done
HELM="$(cached_tool helm build-helm.sh HELM_VERSION)"
COSIGN="$(cached_tool cosign build-cosign.sh COSIGN_VERSION)"
k8s="$(sed -n 's/^K8S_VERSION="${K8S_VERSION:-\([^}]*\)}"$/\1/p' scripts/build-control-plane.sh)"
etcd="$(sed -n 's/^ETCD_VERSION="${ETCD_VERSION:-\([^}]*\)}"$/\1/p' scripts/build-control-plane.sh)"
[ -x "$CACHE_ROOT/bin/k8s-${K8S_VERSION:-$k8s}-etcd-${ETCD_VERSION:-$etcd}/kubectl" ] \
  || die "no kubectl in the cache (scripts/render-install.mjs renders with it): run scripts/build-control-plane.sh --with-kubectl"
if [ "$platform" = all ] && ! have skopeo; then
  die "skopeo is needed for --platform all (Debian's; test/kind/offline/provision.sh bases-arm64 installs it with the arm64 base)"
fi
# Node.js 24, as ./dev gives it: the machine's, or the one ./dev installs into the cache.
if [ "$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)" -lt 24 ]; then
  [ -x "$CACHE_ROOT/node24/node_modules/.bin/node" ] || die "Node.js 24 is needed: ./dev installs it into the cache (e.g. ./dev exec -- node --version)"
  export PATH="$CACHE_ROOT/node24/node_modules/.bin:$PATH"
fi
# The Docker client, as scripts/build-image.sh picks it.
if [ -z "${DOCKER:-}" ]; then
  DOCKER=docker
  major="$(docker version --format '{{.Client.Version}}' 2>/dev/null | cut -d. -f1)"
  if [ "${major:-0}" -ge 23 ] 2>/dev/null && ! docker buildx version >/dev/null 2>&1 && [ -x /usr/bin/docker ]; then
    DOCKER=/usr/bin/docker
  fi
fi
"$DOCKER" info >/dev/null 2>&1 || die "the Docker engine does not answer (docker info)"

# ---------------------------------------------------------------------------------------- setup
version="$(node -p 'require("./package.json").version')"
rehearsal=()
case "$version" in *-dev*) rehearsal+=("version $version is a -dev version: a rehearsal, not a release (RELEASE.md step 1 sets the release version)") ;; esac
out="${out:-dist/release/$version}"
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then bad "--out $out: not empty (a release's files are written to an empty or new directory)"; fi
mkdir -p "$out"
out="$(cd "$out" && pwd)"
host="${registry%%/*}"
rpath="${registry#"$host"}"
rpath="${rpath#/}"
scheme=https
http_flags=() cosign_http=() skopeo_http=()
if [ "$plain_http" = 1 ]; then
  scheme=http http_flags=(--plain-http) cosign_http=(--allow-http-registry) skopeo_http=(--dest-tls-verify=false)
fi
# The registry answers the distribution API (200, or 401 when it wants a token) before anything is built.
code="$(curl -s -o /dev/null -w '%{http_code}' --max-time 15 "$scheme://$host/v2/" || true)"
case "$code" in
  200 | 401) ;;
  000 | "") die "$scheme://$host/v2/ did not answer (no registry there?$([ "$plain_http" = 1 ] || echo ' an http-only registry needs --plain-http'))" ;;
  *) die "$scheme://$host/v2/ answered $code, not 200 or 401 (not a registry there?$([ "$plain_http" = 1 ] || echo ' an http-only registry needs --plain-http'))" ;;
esac
repo="$registry/$NAME"
chart_repo="$registry/charts/$NAME"
work="$(mktemp -d)"
step=setup
trap 'rc=$?; rm -rf "$work"; if [ $rc != 0 ]; then log "failed in step \"$step\" (exit $rc); $out holds what was written so far"; fi' EXIT

timings=()
now_ms() { local t="${EPOCHREALTIME/[.,]/}"; echo $((t / 1000)); }
secs() { printf '%d.%ds' $(($1 / 1000)) $(($1 % 1000 / 100)); } # milliseconds as 12.3s
timed() { # timed LABEL CMD...: runs CMD in this shell (its variables stay set), records its wall time
  local label="$1" t0
  t0="$(now_ms)"
  shift
  step="$label"
  log "-- $label"
  "$@"
  timings+=("$label $(secs $(($(now_ms) - t0)))")
}
# Accept headers for every manifest kind a push can leave: Docker v2 manifest and list, OCI manifest and index.
ACCEPT=(-H "Accept: application/vnd.oci.image.index.v1+json" -H "Accept: application/vnd.oci.image.manifest.v1+json"
  -H "Accept: application/vnd.docker.distribution.manifest.list.v2+json" -H "Accept: application/vnd.docker.distribution.manifest.v2+json")
manifest_url() { echo "$scheme://$host/v2/${rpath:+$rpath/}$1/manifests/$2"; }
# registry_digest REPO-NAME REF: the Docker-Content-Digest the registry answers for a HEAD of the
# manifest, or nothing when it does not answer one anonymously (a registry that wants a token).
registry_digest() {
  curl -fsSI --max-time 30 "${ACCEPT[@]}" "$(manifest_url "$1" "$2")" 2>/dev/null | tr -d '\r' \
    | sed -n 's/^docker-content-digest: *\(sha256:[0-9a-f]\{64\}\)$/\1/Ip' | head -1 || true
}
# checked_digest WHAT REPO-NAME REF PUSHED: the digest the registry holds, which must be the one the push reported.
checked_digest() {
  local got
  got="$(registry_digest "$2" "$3")"
  if [ -z "$got" ]; then
    log "the registry did not answer a HEAD of $(manifest_url "$2" "$3") anonymously: $1 digest as the push reported it"
    echo "$4"
    return
  fi
  [ -z "$4" ] || [ "$got" = "$4" ] || die "$1: the registry holds $got under $3, the push reported $4"
  echo "$got"
}

# ---------------------------------------------------------------------------------------- steps
arches=(amd64)
[ "$platform" = all ] && arches=(amd64 arm64)

build() {
  local p=(--platform "$platform")
  # The images are built under their local name (NAME:VERSION-ARCH) and pushed under the registry's.
  bash scripts/build-image.sh "${p[@]}" --out "$work/image" ${source:+--source "$source"} >&2
  for a in "${arches[@]}"; do
    [ -s "$work/image/$NAME-$version-linux-$a.cdx.json" ] || die "scripts/build-image.sh wrote no SBOM for linux/$a"
  done
}

push_image() {
  local pushed=""
  if [ "$platform" = all ]; then
    skopeo copy -q --all "${skopeo_http[@]}" --digestfile "$work/pushed.digest" \
      "oci:$work/image/oci:$version" "docker://$repo:$version" >&2
    pushed="$(cat "$work/pushed.digest")"
  else
    "$DOCKER" tag "$NAME:$version-amd64" "$repo:$version"
    "$DOCKER" push "$repo:$version" | tee "$work/push.log" >&2
    pushed="$(sed -n 's/.*digest: \(sha256:[0-9a-f]\{64\}\).*/\1/p' "$work/push.log" | tail -1)"
    [ -n "$pushed" ] || die "docker push reported no digest"
  fi
  digest="$(checked_digest image "$NAME" "$version" "$pushed")"
  image="$repo@$digest"
  # What the digest names, when the registry answers anonymously: the image built here.
  local m
  if m="$(curl -fsS --max-time 30 "${ACCEPT[@]}" "$(manifest_url "$NAME" "$digest")" 2>/dev/null)"; then
    if [ "$platform" = all ]; then
      jq -e '[.manifests[].platform | "\(.os)/\(.architecture)"] | sort == ["linux/amd64", "linux/arm64"]' <<<"$m" >/dev/null \
        || die "$image is not an index of linux/amd64 and linux/arm64: $(jq -c '[.manifests[].platform]' <<<"$m")"
      platform_digests="$(jq -r '.manifests[] | "\(.platform.architecture) \(.digest)"' <<<"$m")"
    else
      [ "$(jq -r .config.digest <<<"$m")" = "$("$DOCKER" image inspect --format '{{.Id}}' "$NAME:$version-amd64")" ] \
        || die "$image's config is not the image built here"
    fi
  fi
  log "image $image"
}

chart() {
  local src="$work/chart-src/$NAME"
  mkdir -p "$work/chart-src" "$work/chart"
  cp -rL "charts/$NAME" "$src" # -L: files/ links into manifests/
  sed -i "s/^version: .*/version: $version/; s/^appVersion: .*/appVersion: \"$version\"/" "$src/Chart.yaml"
  # The image block is values.yaml's first: its repository and digest are the first such keys.
  sed -i "0,/^  repository: .*/s||  repository: $repo|; 0,/^  digest: .*/s||  digest: \"$digest\"|" "$src/values.yaml"
  "$HELM" lint --strict "$src" >&2
  local rendered
  rendered="$("$HELM" template nlc "$src" | sed -n 's/^ *image: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' | sort -u)"
  [ "$rendered" = "$image" ] || die "the chart renders the image as '$rendered', not $image"
  "$HELM" package "$src" --destination "$work/chart" >&2
  chart_tgz="$NAME-$version.tgz"
  [ -f "$work/chart/$chart_tgz" ] || die "helm package wrote no $chart_tgz"
  "$HELM" push "$work/chart/$chart_tgz" "oci://$registry/charts" "${http_flags[@]}" 2>&1 | tee "$work/helm-push.log" >&2
  local pushed
  pushed="$(sed -n 's/^Digest: *\(sha256:[0-9a-f]\{64\}\)$/\1/p' "$work/helm-push.log")"
  [ -n "$pushed" ] || die "helm push reported no digest"
  chart_digest="$(checked_digest chart "charts/$NAME" "$version" "$pushed")"
  cp "$work/chart/$chart_tgz" "$out/"
  log "chart oci://$chart_repo:$version, $chart_repo@$chart_digest"
}

files() {
  node scripts/render-install.mjs --image="$image" --output="$out/install.yaml"
  sboms=()
  for a in "${arches[@]}"; do
    cp "$work/image/$NAME-$version-linux-$a.cdx.json" "$out/"
    sboms+=("$NAME-$version-linux-$a.cdx.json")
  done
}

keys() {
  if [ -n "$key" ]; then
    signing_key="$(cd "$(dirname "$key")" && pwd)/$(basename "$key")"
    if [ -z "${COSIGN_PASSWORD+set}" ] && [ ! -t 0 ]; then die "--key $key: set COSIGN_PASSWORD (cosign cannot ask for it without a terminal)"; fi
    "$COSIGN" public-key --key "$signing_key" --outfile "$out/cosign.pub" >&2
  else
    export COSIGN_PASSWORD=""
    (cd "$out" && "$COSIGN" generate-key-pair --output-key-prefix cosign >&2)
    signing_key="$out/cosign.key"
    rehearsal+=("no --key: $out/cosign.key is an ephemeral key pair with an empty password, for a rehearsal only; never publish it")
  fi
  # Offline: a signing config with no services (no Fulcio, no Rekor, no TSA) and a trusted root with
  # no authorities, so that cosign neither contacts nor needs any sigstore service or TUF.
  "$COSIGN" signing-config create --out "$work/signing-config.json" >&2
  "$COSIGN" trusted-root create --out "$work/trusted-root.json" >&2
  blob_sig=(--key "$signing_key" --signing-config "$work/signing-config.json" --trusted-root "$work/trusted-root.json" -y)
  sig=("${blob_sig[@]}" "${cosign_http[@]}")
}

sign() {
  # --recursive on an index: the index and each platform's manifest.
  local r=()
  [ "$platform" = all ] && r=(--recursive)
  "$COSIGN" sign "${sig[@]}" "${r[@]}" "$image" >&2
  "$COSIGN" sign "${sig[@]}" "$chart_repo@$chart_digest" >&2
  # Each platform's SBOM, attested on the digest the install names (the index with --platform all).
  local s
  for s in "${sboms[@]}"; do
    "$COSIGN" attest "${sig[@]}" --type cyclonedx --predicate "$out/$s" "$image" >&2
  done
  (cd "$out" && sha256sum install.yaml "$chart_tgz" "${sboms[@]}" cosign.pub >SHA256SUMS)
  "$COSIGN" sign-blob "${blob_sig[@]}" --bundle "$out/SHA256SUMS.sigstore.json" "$out/SHA256SUMS" >&2
  chmod 0644 "$out/SHA256SUMS.sigstore.json" # cosign writes it 0600; it is a public release file
}

verify() {
  local pub="$out/cosign.pub" v=(--insecure-ignore-tlog "${cosign_http[@]}")
  local ref refs=("$image" "$chart_repo@$chart_digest")
  if [ -n "${platform_digests:-}" ]; then
    while read -r _ d; do refs+=("$repo@$d"); done <<<"$platform_digests"
  fi
  for ref in "${refs[@]}"; do
    "$COSIGN" verify --key "$pub" "${v[@]}" "$ref" 2>>"$work/verify.log" >"$work/v.json"
    jq -e --arg d "${ref#*@}" 'length > 0 and all(.[]; .critical.image."docker-manifest-digest" == $d)' "$work/v.json" >/dev/null \
      || die "cosign verify $ref: the signature names $(jq -c '[.[].critical.image."docker-manifest-digest"]' "$work/v.json")"
    log "verified: signature of $ref"
  done
  # Every SBOM is among the verified attestations' predicates, on the image's digest.
  "$COSIGN" verify-attestation --key "$pub" "${v[@]}" --type cyclonedx "$image" 2>>"$work/verify.log" >"$work/att.jsonl"
  jq -r .payload "$work/att.jsonl" | while read -r p; do base64 -d <<<"$p" | jq -cS .; done >"$work/statements.jsonl"
  local s
  for s in "${sboms[@]}"; do
    jq -cS --slurpfile bom "$out/$s" --arg d "${digest#sha256:}" \
      'select(.predicateType == "https://cyclonedx.org/bom" and .predicate == $bom[0] and any(.subject[]; .digest.sha256 == $d))' \
      "$work/statements.jsonl" | grep -q . || die "no verified CycloneDX attestation on $image holds $s"
    log "verified: attestation of $s on $image"
  done
  (cd "$out" && sha256sum --quiet -c SHA256SUMS) || die "SHA256SUMS does not match the files in $out"
  "$COSIGN" verify-blob --key "$pub" --insecure-ignore-tlog --bundle "$out/SHA256SUMS.sigstore.json" "$out/SHA256SUMS" 2>>"$work/verify.log" >&2
  # And the check is not a no-op: one changed byte fails it.
  { cat "$out/SHA256SUMS"; echo; } >"$work/SHA256SUMS.changed"
  if "$COSIGN" verify-blob --key "$pub" --insecure-ignore-tlog --bundle "$out/SHA256SUMS.sigstore.json" "$work/SHA256SUMS.changed" >/dev/null 2>&1; then
    die "verify-blob accepted a changed SHA256SUMS"
  fi
  log "verified: SHA256SUMS (its bundle; a changed copy is refused) and every file it lists"
  # The chart as a user gets it: pulled by digest, byte for byte the one packaged, rendering the image by digest.
  mkdir -p "$work/pulled"
  "$HELM" pull "oci://$chart_repo@$chart_digest" "${http_flags[@]}" --destination "$work/pulled" >&2
  local pulled=("$work/pulled"/*.tgz) rendered installed
  [ ${#pulled[@]} = 1 ] && [ -f "${pulled[0]}" ] || die "helm pull wrote no chart archive"
  cmp -s "${pulled[0]}" "$out/$chart_tgz" || die "the chart pulled back by digest is not $chart_tgz"
  rendered="$("$HELM" template nlc "${pulled[0]}" | sed -n 's/^ *image: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' | sort -u)"
  [ "$rendered" = "$image" ] || die "helm template of the pulled chart renders the image '$rendered', not $image"
  installed="$(sed -n 's/^ *image: *\(.*\)$/\1/p' "$out/install.yaml" | sort -u)"
  [ "$installed" = "$image" ] || die "install.yaml names the image '$installed', not $image"
  log "verified: oci://$chart_repo@$chart_digest pulled back, helm template and install.yaml name $image"
}

record() {
  local f list=()
  for f in install.yaml "$chart_tgz" "${sboms[@]}" cosign.pub SHA256SUMS SHA256SUMS.sigstore.json; do
    list+=("$(jq -n --arg name "$f" --arg sha256 "$(sha256sum "$out/$f" | cut -d' ' -f1)" --argjson bytes "$(stat -c %s "$out/$f")" \
      '{name: $name, sha256: $sha256, bytes: $bytes}')")
  done
  printf '%s\n' "${list[@]}" | jq -s --arg version "$version" --arg registry "$registry" --arg image "$image" \
    --arg chart "oci://$chart_repo" --arg chart_digest "$chart_digest" \
    --arg platforms "$(printf 'linux/%s,' "${arches[@]}")" --argjson rehearsal "$([ ${#rehearsal[@]} -gt 0 ] && echo true || echo false)" \
    '{version: $version, registry: $registry, image: $image, platforms: ($platforms | rtrimstr(",") | split(",")),
      chart: {ref: $chart, version: $version, digest: $chart_digest}, files: ., rehearsal: $rehearsal}' >"$out/release.json"
}

t_all="$(now_ms)"
timed "keys" keys # first: a key that cannot be read fails before anything is pushed
timed "build image ($platform)" build
timed "push image" push_image
timed "push chart" chart
timed "render install.yaml, SBOMs" files
timed "sign, attest, SHA256SUMS" sign
timed "verify" verify
timed "release.json" record
step=done

echo "node-lifecycle-controller $version released to $registry in $(secs $(($(now_ms) - t_all)))"
for r in "${rehearsal[@]}"; do echo "  REHEARSAL: $r"; done
echo "  image  $image ($(printf 'linux/%s ' "${arches[@]}" | sed 's/ $//'))"
echo "  chart  oci://$chart_repo --version $version ($chart_digest)"
echo "  files  $out: $(jq -r '[.files[].name] | join(", ")' "$out/release.json"), release.json"
echo "  verified: cosign signatures of the image$([ "$platform" = all ] && echo ' (index and each platform)') and the chart, the SBOM attestation$([ ${#sboms[@]} -gt 1 ] && echo s), SHA256SUMS (bundle and sums), the chart pulled back by digest renders the image by digest, install.yaml names it by digest"
echo "  timings: $(printf '%s; ' "${timings[@]}" | sed 's/; $//')"
echo "  a user verifies with: cosign verify --key cosign.pub --insecure-ignore-tlog ${cosign_http[*]:+${cosign_http[*]} }$image"
