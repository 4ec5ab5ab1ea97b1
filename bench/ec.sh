#!/usr/bin/env bash
# S3 on an erasure-coded 4+2 data pool against a replicated size-3 one (bench/RESULTS.md):
# six one-OSD hosts and one gateway, fresh for every setup and round, the two setups
# alternating; 4 MiB PUT and GET at 8 clients, 64 MiB PUT and GET at 4 clients. Around each
# PUT run the OSDs' Prometheus counters give the raw bytes written (data device + RocksDB
# WAL, all OSDs) per user byte. Prints one JSON row per run, tagged with the setup and round,
# then a table.
# Usage: bench/ec.sh [SECONDS] [ROUNDS] (defaults 20, 2).
set -euo pipefail
shoal="${SHOAL:-${CARGO_TARGET_DIR:-$HOME/.cache/shoal/target}/release/shoal}"
secs="${1:-20}" rounds="${2:-2}"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; [ -d "$work/c" ] && "$shoal" vstart --stop --dir "$work/c" >/dev/null 2>&1; rm -rf "$work"' EXIT

wait_port() { for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

# Bytes the OSDs wrote so far: data device and WAL, summed over every OSD.
raw_written() {
  for url in $(grep -E '^ +osd\.' "$work/vstart.out" | awk '{print $2}'); do
    curl -s "$url" | grep -E '^shoal_osd_(data_written|kv_wal_written)_bytes_total' | awk '{print $2}'
  done | awk '{s += $1} END {printf "%.0f", s}'
}

bench() { # tag, then `shoal bench s3` arguments
  local tag=$1 before after; shift
  before=$(raw_written)
  local row
  row=$("$shoal" bench s3 --endpoint http://127.0.0.1:17494 --keys-file "$work/keys.json" --server-pid "$pid" \
    --no-progress --json --duration "${secs}s" "$@")
  after=$(raw_written)
  echo "$row" | python3 -c '
import json, sys
row = json.loads(sys.stdin.read())
row["setup"], raw = sys.argv[1], int(sys.argv[3]) - int(sys.argv[2])
if row["op"] == "PUT":
    row["raw_per_user_byte"] = round(raw / (row["ops"] * row["obj_size"]), 3)
print(json.dumps(row))' "$tag" "$before" "$after"
}

for round in $(seq "$rounds"); do
  for setup in ec rep; do
    ec=(); [ "$setup" = ec ] && ec=(--ec 4+2)
    "$shoal" vstart --dir "$work/c" --osds 6 --hosts 6 "${ec[@]}" >"$work/vstart.out"
    "$shoal" gateway -c "$work/c/shoal.conf" --port 17494 --bind 127.0.0.1 >"$work/gateway.log" 2>&1 &
    pid=$!
    wait_port 17494
    "$shoal" admin -c "$work/c/shoal.conf" user create --uid bench --display-name bench \
      | python3 -c 'import json,sys; k=json.load(sys.stdin)["keys"][0]; print(json.dumps({"access_key":k["access_key"],"secret_key":k["secret_key"]}))' \
      >"$work/keys.json"
    tag="$setup round $round"
    bench "$tag" --workload put --obj-size 4MiB --concurrent 8
    bench "$tag" --workload get --obj-size 4MiB --concurrent 8 --objects 64
    bench "$tag" --workload put --obj-size 64MiB --concurrent 4
    bench "$tag" --workload get --obj-size 64MiB --concurrent 4 --objects 16
    kill "$pid"; wait "$pid" || true
    "$shoal" vstart --stop --dir "$work/c" >/dev/null
    rm -rf "$work/c"
  done
done | tee "$work/rows.jsonl"

python3 - "$work/rows.jsonl" <<'EOF'
import json, sys
from collections import defaultdict
runs = defaultdict(list)
for line in open(sys.argv[1]):
    row = json.loads(line)
    runs[(row["setup"].split()[0], row["op"], row["obj_size"])].append(row)
print(f"\n{'setup':<5} {'op':<4} {'size':>6} {'MiB/s':>8} {'ops/s':>7} {'p50 ms':>8} {'p99 ms':>8} {'gw CPU ms/op':>13} {'raw/user':>9}")
for (setup, op, size), rows in sorted(runs.items()):
    mean = lambda k: sum(r[k] for r in rows) / len(rows)
    cpu = sum(r["server_cpu_s"] or 0 for r in rows) / max(1, sum(r["ops"] for r in rows)) * 1000
    raw = f"{mean('raw_per_user_byte'):.2f}" if op == "PUT" else ""
    print(f"{setup:<5} {op:<4} {size >> 20:>4}Mi {mean('mib_per_sec'):>8.1f} {mean('ops_per_sec'):>7.1f} "
          f"{mean('p50_ms'):>8.1f} {mean('p99_ms'):>8.1f} {cpu:>13.2f} {raw:>9}")
EOF
