#!/usr/bin/env bash
# Same-run A/B of the waits' CPU-sharing detection (collectives/cpu_sharing.h): the hierarchical
# all-reduce, 4 ranks as 2 x 2 on this host (more ranks than CPUs on a 2-core machine), with
# the detection on (retort's default) and off (--adaptive-yield=false: every wait spins 20 us
# before it yields), in both progress modes, sizes 4 KiB - 4 MiB, in alternating rounds. JSON
# lines to $OUT (default bench/collectives/yield_ab_results.jsonl), median time table to stdout.
# Usage: bench/collectives/run_yield_ab.sh [build_dir]   (env: ROUNDS, OUT)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../scripts/python-env.sh"
source "$here/../context.sh"
build=${1:-$here/../../build}
rounds=${ROUNDS:-3}
out=${OUT:-$here/yield_ab_results.jsonl}
: >"$out"
load_context before "$out"
for _ in $(seq "$rounds"); do
  for progress in thread caller; do
    for adaptive in true false; do
      label="$progress-$([[ $adaptive == true ]] && echo detect || echo spin)"
      "$build/bench/collectives/collectives_bench" --ranks=4 --backend=hierarchical --local-size=2 \
        --progress=$progress --adaptive-yield=$adaptive --min-bytes=4096 --max-bytes=4194304 \
        --ops=all_reduce --label="$label" | stamp | tee -a "$out"
    done
  done
done
load_context after "$out"
# shellcheck disable=SC2154 # retort_python comes from python-env.sh
"$retort_python" - "$out" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line) if line.startswith("{") else {}
    if "impl" in r:  # not the machine's context
        rows.setdefault(r["bytes"], {}).setdefault(r["impl"], []).append(r["time_us"])
impls = ["thread-detect", "thread-spin", "caller-detect", "caller-spin"]
print("| bytes | " + " | ".join(f"{i} (us)" for i in impls) + " | thread speedup | caller speedup |")
print("| --- | " + " | ".join("---" for _ in impls) + " | --- | --- |")
for size, by in sorted(rows.items()):
    med = {i: statistics.median(by[i]) for i in impls if i in by}
    cells = [f"{med[i]:.1f}" if i in med else "-" for i in impls]
    speed = [f"{med[b] / med[a]:.2f}x" if a in med and b in med else "-"
             for a, b in (("thread-detect", "thread-spin"), ("caller-detect", "caller-spin"))]
    print(f"| {size} | " + " | ".join(cells + speed) + " |")
PY
