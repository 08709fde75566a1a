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

lib_dir=$stage/opt/retort/lib
run_ldd() { LD_LIBRARY_PATH="$lib_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$1"; }
# The GPU driver's libraries (libcuda, libnvidia-*) come from the host at run time (NVIDIA
# container toolkit), never from the image, and are absent from a build machine.
is_driver_lib() { [[ $1 == libcuda.so* || $1 == libnvidia-* ]]; }

# Every library the binaries load (ldd lists the whole closure); none may be missing.
ldd_out=$(for binary in "${binaries[@]}"; do
  run_ldd "$stage/opt/retort/bin/$binary" || {
    echo "build-in-container: ldd $binary failed" >&2
    exit 1
  }
done)
unresolved=$(grep 'not found' <<<"$ldd_out" | grep -Ev '^\s*(libcuda\.so|libnvidia-)' | sort -u || true)
if [[ -n "$unresolved" ]]; then
  echo "build-in-container: unresolved libraries:" >&2
  echo "$unresolved" >&2
  exit 1
fi
# Vendored libraries add their own closures (for names only; dlopen'd ones may lack deps here).
for lib in "$lib_dir"/*.so*; do
  [[ -f "$lib" ]] && ldd_out+=$'\n'$(run_ldd "$lib" 2>/dev/null || true)
done
declare -A path_of=()
while read -r name path; do
  path_of[$name]=$path
done < <(awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' <<<"$ldd_out" | sort -u)

# Owning packages of all those files in one dpkg-query call (it is slow per call). ldd's path
# can differ from the one dpkg recorded (alternatives such as libblas.so.3, usrmerge): try the
# resolved link and the /usr twin as well.
candidates_of() { printf '%s\n' "$1" "$(readlink -f "$1")" "/usr$1" "${1#/usr}" | awk '!seen[$0]++'; }
declare -A owner_of=()
mapfile -t all_candidates < <(for path in "${path_of[@]}"; do candidates_of "$path"; done | sort -u)
while IFS= read -r line; do
  [[ $line == diversion* || $line != *": /"* ]] && continue
  owner=${line%%: /*}
  owner_of["/${line#*: /}"]=${owner%%[:,]*}
done < <(dpkg-query -S "${all_candidates[@]}" 2>/dev/null || true)
owner() {
  local candidate
  while read -r candidate; do
    if [[ -n "${owner_of[$candidate]:-}" ]]; then
      echo "${owner_of[$candidate]}"
      return
    fi
  done < <(candidates_of "$1")
}

# Walk direct dependencies (NEEDED) from the binaries and the vendored libraries: a library a
# package owns becomes that package (apt brings its own dependencies), any other one is copied
# into lib/ and walked in turn.
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*Shared library: \[\(.*\)\]/\1/p'; }
queue=()
for binary in "${binaries[@]}"; do queue+=("$stage/opt/retort/bin/$binary"); done
for lib in "$lib_dir"/*.so*; do [[ -f "$lib" ]] && queue+=("$lib"); done
declare -A packages=() seen=()
while ((${#queue[@]} > 0)); do
  object=${queue[0]}
  queue=("${queue[@]:1}")
  while read -r name; do
    [[ -n "$name" && -z "${seen[$name]:-}" ]] || continue
    seen[$name]=1
    is_driver_lib "$name" && continue
    path=${path_of[$name]:-}
    [[ -n "$path" && $path != "$lib_dir"/* ]] || continue
    package=$(owner "$path")
    if [[ -n "$package" ]]; then
      packages[$package]=1
    elif [[ ! -e "$lib_dir/$name" ]]; then
      cp -L "$path" "$lib_dir/$name"
      queue+=("$lib_dir/$name")
    fi
  done < <(needed "$object")
done

printf '%s\n' "${!packages[@]}" | sort >"$stage/runtime-packages.txt"
if grep -Ex '(gcc|g\+\+|cpp|clang|cmake|build-essential|ninja-build)(-[0-9.]+)?' "$stage/runtime-packages.txt"; then
  echo "build-in-container: a compiler would end up in the runtime image" >&2
  exit 1
fi
echo "build-in-container: staged ${binaries[*]}; runtime packages:"
sed 's/^/  /' "$stage/runtime-packages.txt"
