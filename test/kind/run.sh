#!/usr/bin/env bash
# End-to-end test on a real kind cluster (needs a Docker engine, kind and kubectl):
#   1. builds the image node-lifecycle-controller:dev and creates a kind cluster (1 control plane,
#      2 workers) whose kube-controller-manager runs WITHOUT its node-lifecycle-controller;
#   2. installs manifests/overlays/kind (both replicas on the control-plane node);
#   3. stops the worker <cluster>-worker2 (docker stop) and asserts that within grace + 30s its
#      Ready condition is Unknown with reason NodeStatusUnknown, it carries the
#      node.kubernetes.io/unreachable NoSchedule and NoExecute taints, and a pod on it is not Ready;
#   4. starts the worker again and asserts Ready=True and those taints gone.
# The cluster is deleted on exit unless KEEP_CLUSTER=1.
#
# Usage: test/kind/run.sh [--preflight]
#   --preflight  only check the tools: prints "OK: ..." or "SKIP: <reason>", exits 0.
# Without the tools it prints "SKIP: <reason>" and exits 0 (nothing was tested).
# Environment: KIND_CLUSTER_NAME (nlc-e2e), KIND_NODE_IMAGE (kind's default), KEEP_CLUSTER.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CLUSTER="${KIND_CLUSTER_NAME:-nlc-e2e}"
IMAGE="node-lifecycle-controller:dev"
OVERLAY="$ROOT/manifests/overlays/kind"
NS="nlc-system"
LOCK="node-lifecycle-controller"
VICTIM="$CLUSTER-worker2"
UNREACHABLE="node.kubernetes.io/unreachable"
NOT_READY="node.kubernetes.io/not-ready"

skip() {
  echo "SKIP: $*"
  exit 0
}

preflight() {
  command -v docker >/dev/null 2>&1 || skip "the docker CLI is not on PATH"
  docker info >/dev/null 2>&1 || skip "no Docker engine answers (docker info failed)"
  command -v kind >/dev/null 2>&1 || skip "kind is not on PATH"
  command -v kubectl >/dev/null 2>&1 || skip "kubectl is not on PATH"
}

preflight
if [ "${1:-}" = "--preflight" ]; then
  echo "OK: docker engine, kind and kubectl are available"
  exit 0
fi

# The grace period the overlay gives the controller: assertions wait grace + 30s.
GRACE="$(grep -o -- '--node-monitor-grace-period=[0-9]*s' "$OVERLAY/kustomization.yaml" | grep -o '[0-9]*' | head -1)"
[ -n "$GRACE" ] || { echo "FAIL: no --node-monitor-grace-period=<n>s in $OVERLAY/kustomization.yaml"; exit 1; }

START=$SECONDS
log() { printf '[kind-e2e +%3ds] %s\n' "$((SECONDS - START))" "$*"; }
fail() {
  log "FAIL: $*"
  exit 1
}
k() { kubectl --context "kind-$CLUSTER" "$@"; }

diagnostics() {
  log "diagnostics"
  k get nodes -o wide || true
  k describe node "$VICTIM" || true
  k -n "$NS" get pods -o wide || true
  k -n "$NS" get lease "$LOCK" -o yaml || true
  for p in $(k -n "$NS" get pods -o name 2>/dev/null); do
    echo "--- logs $p"
    k -n "$NS" logs "$p" --tail=200 || true
  done
  k get events -A --sort-by=.lastTimestamp | tail -50 || true
}

cleanup() {
  local rc=$?
  trap - EXIT
  [ "$rc" -ne 0 ] && diagnostics
  docker start "$VICTIM" >/dev/null 2>&1 || true
  if [ "${KEEP_CLUSTER:-}" = "1" ]; then
    log "keeping cluster $CLUSTER (kind delete cluster --name $CLUSTER)"
  else
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
  fi
  exit "$rc"
}

# Seconds until `cond` (a shell function returning 0) holds, or fail after `timeout` seconds.
wait_for() {
  local what="$1" timeout="$2" cond="$3" begin=$SECONDS
  until "$cond"; do
    if [ $((SECONDS - begin)) -ge "$timeout" ]; then fail "$what: not within ${timeout}s"; fi
    sleep 1
  done
  log "$what (after $((SECONDS - begin))s)"
}

node_json_field() { k get node "$VICTIM" -o jsonpath="$1" 2>/dev/null; }
ready_status() { node_json_field '{.status.conditions[?(@.type=="Ready")].status}'; }
ready_reason() { node_json_field '{.status.conditions[?(@.type=="Ready")].reason}'; }
taints() { node_json_field '{range .spec.taints[*]}{.key}:{.effect}{"\n"}{end}'; }
has_taint() { taints | grep -qx "$1"; }

log "building $IMAGE"
docker build -t "$IMAGE" "$ROOT"

if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  log "deleting the leftover cluster $CLUSTER"
  kind delete cluster --name "$CLUSTER"
fi
trap cleanup EXIT
log "creating cluster $CLUSTER"
kind create cluster --name "$CLUSTER" --config "$ROOT/test/kind/kind-config.yaml" \
  ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"} --wait 180s

kcm_flags="$(k -n kube-system get pod -l component=kube-controller-manager -o jsonpath='{.items[0].spec.containers[0].command}')"
case "$kcm_flags" in
  *"-node-lifecycle-controller"*) log "kube-controller-manager runs without its node-lifecycle-controller" ;;
  *) fail "kube-controller-manager still runs its node-lifecycle-controller: $kcm_flags" ;;
esac

log "loading $IMAGE into the cluster"
kind load docker-image "$IMAGE" --name "$CLUSTER"

log "installing manifests/overlays/kind"
k apply -k "$OVERLAY"
k -n "$NS" rollout status deploy/node-lifecycle-controller --timeout=180s
k wait --for=condition=Ready nodes --all --timeout=180s

leader_is_a_pod() {
  local holder
  holder="$(k -n "$NS" get lease "$LOCK" -o jsonpath='{.spec.holderIdentity}' 2>/dev/null)"
  [ -n "$holder" ] && k -n "$NS" get pod "$holder" >/dev/null 2>&1
}
wait_for "a replica leads" 120 leader_is_a_pod

# A pod on the victim, to see it marked not Ready (the image is already on every node).
k apply -f - <<YAML
apiVersion: v1
kind: Pod
metadata:
  name: nlc-e2e-victim-pod
  namespace: default
spec:
  nodeSelector:
    kubernetes.io/hostname: $VICTIM
  terminationGracePeriodSeconds: 1
  containers:
    - name: idle
      image: $IMAGE
      imagePullPolicy: Never
      command: ["node", "-e", "setInterval(() => {}, 1 << 30)"]
YAML
k wait --for=condition=Ready pod/nlc-e2e-victim-pod --timeout=120s
pod_ready() { k get pod nlc-e2e-victim-pod -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'; }

for t in "$UNREACHABLE:NoSchedule" "$UNREACHABLE:NoExecute" "$NOT_READY:NoSchedule" "$NOT_READY:NoExecute"; do
  if has_taint "$t"; then fail "$VICTIM already carries $t before the test"; fi
done
# Let the leader see a few heartbeats of every node.
sleep 15

log "stopping $VICTIM (grace ${GRACE}s)"
docker stop "$VICTIM" >/dev/null
stopped=$SECONDS
deadline=$((GRACE + 30))

marked_unknown() { [ "$(ready_status)" = "Unknown" ] && [ "$(ready_reason)" = "NodeStatusUnknown" ]; }
wait_for "Ready=Unknown, reason NodeStatusUnknown" $((deadline - (SECONDS - stopped))) marked_unknown
unreachable_taints() { has_taint "$UNREACHABLE:NoSchedule" && has_taint "$UNREACHABLE:NoExecute"; }
wait_for "taints $UNREACHABLE NoSchedule and NoExecute" $((deadline - (SECONDS - stopped))) unreachable_taints
pod_not_ready() { [ "$(pod_ready)" = "False" ]; }
wait_for "its pod marked Ready=False" $((deadline - (SECONDS - stopped))) pod_not_ready
log "marked within $((SECONDS - stopped))s of docker stop (limit ${deadline}s)"

log "starting $VICTIM"
docker start "$VICTIM" >/dev/null
recovered() {
  [ "$(ready_status)" = "True" ] || return 1
  ! taints | grep -qE "^($UNREACHABLE|$NOT_READY):"
}
wait_for "Ready=True and no unreachable/not-ready taints" 240 recovered

k delete pod nlc-e2e-victim-pod --wait=false >/dev/null 2>&1 || true
log "PASS"
