#!/usr/bin/env bash
# JPEG input on a GPU (scripts/gpu-check runs it): an ImageNet-like folder (500x375, quality 90,
# made by trainer_data_bench), batch 256 at 224x224, images/s delivered as ready batches for
# retort with GPU decoding (nvJPEG, 4 decode threads) and with CPU decoding at 4 / 8 / 16
# threads, a PyTorch DataLoader (PIL) at 8 workers, and torchvision's nvJPEG decode
# (decode_jpeg on the GPU, 4 reader workers) with its GPU transforms, in one run. Prints one JSON
# object.
# Usage: bench/trainer_data/run_gpu_decode_bench.sh BUILD_DIR [PYTHON]
set -euo pipefail
build=${1:?usage: run_gpu_decode_bench.sh BUILD_DIR [PYTHON]}
python=${2:-python3}
here=$(cd "$(dirname "$0")" && pwd)
bench=$build/bench/trainer_data/trainer_data_bench
# The JPEG folder: the caller's (JPEG_FOLDER, shared with the KD benchmark), else a new one.
folder=${JPEG_FOLDER:-}
if [[ -z "$folder" ]]; then
  folder=$(mktemp -d /tmp/retort_gpu_jpeg.XXXXXX)
  trap 'rm -rf "$folder"' EXIT
  "$here/make_imagenet_like_jpegs.sh" "$build" "$folder"
fi
# Each row runs on its own: one that fails leaves an error object naming it, the others stand.
row() { "$@" || echo "{\"error\": \"failed: $(basename "$1") ${*:2:6}\"}"; }
lines=()
common=(--dataset image_folder --root "$folder" --batch 256 --steps "${STEPS:-12}" --warmup 2)
lines+=("$(row "$bench" "${common[@]}" --threads 4 --decode-device 0 --no-dct-scaling)")
for threads in 4 8 16; do
  lines+=("$(row "$bench" "${common[@]}" --threads "$threads")")
done
lines+=("$(row "$python" "$here/reference_loader.py" --dataset image_folder --root "$folder" \
  --batch 256 --threads 8 --steps "${STEPS:-12}" --decoder pil)")
lines+=("$(row "$python" "$here/reference_gpu_decode.py" --root "$folder" --batch 256 --threads 4 \
  --steps "${STEPS:-12}" --device "${DEVICE:-cuda}")")
printf '%s\n' "${lines[@]}" | "$python" -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin if l.startswith("{")]
print(json.dumps({"bench": "gpu_decode", "results": rows}))'
