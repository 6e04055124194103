#!/usr/bin/env bash
# The kind suite in one command: builds the controller's image from the Dockerfile, creates a kind
# cluster (1 control plane + 2 workers) whose kube-controller-manager runs without its
# node-lifecycle-controller, installs manifests/overlays/kind and runs the upstream-mode scenarios
# (test/kind/upstream-mode.ts), removes that install; then companion mode on the same cluster
# (test/kind/companion-mode.ts), kube-controller-manager's own controller turned back on in place
# (its static pod restarted). test/kind/kind.test.ts runs both in that order; the cluster is deleted
# at the end.
#
#   test/kind/run.sh [--offline] [--config FILE] [--image IMAGE] [--keep]
#
# On a machine with Docker, kind and kubectl (a laptop) nothing else is needed: kind pulls its
# node image as usual. --offline first runs test/kind/offline/provision.sh (a Docker engine, kind,
# kubectl and every image built from Debian packages and the Go module proxy, for machines with no
# container registry: CI here); later runs find what it provisioned by themselves.
#   --config FILE  a kind config to use instead of test/kind/kind-config.yaml (keep its
#                  kube-controller-manager --controllers patch)
#   --image IMAGE  test a prebuilt controller image instead of building the Dockerfile
#   --keep         keep the cluster (kind delete cluster --name nlc-e2e)
# Results: one "PASS: ..." line per scenario with its timings; on failure, the controller's logs and
# /metrics, nodes, pods and events in .tmp/kind-diagnostics/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

offline=0
while [ $# -gt 0 ]; do
  case "$1" in
    --offline) offline=1 ;;
    --config) export NLC_KIND_CONFIG="$(cd "$(dirname "$2")" && pwd)/$(basename "$2")"; shift ;;
    --config=*) v="${1#--config=}"; export NLC_KIND_CONFIG="$(cd "$(dirname "$v")" && pwd)/$(basename "$v")" ;;
    --image) export NLC_KIND_IMAGE="$2"; shift ;;
    --image=*) export NLC_KIND_IMAGE="${1#--image=}" ;;
    --keep) export NLC_KIND_KEEP=1 ;;
    -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (accepted: --offline, --config FILE, --image IMAGE, --keep)" >&2; exit 2 ;;
  esac
  shift
done

if [ "$offline" = 1 ]; then
  bash "$ROOT/test/kind/offline/provision.sh"
  # The amd64 runtime base scripts/build-image.sh needs for the release rehearsal (scripts/release.sh).
  bash "$ROOT/test/kind/offline/provision.sh" bases-amd64
fi
exec "$ROOT/dev" exec -- vitest run --project kind
