#!/usr/bin/env bash
# Checks that a program loads no LibTorch (libtorch*, libc10*) and no UCX (libucp, libucs, libuct,
# libucm): a control client such as retortctl links only gRPC and what it shares with the
# coordinator (retort_rpc), so it starts fast and installs without the training stack.
# Usage: check_no_heavy_libs.sh PROGRAM
set -euo pipefail
(($# == 1)) || { echo "usage: $0 PROGRAM" >&2; exit 2; }
program=$1
[[ -x "$program" ]] || { echo "not an executable: $program" >&2; exit 1; }
libs=$(ldd "$program") || { echo "ldd $program failed" >&2; exit 1; }
heavy=$(grep -E '^\s*(libtorch|libc10|libuc[pstm])[^ ]*\.so' <<<"$libs" || true)
if [[ -n "$heavy" ]]; then
  echo "$program loads libraries a control client must not need:" >&2
  echo "$heavy" >&2
  exit 1
fi
echo "$program: $(wc -l <<<"$libs") shared libraries, none of LibTorch or UCX"
