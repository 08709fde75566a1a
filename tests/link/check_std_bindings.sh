#!/usr/bin/env bash
# Checks that a program's C++ standard library calls bind to libstdc++, not to a copy that a
# dependency exports (libtorch_cpu.so of the PyPI wheels exports std::filesystem; a remove_all
# bound to it crashed trainer_test). Binds every symbol at start-up (LD_BIND_NOW) and reads the
# dynamic linker's binding log (LD_DEBUG=bindings) while the program prints its --help.
# Usage: check_std_bindings.sh PROGRAM [ARGS...]   (default ARGS: --help)
set -euo pipefail
(($# >= 1)) || { echo "usage: $0 PROGRAM [ARGS...]" >&2; exit 2; }
program=$1
shift
(($# > 0)) || set -- --help
[[ -x "$program" ]] || { echo "not an executable: $program" >&2; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
LD_BIND_NOW=1 LD_DEBUG=bindings LD_DEBUG_OUTPUT="$log" timeout 60 "$program" "$@" >/dev/null 2>&1 || true
logs=("$log".*)
[[ -e "${logs[0]}" ]] || { echo "no binding log from $program" >&2; exit 1; }
# Lines look like: "binding file PROGRAM [0] to /path/libstdc++.so.6 [0]: normal symbol `_ZNSt10filesystem...'"
std_bindings=$(grep -h "binding file $program \[0\] to" "${logs[@]}" | grep -E "symbol \`_ZNSt10filesystem|symbol \`_ZNKSt10filesystem" || true)
rm -f "${logs[@]}"
[[ -n "$std_bindings" ]] || { echo "$program binds no std::filesystem symbol: nothing to check"; exit 0; }
wrong=$(grep -v "libstdc++.so" <<<"$std_bindings" || true)
total=$(wc -l <<<"$std_bindings")
if [[ -n "$wrong" ]]; then
  echo "$program: std::filesystem symbols bound outside libstdc++:" >&2
  sed 's/^ *[0-9]*: *//' <<<"$wrong" | head -20 >&2
  exit 1
fi
echo "$program: all $total std::filesystem bindings go to libstdc++"
