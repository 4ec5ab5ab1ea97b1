#!/usr/bin/env bash
# Sourced by scripts/test.sh: a Python venv with boto3, pytest, requests, the aws CLI, pika,
# kafka-python, python-swiftclient and swift-bench for the suites in tests/s3 (Debian's python3-venv provides the venv
# module), promtool (Debian's prometheus package) to check every daemon's metrics, headless
# Chromium for the CORS test from a real browser, openssl for the test CA of the HTTPS test, and the
# test brokers (RabbitMQ, Kafka) the notification suite pushes to.
set -euo pipefail

need_apt=()
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
command -v faketime >/dev/null 2>&1 || need_apt+=(faketime)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "[setup] installing ${need_apt[*]}" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
VENV="${SHOAL_VENV:-$HOME/.cache/shoal/venv}"
if ! "$VENV/bin/python" -c 'import boto3, pytest, requests, awscli, pika, kafka, swiftclient, swiftbench' >/dev/null 2>&1; then
  echo "[setup] creating the test venv in $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q boto3 pytest requests awscli pika kafka-python python-swiftclient swift-bench
fi
export SHOAL_PYTHON="$VENV/bin/python"

scripts/brokers.sh install
eval "export $(scripts/brokers.sh start)"
trap 'scripts/brokers.sh stop' EXIT
