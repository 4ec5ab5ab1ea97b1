#!/usr/bin/env bash
# Reproduces the "sealed frames vs CRC frames" figures in bench/RESULTS.md: two `shoal`
# binaries (A: before daemon traffic was sealed, B: after) each start a vstart cluster
# (1 monitor, 3 OSDs, replicated pool of size 3: every write crosses the TCP messenger three
# times) and run `shoal rados bench` against it, A and B alternating.
# Usage: bench/wire.sh SHOAL_A SHOAL_B [SECONDS] [ROUNDS] (defaults 15, 2). JSON rows on stdout.
set -euo pipefail
a=$1 b=$2 secs="${3:-15}" rounds="${4:-2}"
work=$(mktemp -d)
trap 'for d in "$work"/*/; do "$a" vstart --dir "$d" --stop >/dev/null 2>&1 || true; done; rm -rf "$work"' EXIT
run() { # tag, binary
  local tag=$1 shoal=$2 dir="$work/$1-$round"
  "$shoal" vstart --dir "$dir" --osds 3 >/dev/null
  "$shoal" rados -c "$dir/shoal.conf" mkpool bench --size 3 --pg-num 32 >/dev/null
  for args in "write -b 4194304 -t 8" "seq -t 8" "write -b 4096 -t 16"; do
    # shellcheck disable=SC2086
    "$shoal" rados -c "$dir/shoal.conf" -p bench --json bench "$secs" $args --no-cleanup |
      sed "s/^{/{\"setup\":\"$tag round $round\",/"
  done
  "$shoal" vstart --dir "$dir" --stop >/dev/null
  rm -rf "$dir" # a 4 MiB run leaves ~18 GB
}
for round in $(seq "$rounds"); do
  run crc "$a"
  run sealed "$b"
done
