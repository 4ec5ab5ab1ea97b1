#!/usr/bin/env bash
# Reproduces the access-control, TLS and encryption figures in bench/RESULTS.md against
# `shoal server` (HTTP and HTTPS on one server, a test CA made with openssl, the SSE key file
# the server makes): 4 KiB PUT and GET with a 20-statement bucket policy against none, over
# HTTPS against HTTP, and SSE-S3 (default bucket encryption) against plain; then 4 MiB PUT
# and GET with SSE-S3 against plain; in alternating rounds. Prints one JSON row per line,
# tagged with the setup. Usage: bench/access.sh [SECONDS] [ROUNDS] (defaults 15, 2).
set -euo pipefail
shoal="${SHOAL:-${CARGO_TARGET_DIR:-$HOME/.cache/shoal/target}/release/shoal}"
secs="${1:-15}" rounds="${2:-2}"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait; rm -rf "$work"' EXIT

wait_port() { for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; return 1; }

cd "$work"
ec=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes)
openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 2 -subj "/CN=bench CA" 2>/dev/null
openssl req "${ec[@]}" -keyout server.key -out server.csr -subj "/CN=127.0.0.1" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >ext.cnf
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 -extfile ext.cnf 2>/dev/null

"$shoal" server --data "$work/server" --port 17494 --bind 127.0.0.1 \
  --tls-port 17495 --tls-cert server.pem --tls-key server.key >"$work/server.log" 2>&1 &
server=$!
wait_port 17494
wait_port 17495
bench() { # tag, endpoint, then `shoal bench s3` arguments
  local tag=$1 endpoint=$2; shift 2
  "$shoal" bench s3 --endpoint "$endpoint" --ca ca.pem --keys-file "$work/server/admin.json" --server-pid "$server" \
    --json "$@" | sed "s/^{/{\"setup\":\"$tag\",/"
}
http=http://127.0.0.1:17494 https=https://127.0.0.1:17495
for round in $(seq "$rounds"); do
  for setup in "no policy" "20-statement policy" "https" "sse-s3" "4 MiB plain" "4 MiB sse-s3"; do
    endpoint=$http statements=0 bucket=acc-plain size=4KiB objects=1000 encryption=()
    case $setup in
      "20-statement policy") statements=20 bucket=acc-policy ;;
      https) endpoint=$https bucket=acc-tls ;;
      sse-s3) bucket=acc-sse encryption=(--bucket-encryption AES256) ;;
      "4 MiB plain") bucket=acc-large size=4MiB objects=64 ;;
      "4 MiB sse-s3") bucket=acc-large-sse size=4MiB objects=64 encryption=(--bucket-encryption AES256) ;;
    esac
    for workload in put get; do
      bench "$setup round $round" "$endpoint" --bucket "$bucket-$workload" --policy-statements "$statements" \
        "${encryption[@]}" --workload "$workload" --obj-size "$size" --objects "$objects" --concurrent 32 \
        --duration "${secs}s"
    done
  done
done
