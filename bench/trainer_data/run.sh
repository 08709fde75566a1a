#!/usr/bin/env bash
# Side-by-side loader throughput: retort's Loader vs a PyTorch DataLoader, same machine,
# same run, same thread count. Prints JSON lines (one per implementation and dataset).
# Usage: bench/trainer_data/run.sh [build_dir] [threads]
# Environment: STEPS_FM (default 100), STEPS_JPEG (default 40), JPEG_IMAGES (default 512),
# REPEATS (default 3: the whole sequence is repeated, interleaving the implementations).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
threads=${2:-2}
bench=$build/bench/trainer_data/trainer_data_bench
source "$root/scripts/python-env.sh"
py=$retort_python
ref=$root/bench/trainer_data/reference_loader.py
steps_fm=${STEPS_FM:-100}
steps_jpeg=${STEPS_JPEG:-40}
folder=$(mktemp -d /tmp/retort_jpeg_folder.XXXXXX)
trap 'rm -rf "$folder"' EXIT
"$bench" --make-jpeg-folder "$folder" --num-images "${JPEG_IMAGES:-512}"

for ((rep = 0; rep < ${REPEATS:-3}; rep++)); do
  "$bench" --dataset fashion_mnist --batch 256 --threads "$threads" --steps "$steps_fm"
  "$py" "$ref" --dataset fashion_mnist --batch 256 --threads "$threads" --steps "$steps_fm"
  "$bench" --dataset image_folder --root "$folder" --batch 64 --threads "$threads" --steps "$steps_jpeg"
  "$bench" --dataset image_folder --root "$folder" --batch 64 --threads "$threads" --steps "$steps_jpeg" --no-dct-scaling
  "$py" "$ref" --dataset image_folder --root "$folder" --batch 64 --threads "$threads" --steps "$steps_jpeg"
done
