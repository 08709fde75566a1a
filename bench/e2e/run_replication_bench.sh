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
work=$(mktemp -d /tmp/retort_replication_bench_XXXXXX)
trap 'rm -rf "$work"' EXIT
write_job() {  # $1 = replicate_every_steps
  cat <<JOB
name: replication-bench
teacher: {preset: fm-teacher}
student: {preset: fm-student}
dataset: {kind: synthetic, image_size: 28, num_classes: 10, synthetic_samples: 60000}
global_batch: 128
steps: $((steps + warmup))
optimizer: {lr: 0.001, weight_decay: 0.05, clip_grad_norm: 1.0}
distillation: {temperature: 4.0, alpha: 0.5}
checkpoint: {replicate_every_steps: $1}
threads_per_worker: 1
evaluate: false
JOB
}
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A results=([every_step]="" [off]="")
for round in $(seq 1 "$rounds"); do
  for mode in every_step off; do
    every=1
    [ "$mode" = off ] && every=1000000
    write_job "$every" > "$work/job.yaml"
    out="$work/$mode-$round"
    "$build/tools/retort-run" --job="$work/job.yaml" --workers=2 --output-dir="$out" > "$out.log" 2>&1
    sps=$(/usr/bin/python3 - "$out/metrics.jsonl" "$warmup" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][int(sys.argv[2]):]
print(round(128 / statistics.median(128 / r["samples_per_second"] for r in rows), 2))
PY
)
    echo "{\"replication\":\"$mode\",\"round\":$round,\"workers\":2,\"steps\":$steps,\"samples_per_s\":$sps}"
    results[$mode]+="$sps "
  done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "${results[every_step]}" "${results[off]}" <<'PY'
import json, statistics, sys
on = [float(x) for x in sys.argv[1].split()]
off = [float(x) for x in sys.argv[2].split()]
print(json.dumps({"comparison": "replication_cost_2_workers", "every_step_samples_per_s": on,
                  "off_samples_per_s": off,
                  "median_cost_percent": round(100 * (1 - statistics.median(on) / statistics.median(off)), 2)}))
PY
