#!/usr/bin/env bash
# Runs the straggler-rebalancing benchmark (straggler_bench: 4 workers on test hosts, one
# CPU-limited to about half the others' speed; even split vs rebalanced vs limit lifted mid-run,
# side by side) and appends its JSON lines, stamped, to bench/multihost/results_straggler.jsonl.
# Usage: bench/multihost/run_straggler_bench.sh [--help] [straggler_bench flags...]
# Environment: RETORT_BUILD_DIR (default: build). Needs root (namespaces, cgroups).
set -euo pipefail
if [[ "${1:-}" == "--help" || "${1:-}" == "-h" ]]; then
  sed -n '2,6p' "$0" | sed 's/^# //'
  exit 0
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/bench/context.sh"
build_dir=${RETORT_BUILD_DIR:-$root/build}
bin=$build_dir/bench/multihost/straggler_bench
if [[ ! -x "$bin" ]]; then
  echo "build it first: cmake --build $build_dir --target straggler_bench" >&2
  exit 1
fi
out=$root/bench/multihost/results_straggler.jsonl
load_context start "$out"
"$bin" "$@" | stamp | tee -a "$out"
load_context end "$out"
