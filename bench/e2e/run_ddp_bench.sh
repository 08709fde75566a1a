#!/usr/bin/env bash
# End-to-end distributed KD throughput, side by side on this machine: retort (retort-run:
# coordinator + 2 workers over UCX, ZeRO-1) vs torchrun + PyTorch DDP + ZeroRedundancyOptimizer
# (AdamW) on gloo. Same ViT teacher/student (fm-teacher -> fm-student), global batch 128,
# 1 thread per worker, KD loss (alpha 0.5, T 4), synthetic 28x28x1 data. Alternating rounds;
# prints JSON lines and a comparison line.
# Usage: bench/e2e/run_ddp_bench.sh BUILD_DIR [ROUNDS=2] [STEPS=60]
set -euo pipefail
build=${1:?usage: run_ddp_bench.sh BUILD_DIR [ROUNDS] [STEPS]}
rounds=${2:-2}
steps=${3:-60}
warmup=10
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../scripts/python-env.sh"
work=$(mktemp -d /tmp/retort_ddp_bench_XXXXXX)
source "$here/kd_bench_job.sh"
kd_bench_job ddp-bench $((steps + warmup)) > "$work/job.yaml"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)"
ours=() refs=()
for round in $(seq 1 "$rounds"); do
  out="$work/round$round"
  "$build/tools/retort-run" --job="$work/job.yaml" --workers=2 --output-dir="$out" > "$out.log" 2>&1
  sps=$(median_samples_per_s "$out/metrics.jsonl" "$warmup")
  echo "{\"impl\":\"retort\",\"round\":$round,\"workers\":2,\"threads\":1,\"global_batch\":128,\"steps\":$steps,\"samples_per_s\":$sps}"
  ours+=("$sps")
  ref=$("$retort_python" -m torch.distributed.run --nproc_per_node=2 "$here/ddp_reference.py" --steps "$steps" \
        --warmup "$warmup" 2>/dev/null | grep '"impl"')
  echo "$ref"
  refs+=("$(echo "$ref" | "$retort_python" -c 'import json,sys; print(json.load(sys.stdin)["samples_per_s"])')")
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$retort_python" - "${ours[*]}" "${refs[*]}" <<'PY'
import json, statistics, sys
ours = [float(x) for x in sys.argv[1].split()]
refs = [float(x) for x in sys.argv[2].split()]
print(json.dumps({"comparison": "e2e_kd_2_workers", "retort_samples_per_s": ours,
                  "torchrun_ddp_zero_samples_per_s": refs,
                  "per_round_speedup": [round(a / b, 3) for a, b in zip(ours, refs)],
                  "median_speedup": round(statistics.median(a / b for a, b in zip(ours, refs)), 3)}))
PY
rm -rf "$work"
