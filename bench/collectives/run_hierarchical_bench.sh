#!/usr/bin/env bash
# The hierarchical composition against OpenMPI, side by side on this host in one run: 4 ranks
# as 2 "nodes" x 2 local ranks. retort-hier: every level UCX on host buffers. retort-hier-device:
# the composition GPU workers use (staged inter-node and global levels, device scratch for
# packing, a device-memory node level) with host memory standing in for the device, so its
# figures show the cost of the staging copies (memcpy here) on the same machine. OpenMPI:
# MPI_Allreduce / MPI_Reduce_scatter_block over the same 4 processes. Three more retort columns
# (retort-hier-fifo, retort-hier-cma, retort-hier-spin: variants below) set the adaptive
# protocol choice and the CPU-sharing detection against fixed alternatives in the same run.
# Sizes 1-64 MiB, repeated in alternating rounds so every implementation sees the same load;
# JSON lines to $OUT (default bench/collectives/hierarchical_results.jsonl), median busbw
# table to stdout.
# Usage: bench/collectives/run_hierarchical_bench.sh [build_dir]   (env: ROUNDS, OUT)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../scripts/python-env.sh"
source "$here/../context.sh"
build=${1:-$here/../../build}
rounds=${ROUNDS:-3}
out=${OUT:-$here/hierarchical_results.jsonl}
min_bytes=$((1 << 20)) max_bytes=$((64 << 20))
: > "$out"
load_context before "$out"
# Variants of retort-hier (its defaults: the CMA-or-FIFO choice measured per operation, waits
# that detect a shared CPU), same binary: the device composition; same-host messages always
# through UCX's shared-memory FIFO, or always through single-copy CMA reads (which of the two
# is faster changes with the vCPU state, see RESULTS.md); waits that always spin first.
variants=(
  "retort-hier --backend=hierarchical"
  "retort-hier-device --backend=hierarchical-device"
  "retort-hier-fifo --backend=hierarchical --cma-policy=never"
  "retort-hier-cma --backend=hierarchical --cma-policy=always"
  "retort-hier-spin --backend=hierarchical --adaptive-yield=false"
)
for _ in $(seq "$rounds"); do
  for variant in "${variants[@]}"; do
    read -r label flags <<<"$variant"
    # shellcheck disable=SC2086 # flags are words
    "$build/bench/collectives/collectives_bench" --ranks=4 --local-size=2 $flags \
      --min-bytes=$min_bytes --max-bytes=$max_bytes --ops=all_reduce,reduce_scatter \
      --label="$label" | stamp | tee -a "$out"
  done
  if [[ -x "$build/bench/collectives/mpi_reference" ]]; then
    mpirun --allow-run-as-root --oversubscribe -np 4 \
      "$build/bench/collectives/mpi_reference" $min_bytes $max_bytes 2>/dev/null |
      grep -v all_gather | stamp | tee -a "$out"
  fi
done
load_context after "$out"
"$retort_python" - "$out" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    if "impl" not in r:  # the machine's context
        continue
    rows.setdefault((r["op"], r["bytes"]), {}).setdefault(r["impl"], []).append(r["busbw_GBps"])
impls = ["retort-hier", "retort-hier-device", "retort-hier-fifo", "retort-hier-cma",
         "retort-hier-spin", "openmpi"]
print("| op | MiB | " + " | ".join(impls) + " |")
print("| --- | --- | " + " | ".join("---" for _ in impls) + " |")
for (op, size), by_impl in sorted(rows.items()):
    cells = []
    for impl in impls:
        v = by_impl.get(impl)
        cells.append(f"{statistics.median(v):.3f}" if v else "-")
    print(f"| {op} | {size / 2**20:.0f} | " + " | ".join(cells) + " |")
PY
