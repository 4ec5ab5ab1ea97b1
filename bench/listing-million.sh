#!/usr/bin/env bash
# ListObjectsV2 over a bucket of OBJECTS keys (default 1,000,000; 11 index shards) in
# `shoal server`: fills it once, then RUNS runs of SECONDS each at 4 clients and at one
# client, pages of 1,000 from a random key on. Prints one JSON row per run.
# Usage: bench/listing-million.sh [SECONDS] [RUNS] [OBJECTS] (defaults 20, 5, 1000000).
set -euo pipefail
shoal="${SHOAL:-${CARGO_TARGET_DIR:-$HOME/.cache/shoal/target}/release/shoal}"
secs="${1:-20}" runs="${2:-5}" objects="${3:-1000000}"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

source "$(dirname "$0")/lib.sh"
"$shoal" server --data "$work/server" --port 17498 --bind 127.0.0.1 >"$work/server.log" 2>&1 &
server=$!
wait_port 17498
bench() { # tag, then `shoal bench s3` arguments
  local tag=$1; shift
  "$shoal" bench s3 --endpoint http://127.0.0.1:17498 --keys-file "$work/server/admin.json" --server-pid "$server" \
    --no-progress --json --bucket million --prefix p --objects "$objects" --workload list --noclear "$@" \
    | sed "s/^{/{\"setup\":\"$tag\",/"
}
start=$(date +%s)
bench fill --concurrent 32 --duration 1s >/dev/null
echo "{\"setup\":\"filled\",\"objects\":$objects,\"secs\":$(( $(date +%s) - start ))}"
for run in $(seq "$runs"); do
  bench "4 clients run $run" --no-prepare --concurrent 4 --duration "${secs}s"
  bench "1 client run $run" --no-prepare --concurrent 1 --duration "${secs}s"
done
