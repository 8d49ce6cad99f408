#!/bin/sh
# perf/compare.sh OLD NEW: compare two result folders of perf/run.sh (or any two folders holding
# `sluice bench` result JSON files): a side-by-side table of the headline figures, and benchstat of
# Go benchmark outputs (*.bench) when both folders have them and benchstat is installed.
set -eu
[ $# -eq 2 ] || { echo "usage: perf/compare.sh OLD_DIR NEW_DIR" >&2; exit 2; }
cd "$(dirname "$0")/.."
go run ./perf/compare "$1" "$2"
if ls "$1"/*.bench >/dev/null 2>&1 && ls "$2"/*.bench >/dev/null 2>&1; then
	if command -v benchstat >/dev/null 2>&1; then
		benchstat "$1"/*.bench "$2"/*.bench
	else
		echo "(Go benchmark outputs found; install benchstat: go install golang.org/x/perf/cmd/benchstat@latest)"
	fi
fi
