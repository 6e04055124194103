#!/bin/bash
# OCI runtime wrapper for VMs that cannot run privileged containers (the offline CI path only; a
# normal Docker host never uses it). On such a VM the capability bounding set lacks
# CAP_SYS_RESOURCE and no process may set a negative oom_score_adj, so runc fails on
# `docker run --privileged` (every kind node) and on the oomScoreAdj kubelet gives critical pods
# (-997) and sandboxes (-998). Before `create`/`run` (the bundle's config.json) and `exec`
# (the --process file) this drops CAP_SYS_RESOURCE from every capability set and raises a
# negative oomScoreAdj to 0, then hands over to the real runc: "<this file>.real".
set -u
real="$0.real"
cmd="" bundle="." process=""
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --bundle | -b) bundle="${args[i + 1]:-.}" ;;
    --bundle=*) bundle="${args[i]#--bundle=}" ;;
    --process | -p) process="${args[i + 1]:-}" ;;
    --process=*) process="${args[i]#--process=}" ;;
    create | run | exec) [ -z "$cmd" ] && cmd="${args[i]}" ;;
  esac
done

# Rewrites an OCI config (or process) JSON file in place; leaves it alone when jq fails.
soften() {
  local file="$1" out
  [ -f "$file" ] || return 0
  out="$(jq -c '
    def nosysres: if type == "array" then map(select(. != "CAP_SYS_RESOURCE")) else . end;
    def clamp: if (.oomScoreAdj? // 0) < 0 then .oomScoreAdj = 0 else . end;
    (if has("capabilities") then .capabilities |= map_values(nosysres) else . end)
    | (if (.process? | type) == "object" and (.process | has("capabilities"))
       then .process.capabilities |= map_values(nosysres) else . end)
    | clamp
    | (if (.process? | type) == "object" then .process |= clamp else . end)
  ' "$file")" && printf '%s\n' "$out" >"$file"
}

case "$cmd" in
  create | run) soften "$bundle/config.json" ;;
  exec) [ -n "$process" ] && soften "$process" ;;
esac
exec "$real" "$@"
