#!/usr/bin/env bash
# Runs every test of Shoal: installs what is missing, builds in the release profile (the
# only profile we build: each profile compiles RocksDB again), then runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/setup.sh
source scripts/test-env.sh
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/shoal/target}"
cargo test --release --workspace --locked
