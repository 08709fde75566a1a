#!/usr/bin/env bash
# scripts/gpu-check's plumbing without a GPU (ctest gpu_check_plumbing): --fake runs every step
# as a trivial command under short bounds. Checks the order, that a step past its bound is
# recorded as a timeout and a failing one as failed while the next steps still run, the teacher
# hook's "not built", the file limit, --step re-running one step alone, --plan, and that the
# CMake steps (cmake/gpu_check.cmake) are the script's.
# Usage: gpu_check_plumbing_test.sh PYTHON CMAKE_STEP...
set -euo pipefail
python=${1:?usage: gpu_check_plumbing_test.sh PYTHON CMAKE_STEP...}
shift
cmake_steps="$*"
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/retort_gpu_check_plumbing.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$root/scripts/gpu-check" --python "$python" --plan >"$tmp/plan.txt"
grep -q 'budget 540 s' "$tmp/plan.txt" || fail "--plan: $(cat "$tmp/plan.txt")"

set +e
RETORT_GPU_CHECK_FAKE="tests=hang staging=fail" RETORT_GPU_CHECK_FAKE_BOUND_S=1 \
  "$root/scripts/gpu-check" --python "$python" --fake --out "$tmp/all" 2>"$tmp/all.err"
rc=$?
set -e
((rc != 0)) || fail "a failed and a timed-out step must fail the check"
"$python" - "$tmp/all" "$cmake_steps" <<'PY'
import json, os, sys
out, cmake_steps = sys.argv[1], sys.argv[2].split()
s = json.load(open(os.path.join(out, "summary.json")))
status = {n: s["steps"][n]["status"] for n in s["order"]}
assert s["order"] == ["build", "kd", "tests", "staging", "jpeg", "teacher"], s["order"]
assert s["order"][1:] == cmake_steps, f"CMake steps {cmake_steps} differ from {s['order'][1:]}"
assert status == {"build": "passed", "kd": "passed", "tests": "timeout", "staging": "failed",
                  "jpeg": "passed", "teacher": "skipped"}, status
assert s["steps"]["teacher"]["reason"] == "not built"
assert 0.9 <= s["steps"]["tests"]["seconds"] < 5, s["steps"]["tests"]
assert s["steps"]["kd"]["figures"]["retort"] == {"samples_per_s": 1.5}
assert s["finished"] and not s["passed"] and "out_files_error" not in s
files = sorted(os.listdir(out))
assert len(files) <= 8 and files == sorted(["summary.json"] + [n + ".log" for n in s["order"]]), files
assert "fake hang" in open(os.path.join(out, "tests.log")).read()
PY

RETORT_GPU_CHECK_FAKE_BOUND_S=1 "$root/scripts/gpu-check" --python "$python" --fake \
  --step staging --out "$tmp/one" 2>"$tmp/one.err" || fail "--step staging: $(cat "$tmp/one.err")"
"$python" - "$tmp/one" <<'PY'
import json, os, sys
s = json.load(open(os.path.join(sys.argv[1], "summary.json")))
assert s["order"] == ["build", "staging"], s["order"]
assert s["passed"] and s["steps"]["staging"]["status"] == "passed"
PY
if "$root/scripts/gpu-check" --python "$python" --fake --step nope --out "$tmp/bad" 2>/dev/null; then
  fail "an unknown step must be refused"
fi
echo "gpu-check plumbing: order, bounds, failures, file limit, --step and --plan as expected"
