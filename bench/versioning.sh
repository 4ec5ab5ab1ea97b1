#!/usr/bin/env bash
# Reproduces the data-protection figures in bench/RESULTS.md against `shoal server`:
# 1. 4 KiB PUT and GET (32 clients) in an unversioned and a versioned bucket, alternating
#    rounds; 2. ListObjectsV2 over 100,000 keys × 3 versions in a versioned bucket against
#    100,000 keys in an unversioned one (and ListObjectVersions), alternating rounds;
# 3. a lifecycle rule expiring 100,000 objects while 32 clients PUT into another bucket,
#    against rounds of PUTs alone. Prints one JSON row per line, tagged with the setup.
# Usage: bench/versioning.sh [SECONDS] [ROUNDS] [OBJECTS] (defaults 20, 3, 100000).
set -euo pipefail
shoal="${SHOAL:-${CARGO_TARGET_DIR:-$HOME/.cache/shoal/target}/release/shoal}"
secs="${1:-20}" rounds="${2:-3}" objects="${3:-100000}"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

source "$(dirname "$0")/lib.sh"

# rgw_lc_debug_interval=1: one lifecycle day is a second, so that expiry starts at once.
"$shoal" server --data "$work/server" --port 17493 --bind 127.0.0.1 -o rgw_lc_debug_interval=1 >"$work/server.log" 2>&1 &
server=$!
wait_port 17493
bench() { # tag, then `shoal bench s3` arguments
  local tag=$1; shift
  "$shoal" bench s3 --endpoint http://127.0.0.1:17493 --keys-file "$work/server/admin.json" --server-pid "$server" \
    --json "$@" | sed "s/^{/{\"setup\":\"$tag\",/"
}

# 1. PUT and GET, plain against versioned, in alternating rounds.
for round in $(seq "$rounds"); do
  for kind in plain versioned; do
    flag=(); [ "$kind" = versioned ] && flag=(--versioned)
    bench "$kind round $round" --bucket "put-$kind" "${flag[@]}" --workload put --concurrent 32 --duration "${secs}s"
    bench "$kind round $round" --bucket "get-$kind" "${flag[@]}" --workload get --concurrent 32 --duration "${secs}s" \
      --objects 1000 --versions 3
  done
done

# 2. Listing: the buckets are filled once and listed in alternating rounds.
bench "fill plain" --bucket list-plain --prefix p --workload list --objects "$objects" --noclear --duration 1s \
  --concurrent 32 >/dev/null
bench "fill versioned" --bucket list-versioned --versioned --prefix p --workload list --objects "$objects" \
  --versions 3 --noclear --duration 1s --concurrent 32 >/dev/null
for round in $(seq "$rounds"); do
  bench "plain round $round" --bucket list-plain --prefix p --no-prepare --objects "$objects" --workload list \
    --noclear --concurrent 4 --duration "${secs}s"
  bench "versioned round $round" --bucket list-versioned --prefix p --no-prepare --objects "$objects" --workload list \
    --noclear --concurrent 4 --duration "${secs}s"
  bench "versioned versions round $round" --bucket list-versioned --prefix p --no-prepare --objects "$objects" \
    --workload list --list-versions --noclear --concurrent 4 --duration "${secs}s"
done

# 3. Lifecycle expiry under a PUT workload.
bench "lifecycle" --bucket lc-put --workload expire --objects "$objects" --rounds "$rounds" --concurrent 32 --duration 30m
kill "$server"; wait "$server" || true
