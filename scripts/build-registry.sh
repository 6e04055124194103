#!/usr/bin/env bash
# Builds the CNCF Distribution registry from the Go module proxy into the per-user cache folder,
# keyed by version, for the release rehearsal (an OCI registry on loopback that the image and the
# chart are pushed to, then installed from). Nothing is written inside the repository. Shares the
# Go module and build caches with scripts/build-control-plane.sh.
#
#   scripts/build-registry.sh
#
# The first build is checked by running it: a throwaway config in a temp folder (filesystem storage
# under it, http on 127.0.0.1 with a port the kernel picks) and GET /v2/ must answer 200.
# When running it, set OTEL_TRACES_EXPORTER=none: by default it exports traces to localhost:4318.
# Prints the directory holding the binary on its last line. Reruns are instant when cached.
set -euo pipefail

REGISTRY_VERSION="${REGISTRY_VERSION:-v3.1.2}"
CACHE_ROOT="${NLC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/node-lifecycle-controller}"

if ! [[ "$REGISTRY_VERSION" =~ ^v3\.[0-9]+\.[0-9]+$ ]]; then
  echo "build-registry: REGISTRY_VERSION must look like v3.Y.Z (got '$REGISTRY_VERSION')" >&2
  exit 2
fi

bin_dir="$CACHE_ROOT/bin/registry-$REGISTRY_VERSION"
log() { echo "[build-registry] $*" >&2; }

export GOMODCACHE="${GOMODCACHE:-$CACHE_ROOT/gomod}"
export GOCACHE="${GOCACHE:-$CACHE_ROOT/gobuild}"
export CGO_ENABLED=0
# `go install pkg@version` builds in module mode from the module's own go.mod; -mod must not be set.
export GOFLAGS="-buildvcs=false"

if [ -x "$bin_dir/registry" ]; then
  echo "$bin_dir"
  exit 0
fi
mkdir -p "$bin_dir"
tmp_bin="$(mktemp -d "$bin_dir.tmp.XXXXXX")"
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp_bin"
}
trap cleanup EXIT

log "building registry $REGISTRY_VERSION (first time only)"
start=$SECONDS
# The registry's Makefile stamps its version the same way; without it `registry --version` says
# vX.Y.Z+unknown.
p=github.com/distribution/distribution/v3
ldflags="-s -w -X $p/version.version=$REGISTRY_VERSION -X $p/version.revision=module-$REGISTRY_VERSION -X $p/version.mainpkg=$p"
GOBIN="$tmp_bin" go install -trimpath -ldflags "$ldflags" "$p/cmd/registry@$REGISTRY_VERSION" >&2
"$tmp_bin/registry" --version >&2

# Smoke check on loopback: the registry logs the address it listens on; port 0 lets the kernel pick.
mkdir -p "$tmp_bin/check/storage"
cat >"$tmp_bin/check/config.yml" <<EOF
version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: $tmp_bin/check/storage
http:
  addr: 127.0.0.1:0
EOF
OTEL_TRACES_EXPORTER=none "$tmp_bin/registry" serve "$tmp_bin/check/config.yml" >"$tmp_bin/check/log" 2>&1 &
pid=$!
addr=""
for _ in $(seq 1 100); do
  addr="$(sed -n 's/.*listening on \(127\.0\.0\.1:[0-9]*\).*/\1/p' "$tmp_bin/check/log" | head -n 1)"
  [ -n "$addr" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$addr" ]; then
  cat "$tmp_bin/check/log" >&2
  log "the registry did not start listening"
  exit 1
fi
code="$(curl -s -o /dev/null -w '%{http_code}' "http://$addr/v2/")"
if [ "$code" != 200 ]; then
  cat "$tmp_bin/check/log" >&2
  log "GET http://$addr/v2/ answered $code, want 200"
  exit 1
fi
log "GET http://$addr/v2/ answered 200"

mv "$tmp_bin/registry" "$bin_dir/registry"
log "built in $((SECONDS - start))s"
echo "$bin_dir"
