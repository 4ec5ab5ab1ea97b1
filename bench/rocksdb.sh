#!/usr/bin/env bash
# The RocksDB tuning study: every preset of bench/rocksdb.py on a fresh `shoal server`
# pinned to two cores; JSON rows to bench/rocksdb.jsonl, the tables to stdout and the plot
# to bench/rocksdb.png (matplotlib in a venv outside the repository).
# Usage: bench/rocksdb.sh [SECONDS] (default 20).
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-20}"
venv="${SHOAL_PLOT_VENV:-$HOME/.cache/shoal/plot-venv}"
[ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import matplotlib' 2>/dev/null || {
  python3 -m venv "$venv" && "$venv/bin/pip" install -q matplotlib
}
"$venv/bin/python" bench/rocksdb.py --seconds "$secs" | tee bench/rocksdb.jsonl
"$venv/bin/python" bench/rocksdb.py --from bench/rocksdb.jsonl --table --plot bench/rocksdb.png
