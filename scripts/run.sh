#!/usr/bin/env bash
# Builds Shoal and starts the S3 server with embedded storage in ${SHOAL_DATA:-./shoal-data}
# on port ${SHOAL_PORT:-7480}; it prints the admin user's access key (both keys are in DATA/admin.json). Extra arguments go to
# `shoal server` (e.g. `-o rgw_thread_pool_size=64`).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/shoal/target}"
cargo build --release --locked -p shoal
exec "$CARGO_TARGET_DIR/release/shoal" server --data "${SHOAL_DATA:-./shoal-data}" --port "${SHOAL_PORT:-7480}" "$@"
