#!/usr/bin/env bash
# Opt-in (not part of `./dev test`): the controller on an IPv6 single-stack or dual-stack kind
# cluster (issue 28, defect 1: on IPv6 the kubelet probes the pod's IPv6 address, so a controller
# listening on IPv4 only crash-loops). One command, its own cluster (nlc-ipv6), deleted at the end:
#
#   test/kind/ipv6.sh [--family ipv6|dual|dual-ipv6-first] [--image IMAGE] [--keep]
#
# ipv6 is single-stack; dual is kind's dual-stack (IPv4 first: status.podIP is the IPv4 address);
# dual-ipv6-first lists the IPv6 pod and service ranges first (status.podIP is the IPv6 address).
#
# Steps, each printing PASS or stopping with FAIL and the error:
#   1. the controller image built from the Dockerfile (as the kind suite builds it), or --image;
#   2. a kind cluster (1 control plane + 2 workers, kube-controller-manager without its
#      node-lifecycle-controller, as test/kind/kind-config.yaml) with networking.ipFamily set and
#      kind's CNI off; test/kind/offline/kindnet-ipfamily.sh installed as the CNI from a ConfigMap,
#      in the kindnetd stand-in image test/kind/offline/provision.sh builds (bash, curl, jq, ip):
#      so this needs that provisioning (a laptop's kind image has no such image);
#   3. every node Ready, every pod range of the cluster's families assigned;
#   4. manifests/overlays/kind installed: both replicas Ready on pod IPs of the expected families
#      (startup and readiness probes passed on them), no container restart, one leader, every
#      node's not-ready taint removed, CoreDNS Ready; as a control, a bare listener on 0.0.0.0 (the
#      controller before issue 28's fix) must fail the same startup probe where status.podIP is IPv6;
#   5. from a pod on another node, over each pod IP family: /metrics over HTTPS with the token of a
#      ServiceAccount bound to the shipped metrics-reader ClusterRole (200, leader_election_master_status),
#      without a token (401), /readyz on the probe port (200);
#   6. the standby's worker stopped: Ready=Unknown and both unreachable taints; started again:
#      Ready and untainted.
# On failure, nodes, pods, events and the controller's logs go to .tmp/kind-ipv6-diagnostics/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
family=ipv6
image=""
keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --family) family="$2"; shift ;;
    --family=*) family="${1#--family=}" ;;
    --image) image="$2"; shift ;;
    --image=*) image="${1#--image=}" ;;
    --keep) keep=1 ;;
    -h | --help) sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "ipv6.sh: unknown argument '$1' (accepted: --family ipv6|dual|dual-ipv6-first, --image IMAGE, --keep)" >&2; exit 2 ;;
  esac
  shift
done
case "$family" in ipv6 | dual | dual-ipv6-first) ;; *) echo "ipv6.sh: --family must be ipv6, dual or dual-ipv6-first" >&2; exit 2 ;; esac

CACHE_ROOT="${NLC_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/node-lifecycle-controller}"
ENV_FILE="${NLC_KIND_ENV_FILE:-$CACHE_ROOT/kind-offline/env}"
[ -f "$ENV_FILE" ] || { echo "FAIL: $ENV_FILE missing: run test/kind/offline/provision.sh first" >&2; exit 1; }
NLC_KIND_PATH="$(sed -n 's/^NLC_KIND_PATH=//p' "$ENV_FILE")"
NODE_IMAGE="${NLC_KIND_NODE_IMAGE:-$(sed -n 's/^NLC_KIND_NODE_IMAGE=//p' "$ENV_FILE")}"
export PATH="$NLC_KIND_PATH:$PATH"
CLUSTER="${NLC_KIND_CLUSTER:-nlc-ipv6}"
IMAGE=node-lifecycle-controller:dev
NS=nlc-system
WORK="$(mktemp -d "${TMPDIR:-/tmp}/nlc-kind-ipv6.XXXXXX")"
KUBECONFIG="$WORK/kubeconfig"
export KUBECONFIG
DIAG="$ROOT/.tmp/kind-ipv6-diagnostics"
T0=$(date +%s)

log() { echo "[ipv6.sh $(date -u +%T)] $*"; }
pass() { echo "PASS ($(($(date +%s) - T0))s): $*"; }
k() { kubectl "$@"; }
diagnostics() {
  mkdir -p "$DIAG"
  k get nodes -o wide >"$DIAG/nodes.txt" 2>&1 || true
  k get nodes -o yaml >"$DIAG/nodes.yaml" 2>&1 || true
  k get pods -A -o wide >"$DIAG/pods.txt" 2>&1 || true
  k get events -A --sort-by=.lastTimestamp >"$DIAG/events.txt" 2>&1 || true
  k -n kube-system logs -l app=kindnet --tail=100 --prefix >"$DIAG/kindnet.log" 2>&1 || true
  k -n "$NS" logs -l app.kubernetes.io/name=node-lifecycle-controller --tail=300 --prefix >"$DIAG/controller.log" 2>&1 || true
  k -n "$NS" logs -l app.kubernetes.io/name=node-lifecycle-controller --previous --tail=100 --prefix >"$DIAG/controller-previous.log" 2>&1 || true
  echo "diagnostics in $DIAG"
}
fail() {
  echo "FAIL: $*" >&2
  diagnostics >&2
  exit 1
}
cleanup() {
  local rc=$?
  for n in $(kind get nodes --name "$CLUSTER" 2>/dev/null); do docker start "$n" >/dev/null 2>&1 || true; done
  if [ "$keep" = 1 ]; then
    echo "keeping cluster $CLUSTER (KUBECONFIG=$KUBECONFIG; kind delete cluster --name $CLUSTER)"
  else
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
    rm -rf "$WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT
# wait_for SECONDS WHAT COMMAND...: until COMMAND succeeds; FAIL after SECONDS.
wait_for() {
  local limit="$1" what="$2" start
  shift 2
  start=$(date +%s)
  until "$@" >/dev/null 2>&1; do
    [ $(($(date +%s) - start)) -lt "$limit" ] || fail "$what: not within ${limit}s"
    sleep 2
  done
  echo $(($(date +%s) - start))
}
# An IPv6 address has a colon; the families a list of addresses covers: "ipv4", "ipv6" or "ipv4,ipv6".
families_of() { jq -r '[.[] | if test(":") then "ipv6" else "ipv4" end] | unique | join(",")'; }
want_families=$([ "$family" = ipv6 ] && echo ipv6 || echo ipv4,ipv6)
# The family of status.podIP, the address the kubelet probes.
probed_family=$([ "$family" = dual ] && echo ipv4 || echo ipv6)
networking="ipFamily: $family"
if [ "$family" = dual-ipv6-first ]; then
  networking='ipFamily: dual
  podSubnet: "fd00:10:244::/56,10.244.0.0/16"
  serviceSubnet: "fd00:10:96::/112,10.96.0.0/16"'
fi

# ----------------------------------------------------------------------------------- 1. image
if [ -n "$image" ]; then
  docker tag "$image" "$IMAGE"
  pass "image $IMAGE tagged from $image"
else
  ca="${NLC_BUILD_CA_FILE:-${NODE_EXTRA_CA_CERTS:-}}"
  secret=()
  [ -n "$ca" ] && [ -f "$ca" ] && secret=(--secret "id=npm-ca,src=$ca")
  s=$(date +%s)
  DOCKER_BUILDKIT=1 docker build -q "${secret[@]}" -t "$IMAGE" "$ROOT" >/dev/null
  pass "image $IMAGE built from the Dockerfile in $(($(date +%s) - s))s"
fi

# --------------------------------------------------------------------------------- 2. cluster
kind get clusters 2>/dev/null | grep -qx "$CLUSTER" && kind delete cluster --name "$CLUSTER"
cgroup_patch=""
if [ "$(docker info --format '{{.CgroupVersion}}')" = 1 ]; then
  # kubelet >= 1.35 refuses cgroup v1 unless told (as test/kind/cluster.ts does).
  cgroup_patch='  - |
    kind: KubeletConfiguration
    apiVersion: kubelet.config.k8s.io/v1beta1
    failCgroupV1: false'
fi
cat >"$WORK/kind-config.yaml" <<EOF
kind: Cluster
apiVersion: kind.x-k8s.io/v1alpha4
networking:
  $networking
  disableDefaultCNI: true
nodes:
  - role: control-plane
  - role: worker
  - role: worker
kubeadmConfigPatches:
  - |
    apiVersion: kubeadm.k8s.io/v1beta3
    kind: ClusterConfiguration
    controllerManager:
      extraArgs:
        controllers: "*,bootstrapsigner,tokencleaner,-node-lifecycle-controller"
  - |
    apiVersion: kubeadm.k8s.io/v1beta4
    kind: ClusterConfiguration
    controllerManager:
      extraArgs:
        - name: controllers
          value: "*,bootstrapsigner,tokencleaner,-node-lifecycle-controller"
$cgroup_patch
EOF
s=$(date +%s)
kind create cluster --name "$CLUSTER" --config "$WORK/kind-config.yaml" --kubeconfig "$KUBECONFIG" \
  ${NODE_IMAGE:+--image "$NODE_IMAGE"} || fail "kind create cluster (ipFamily $family) failed"
pass "kind cluster $CLUSTER (ipFamily $family) created in $(($(date +%s) - s))s; API server $(k config view -o jsonpath='{.clusters[0].cluster.server}')"
cp="$CLUSTER-control-plane"
for n in $(kind get nodes --name "$CLUSTER"); do
  echo "  $n: $(docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{.GlobalIPv6Address}}{{end}}' "$n")"
done

# ------------------------------------------------------------------------------------- 3. CNI
standin="$(docker exec "$cp" ctr --namespace=k8s.io images list -q | grep '/kindnetd:' | head -1)"
[ -n "$standin" ] || fail "no kindnetd image in the node image"
docker image inspect "$standin" --format '{{json .Config.Entrypoint}}' 2>/dev/null | grep -q kindnet-standin \
  || fail "$standin is not the offline stand-in (bash, curl, jq, ip): this needs test/kind/offline/provision.sh"
k -n kube-system create configmap kindnet-ipfamily --from-file=kindnet.sh="$ROOT/test/kind/offline/kindnet-ipfamily.sh" >/dev/null
k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: ServiceAccount
metadata: {name: kindnet, namespace: kube-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: kindnet-ipfamily}
rules: [{apiGroups: [""], resources: [nodes], verbs: [list]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: kindnet-ipfamily}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: kindnet-ipfamily}
subjects: [{kind: ServiceAccount, name: kindnet, namespace: kube-system}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: kindnet, namespace: kube-system, labels: {app: kindnet}}
spec:
  selector: {matchLabels: {app: kindnet}}
  template:
    metadata: {labels: {app: kindnet}}
    spec:
      hostNetwork: true
      tolerations: [{operator: Exists}]
      priorityClassName: system-node-critical
      serviceAccountName: kindnet
      containers:
        - name: kindnet-cni
          image: $standin
          imagePullPolicy: Never
          command: [bash, /ipfamily/kindnet.sh]
          env: [{name: NODE_NAME, valueFrom: {fieldRef: {fieldPath: spec.nodeName}}}]
          securityContext: {capabilities: {add: [NET_RAW, NET_ADMIN]}}
          volumeMounts:
            - {name: cni-cfg, mountPath: /etc/cni/net.d}
            - {name: script, mountPath: /ipfamily}
      volumes:
        - {name: cni-cfg, hostPath: {path: /etc/cni/net.d}}
        - {name: script, configMap: {name: kindnet-ipfamily}}
EOF
all_ready() {
  k get nodes -o json | jq -e '.items | length == 3 and all(.status.conditions[] | select(.type == "Ready") | .status == "True")'
}
took=$(wait_for 240 "every node Ready" all_ready)
pass "every node Ready ${took}s after the CNI stand-in was applied"
k get nodes -o json | jq -r '.items[] | "  \(.metadata.name): InternalIP \([.status.addresses[] | select(.type == "InternalIP") | .address] | join(",")), podCIDRs \(.spec.podCIDRs | join(","))"'
bad="$(k get nodes -o json | jq -r --arg want "$want_families" '.items[]
  | select(([.spec.podCIDRs[] | if test(":") then "ipv6" else "ipv4" end] | unique | join(",")) != $want)
  | .metadata.name')"
[ -z "$bad" ] || fail "nodes without pod ranges of $want_families: $bad"
pass "every node has pod ranges of $want_families"

# ------------------------------------------------------------------------------ 4. controller
s=$(date +%s)
kind load docker-image "$IMAGE" --name "$CLUSTER" >/dev/null
k apply -k "$ROOT/manifests/overlays/kind" >/dev/null
k -n "$NS" rollout status deploy/node-lifecycle-controller --timeout=240s >/dev/null \
  || fail "the controller's rollout did not complete in 240s (probes on its pod IP?)"
pass "controller rolled out $(($(date +%s) - s))s after kind load + kubectl apply -k manifests/overlays/kind"
pods_json() { k -n "$NS" get pods -l app.kubernetes.io/name=node-lifecycle-controller -o json; }
pods_json | jq -r '.items[] | "  \(.metadata.name) on \(.spec.nodeName): podIPs \([.status.podIPs[].ip] | join(",")), restarts \([.status.containerStatuses[].restartCount] | add), Ready \(.status.conditions[] | select(.type == "Ready") | .status)"'
got="$(pods_json | jq -c '[.items[].status.podIPs[].ip]' | families_of)"
[ "$got" = "$want_families" ] || fail "the controller's pod IPs are $got, expected $want_families"
restarts="$(pods_json | jq '[.items[].status.containerStatuses[].restartCount] | add')"
[ "$restarts" = 0 ] || fail "the controller's containers restarted $restarts times"
got="$(pods_json | jq -c '[.items[].status.podIP]' | families_of)"
[ "$got" = "$probed_family" ] || fail "the controller's status.podIP (what the kubelet probes) is $got, expected $probed_family"
pass "both replicas Ready on $want_families pod IPs (status.podIP $(pods_json | jq -r '[.items[].status.podIP] | join(", ")'): the kubelet's startup and readiness probes passed there), 0 restarts"
holder() { k -n "$NS" get lease node-lifecycle-controller -o jsonpath='{.spec.holderIdentity}'; }
wait_for 60 "a leader" holder >/dev/null
leader="$(holder)"
untainted() {
  k get nodes -o json | jq -e 'all(.items[]; [.spec.taints[]? | select(.key | startswith("node.kubernetes.io/"))] | length == 0)'
}
took=$(wait_for 120 "no node tainted not-ready" untainted)
dns_ready() {
  k -n kube-system get pods -l k8s-app=kube-dns -o json \
    | jq -e '(.items | length) > 0 and all(.items[]; any(.status.conditions[]; .type == "Ready" and .status == "True"))'
}
wait_for 180 "CoreDNS Ready" dns_ready >/dev/null
pass "leader $leader; every node's not-ready taint removed (${took}s after the rollout); CoreDNS Ready on $(k -n kube-system get pods -l k8s-app=kube-dns -o jsonpath='{.items[*].status.podIP}')"

# The control: what the controller did before issue 28's fix (listen on 0.0.0.0, IPv4 only) next to
# what it does now (::, both families), as two bare listeners with the Deployment's startup probe.
# Where status.podIP is IPv6 (single-stack, IPv6-first dual-stack) the kubelet probes it, so the
# first must fail there: otherwise step 4 proved nothing. On dual-stack with IPv4 first both pass.
for pair in listen-ipv4-only=0.0.0.0 listen-both=::; do
  name="${pair%%=*}" host="${pair#*=}"
  k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: default}
spec:
  terminationGracePeriodSeconds: 1
  containers:
    - name: http
      image: $IMAGE
      imagePullPolicy: Never
      command: [/nodejs/bin/node, -e, "require('http').createServer((q, s) => s.end('ok')).listen(8081, '$host')"]
      startupProbe: {httpGet: {path: /, port: 8081}, periodSeconds: 2, failureThreshold: 3}
EOF
done
started() { k get pod "$1" -o json | jq -e '.status.containerStatuses[0].started == true'; }
restarted() { k get pod "$1" -o json | jq -e '.status.containerStatuses[0].restartCount >= 1'; }
restarts_of() { k get pod "$1" -o jsonpath='{.status.containerStatuses[0].restartCount}'; }
probe_errors() {
  k get events --field-selector "involvedObject.name=$1,reason=Unhealthy" -o json \
    | jq -r '[.items[].message] | unique | join(" | ")'
}
wait_for 60 "a listener on :: passes the startup probe" started listen-both >/dev/null
if [ "$probed_family" = ipv6 ]; then
  # Three failures 2 s apart and the kubelet restarts it: the crash loop of issue 28.
  wait_for 60 "a listener on 0.0.0.0 restarted for failing the startup probe" restarted listen-ipv4-only >/dev/null
  [ "$(restarts_of listen-both)" = 0 ] || fail "the listener on :: restarted too: $(probe_errors listen-both)"
  pass "control: a listener on :: passes the same startup probe (0 restarts); one on 0.0.0.0 (the controller before the fix) is restarted for failing it: $(probe_errors listen-ipv4-only)"
else
  wait_for 60 "a listener on 0.0.0.0 passes the startup probe (status.podIP is IPv4)" started listen-ipv4-only >/dev/null
  pass "control: listeners on :: and on 0.0.0.0 both pass the startup probe (status.podIP is the IPv4 one)"
fi
k delete pod listen-both listen-ipv4-only --wait=false >/dev/null

# --------------------------------------------------------------------------------- 5. scrape
k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: monitoring}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: prometheus, namespace: monitoring}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: nlc-ipv6-metrics-reader}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: node-lifecycle-controller-metrics-reader}
subjects: [{kind: ServiceAccount, name: prometheus, namespace: monitoring}]
EOF
# From a pod on the worker without the leader (so at least one scrape crosses nodes), with curl from
# the stand-in image; each replica over each of its pod IPs.
standby_node="$(pods_json | jq -r --arg l "$leader" '.items[] | select(.metadata.name != $l) | .spec.nodeName')"
targets="$(pods_json | jq -r '[.items[].status.podIPs[].ip | if test(":") then "[\(.)]" else . end] | join(" ")')"
k apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: scraper, namespace: monitoring}
spec:
  nodeName: $standby_node
  serviceAccountName: prometheus
  restartPolicy: Never
  securityContext: {runAsUser: 65534}
  containers:
    - name: curl
      image: $standin
      imagePullPolicy: Never
      command:
        - bash
        - -c
        - |
          token=\$(cat /var/run/secrets/kubernetes.io/serviceaccount/token)
          for t in $targets; do
            code=\$(curl -sk -o /tmp/m -w '%{http_code}' --max-time 10 -H "Authorization: Bearer \$token" "https://\$t:8080/metrics")
            echo "metrics \$t \$code \$(grep -c '^leader_election_master_status' /tmp/m) \$(grep '^leader_election_master_status' /tmp/m | awk '{print \$NF}')"
            echo "notoken \$t \$(curl -sk -o /dev/null -w '%{http_code}' --max-time 10 "https://\$t:8080/metrics")"
            echo "readyz \$t \$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://\$t:8081/readyz")"
          done
EOF
scraped() { [ "$(k -n monitoring get pod scraper -o jsonpath='{.status.phase}')" = Succeeded ]; }
wait_for 120 "the scraper pod finished" scraped >/dev/null
out="$(k -n monitoring logs scraper)"
echo "$out" | sed 's/^/  /'
n_targets=$(echo "$targets" | wc -w)
[ "$(echo "$out" | grep -c '^metrics .* 200 1 ')" = "$n_targets" ] || fail "not every /metrics scrape got 200 with leader_election_master_status"
[ "$(echo "$out" | grep '^metrics ' | awk '{s += $5} END {print s}')" = "$(( n_targets / 2 ))" ] \
  || fail "leader_election_master_status does not sum to one leader per address family"
[ "$(echo "$out" | grep -c '^notoken .* 401$')" = "$n_targets" ] || fail "a scrape without a token was not refused with 401"
[ "$(echo "$out" | grep -c '^readyz .* 200$')" = "$n_targets" ] || fail "/readyz did not answer 200 on every pod IP"
pass "from a pod on $standby_node: /metrics over HTTPS 200 with a metrics-reader token, 401 without, /readyz 200, on $targets"

# ------------------------------------------------------------------------------- 6. node loss
victim="$standby_node"
s=$(date +%s)
docker stop "$victim" >/dev/null
marked() {
  k get node "$victim" -o json | jq -e '
    any(.status.conditions[]; .type == "Ready" and .status == "Unknown" and .reason == "NodeStatusUnknown")
    and ([.spec.taints[]? | select(.key == "node.kubernetes.io/unreachable") | .effect] | sort == ["NoExecute", "NoSchedule"])'
}
wait_for 90 "$victim Ready=Unknown with both unreachable taints" marked >/dev/null
pass "$victim stopped: Ready=Unknown (NodeStatusUnknown) and both unreachable taints $(($(date +%s) - s))s after docker stop began (grace 20s)"
s=$(date +%s)
docker start "$victim" >/dev/null
back() {
  k get node "$victim" -o json | jq -e '
    any(.status.conditions[]; .type == "Ready" and .status == "True")
    and ([.spec.taints[]? | select(.key | startswith("node.kubernetes.io/"))] | length == 0)'
}
wait_for 180 "$victim Ready and untainted" back >/dev/null
pass "$victim started: Ready=True and untainted $(($(date +%s) - s))s after docker start"
echo "ipv6.sh: ipFamily $family: all checks passed in $(($(date +%s) - T0))s"
