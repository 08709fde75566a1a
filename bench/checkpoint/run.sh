#!/usr/bin/env bash
# Runs the checkpoint benchmark (WriteShard/ReadRange vs dd, same filesystem as /tmp, same
# bytes) and appends its JSON lines to bench/checkpoint/results.jsonl.
# Usage: bench/checkpoint/run.sh [--help] [checkpoint_bench flags...]
# Environment: RETORT_BUILD_DIR (default: build).
set -euo pipefail
if [[ "${1:-}" == "--help" || "${1:-}" == "-h" ]]; then
  sed -n '2,5p' "$0" | sed 's/^# //'
  exit 0
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/bench/context.sh"
build_dir=${RETORT_BUILD_DIR:-$root/build}
bin=$build_dir/bench/checkpoint/checkpoint_bench
if [[ ! -x "$bin" ]]; then
  echo "build it first: ninja -C $build_dir checkpoint_bench" >&2
  exit 1
fi
# The machine may be shared: record the load so results can be judged.
echo "{\"bench\":\"context\",\"uptime\":\"$(uptime | sed 's/"//g')\",\"fs\":\"$(df -T /tmp | awk 'NR==2{print $2}')\"}" |
  stamp | tee -a "$root/bench/checkpoint/results.jsonl"
"$bin" "$@" | stamp | tee -a "$root/bench/checkpoint/results.jsonl"
