#!/usr/bin/env bash
# Compares two builds of `shoal server` side by side: S3 4 KiB PUT/GET at 32 clients and
# 4 MiB PUT/GET at 8, each round running A then B on fresh data directories, so that the
# machine's drift falls on both. The load generator is A's `shoal bench s3`. Prints one
# JSON row per line, tagged with the build and the round.
# Usage: bench/ab.sh SHOAL_A SHOAL_B [SECONDS] [ROUNDS]   (defaults 20 s, 2 rounds)
set -euo pipefail
a="$1"; b="$2"; secs="${3:-20}"; rounds="${4:-2}"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

one() { # tag binary round
  local tag=$1 bin=$2 round=$3 dir="$work/$1-$3"
  "$bin" server --data "$dir" --port 17491 --bind 127.0.0.1 >"$dir.log" 2>&1 &
  local server=$!
  wait_port 17491
  run() { "$a" bench s3 --endpoint http://127.0.0.1:17491 --keys-file "$dir/admin.json" --server-pid "$server" \
            --duration "${secs}s" --json "$@" | sed "s/^{/{\"build\":\"$tag\",\"round\":$round,/"; }
  run --workload put --obj-size 4KiB --concurrent 32
  run --workload get --obj-size 4KiB --concurrent 32 --objects 1000
  run --workload put --obj-size 4MiB --concurrent 8
  run --workload get --obj-size 4MiB --concurrent 8 --objects 64
  kill "$server"; wait "$server" 2>/dev/null || true
}

for round in $(seq "$rounds"); do
  one A "$a" "$round"
  one B "$b" "$round"
done
