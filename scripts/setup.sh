#!/usr/bin/env bash
# Installs what building and testing Shoal needs on Debian 12 (run as root, or with sudo
# available): a C/C++ toolchain and libclang for RocksDB's bindings, and ISA-L for erasure
# coding. Rust >= 1.95 must be
# on PATH (rustup); this script checks it and says so if not.
set -euo pipefail

need_apt=()
for pkg in build-essential pkg-config libclang-dev libisal-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "[setup] installing ${need_apt[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null 2>&1; then
  for dir in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
    [ -x "$dir/cargo" ] && export PATH="$dir:$PATH"
  done
fi
if ! command -v cargo >/dev/null 2>&1; then
  echo "[setup] error: cargo not found; install Rust 1.95 or newer with rustup" >&2
  exit 1
fi
version=$(rustc --version | awk '{print $2}')
if [ "$(printf '%s\n1.95.0\n' "$version" | sort -V | head -n1)" != "1.95.0" ]; then
  echo "[setup] error: Rust $version is too old; Shoal needs 1.95 or newer" >&2
  exit 1
fi
