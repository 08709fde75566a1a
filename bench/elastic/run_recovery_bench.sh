#!/usr/bin/env bash
# Failure recovery, side by side on this machine: retort (coordinator + 2 retort-workers over
# UCX) vs torchrun elastic (c10d rendezvous, max_restarts 3, DDP + ZeroRedundancyOptimizer on
# gloo, checkpoint every 5 steps) on the same KD job (fm-teacher-p7 -> fm-student-p7,
# Fashion-MNIST, global batch 64, 60 steps, 1 thread per worker). In each round and for each
# side: kill -9 one worker's training process after step 8, a replacement joins, the job runs
# to the end. Prints one JSON line per side per round (recovery_seconds, steps_lost, ...), '#'
# context lines (logs around the kill) and a final comparison line.
# Usage: bench/elastic/run_recovery_bench.sh BUILD_DIR [ROUNDS=1] [extra recovery_bench.py flags]
#   e.g. --keep (keep logs), --worker-flag=--comm-timeout-ms=5000, --coordinator-flag=...
set -euo pipefail
build=$(cd "${1:?usage: run_recovery_bench.sh BUILD_DIR [ROUNDS] [flags]}" && pwd)
rounds=${2:-1}
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS must be a positive integer, got '$rounds'" >&2; exit 2; }
shift $(($# >= 2 ? 2 : 1))
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../scripts/python-env.sh"
for tool in retort-coordinator retort-worker retortctl; do
  [[ -x "$build/tools/$tool" ]] || { echo "missing $build/tools/$tool (ninja -C $build tools/$tool)" >&2; exit 2; }
done
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
# The Python driver kills every process it started when it exits or gets SIGINT/SIGTERM.
"$retort_python" "$here/recovery_bench.py" --build="$build" --rounds="$rounds" "$@" &
driver=$!
trap 'kill -TERM "$driver" 2>/dev/null; wait "$driver"; exit 143' INT TERM
wait "$driver"
trap - INT TERM
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
