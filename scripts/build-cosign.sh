#!/usr/bin/env bash
# Builds cosign from the Go module proxy into the per-user cache folder, keyed by version, for the
# release rehearsal (signing the pushed image and chart with a key, and verifying them, offline:
# no transparency log). Nothing is written inside the repository. Shares the Go module and build
# caches with scripts/build-control-plane.sh.
#
#   scripts/build-cosign.sh
#
# Prints the directory holding the binary on its last line. Reruns are instant when cached.
set -euo pipefail

COSIGN_VERSION="${COSIGN_VERSION:-v3.1.3}"
CACHE_ROOT="${NLC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/node-lifecycle-controller}"

if ! [[ "$COSIGN_VERSION" =~ ^v([23])\.[0-9]+\.[0-9]+$ ]]; then
  echo "build-cosign: COSIGN_VERSION must look like v3.Y.Z or v2.Y.Z (got '$COSIGN_VERSION')" >&2
  exit 2
fi
module="github.com/sigstore/cosign/v${BASH_REMATCH[1]}"

bin_dir="$CACHE_ROOT/bin/cosign-$COSIGN_VERSION"
log() { echo "[build-cosign] $*" >&2; }

export GOMODCACHE="${GOMODCACHE:-$CACHE_ROOT/gomod}"
export GOCACHE="${GOCACHE:-$CACHE_ROOT/gobuild}"
export CGO_ENABLED=0
# `go install pkg@version` builds in module mode from the module's own go.mod; -mod must not be set.
export GOFLAGS="-buildvcs=false"

if [ -x "$bin_dir/cosign" ]; then
  echo "$bin_dir"
  exit 0
fi
mkdir -p "$bin_dir"
tmp_bin="$(mktemp -d "$bin_dir.tmp.XXXXXX")"
trap 'rm -rf "$tmp_bin"' EXIT

log "building cosign $COSIGN_VERSION (first time only)"
start=$SECONDS
# cosign's Makefile stamps its version the same way; without it `cosign version` says (devel).
# The build date is the release's commit time as the module proxy records it (reproducible).
released="$(cd "$tmp_bin" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "$module@$COSIGN_VERSION")"
v=sigs.k8s.io/release-utils/version
ldflags="-s -w -buildid= -X $v.gitVersion=$COSIGN_VERSION -X $v.gitCommit=module-$COSIGN_VERSION"
ldflags+=" -X $v.gitTreeState=clean -X $v.buildDate=$released"
GOBIN="$tmp_bin" go install -trimpath -ldflags "$ldflags" "$module/cmd/cosign@$COSIGN_VERSION" >&2
"$tmp_bin/cosign" version >&2
mv "$tmp_bin/cosign" "$bin_dir/cosign"
log "built in $((SECONDS - start))s"
echo "$bin_dir"
