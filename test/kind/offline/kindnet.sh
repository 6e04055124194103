#!/bin/bash
# A stand-in for kind's kindnetd (whose source the Go module proxy does not serve), for the offline
# CI path only. It runs where kind runs kindnetd (the `kindnet` DaemonSet: host network,
# NET_ADMIN, /etc/cni/net.d mounted) and does the two things pods need between kind nodes:
#   - writes this node's CNI config: ptp + host-local IPAM over the node's spec.podCIDRs, portmap;
#   - keeps a route to every other node's pod ranges via that node's InternalIP.
# No masquerading and no network policy (nothing in the suite needs them). Every 5 s it lists the
# Nodes with the pod's service-account token; a failed round is logged and retried.
set -u
sa=/var/run/secrets/kubernetes.io/serviceaccount
api="https://${KUBERNETES_SERVICE_HOST}:${KUBERNETES_SERVICE_PORT}"
conf=/etc/cni/net.d/10-kindnet.conflist
host_ip="${HOST_IP:?HOST_IP (status.hostIP) must be set}"

log() { printf '%s kindnet-standin: %s\n' "$(date -u +%FT%TZ)" "$*"; }

# One line per node with an IPv4 InternalIP and pod ranges: "<ip> <cidr>[,<cidr>...]".
node_ranges() {
  curl -sf --max-time 10 --cacert "$sa/ca.crt" -H "Authorization: Bearer $(cat "$sa/token")" \
    "$api/api/v1/nodes" | jq -r '
      .items[]
      | ([.status.addresses[]? | select(.type == "InternalIP") | .address | select(test("^[0-9.]+$"))][0]) as $ip
      | ((.spec.podCIDRs // [.spec.podCIDR // empty]) | map(select(test("^[0-9.]+/[0-9]+$")))) as $cidrs
      | select($ip != null and ($cidrs | length) > 0)
      | "\($ip) \($cidrs | join(","))"'
}

write_conf() {
  local cidrs="$1" body
  body="$(jq -n --arg cidrs "$cidrs" '{
    cniVersion: "0.4.0",
    name: "kindnet",
    plugins: [
      {type: "ptp", ipMasq: false, mtu: 1500,
       ipam: {type: "host-local", dataDir: "/run/cni-ipam-state", routes: [{dst: "0.0.0.0/0"}],
              ranges: ($cidrs | split(",") | map([{subnet: .}]))}},
      {type: "portmap", capabilities: {portMappings: true}}
    ]}')"
  if [ -f "$conf" ] && [ "$(cat "$conf")" = "$body" ]; then return 0; fi
  printf '%s\n' "$body" >"$conf.tmp" && mv "$conf.tmp" "$conf" && log "wrote $conf for $cidrs"
}

log "starting on $host_ip"
while true; do
  if lines="$(node_ranges)"; then
    while read -r ip cidrs; do
      [ -n "$ip" ] || continue
      if [ "$ip" = "$host_ip" ]; then
        write_conf "$cidrs"
        continue
      fi
      for cidr in ${cidrs//,/ }; do
        ip route replace "$cidr" via "$ip" 2>/dev/null || log "route $cidr via $ip failed"
      done
    done <<<"$lines"
  else
    log "listing nodes failed; retrying"
  fi
  sleep 5
done
