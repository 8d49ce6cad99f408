#!/usr/bin/env bash
# TLS against plaintext on one sluiced: the same `sluice bench` workload through a PLAINTEXT and
# an SSL listener of the same broker, with the broker's CPU time (utime+stime from
# /proc/<pid>/stat) over each run divided by the records published plus consumed.
#
#   perf/tls_bench.sh [workload] [duration]      (defaults: 1 KiB records at max rate, 15s)
set -euo pipefail
cd "$(dirname "$0")/.."
workload=${1:-bench/workloads/1-topic-8-partitions-1kb.yaml}
duration=${2:-15s}
work=$(mktemp -d)
trap 'kill $broker 2>/dev/null || true; wait $broker 2>/dev/null || true; rm -rf "$work"' EXIT

go build -o "$work/sluiced" ./cmd/sluiced
go build -o "$work/sluice" ./cmd/sluice

# A throwaway CA and a server certificate for 127.0.0.1.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=bench-ca \
  -keyout "$work/ca-key.pem" -out "$work/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
  -keyout "$work/server-key.pem" -out "$work/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$work/san.ext"
openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca-key.pem" -CAcreateserial \
  -days 1 -extfile "$work/san.ext" -out "$work/server.pem" 2>/dev/null

"$work/sluiced" --data-dir "$work/data" --listeners PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0 \
  --raft-listen 127.0.0.1:0 --http 127.0.0.1:0 \
  --tls-cert "$work/server.pem" --tls-key "$work/server-key.pem" 2> "$work/sluiced.log" &
broker=$!
for _ in $(seq 600); do grep -q 'broker serving' "$work/sluiced.log" && break; sleep 0.1; done
listeners=$(grep -o 'listeners=[^ ]*' "$work/sluiced.log" | head -1 | cut -d= -f2)
plaintext=$(tr ',' '\n' <<<"$listeners" | sed -n 's|^PLAINTEXT://||p')
ssl=$(tr ',' '\n' <<<"$listeners" | sed -n 's|^SSL://||p')
ticks=$(getconf CLK_TCK)

cpu() { awk '{print $14 + $15}' "/proc/$broker/stat"; }

run() { # name, then sluice flags
  local name=$1; shift
  local before after out published consumed seconds
  before=$(cpu)
  out=$("$work/sluice" bench "$@" --workload "$workload" --duration "$duration" --warmup 0s \
    --quiet --json --out-dir "$work/results")
  after=$(cpu)
  published=$(jq '.published' <<<"$out")
  consumed=$(jq '.consumed' <<<"$out")
  seconds=$(jq -r '.summary.duration_seconds // empty' <<<"$out")
  awk -v name="$name" -v p="$published" -v c="$consumed" -v d="${duration%s}" -v t=$((after - before)) -v hz="$ticks" 'BEGIN {
    cpu = t / hz
    printf "%-9s publish %9.0f msg/s  consume %9.0f msg/s  broker CPU %6.2f s  %5.2f us/record\n", name, p / d, c / d, cpu, cpu * 1e6 / (p + c)
  }'
}

run plaintext --brokers "$plaintext"
run tls --brokers "$ssl" --tls-ca "$work/ca.pem"
