#!/usr/bin/env bash
# Builds Prometheus and promtool from the Go module proxy into the per-user cache folder, keyed by
# version, for the e2e suite (a real Prometheus scrapes the controller and evaluates the shipped
# alert rules; promtool checks the rules). Nothing is written inside the repository.
#
#   scripts/build-prometheus.sh
#
# Built without the web UI's assets (not needed: the tests use the HTTP API) and without service
# discovery plugins (the tests use static targets), which keeps the build small. Shares the Go
# module and build caches with scripts/build-control-plane.sh.
# Prints the directory holding the binaries on its last line. Reruns are instant when cached.
set -euo pipefail

# Prometheus v3.Y.Z is published as the Go module version v0.3YY.Z.
PROMETHEUS_VERSION="${PROMETHEUS_VERSION:-v3.16.0}"
CACHE_ROOT="${NLC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/node-lifecycle-controller}"

if ! [[ "$PROMETHEUS_VERSION" =~ ^v3\.([0-9]+)\.([0-9]+)$ ]]; then
  echo "build-prometheus: PROMETHEUS_VERSION must look like v3.Y.Z (got '$PROMETHEUS_VERSION')" >&2
  exit 2
fi
minor="${BASH_REMATCH[1]}"
patch="${BASH_REMATCH[2]}"
module_version="v0.$((300 + minor)).$patch"

bin_dir="$CACHE_ROOT/bin/prometheus-$PROMETHEUS_VERSION"
log() { echo "[build-prometheus] $*" >&2; }

export GOMODCACHE="${GOMODCACHE:-$CACHE_ROOT/gomod}"
export GOCACHE="${GOCACHE:-$CACHE_ROOT/gobuild}"
export CGO_ENABLED=0
# `go install pkg@version` builds in module mode from the module's own go.mod; -mod must not be set.
export GOFLAGS="-buildvcs=false"

if [ -x "$bin_dir/prometheus" ] && [ -x "$bin_dir/promtool" ]; then
  echo "$bin_dir"
  exit 0
fi
mkdir -p "$bin_dir"
tmp_bin="$(mktemp -d "$bin_dir.tmp.XXXXXX")"
trap 'rm -rf "$tmp_bin"' EXIT

log "building prometheus and promtool $PROMETHEUS_VERSION (module $module_version; first time only)"
start=$SECONDS
v=github.com/prometheus/common/version
ldflags="-s -w -X $v.Version=${PROMETHEUS_VERSION#v} -X $v.Branch=release -X $v.Revision=module-$module_version -X $v.BuildUser=node-lifecycle-controller"
GOBIN="$tmp_bin" go install -trimpath -tags remove_all_sd -ldflags "$ldflags" \
  "github.com/prometheus/prometheus/cmd/prometheus@$module_version" \
  "github.com/prometheus/prometheus/cmd/promtool@$module_version" >&2
"$tmp_bin/prometheus" --version >&2
mv "$tmp_bin/promtool" "$bin_dir/promtool"
mv "$tmp_bin/prometheus" "$bin_dir/prometheus"
log "built in $((SECONDS - start))s"
echo "$bin_dir"
