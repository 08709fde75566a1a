#!/usr/bin/env bash
# ctest clang_format: every tracked C++ and CUDA source of the checkout is formatted as
# .clang-format says (clang-format --dry-run -Werror). Names each file that drifts and says how
# to fix it. Skips (exit 77) when the tree is not a git checkout (an exported source tarball).
# Usage: clang_format_check.sh CLANG_FORMAT SOURCE_DIR
set -euo pipefail
clang_format=${1:?usage: clang_format_check.sh CLANG_FORMAT SOURCE_DIR}
src=${2:?usage: clang_format_check.sh CLANG_FORMAT SOURCE_DIR}
if ! git -C "$src" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "clang_format: $src is not a git checkout; nothing to list" >&2
  exit 77
fi
mapfile -t files < <(git -C "$src" ls-files -- '*.cc' '*.h' '*.cu' '*.cuh' '*.inc')
drifting=()
for f in "${files[@]}"; do
  [[ -f "$src/$f" ]] || continue  # deleted in the work tree, not yet committed
  if ! "$clang_format" --dry-run -Werror "$src/$f" >/dev/null 2>&1; then drifting+=("$f"); fi
done
echo "clang_format: ${#files[@]} files checked, ${#drifting[@]} not formatted"
if ((${#drifting[@]} > 0)); then
  printf '  %s\n' "${drifting[@]}"
  echo "fix: (cd $src && clang-format -i ${drifting[*]})"
  exit 1
fi
