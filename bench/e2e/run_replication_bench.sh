#!/usr/bin/env bash
# Steady-state cost of the in-memory peer replicas: the same 2-worker retort-run job with the
# optimizer state replicated after every step (the default) and with replication effectively
# off (checkpoint.replicate_every_steps = 1000000), in alternating rounds on the same machine.
# Same model and data as run_ddp_bench.sh (fm-teacher -> fm-student, batch 128, synthetic).
# Prints one JSON line per run and a comparison line (median samples/s, relative cost).
# Usage: bench/e2e/run_replication_bench.sh BUILD_DIR [ROUNDS=3] [STEPS=60]
set -euo pipefail
build=${1:?usage: run_replication_bench.sh BUILD_DIR [ROUNDS] [STEPS]}
rounds=${2:-3}
steps=${3:-60}
warmup=10
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../scripts/python-env.sh"
source "$here/kd_bench_job.sh"
work=$(mktemp -d /tmp/retort_replication_bench_XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A results=([every_step]="" [off]="")
for round in $(seq 1 "$rounds"); do
  for mode in every_step off; do
    every=1
    [ "$mode" = off ] && every=1000000
    kd_bench_job replication-bench $((steps + warmup)) \
      "checkpoint: {replicate_every_steps: $every}" > "$work/job.yaml"
    out="$work/$mode-$round"
    "$build/tools/retort-run" --job="$work/job.yaml" --workers=2 --output-dir="$out" > "$out.log" 2>&1
    sps=$(median_samples_per_s "$out/metrics.jsonl" "$warmup")
    echo "{\"replication\":\"$mode\",\"round\":$round,\"workers\":2,\"steps\":$steps,\"samples_per_s\":$sps}"
    results[$mode]+="$sps "
  done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$retort_python" - "${results[every_step]}" "${results[off]}" <<'PY'
import json, statistics, sys
on = [float(x) for x in sys.argv[1].split()]
off = [float(x) for x in sys.argv[2].split()]
print(json.dumps({"comparison": "replication_cost_2_workers", "every_step_samples_per_s": on,
                  "off_samples_per_s": off,
                  "median_cost_percent": round(100 * (1 - statistics.median(on) / statistics.median(off)), 2)}))
PY
