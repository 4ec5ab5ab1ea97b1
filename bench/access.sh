#!/usr/bin/env bash
# Reproduces the access-control and TLS figures in bench/RESULTS.md against `shoal server`
# (HTTP and HTTPS on one server, a test CA made with openssl): 4 KiB PUT and GET with a
# 20-statement bucket policy against none, and over HTTPS against HTTP, in alternating
# rounds. Prints one JSON row per line, tagged with the setup.
# Usage: bench/access.sh [SECONDS] [ROUNDS] (defaults 15, 2).
set -euo pipefail
shoal="${SHOAL:-${CARGO_TARGET_DIR:-$HOME/.cache/shoal/target}/release/shoal}"
secs="${1:-15}" rounds="${2:-2}"
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

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
  for setup in "no policy" "20-statement policy" "https"; do
    endpoint=$http statements=0 bucket=acc-plain
    [ "$setup" = "20-statement policy" ] && statements=20 bucket=acc-policy
    [ "$setup" = "https" ] && endpoint=$https bucket=acc-tls
    for workload in put get; do
      bench "$setup round $round" "$endpoint" --bucket "$bucket-$workload" --policy-statements "$statements" \
        --workload "$workload" --objects 1000 --concurrent 32 --duration "${secs}s"
    done
  done
done
