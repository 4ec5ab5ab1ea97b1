#!/usr/bin/env bash
# Reproduces the notification figures in bench/RESULTS.md with the test venv and brokers
# (installed and started as scripts/test.sh does).
# Usage: bench/notify.sh [SECONDS] [--rounds N] [--osds 3,6] [--json]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/test-env.sh
"$SHOAL_PYTHON" bench/notify.py --seconds "${1:-8}" "${@:2}"
