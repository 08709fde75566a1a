#!/usr/bin/env bash
# scripts/failure-digest.py on a made-up ctest log: the failed test's reason lines and tail
# are printed, a passed test's output is not, and a run without failures prints nothing.
set -euo pipefail
digest=${1:?usage: failure_digest_test.sh path/to/failure-digest.py}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/Testing/Temporary"
rule=----------------------------------------------------------
cat >"$dir/Testing/Temporary/LastTest.log" <<LOG
Start testing: Nov 27 01:00 UTC
$rule
1/2 Testing: Quiet.Passes
1/2 Test: Quiet.Passes
Command: "/bin/true"
Output:
$rule
passing output that must not be printed
<end of output>
Test time =   0.01 sec
$rule
Test Passed.
$rule

2/2 Testing: sanitize_thread_training
2/2 Test: sanitize_thread_training
Command: "/bin/false"
Output:
$rule
[1/175] Building CXX object a.o
== launcher_test (thread)
/src/launcher_test.cc:446: Failure
job 17 did not finish
WARNING: ThreadSanitizer: data race (pid=42)
SUMMARY: ThreadSanitizer: data race /src/x.cc:10 in Foo
sanitize: thread (training) FAILED: launcher_test 1 sanitizer report(s)
<end of output>
Test time = 691.59 sec
$rule
Test Failed.
$rule
LOG
printf '2:sanitize_thread_training\n' >"$dir/Testing/Temporary/LastTestsFailed.log"
out=$(python3 "$digest" "$dir" --lines 3)
fail() { echo "failure_digest_test: $*"; echo "--- digest:"; echo "$out"; exit 1; }
for want in "failure digest: 1 failed test(s)" "---- sanitize_thread_training" \
  "| /src/launcher_test.cc:446: Failure" "| SUMMARY: ThreadSanitizer: data race" \
  "| sanitize: thread (training) FAILED: launcher_test" "last 3 of 7 lines"; do
  grep -qF -- "$want" <<<"$out" || fail "missing: $want"
done
grep -qF "passing output" <<<"$out" && fail "printed a passed test's output"
grep -qF "[1/175] Building" <<<"$out" && fail "printed a build line as a reason"
rm "$dir/Testing/Temporary/LastTestsFailed.log"
out=$(python3 "$digest" "$dir")
[[ -z "$out" ]] || fail "printed something for a run without failures"
echo "failure_digest_test: ok"
