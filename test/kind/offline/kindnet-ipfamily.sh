#!/bin/bash
# kindnet.sh for IPv6 single-stack and dual-stack clusters (test/kind/ipv6.sh only). The same two
# jobs as kindnet.sh, for every IP family a node has:
#   - this node's CNI config: ptp + host-local IPAM with one range per spec.podCIDRs entry and a
#     default route per family, portmap;
#   - a route to each other node's pod range via that node's InternalIP of the same family.
# kindnet.sh itself stays IPv4-only: it is baked into the offline node image, whose cache key hashes
# it, so changing it would rebuild that image everywhere. This one is not baked in: test/kind/ipv6.sh
# mounts it from a ConfigMap into the same stand-in image (bash, curl, jq, iproute2) on a cluster
# created with kind's disableDefaultCNI. It needs NODE_NAME (spec.nodeName). No masquerading and no
# network policy. Every 5 s it lists the Nodes with the pod's service-account token.
set -u
sa=/var/run/secrets/kubernetes.io/serviceaccount
host="${KUBERNETES_SERVICE_HOST:?}"
case "$host" in *:*) host="[$host]" ;; esac
api="https://${host}:${KUBERNETES_SERVICE_PORT:?}"
conf=/etc/cni/net.d/10-kindnet.conflist
me="${NODE_NAME:?NODE_NAME (spec.nodeName) must be set}"

log() { printf '%s kindnet-ipfamily: %s\n' "$(date -u +%FT%TZ)" "$*"; }

# One line per pod range of every node: "<node> <cidr> <that node's InternalIP of the cidr's family>".
node_ranges() {
  curl -sf --max-time 10 --cacert "$sa/ca.crt" -H "Authorization: Bearer $(cat "$sa/token")" \
    "$api/api/v1/nodes" | jq -r '
      .items[]
      | .metadata.name as $node
      | [.status.addresses[]? | select(.type == "InternalIP") | .address] as $ips
      | (.spec.podCIDRs // [.spec.podCIDR // empty])[]
      | . as $cidr
      | ([$ips[] | select(test(":") == ($cidr | test(":")))][0]) as $ip
      | select($ip != null)
      | "\($node) \($cidr) \($ip)"'
}

write_conf() {
  local cidrs="$1" body
  body="$(jq -n --arg cidrs "$cidrs" '($cidrs | split(",")) as $c | {
    cniVersion: "0.4.0",
    name: "kindnet",
    plugins: [
      {type: "ptp", ipMasq: false, mtu: 1500,
       ipam: {type: "host-local", dataDir: "/run/cni-ipam-state",
              routes: ([if any($c[]; test(":") | not) then {dst: "0.0.0.0/0"} else empty end,
                        if any($c[]; test(":")) then {dst: "::/0"} else empty end]),
              ranges: ($c | map([{subnet: .}]))}},
      {type: "portmap", capabilities: {portMappings: true}}
    ]}')"
  if [ -f "$conf" ] && [ "$(cat "$conf")" = "$body" ]; then return 0; fi
  printf '%s\n' "$body" >"$conf.tmp" && mv "$conf.tmp" "$conf" && log "wrote $conf for $cidrs"
}

log "starting on $me"
while true; do
  if lines="$(node_ranges)"; then
    mine=""
    while read -r node cidr ip; do
      [ -n "$node" ] || continue
      if [ "$node" = "$me" ]; then
        mine="${mine:+$mine,}$cidr"
        continue
      fi
      ip route replace "$cidr" via "$ip" 2>/dev/null || log "route $cidr via $ip failed"
    done <<<"$lines"
    if [ -n "$mine" ]; then write_conf "$mine"; else log "no pod range for $me yet"; fi
  else
    log "listing nodes failed; retrying"
  fi
  sleep 5
done
