#!/usr/bin/env bash
# Builds retort's binaries inside an image build (the "build" stage) and stages what the final
# stage needs, and nothing else:
#   STAGE/opt/retort/bin/{retort-coordinator,retort-worker,retortctl}  (stripped)
#   STAGE/opt/retort/lib/             libraries no distribution package provides (e.g. LibTorch)
#   STAGE/runtime-packages.txt        the packages owning every other library the binaries load
# Usage: build-in-container.sh [--stage-only] SOURCE_DIR STAGE_DIR [extra cmake -D options...]
#   --stage-only: skip the build and stage from an existing build folder (RETORT_BUILD_DIR).
# Environment: RETORT_BUILD_DIR (default /tmp/retort-build), RETORT_JOBS (default nproc),
#   RETORT_RUNTIME_LIB_DIRS (colon-separated folders copied whole into lib/, for libraries that
#   are loaded with dlopen and so are not seen by ldd, e.g. LibTorch's lib/ with cuDNN).
set -euo pipefail
usage() { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; }
if [[ "${1:-}" == "--help" || "${1:-}" == "-h" ]]; then
  usage
  exit 0
fi
build=1
if [[ "${1:-}" == "--stage-only" ]]; then
  build=0
  shift
fi
if (($# < 2)); then
  usage >&2
  exit 2
fi
src=$(cd "$1" && pwd)
stage=$2
shift 2
binaries=(retort-coordinator retort-worker retortctl)
build_dir=${RETORT_BUILD_DIR:-/tmp/retort-build}

if ((build)); then
  RETORT_BUILD_DIR=$build_dir RETORT_JOBS=${RETORT_JOBS:-$(nproc)} "$src/scripts/build" \
    -DRETORT_BUILD_TESTS=OFF -DRETORT_BUILD_BENCH=OFF "$@"
fi

install -d "$stage/opt/retort/bin" "$stage/opt/retort/lib"
for binary in "${binaries[@]}"; do
  if [[ ! -x "$build_dir/tools/$binary" ]]; then
    echo "build-in-container: $build_dir/tools/$binary was not built" >&2
    exit 1
  fi
  install -m 0755 "$build_dir/tools/$binary" "$stage/opt/retort/bin/$binary"
  strip --strip-debug "$stage/opt/retort/bin/$binary"
done

IFS=: read -r -a lib_dirs <<<"${RETORT_RUNTIME_LIB_DIRS:-}"
for dir in "${lib_dirs[@]}"; do
  [[ -n "$dir" ]] || continue
  find "$dir" -maxdepth 1 -name '*.so*' \( -type f -o -type l \) -exec cp -a -t "$stage/opt/retort/lib" {} +
done

# The package that owns a library file, or nothing (also tries the /usr-merged twin path).
owner_of() {
  local path=$1 candidate
  for candidate in "$path" "$(readlink -f "$path")" "/usr$path" "${path#/usr}"; do
    dpkg-query -S "$candidate" 2>/dev/null | head -n1 | cut -d: -f1 && return 0
  done
  return 0
}

ldd_out=$(for binary in "${binaries[@]}"; do
  LD_LIBRARY_PATH="$stage/opt/retort/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    ldd "$stage/opt/retort/bin/$binary" || {
    echo "build-in-container: ldd $binary failed" >&2
    exit 1
  }
done)
# The GPU driver's libraries (libcuda, libnvidia-*) come from the host at run time (NVIDIA
# container toolkit), never from the image, and are absent from a build machine.
unresolved=$(grep 'not found' <<<"$ldd_out" | grep -Ev '^\s*(libcuda\.so|libnvidia-)' | sort -u || true)
if [[ -n "$unresolved" ]]; then
  echo "build-in-container: unresolved libraries:" >&2
  echo "$unresolved" >&2
  exit 1
fi

packages=()
while read -r lib; do
  case "$(basename "$lib")" in
    libcuda.so* | libnvidia-*) continue ;;
  esac
  package=$(owner_of "$lib")
  if [[ -n "$package" ]]; then
    packages+=("$package")
  elif [[ ! -e "$stage/opt/retort/lib/$(basename "$lib")" ]]; then
    cp -L "$lib" "$stage/opt/retort/lib/"
  fi
done < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 }' <<<"$ldd_out" | sort -u)

printf '%s\n' "${packages[@]}" | sort -u >"$stage/runtime-packages.txt"
if grep -Ex '(gcc|g\+\+|cpp|clang|cmake|build-essential|ninja-build)(-[0-9.]+)?' "$stage/runtime-packages.txt"; then
  echo "build-in-container: a compiler would end up in the runtime image" >&2
  exit 1
fi
echo "build-in-container: staged ${binaries[*]}; runtime packages:"
sed 's/^/  /' "$stage/runtime-packages.txt"
