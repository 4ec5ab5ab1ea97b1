#!/usr/bin/env bash
# Where should writes leave the WAL for the data device? `shoal server` with
# store_prefer_deferred_size 16 KiB, 64 KiB (the default) and 1 MiB, in alternating rounds:
# PUT and GET of 32 KiB, 128 KiB and 512 KiB objects at 16 clients, each server fresh.
# Prints one JSON row per line, tagged with the threshold. bench/RESULTS.md has the table.
# Usage: bench/deferred.sh [SECONDS] [ROUNDS] (defaults 8, 2).
set -euo pipefail
shoal="${SHOAL:-${CARGO_TARGET_DIR:-$HOME/.cache/shoal/target}/release/shoal}"
secs="${1:-8}" rounds="${2:-2}"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
wait_port() { for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }
for round in $(seq "$rounds"); do
  for threshold in 16384 65536 1048576; do
    rm -rf "$work/data"
    "$shoal" server --data "$work/data" --port 17496 --bind 127.0.0.1 -o "store_prefer_deferred_size=$threshold" \
      >"$work/server.log" 2>&1 &
    pid=$!
    wait_port 17496
    for size in 32KiB 128KiB 512KiB; do
      for workload in put get; do
        "$shoal" bench s3 --endpoint http://127.0.0.1:17496 --keys-file "$work/data/admin.json" --server-pid "$pid" \
          --workload "$workload" --obj-size "$size" --concurrent 16 --duration "${secs}s" --objects 200 --no-progress \
          --json | sed "s/^{/{\"setup\":\"threshold $threshold round $round\",/"
      done
    done
    kill "$pid"; wait "$pid" || true
  done
done
