#!/usr/bin/env bash
# Builds a retort container image with Docker BuildKit (docker buildx), from the repository root.
# Usage: deploy/docker/build-image.sh cpu|cuda [--tag NAME:TAG] [--libtorch DIR]
#          [--cuda-version X.Y.Z] [--jobs N] [--push] [--dry-run]
#   cpu   Debian bookworm, the PyPI wheel's LibTorch (CPU) default tag retort-cpu:0.1.0
#   cuda  NVIDIA CUDA image, LibTorch with CUDA + NCCL default tag retort-cuda:0.1.0
#         --libtorch DIR: the unpacked LibTorch (cxx11 ABI, CUDA build matching --cuda-version)
#   --push     push the image after building (the tag then names your registry)
#   --dry-run  print the docker command instead of running it
set -euo pipefail
usage() { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; }
die() {
  echo "build-image: $*" >&2
  exit 2
}
root=$(cd "$(dirname "$0")/../.." && pwd)
flavor=${1:-}
case "$flavor" in
  -h | --help) usage; exit 0 ;;
  cpu | cuda) shift ;;
  *) usage >&2; die "first argument must be cpu or cuda" ;;
esac
tag="retort-$flavor:0.1.0"
libtorch=""
cuda_version=""
jobs=""
push=0
dry_run=0
while (($# > 0)); do
  case "$1" in
    --tag) tag=${2:?--tag needs a value}; shift 2 ;;
    --libtorch) libtorch=${2:?--libtorch needs a folder}; shift 2 ;;
    --cuda-version) cuda_version=${2:?--cuda-version needs a value}; shift 2 ;;
    --jobs) jobs=${2:?--jobs needs a value}; shift 2 ;;
    --push) push=1; shift ;;
    --dry-run) dry_run=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done

cmd=(docker buildx build --file "$root/deploy/docker/Dockerfile.$flavor" --tag "$tag")
if [[ -n "$jobs" ]]; then cmd+=(--build-arg "RETORT_JOBS=$jobs"); fi
if [[ $flavor == cuda ]]; then
  [[ -n "$libtorch" ]] || die "cuda needs --libtorch DIR (LibTorch with CUDA, unpacked)"
  [[ -f "$libtorch/share/cmake/Torch/TorchConfig.cmake" ]] ||
    die "$libtorch is not a LibTorch folder (no share/cmake/Torch/TorchConfig.cmake)"
  cmd+=(--build-context "libtorch=$(cd "$libtorch" && pwd)")
  if [[ -n "$cuda_version" ]]; then cmd+=(--build-arg "CUDA_VERSION=$cuda_version"); fi
elif [[ -n "$libtorch" || -n "$cuda_version" ]]; then
  die "--libtorch and --cuda-version are for the cuda image"
fi
if ((push)); then cmd+=(--push); else cmd+=(--load); fi
cmd+=("$root")

if ((dry_run)); then
  printf '%q ' "${cmd[@]}"
  echo
  exit 0
fi
command -v docker >/dev/null || die "docker not found"
"${cmd[@]}"
