#!/usr/bin/env bash
# Reproduces the "crc frames vs sealed frames" figures in bench/RESULTS.md: one `shoal`
# binary starts a vstart cluster (1 monitor, 3 OSDs, replicated pool of size 3: every write
# crosses the TCP messenger three times) with the default frame modes (sealed) and another
# with `ms_cluster_mode` and `ms_client_mode` preferring crc, and runs `shoal rados bench`
# against each, the two alternating.
# Usage: bench/wire.sh SHOAL [SECONDS] [ROUNDS] (defaults 15, 2). JSON rows on stdout.
set -euo pipefail
shoal=$1 secs="${2:-15}" rounds="${3:-2}"
work=$(mktemp -d)
trap 'for d in "$work"/*/; do "$shoal" vstart --dir "$d" --stop >/dev/null 2>&1 || true; done; rm -rf "$work"' EXIT
run() { # tag, vstart options
  local tag=$1 dir="$work/$1-$round"
  shift
  "$shoal" vstart --dir "$dir" --osds 3 "$@" >/dev/null
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
  run sealed
  run crc -o "ms_cluster_mode=crc secure" -o "ms_client_mode=crc secure"
done
