#!/usr/bin/env bash
# The GPU benchmarks' ImageNet-like JPEG folder, defined once: $JPEG_IMAGES (default 4096)
# synthetic images of 500x375 at quality 90 in 8 class folders, written by trainer_data_bench.
# Usage: bench/trainer_data/make_imagenet_like_jpegs.sh BUILD_DIR FOLDER
set -euo pipefail
build=${1:?usage: make_imagenet_like_jpegs.sh BUILD_DIR FOLDER}
folder=${2:?usage: make_imagenet_like_jpegs.sh BUILD_DIR FOLDER}
"$build/bench/trainer_data/trainer_data_bench" --make-jpeg-folder "$folder" \
  --num-images "${JPEG_IMAGES:-4096}" --jpeg-width 500 --jpeg-height 375 >&2
