#!/usr/bin/env bash
# scripts/gpu-check's plumbing without a GPU (ctest gpu_check_plumbing): --fake runs every step
# as a trivial command under short bounds. Checks the order and the default plan (teacher
# opt-in, at least 60 s of slack), that a target that fails to build fails its step alone while
# the other steps run, that a step past its bound is recorded as a timeout and keeps the rows it
# took, a failing one as failed, that a GPU test's skip fails its step on a machine with a GPU
# and not in a rehearsal (a test needing a second GPU: "not exercised"), that the torch.compile
# warm-up and every step's processes are ended, the file limit, --step re-running steps alone,
# the teacher hook's "not built", a missing dpkg-deb recorded in summary.json, --plan, and that
# the CMake steps (cmake/gpu_check.cmake) are the script's.
# Usage: gpu_check_plumbing_test.sh PYTHON CMAKE_STEP...
set -euo pipefail
python=${1:?usage: gpu_check_plumbing_test.sh PYTHON CMAKE_STEP...}
shift
cmake_steps="$*"
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/retort_gpu_check_plumbing.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
check() {  # NAME RC: runs the Python check on stdin against $tmp/NAME/summary.json
  "$python" - "$tmp/$1" "$2" "$cmake_steps" "$root/scripts" || fail "$1: $(cat "$tmp/$1.err")"
}
gpu_check() { "$root/scripts/gpu-check" --python "$python" "$@"; }

# The default plan: no teacher, and at least 60 s of the 540 s budget left.
gpu_check --plan >"$tmp/plan.txt"
grep -q 'budget 540 s' "$tmp/plan.txt" || fail "--plan: $(cat "$tmp/plan.txt")"
slack=$(sed -nE 's/.*slack (-?[0-9]+) s.*/\1/p' "$tmp/plan.txt")
[[ -n "$slack" ]] && ((slack >= 60)) || fail "--plan leaves ${slack:-no} s of slack (>= 60): $(cat "$tmp/plan.txt")"
! grep -q '^teacher' "$tmp/plan.txt" || fail "teacher is in the default plan: $(cat "$tmp/plan.txt")"
grep -q 'opt-in.*teacher' "$tmp/plan.txt" || fail "--plan does not name the opt-in teacher"
gpu_check --plan --step teacher >"$tmp/plan-teacher.txt"
grep -q '^teacher' "$tmp/plan-teacher.txt" || fail "--plan --step teacher: $(cat "$tmp/plan-teacher.txt")"

# Every way a step ends, in one run: kd's target fails to build, tests hangs, staging fails,
# jpeg takes a row and hangs.
set +e
RETORT_GPU_CHECK_FAKE="kd=buildfail tests=hang staging=fail jpeg=cut" RETORT_GPU_CHECK_FAKE_BOUND_S=1 \
  gpu_check --fake --out "$tmp/all" 2>"$tmp/all.err"
rc=$?
set -e
check all $rc <<'PY'
import json, os, re, sys
out, rc, cmake_steps = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
sys.path.insert(0, sys.argv[4])
import gpu_check_summary as g
assert rc != 0, "failed, timed-out and unbuilt steps must fail the check"
s = json.load(open(os.path.join(out, "summary.json")))
steps = s["steps"]
status = {n: steps[n]["status"] for n in s["order"]}
assert s["order"] == ["build", "kd", "tests", "staging", "jpeg"], s["order"]
assert list(g.STEP_NAMES[1:]) == cmake_steps, f"CMake steps {cmake_steps} differ from {g.STEP_NAMES}"
assert s["slack_s"] >= 60, s["slack_s"]
# kd's target failed: kd failed, saying so; the others built and ran.
assert status == {"build": "failed", "kd": "failed", "tests": "timeout", "staging": "failed",
                  "jpeg": "timeout"}, status
assert steps["kd"]["reason"].startswith("build of its target failed"), steps["kd"]
targets = steps["build"]["figures"]["targets"]
assert {n: t["status"] for n, t in targets.items()} == {
    "kd": "failed", "tests": "built", "staging": "built", "jpeg": "built"}, targets
# jpeg was cut after one row: the row is in the summary, and its figures with it.
assert steps["jpeg"]["partial"][0]["row"] == "retort_nvjpeg_4", steps["jpeg"]
assert steps["jpeg"]["figures"]["decode"][0]["images_per_s"] == 9000.0, steps["jpeg"]
assert 0.9 <= steps["tests"]["seconds"] < 5, steps["tests"]
assert s["finished"] and not s["passed"] and "out_files_error" not in s
assert s["not_exercised"]["multi-rank NCCL"].startswith("not exercised")
files = sorted(os.listdir(out))
assert len(files) <= 8 and files == sorted(["summary.json"] + [
    n + ".log" for n in s["order"] if n != "kd"]), files
assert "fake hang" in open(os.path.join(out, "tests.log")).read()
# The warm-up stand-in was stopped when step kd came, and is gone.
note = steps["kd"]["notes"][0]
assert note.startswith("torch.compile warm-up stopped"), note
pid = int(re.search(r"pid (\d+)", note).group(1))
assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split(") ")[1][0] == "Z"
PY
# Nothing of the steps (the hung ones' sleep) outlives the run: no live process left whose
# environment names this run's output folder.
"$python" - "$tmp/all" <<'PY' || fail "a step's process outlived the run"
import os, sys
mark = f"out={sys.argv[1]}".encode()
left = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        state = open(f"/proc/{pid}/stat").read().rsplit(") ", 1)[1][0]
    except OSError:
        continue
    if mark in env and state != "Z" and int(pid) != os.getpid():
        left.append((pid, open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ")))
assert not left, left
PY

# On a machine with a GPU, a GPU test's skip fails its step (--step: that step alone).
set +e
RETORT_GPU_CHECK_FAKE="tests=skip" RETORT_GPU_CHECK_FAKE_GPUS=1 RETORT_GPU_CHECK_FAKE_BOUND_S=1 \
  gpu_check --fake --step tests --out "$tmp/gpu" 2>"$tmp/gpu.err"
rc=$?
set -e
check gpu $rc <<'PY'
import json, os, sys
out, rc = sys.argv[1], int(sys.argv[2])
s = json.load(open(os.path.join(out, "summary.json")))
t = s["steps"]["tests"]
assert rc != 0 and s["order"] == ["build", "tests"] and not s["passed"], (rc, s["order"])
assert t["status"] == "failed", t
assert "skipped on a machine with a GPU" in t["reason"], t["reason"]
assert "KdStepGpuTest.Bf16LossCurveFollowsFp32Over50Steps" in t["reason"], t["reason"]
assert list(t["tests"]["not_exercised"]) == [
    "NcclCommunicatorTest.PaddedAndGroupedCountsGiveTheReference"], t["tests"]
assert "not exercised" in s["not_exercised"]["multi-rank NCCL"]
PY

# In a rehearsal the same skips pass; the opt-in teacher runs when named (its hook: not built).
RETORT_GPU_CHECK_FAKE="tests=skip" RETORT_GPU_CHECK_FAKE_GPUS=1 RETORT_GPU_CHECK_FAKE_BOUND_S=1 \
  gpu_check --fake --rehearse --step tests --step teacher --out "$tmp/rehearse" \
  2>"$tmp/rehearse.err" || fail "--rehearse --step tests,teacher: $(cat "$tmp/rehearse.err")"
check rehearse 0 <<'PY'
import json, os, sys
s = json.load(open(os.path.join(sys.argv[1], "summary.json")))
assert s["order"] == ["build", "tests", "teacher"], s["order"]
assert s["passed"] and s["steps"]["tests"]["status"] == "passed", s["steps"]["tests"]
assert s["steps"]["teacher"]["status"] == "skipped", s["steps"]["teacher"]
assert s["steps"]["teacher"]["reason"] == "not built"
assert s["steps"]["build"]["figures"]["targets"].keys() == {"tests", "teacher"}
PY

# A missing dpkg-deb stops the run after summary.json exists, saying so there.
mkdir -p "$tmp/debs/debs" "$tmp/debs/wheels"
if RETORT_GPU_CHECK_FAKE="dpkg-deb=missing" gpu_check --fake --debs "$tmp/debs" \
  --out "$tmp/nodpkg" 2>"$tmp/nodpkg.err"; then
  fail "--debs without dpkg-deb must fail"
fi
check nodpkg 1 <<'PY'
import json, os, sys
s = json.load(open(os.path.join(sys.argv[1], "summary.json")))
assert "dpkg-deb" in s["error"] and s["finished"] and not s["passed"], s
assert all(e["status"] == "pending" for e in s["steps"].values())
PY

if gpu_check --fake --step nope --out "$tmp/bad" 2>/dev/null; then
  fail "an unknown step must be refused"
fi
echo "gpu-check plumbing: plan and slack, unbuilt targets, bounds and partial rows, GPU skips," \
  "processes ended, file limit, --step, --debs and --plan as expected"
