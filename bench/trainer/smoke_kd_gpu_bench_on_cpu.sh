#!/usr/bin/env bash
# Smoke test of kd_step_gpu_bench's real-input path on the CPU (ctest; the GPU run is
# scripts/gpu-check's): a small JPEG folder through retort's Loader into two KD steps of tiny
# ViTs; the JSON must say how much of the step waited for data, the loss must be finite, and the
# FLOPs per sample come on both bases (computed below model: the class-token-only last block).
# Then the PyTorch reference's eager step (kd_reference_gpu.py) on the CPU with the frozen bf16
# teacher (the small fm presets: bf16 on the CPU is slow), given model FLOPs as
# run_kd_gpu_bench.sh gives them.
# Usage: smoke_kd_gpu_bench_on_cpu.sh TRAINER_DATA_BENCH KD_STEP_GPU_BENCH PYTHON
set -euo pipefail
data_bench=$1 kd_bench=$2 python=$3
folder=$(mktemp -d /tmp/retort_kd_smoke.XXXXXX)
trap 'rm -rf "$folder"' EXIT
"$data_bench" --make-jpeg-folder "$folder" --num-images 16 --jpeg-width 320 --jpeg-height 240 >&2
json=$("$kd_bench" --device cpu --teacher vit-ti16 --student vit-ti16 --batch 4 --warmup 1 \
  --steps 2 --no-bf16 --jpeg-folder "$folder" --decode cpu --decode-threads 2)
echo "$json"
"$python" - "$json" <<'PY'
import json, math, sys
r = json.loads(sys.argv[1])
assert r["input"] == "jpeg" and r["decode"] == "cpu", r
assert 0.0 <= r["data_wait_fraction"] <= 1.0, r["data_wait_fraction"]
assert r["data_wait_ms_mean"] >= 0.0, r["data_wait_ms_mean"]
assert math.isfinite(r["final_loss"]) and r["final_loss"] > 0, r["final_loss"]
assert r["samples_per_s"] > 0, r["samples_per_s"]
assert 0 < r["gflop_per_sample_computed"] < r["gflop_per_sample_model"], r
PY
gflop=0.25
ref=$("$python" "$(dirname "$0")/kd_reference_gpu.py" --mode eager --device cpu \
  --teacher fm-teacher --student fm-student --batch 4 --warmup 1 --steps 1 --bf16 \
  --gflop-per-sample "$gflop")
echo "$ref"
"$python" - "$ref" "$gflop" <<'PY'
import json, math, sys
r = json.loads(sys.argv[1])
assert r["impl"] == "pytorch_eager" and r["teacher_dtype"] == "bfloat16", r
assert r["gflop_per_sample_model"] == r["gflop_per_sample_computed"] == float(sys.argv[2]), r
assert math.isfinite(r["final_loss"]) and r["samples_per_s"] > 0, r
PY
