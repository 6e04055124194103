#!/usr/bin/env bash
# Builds etcd, kube-apiserver (and, on request, other Kubernetes commands) from the Go module proxy
# into a per-user cache folder keyed by version. Nothing is written inside the repository.
#
#   scripts/build-control-plane.sh            # etcd + kube-apiserver
#   scripts/build-control-plane.sh --with-kcm # also kube-controller-manager (benchmarks)
#   scripts/build-control-plane.sh --with-kubectl # also kubectl (the tests render manifests with it)
#   scripts/build-control-plane.sh --kind     # every Kubernetes command a kind node image holds
#                                             # (test/kind/offline builds one without a registry)
#
# Prints the directory holding the binaries on its last line. Reruns are instant when cached.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}"
CACHE_ROOT="${NLC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/node-lifecycle-controller}"
# Every command the wrapper module can build; tools.go imports them all so that one `go mod tidy`
# serves every build and the shared build cache hits across them.
ALL_CMDS="kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubeadm kubectl"
want="kube-apiserver"
for arg in "$@"; do
  case "$arg" in
    --with-kcm) want="$want kube-controller-manager" ;;
    --with-kubectl) want="$want kubectl" ;;
    --kind) want="$ALL_CMDS" ;;
    *) echo "build-control-plane: unknown argument '$arg' (accepted: --with-kcm, --with-kubectl, --kind)" >&2; exit 2 ;;
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

tools_go() {
  echo "// Package tools keeps the commands we build in the module graph."
  echo "package tools"
  echo
  echo "import ("
  for c in $ALL_CMDS; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
  echo ")"
}

k8s_module() {
  local d="$work/k8s-$K8S_VERSION"
  # Ready when prepared for exactly today's command list (an older wrapper is regenerated).
  if [ -f "$d/.ready" ] && tools_go | cmp -s - "$d/tools/tools.go"; then echo "$d"; return 0; fi
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
  tools_go >"$d/tools/tools.go"
  (cd "$d" && go mod tidy >&2)
  touch "$d/.ready"
  echo "$d"
}

# Builds the given commands that are not in the cache yet, in one `go build` (they share most
# packages; the links run in parallel).
build_k8s_cmds() {
  local missing=() c
  for c in "$@"; do [ -x "$bin_dir/$c" ] || missing+=("$c"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  local d; d="$(k8s_module)"
  local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  local ldflags="-s -w" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  log "building ${missing[*]} $K8S_VERSION (first time only; the links are the slow part)"
  local start=$SECONDS tmp="$bin_dir/.tmp-$$"
  rm -rf "$tmp" && mkdir -p "$tmp"
  local pkgs=()
  for c in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  (cd "$d" && go build -trimpath -tags=selinux,notest -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}" >&2)
  for c in "${missing[@]}"; do mv "$tmp/$c" "$bin_dir/$c"; done
  rm -rf "$tmp"
  log "${missing[*]} built in $((SECONDS - start))s"
}

build_etcd
# shellcheck disable=SC2086 # a list of command names
build_k8s_cmds $want
echo "$bin_dir"
