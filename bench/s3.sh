#!/usr/bin/env bash
# Reproduces the S3 figures in bench/RESULTS.md: 4 KiB PUT/GET/DELETE and mixed at 32
# clients, 4 MiB PUT/GET at 8, against `shoal server` and a 3-OSD size-3 vstart cluster
# behind one gateway; then the thread-pool / cache study. Prints one JSON row per line,
# tagged with the setup. Usage: bench/s3.sh [SECONDS] (default 20).
set -euo pipefail
shoal="${SHOAL:-${CARGO_TARGET_DIR:-$HOME/.cache/shoal/target}/release/shoal}"
secs="${1:-20}"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; "$shoal" vstart --dir "$work/cluster" --stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

suite() { # setup-name endpoint keys-file server-pid
  local tag=$1 endpoint=$2 keys=$3 pid=$4
  run() { "$shoal" bench s3 --endpoint "$endpoint" --keys-file "$keys" --server-pid "$pid" --duration "${secs}s" --json "$@" |
          sed "s/^{/{\"setup\":\"$tag\",/"; }
  run --workload put --obj-size 4KiB --concurrent 32
  run --workload get --obj-size 4KiB --concurrent 32 --objects 1000
  run --workload delete --obj-size 4KiB --concurrent 32 --objects 20000
  run --workload mixed --obj-size 4KiB --concurrent 32 --objects 1000
  run --workload put --obj-size 4MiB --concurrent 8
  run --workload get --obj-size 4MiB --concurrent 8 --objects 64
}

# 1. shoal server (embedded, size 1)
"$shoal" server --data "$work/server" --port 17490 --bind 127.0.0.1 >"$work/server.log" 2>&1 &
server=$!
wait_port 17490
suite server http://127.0.0.1:17490 "$work/server/admin.json" "$server"
kill $server; wait $server || true

# 2. vstart: 3 OSDs on 3 hosts, pools of size 3, one gateway
"$shoal" vstart --dir "$work/cluster" --osds 3 --hosts 3 >/dev/null
"$shoal" gateway -c "$work/cluster/shoal.conf" --port 17491 --bind 127.0.0.1 >"$work/gateway.log" 2>&1 &
gateway=$!
wait_port 17491
"$shoal" admin -c "$work/cluster/shoal.conf" user create --uid bench --display-name Bench |
  python3 -c 'import json,sys; k=json.load(sys.stdin)["keys"][0]; print(json.dumps(k))' >"$work/bench-keys.json"
suite vstart3 http://127.0.0.1:17491 "$work/bench-keys.json" "$gateway"
kill $gateway; wait $gateway || true
"$shoal" vstart --dir "$work/cluster" --stop >/dev/null

# 3. thread pool / cache study on shoal server: mixed 4 KiB at 256 clients
for cache in true false; do
  for pool in 64 512 2048; do
    rm -rf "$work/study"
    "$shoal" server --data "$work/study" --port 17492 --bind 127.0.0.1 \
      -o rgw_thread_pool_size=$pool -o rgw_max_concurrent_requests=4096 -o rgw_cache_enabled=$cache >"$work/study.log" 2>&1 &
    server=$!
    wait_port 17492
    "$shoal" bench s3 --endpoint http://127.0.0.1:17492 --keys-file "$work/study/admin.json" --server-pid $server \
      --duration "${secs}s" --json --workload mixed --concurrent 256 --objects 1000 |
      sed "s/^{/{\"setup\":\"study pool=$pool cache=$cache\",/"
    kill $server; wait $server || true
  done
done
