#!/usr/bin/env bash
# Large objects, side by side in alternating rounds (bench/RESULTS.md):
# 1. `shoal server` of this build (B) against the build in $SHOAL_A (A, the previous
#    store) and against MinIO single-drive: 4 MiB PUT and GET at 8 clients, 64 MiB PUT and
#    GET at 4 clients, 4 KiB PUT, GET and mixed at 32 clients;
# 2. a 3-OSD size-3 vstart cluster behind one gateway, B against A: 4 MiB PUT and GET at
#    8 clients.
# Every setup runs on a fresh data directory; `shoal bench s3` of this build drives all.
# MinIO comes from `go install github.com/minio/minio@latest` (outside the repository).
# Prints one JSON row per line, tagged with the setup.
# Usage: SHOAL_A=/path/to/old/shoal bench/large.sh [SECONDS] [ROUNDS] (defaults 20, 2).
set -euo pipefail
shoal="${SHOAL:-${CARGO_TARGET_DIR:-$HOME/.cache/shoal/target}/release/shoal}"
old="${SHOAL_A:?set SHOAL_A to the previous build\'s shoal binary}"
minio="${MINIO:-$HOME/go/bin/minio}"
secs="${1:-20}" rounds="${2:-2}"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; for c in "$work"/vstart-*; do [ -d "$c" ] && "$old" vstart --stop --dir "$c" >/dev/null 2>&1; "$shoal" vstart --stop --dir "$c" >/dev/null 2>&1; done; rm -rf "$work"' EXIT
[ -x "$minio" ] || GOFLAGS=-mod=mod go install github.com/minio/minio@latest

wait_port() { for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

# Starts system $1 (A, B or minio) on port 17494; sets $pid, $keys.
start() {
  rm -rf "$work/data"
  case $1 in
    minio)
      printf '{"access_key":"benchadmin","secret_key":"benchadmin-secret"}' >"$work/minio.json"
      MINIO_ROOT_USER=benchadmin MINIO_ROOT_PASSWORD=benchadmin-secret "$minio" server "$work/data" \
        --address 127.0.0.1:17494 --console-address 127.0.0.1:17495 >"$work/minio.log" 2>&1 &
      keys="$work/minio.json" ;;
    *)
      local bin=$shoal; [ "$1" = A ] && bin=$old
      "$bin" server --data "$work/data" --port 17494 --bind 127.0.0.1 >"$work/server.log" 2>&1 &
      keys="$work/data/admin.json" ;;
  esac
  pid=$!
  wait_port 17494
  for _ in $(seq 100); do [ -s "$keys" ] && break; sleep 0.1; done
}

bench() { # tag, then `shoal bench s3` arguments
  local tag=$1; shift
  "$shoal" bench s3 --endpoint http://127.0.0.1:17494 --keys-file "$keys" --server-pid "$pid" --no-progress \
    --json --duration "${secs}s" "$@" | sed "s/^{/{\"setup\":\"$tag\",/"
}

# 1. shoal server A and B, MinIO: one fresh server per system and round.
for round in $(seq "$rounds"); do
  for system in A B minio; do
    start "$system"
    bench "$system server round $round" --workload put --obj-size 4MiB --concurrent 8
    bench "$system server round $round" --workload get --obj-size 4MiB --concurrent 8 --objects 64
    bench "$system server round $round" --workload put --obj-size 64MiB --concurrent 4
    bench "$system server round $round" --workload get --obj-size 64MiB --concurrent 4 --objects 16
    bench "$system server round $round" --workload put --obj-size 4KiB --concurrent 32
    bench "$system server round $round" --workload get --obj-size 4KiB --concurrent 32 --objects 1000
    bench "$system server round $round" --workload mixed --obj-size 4KiB --concurrent 32 --objects 1000
    kill "$pid"; wait "$pid" || true
  done
done

# 2. vstart 3 OSDs, size 3, one gateway: A and B.
for round in $(seq "$rounds"); do
  for system in A B; do
    bin=$shoal; [ "$system" = A ] && bin=$old
    cluster="$work/vstart-$system-$round"
    "$bin" vstart --dir "$cluster" --osds 3 --hosts 3 >/dev/null
    "$bin" gateway -c "$cluster/shoal.conf" --port 17494 --bind 127.0.0.1 >"$work/gateway.log" 2>&1 &
    pid=$!
    wait_port 17494
    "$bin" admin -c "$cluster/shoal.conf" user create --uid bench --display-name bench \
      | python3 -c 'import json,sys; k=json.load(sys.stdin)["keys"][0]; print(json.dumps({"access_key":k["access_key"],"secret_key":k["secret_key"]}))' \
      >"$work/vstart.json"
    keys="$work/vstart.json"
    bench "$system vstart round $round" --workload put --obj-size 4MiB --concurrent 8
    bench "$system vstart round $round" --workload get --obj-size 4MiB --concurrent 8 --objects 64
    kill "$pid"; wait "$pid" || true
    "$bin" vstart --stop --dir "$cluster" >/dev/null
    rm -rf "$cluster"
  done
done
