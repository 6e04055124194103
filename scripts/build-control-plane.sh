#!/usr/bin/env bash
# Builds etcd, kube-apiserver (and, on request, kube-controller-manager) from the Go module proxy
# into a per-user cache folder keyed by version. Nothing is written inside the repository.
#
#   scripts/build-control-plane.sh            # etcd + kube-apiserver
#   scripts/build-control-plane.sh --with-kcm # also kube-controller-manager (benchmarks)
#
# Prints the directory holding the binaries on its last line. Reruns are instant when cached.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
CACHE_ROOT="${NLC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/node-lifecycle-controller}"
want_kcm=0
for arg in "$@"; do
  case "$arg" in
    --with-kcm) want_kcm=1 ;;
    *) echo "build-control-plane: unknown argument '$arg' (accepted: --with-kcm)" >&2; exit 2 ;;
  esac
done

bin_dir="$CACHE_ROOT/bin/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"
work="$CACHE_ROOT/build"
mkdir -p "$bin_dir" "$work"
log() { echo "[build-control-plane] $*" >&2; }

# One Go module cache and build cache for all our builds, outside the repo.
export GOMODCACHE="${GOMODCACHE:-$CACHE_ROOT/gomod}"
export GOCACHE="${GOCACHE:-$CACHE_ROOT/gobuild}"
export CGO_ENABLED=0
export GOFLAGS="-buildvcs=false -mod=mod"

build_etcd() {
  [ -x "$bin_dir/etcd" ] && return 0
  local d="$work/etcd-$ETCD_VERSION"
  rm -rf "$d" && mkdir -p "$d"
  log "building etcd $ETCD_VERSION (first time only)"
  local start=$SECONDS
  cat >"$d/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$d" && go mod init nlc.local/etcd >/dev/null 2>&1 \
    && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2 \
    && go mod tidy >&2 \
    && go build -trimpath -o "$bin_dir/etcd.tmp" . >&2)
  mv "$bin_dir/etcd.tmp" "$bin_dir/etcd"
  log "etcd built in $((SECONDS - start))s"
}

k8s_module() {
  local d="$work/k8s-$K8S_VERSION"
  [ -f "$d/.ready" ] && { echo "$d"; return 0; }
  rm -rf "$d" && mkdir -p "$d"
  local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  local staging_version="v0.${K8S_VERSION#v1.}"
  log "preparing wrapper module for k8s.io/kubernetes $K8S_VERSION (staging modules at $staging_version)"
  # The replace list is generated from the release's own go.mod: every ./staging module
  # is pointed at its published v0.Y.Z counterpart.
  local upstream_mod
  upstream_mod="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  {
    echo "module nlc.local/k8s"
    echo
    echo "go 1.26.0"
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$upstream_mod" \
      | awk -v v="$staging_version" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } >"$d/go.mod"
  mkdir -p "$d/tools"
  cat >"$d/tools/tools.go" <<'GO'
// Package tools keeps the commands we build in the module graph.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
GO
  (cd "$d" && go mod tidy >&2)
  touch "$d/.ready"
  echo "$d"
}

build_k8s_cmd() {
  local cmd="$1"
  [ -x "$bin_dir/$cmd" ] && return 0
  local d; d="$(k8s_module)"
  local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  local pkgs="k8s.io/component-base/version k8s.io/client-go/pkg/version"
  local ldflags="-s -w"
  for p in $pkgs; do
    ldflags="$ldflags -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  log "building $cmd $K8S_VERSION (first time only; the link is the slow part)"
  local start=$SECONDS
  (cd "$d" && go build -trimpath -tags=selinux,notest -ldflags "$ldflags" -o "$bin_dir/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd" >&2)
  mv "$bin_dir/$cmd.tmp" "$bin_dir/$cmd"
  log "$cmd built in $((SECONDS - start))s"
}

build_etcd
build_k8s_cmd kube-apiserver
if [ "$want_kcm" = 1 ]; then build_k8s_cmd kube-controller-manager; fi
echo "$bin_dir"
