#!/usr/bin/env bash
# Offline check of deploy/slurm/retort.sbatch (ctest deploy.slurm.*): its --dry-run on a
# pretend 3-node allocation prints the coordinator on the first node and one srun step of 6
# workers pointed at it, each with its node name, local rank, data address and GPU; a missing job
# spec and a bad RETORT_DEVICES are refused naming the value.
# Usage: deploy/slurm/check-dry-run.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
script=$here/retort.sbatch
(($# == 1)) || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "check-dry-run: $*" >&2; exit 1; }

printf 'name: slurm-check\n' > "$tmp/job.yaml"
out=$(cd "$tmp" && RETORT_BIN="$1/tools" RETORT_NODES="gpu-a gpu-b gpu-c" "$script" --dry-run job.yaml)
echo "$out"
coordinator_line=$(grep -E '/retort-coordinator ' <<< "$out") || fail "no coordinator command"
[[ "$coordinator_line" == *"--listen=gpu-a:7070"* ]] || fail "the coordinator does not listen on the first node"
[[ "$coordinator_line" == *"--job=$tmp/job.yaml"* ]] || fail "the coordinator does not get the job spec's absolute path"
[[ "$coordinator_line" == *"--state-dir=$tmp/retort-state-DRYRUN"* ]] || fail "unexpected state dir"
srun_line=$(grep -E '^srun ' <<< "$out") || fail "no srun command"
# shellcheck disable=SC2016 # the task's own variables, as printed
for want in '--ntasks=6' '--no-kill' '--kill-on-bad-exit=0' 'retort-worker gpu-a:7070' \
  'SLURM_LOCALID' 'hostname\ -s' 'hostname\ -I' '--print-device' 'RETORT_DEVICE' \
  'device=\"\$RETORT_DEVICE\"' 'devices=\"\$RETORT_DEVICE\"' 'gpu-a:7070 cuda'; do
  [[ "$srun_line" == *"$want"* ]] || fail "the srun step lacks '$want': $srun_line"
done
# The flags the script passes exist in the built binaries (help read whole first: grep -q stops
# reading at its match, and under pipefail the binary's SIGPIPE would fail the pipeline).
help=$("$1/tools/retort-coordinator" --help)
for flag in --state-dir --job --listen --insecure-listen --no-check-paths; do
  grep -q -- "${flag#--no}" <<< "$help" || fail "retort-coordinator has no $flag"
done
help=$("$1/tools/retort-worker" --help)
for flag in --coordinator --node --local-rank --data-address --device --devices --print-device; do
  grep -q -- "$flag" <<< "$help" || fail "retort-worker has no $flag"
done

if "$script" --dry-run "$tmp/missing.yaml" 2> "$tmp/err"; then fail "a missing job spec was accepted"; fi
grep -q "missing.yaml" "$tmp/err" || fail "the error does not name the missing spec: $(cat "$tmp/err")"
if RETORT_DEVICES=tpu "$script" --dry-run "$tmp/job.yaml" 2> "$tmp/err"; then fail "RETORT_DEVICES=tpu was accepted"; fi
grep -q "tpu" "$tmp/err" || fail "the error does not name the bad device kind: $(cat "$tmp/err")"
echo "check-dry-run: ok"
