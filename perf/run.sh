#!/bin/sh
# perf/run.sh: start a local sluiced on a temporary data directory, run a standard workload
# against it with `sluice bench`, capture the broker's CPU and allocation profiles over its HTTP
# listener (pprof) and, where the kernel allows, `perf stat` of the broker, and store everything
# under perf/results/<date-time>-<workload>/. The data directory is deleted afterwards.
#
# Settings (environment): WORKLOAD (default bench/workloads/1-topic-8-partitions-100b.yaml),
# DURATION (default 30s), WARMUP (5s), ACKS (the workload's), DRIVER (client), RESULTS
# (perf/results), SEGMENT_BYTES (268435456), FLUSH (os), EXTRA_BENCH_ARGS.
set -eu

cd "$(dirname "$0")/.."
WORKLOAD=${WORKLOAD:-bench/workloads/1-topic-8-partitions-100b.yaml}
DURATION=${DURATION:-30s}
WARMUP=${WARMUP:-5s}
DRIVER=${DRIVER:-client}
RESULTS=${RESULTS:-perf/results}
SEGMENT_BYTES=${SEGMENT_BYTES:-268435456}
FLUSH=${FLUSH:-os}
name=$(basename "$WORKLOAD" .yaml)
out="$RESULTS/$(date +%Y%m%d-%H%M%S)-$name${ACKS:+-acks$ACKS}"
mkdir -p "$out"
data=$(mktemp -d "${TMPDIR:-/tmp}/sluice-perf-XXXXXX")
log="$out/sluiced.log"

cleanup() {
	[ -n "${broker_pid:-}" ] && kill -TERM "$broker_pid" 2>/dev/null && wait "$broker_pid" 2>/dev/null || true
	[ -n "${perf_pid:-}" ] && wait "$perf_pid" 2>/dev/null || true
	rm -rf "$data"
}
trap cleanup EXIT INT TERM

bin/sluiced --data-dir "$data" --listen 127.0.0.1:0 --http 127.0.0.1:0 --raft-listen 127.0.0.1:0 \
	--segment-bytes "$SEGMENT_BYTES" --flush "$FLUSH" 2>"$log" &
broker_pid=$!
for _ in $(seq 1 300); do
	grep -q 'msg="broker serving"' "$log" && break
	sleep 0.1
done
kafka=$(sed -n 's/.*msg="broker serving" listen=\([^ ]*\).*/\1/p' "$log" | head -1)
http=$(sed -n 's/.*msg="http serving" address=\([^ ]*\).*/\1/p' "$log" | head -1)
[ -n "$kafka" ] || { echo "perf: sluiced did not start; see $log" >&2; exit 1; }

{
	echo "date: $(date -Is)"
	echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (dirty)')"
	echo "kernel: $(uname -sr)"
	echo "cpus: $(nproc) ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1))"
	echo "memory: $(awk '/MemTotal/ {print $2 " kB"}' /proc/meminfo)"
	echo "filesystem: $(df -T "$data" | awk 'NR==2 {print $2 " on " $1}')"
	echo "workload: $WORKLOAD duration $DURATION warmup $WARMUP driver $DRIVER acks ${ACKS:-workload} flush $FLUSH"
} >"$out/machine.txt"

seconds=$(echo "$DURATION" | sed 's/s$//')
# perf stat of the broker for the measured window, where perf exists and the kernel lets us.
if command -v perf >/dev/null 2>&1 && perf stat -e task-clock true >/dev/null 2>&1; then
	(sleep "$(echo "$WARMUP" | sed 's/s$//')"; perf stat -p "$broker_pid" -e task-clock,context-switches,cpu-migrations,page-faults,cycles,instructions -- sleep "$seconds" 2>"$out/perf-stat.txt") &
	perf_pid=$!
else
	echo "perf stat unavailable (no perf binary, or perf_event_paranoid forbids it)" >"$out/perf-stat.txt"
fi
# CPU profile over most of the measured window, then a heap (allocation) profile.
(sleep "$(echo "$WARMUP" | sed 's/s$//')"; curl -sf -o "$out/cpu.pprof" "http://$http/debug/pprof/profile?seconds=$((seconds > 5 ? seconds - 2 : seconds))"; curl -sf -o "$out/allocs.pprof" "http://$http/debug/pprof/allocs") &
profile_pid=$!

bin/sluice bench run --brokers "$kafka" --workload "$WORKLOAD" --duration "$DURATION" --warmup "$WARMUP" \
	--driver "$DRIVER" ${ACKS:+--acks "$ACKS"} --out-dir "$out" --quiet ${EXTRA_BENCH_ARGS:-} | tee "$out/table.txt"
wait "$profile_pid" || true
curl -sf -o "$out/metrics.txt" "http://$http/metrics" || true
if [ -s "$out/cpu.pprof" ]; then
	go tool pprof -top -nodecount=40 bin/sluiced "$out/cpu.pprof" >"$out/cpu-top.txt" 2>/dev/null || true
	go tool pprof -sample_index=alloc_space -top -nodecount=40 bin/sluiced "$out/allocs.pprof" >"$out/allocs-top.txt" 2>/dev/null || true
fi
echo "perf: results in $out"
