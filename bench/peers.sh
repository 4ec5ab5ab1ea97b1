#!/usr/bin/env bash
# The peer sitting of issue 49's table, in alternating rounds on fresh data directories,
# every system driven by `shoal bench s3` of this build (warp is not served by the Go
# module proxy here):
# 1. `shoal server` against MinIO single-drive: 4 KiB PUT at 32 clients, 4 MiB PUT and GET
#    at 8;
# 2. a 3-OSD size-3 vstart cluster behind one gateway against radosgw 16.2 with 3
#    BlueStore OSDs, size 3 (`radosgw-up.sh` of the peers kit, given as $RADOSGW_UP):
#    4 KiB PUT and GET at 32 clients, 4 MiB PUT and GET at 8.
# Server CPU is summed over every daemon of the system (OSDs, monitors' excluded).
# MinIO comes from `go install github.com/minio/minio@latest` (outside the repository).
# Prints one JSON row per line, tagged with the setup.
# Usage: RADOSGW_UP=.../peers/radosgw-up.sh bench/peers.sh [SECONDS] [ROUNDS] [SECTIONS]
# (defaults 20, 2, "server cluster": either or both of the two sections). CLUSTER_SYSTEMS
# picks the cluster section's systems, in order (default "shoal radosgw"; "shoal-crc" is the
# vstart cluster with `ms_cluster_mode` and `ms_client_mode` preferring crc frames).
set -euo pipefail
shoal="${SHOAL:-${CARGO_TARGET_DIR:-$HOME/.cache/shoal/target}/release/shoal}"
minio="${MINIO:-$HOME/go/bin/minio}"
radosgw_up="${RADOSGW_UP:?set RADOSGW_UP to the peers kit\'s radosgw-up.sh}"
radosgw_down="$(dirname "$radosgw_up")/radosgw-down.sh"
secs="${1:-20}" rounds="${2:-2}" sections="${3:-server cluster}" cluster_systems="${CLUSTER_SYSTEMS:-shoal radosgw}"
work=$(mktemp -d)
export CEPH_ANCHOR_DIR="$work/ceph"
trap 'set +e; kill $(jobs -p) 2>/dev/null; "$shoal" vstart --stop --dir "$work/vstart" >/dev/null 2>&1; "$radosgw_down" >/dev/null 2>&1; rm -rf "$work"' EXIT
[[ " $sections " != *" server "* ]] || [ -x "$minio" ] || GOFLAGS=-mod=mod go install github.com/minio/minio@latest
source "$(dirname "$0")/lib.sh"

# Writes {"access_key": $1, "secret_key": $2} to $keys.
keys_file() { printf '{"access_key":"%s","secret_key":"%s"}' "$1" "$2" >"$keys"; }

bench() { # tag, then `shoal bench s3` arguments
  local tag=$1; shift
  "$shoal" bench s3 --endpoint "http://127.0.0.1:$port" --keys-file "$keys" --server-pid "$pids" --no-progress \
    --json --duration "${secs}s" "$@" | sed "s/^{/{\"setup\":\"$tag\",/"
}

# 1. shoal server and MinIO.
server() {
  port=17494 keys="$work/keys.json"
  for round in $(seq "$rounds"); do
    for system in shoal minio; do
      rm -rf "$work/data"
      case $system in
        minio)
          MINIO_ROOT_USER=benchadmin MINIO_ROOT_PASSWORD=benchadmin-secret "$minio" server "$work/data" \
            --address 127.0.0.1:$port --console-address 127.0.0.1:17495 >"$work/minio.log" 2>&1 &
          keys_file benchadmin benchadmin-secret ;;
        shoal)
          "$shoal" server --data "$work/data" --port $port --bind 127.0.0.1 >"$work/server.log" 2>&1 & ;;
      esac
      pids=$!
      wait_port $port 300
      if [ $system = shoal ]; then
        for _ in $(seq 100); do [ -s "$work/data/admin.json" ] && break; sleep 0.1; done
        cp "$work/data/admin.json" "$keys"
      fi
      bench "$system server round $round" --workload put --obj-size 4KiB --concurrent 32
      bench "$system server round $round" --workload put --obj-size 4MiB --concurrent 8
      bench "$system server round $round" --workload get --obj-size 4MiB --concurrent 8 --objects 64
      kill "$pids"; wait "$pids" || true
    done
  done
}

# 2. 3 OSDs, size 3: shoal vstart with one gateway, and radosgw.
cluster() {
  keys="$work/keys.json"
  for round in $(seq "$rounds"); do
    for system in $cluster_systems; do
      case $system in
        shoal | shoal-crc)
          port=17494
          modes=()
          [ $system = shoal ] || modes=(-o "ms_cluster_mode=crc secure" -o "ms_client_mode=crc secure")
          "$shoal" vstart --dir "$work/vstart" --osds 3 --hosts 3 "${modes[@]}" >/dev/null
          "$shoal" gateway -c "$work/vstart/shoal.conf" --port $port --bind 127.0.0.1 >"$work/gateway.log" 2>&1 &
          gateway=$!
          wait_port $port 300
          "$shoal" admin -c "$work/vstart/shoal.conf" user create --uid bench --display-name bench \
            | python3 -c 'import json,sys; k=json.load(sys.stdin)["keys"][0]; print(k["access_key"], k["secret_key"])' \
            | { read -r access secret; keys_file "$access" "$secret"; }
          pids="$gateway,$(awk '$1 ~ /^osd/ {print $2}' "$work/vstart/pids" | paste -sd,)" ;;
        radosgw)
          port=7480
          FRESH=1 "$radosgw_up" >"$work/radosgw-up.log" 2>&1
          # shellcheck disable=SC1091
          source "$CEPH_ANCHOR_DIR/s3.env"
          keys_file "$ACCESS_KEY" "$SECRET_KEY"
          pids=$(pgrep -d, -x 'ceph-osd|radosgw') ;;
      esac
      bench "$system 3 osds round $round" --workload put --obj-size 4KiB --concurrent 32
      bench "$system 3 osds round $round" --workload get --obj-size 4KiB --concurrent 32 --objects 1000
      bench "$system 3 osds round $round" --workload put --obj-size 4MiB --concurrent 8
      bench "$system 3 osds round $round" --workload get --obj-size 4MiB --concurrent 8 --objects 64
      case $system in
        shoal | shoal-crc) kill "$gateway"; wait "$gateway" || true; "$shoal" vstart --stop --dir "$work/vstart" >/dev/null; rm -rf "$work/vstart" ;;
        radosgw) "$radosgw_down" >/dev/null 2>&1 ;;
      esac
    done
  done
}

for section in $sections; do "$section"; done
