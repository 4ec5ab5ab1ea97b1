#!/usr/bin/env bash
# Builds Shoal and opens an interactive object-layer session on an embedded store in
# ${SHOAL_DATA:-./shoal-data}. Extra arguments go to `shoal rados`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/shoal/target}"
cargo build --release --locked -p shoal
exec "$CARGO_TARGET_DIR/release/shoal" rados --data "${SHOAL_DATA:-./shoal-data}" "$@"
