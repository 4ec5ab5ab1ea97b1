#!/usr/bin/env bash
# Listing, build A against build B, in alternating rounds on one data directory: fills an
# unversioned bucket with OBJECTS keys and a versioned one with OBJECTS keys × 3 versions
# (11 index shards each) once, then per round restarts `shoal server` from A and from B
# and times ListObjectsV2 over each bucket and ListObjectVersions (4 clients, pages of
# 1,000 from a random key on). Prints one JSON row per line, tagged with build and round.
# Usage: SHOAL_A=path SHOAL_B=path bench/listing-ab.sh [SECONDS] [ROUNDS] [OBJECTS]
# (defaults 20, 3, 100000).
set -euo pipefail
secs="${1:-20}" rounds="${2:-3}" objects="${3:-100000}"
: "${SHOAL_A:?the first build's shoal binary}" "${SHOAL_B:?the second build's shoal binary}"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

source "$(dirname "$0")/lib.sh"
start() { # binary
  "$1" server --data "$work/server" --port 17494 --bind 127.0.0.1 >>"$work/server.log" 2>&1 &
  server=$!
  wait_port 17494
}
stop() { kill "$server"; wait "$server" || true; }
bench() { # binary, tag, then `shoal bench s3` arguments
  local binary=$1 tag=$2; shift 2
  "$binary" bench s3 --endpoint http://127.0.0.1:17494 --keys-file "$work/server/admin.json" --server-pid "$server" \
    --json "$@" | sed "s/^{/{\"setup\":\"$tag\",/"
}

start "$SHOAL_A"
bench "$SHOAL_A" fill --bucket list-plain --prefix p --workload list --objects "$objects" --noclear --duration 1s \
  --concurrent 32 >/dev/null
bench "$SHOAL_A" fill --bucket list-versioned --versioned --prefix p --workload list --objects "$objects" \
  --versions 3 --noclear --duration 1s --concurrent 32 >/dev/null
stop
for round in $(seq "$rounds"); do
  for build in A B; do
    binary=SHOAL_$build
    start "${!binary}"
    list=(--prefix p --no-prepare --objects "$objects" --workload list --noclear --concurrent 4 --duration "${secs}s")
    bench "${!binary}" "$build plain $round" --bucket list-plain "${list[@]}"
    bench "${!binary}" "$build versioned $round" --bucket list-versioned "${list[@]}"
    bench "${!binary}" "$build versions $round" --bucket list-versioned "${list[@]}" --list-versions
    stop
  done
done
