#!/usr/bin/env bash
# One-GPU KD step: retort (kd_step_gpu_bench) against PyTorch eager and torch.compile
# (kd_reference_gpu.py), same GPU, same models, batch and precision, in one run; then retort
# again on real input: an ImageNet-like JPEG folder (500x375, quality 90) decoded by nvJPEG
# with 4 CPU threads, reporting how much of the step waited for data (target < 5%). Prints one
# JSON object with the four results and the ratios.
# Usage: bench/trainer/run_kd_gpu_bench.sh BUILD_DIR [PYTHON] [extra flags for all three]
set -euo pipefail
if [[ "${1:-}" == "--help" || "${1:-}" == "-h" || $# -lt 1 ]]; then
  sed -n '2,5p' "$0" | sed 's/^# //'
  [[ $# -ge 1 ]] && exit 0 || exit 2
fi
build=$1
python=${2:-python3}
shift $(($# >= 2 ? 2 : 1))
here=$(cd "$(dirname "$0")" && pwd)
ours=$("$build/bench/trainer/kd_step_gpu_bench" "$@")
eager=$("$python" "$here/kd_reference_gpu.py" --mode eager "$@")
compiled=$("$python" "$here/kd_reference_gpu.py" --mode compile "$@")
folder=$(mktemp -d /tmp/retort_kd_jpeg.XXXXXX)
trap 'rm -rf "$folder"' EXIT
"$build/bench/trainer_data/trainer_data_bench" --make-jpeg-folder "$folder" \
  --num-images "${JPEG_IMAGES:-4096}" --jpeg-width 500 --jpeg-height 375 >&2
jpeg=$("$build/bench/trainer/kd_step_gpu_bench" --jpeg-folder "$folder" --decode gpu \
  --decode-threads 4 "$@")
"$python" - "$ours" "$eager" "$compiled" "$jpeg" <<'PY'
import json, sys
ours, eager, compiled, jpeg = (json.loads(a) for a in sys.argv[1:])
print(json.dumps({
    "comparison": "kd_step_gpu", "retort": ours, "pytorch_eager": eager,
    "pytorch_compile": compiled, "retort_jpeg_input": jpeg,
    "speedup_vs_eager": round(ours["samples_per_s"] / eager["samples_per_s"], 3),
    "speedup_vs_compile": round(ours["samples_per_s"] / compiled["samples_per_s"], 3),
    "jpeg_vs_synthetic": round(jpeg["samples_per_s"] / ours["samples_per_s"], 3),
    "jpeg_data_wait_fraction": jpeg["data_wait_fraction"],
}))
PY
