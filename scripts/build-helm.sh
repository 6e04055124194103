#!/usr/bin/env bash
# Builds Helm from the Go module proxy into the per-user cache folder, keyed by version, for the
# chart's lint and template tests (charts/node-lifecycle-controller). Nothing is written inside the
# repository. Shares the Go module and build caches with scripts/build-control-plane.sh.
#
#   scripts/build-helm.sh
#
# Prints the directory holding the binary on its last line. Reruns are instant when cached.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.21.4}"
CACHE_ROOT="${NLC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/node-lifecycle-controller}"

if ! [[ "$HELM_VERSION" =~ ^v3\.[0-9]+\.[0-9]+$ ]]; then
  echo "build-helm: HELM_VERSION must look like v3.Y.Z (got '$HELM_VERSION')" >&2
  exit 2
fi

bin_dir="$CACHE_ROOT/bin/helm-$HELM_VERSION"
log() { echo "[build-helm] $*" >&2; }

export GOMODCACHE="${GOMODCACHE:-$CACHE_ROOT/gomod}"
export GOCACHE="${GOCACHE:-$CACHE_ROOT/gobuild}"
export CGO_ENABLED=0
# `go install pkg@version` builds in module mode from the module's own go.mod; -mod must not be set.
export GOFLAGS="-buildvcs=false"

if [ -x "$bin_dir/helm" ]; then
  echo "$bin_dir"
  exit 0
fi
mkdir -p "$bin_dir"
tmp_bin="$(mktemp -d "$bin_dir.tmp.XXXXXX")"
trap 'rm -rf "$tmp_bin"' EXIT

log "building helm $HELM_VERSION (first time only)"
start=$SECONDS
# Helm's own Makefile stamps its version the same way; without it `helm version` says v3.x-dev.
v=helm.sh/helm/v3/internal/version
ldflags="-s -w -X $v.version=$HELM_VERSION -X $v.metadata= -X $v.gitTreeState=clean"
GOBIN="$tmp_bin" go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
"$tmp_bin/helm" version --short >&2
mv "$tmp_bin/helm" "$bin_dir/helm"
log "built in $((SECONDS - start))s"
echo "$bin_dir"
