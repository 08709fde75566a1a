#!/usr/bin/env bash
# Teacher formats side by side, one run (bench/trainer/RESULTS.md): exports a ViT of the built-in
# preset's shape (its weights also loaded into the preset) and a torchvision ResNet-18 as
# AOTInductor packages and TorchScript (export_bench_teachers.py; files already in OUT_DIR are
# kept), then runs
# exported_teacher_bench on them and prints its JSON lines and a summary line (speedups of the
# exported teacher over TorchScript). The lines, stamped (bench/context.sh), are also appended
# to bench/trainer/exported_teacher_results.jsonl (RESULTS=FILE to append elsewhere).
# Usage: run_exported_teacher_bench.sh BUILD_DIR [OUT_DIR]
# Environment: PYTHON (default .venv/bin/python3), DEVICE (cpu, or cuda: packages compiled for
# the GPU and every teacher and step on cuda:0), BATCH (128), THREADS (2), RESNET_IMAGES
# ("224 64": the ResNet-18's input sizes, each measured in turn; 224 is its own),
# VIT_PRESET (fm-teacher), VIT_CONFIG (28,1,4,192,6,3,10: its shape for kd_reference.py).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: run_exported_teacher_bench.sh BUILD_DIR [OUT_DIR]}
out=${2:-$(mktemp -d /tmp/retort_exported_bench.XXXXXX)}
python=${PYTHON:-$root/.venv/bin/python3}
device=${DEVICE:-cpu}
batch=${BATCH:-128}
threads=${THREADS:-2}
read -r -a images <<<"${RESNET_IMAGES:-224 64}"
preset=${VIT_PRESET:-fm-teacher}
config=${VIT_CONFIG:-28,1,4,192,6,3,10}
bench=$build/bench/trainer/exported_teacher_bench
results=${RESULTS:-$root/bench/trainer/exported_teacher_results.jsonl}
# shellcheck source=bench/context.sh
source "$root/bench/context.sh"
mkdir -p "$out"
"$python" "$root/bench/trainer/export_bench_teachers.py" "$out" "$config" \
  --resnet-image "${images[@]}" --device "$device" >&2
vit_shape=$(cut -d, -f2 <<<"$config"),$(cut -d, -f1 <<<"$config"),$(cut -d, -f1 <<<"$config")
vit_classes=$(cut -d, -f7 <<<"$config")
{
  bench_device=$device
  [[ $device == cuda ]] && bench_device=cuda:0
  "$bench" --device "$bench_device" --batch "$batch" --threads "$threads" --input-shape "$vit_shape" \
    --classes "$vit_classes" --student "preset:${preset/teacher/student}" \
    --teacher "vit_builtin=preset:$preset@$out/vit.safetensors" \
    --teacher "vit_torchscript=torchscript:$out/vit.pt" \
    --teacher "vit_exported=exported:$out/vit.pt2"
  for n in "${images[@]}"; do
    "$bench" --device "$bench_device" --batch "$batch" --threads "$threads" --input-shape "3,$n,$n" \
      --classes 1000 --student "torchscript:$out/resnet_student_${n}px.pt" \
      --teacher "resnet18_${n}px_torchscript=torchscript:$out/resnet18_${n}px.pt" \
      --teacher "resnet18_${n}px_exported=exported:$out/resnet18_${n}px.pt2"
  done
} | stamp | tee "$out/results.jsonl" | tee -a "$results"
"$python" - "$out/results.jsonl" <<'PY'
import json, sys
rows = {r["label"]: r for r in map(json.loads, open(sys.argv[1]))}
def ratio(a, b, key):
    return round(rows[a][key] / rows[b][key], 3)
resnets = sorted({l[:-len("_exported")] for l in rows if l.startswith("resnet18_") and
                  l.endswith("_exported")}, key=lambda l: int(l.split("_")[1][:-2]), reverse=True)
print(json.dumps({
    "summary": "exported_teacher",
    **{f"{r}_{what}_speedup_exported_over_torchscript":
       ratio(f"{r}_torchscript", f"{r}_exported", f"{what}_median_s")
       for r in resnets for what in ("forward", "kd_step")},
    "vit_forward_speedup_exported_over_torchscript":
        ratio("vit_torchscript", "vit_exported", "forward_median_s"),
    "vit_kd_step_speedup_exported_over_torchscript":
        ratio("vit_torchscript", "vit_exported", "kd_step_median_s"),
    "vit_forward_speedup_exported_over_builtin":
        ratio("vit_builtin", "vit_exported", "forward_median_s"),
    "vit_kd_step_speedup_exported_over_builtin":
        ratio("vit_builtin", "vit_exported", "kd_step_median_s"),
}))
PY
