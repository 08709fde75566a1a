#!/usr/bin/env bash
# Offline check of deploy/slurm/retort.sbatch (ctest deploy.slurm.*): its --dry-run on a
# pretend 3-node allocation prints the coordinator on the first node and one srun step of 6
# workers pointed at it, each with its node name, local rank, data address (RETORT_DATA_INTERFACE
# or the node name's address, never `hostname -I`), GPU and worker certificate; mutual TLS by
# default, --cpus-per-task passed to srun, the allocation's --no-kill/--requeue/--signal; a
# missing job spec, a bad RETORT_DEVICES and a bad interface name are refused naming the value.
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
for want in '--ntasks=6' '--cpus-per-task=1' '--no-kill' '--kill-on-bad-exit=0' \
  "retort-worker gpu-a:7070 $tmp/retort-state-DRYRUN/certs cuda" 'SLURM_LOCALID' 'hostname\ -s' \
  'RETORT_DATA_INTERFACE' '--print-device' 'device=\"\$RETORT_DEVICE\"' \
  'devices=\"\$RETORT_DEVICE\"' '--tls-ca=' '--tls-cert=' '--tls-key='; do
  [[ "$srun_line" == *"$want"* ]] || fail "the srun step lacks '$want': $srun_line"
done
[[ "$srun_line" != *'hostname\ -I'* ]] || fail "the data address still comes from hostname -I"
[[ "$coordinator_line" == *"--tls-ca=$tmp/retort-state-DRYRUN/certs/ca.crt"* ]] ||
  fail "the coordinator does not require client certificates: $coordinator_line"
[[ "$coordinator_line" != *--insecure-listen* ]] || fail "the coordinator listens without TLS by default"
grep -qE '/retortctl certs --out=' <<< "$out" || fail "no certificates are made"
# The allocation itself survives a node's loss and is requeued after a preemption warning.
for want in --no-kill --requeue --open-mode=append '--signal=B:TERM@' --cpus-per-task=; do
  grep -qE "^#SBATCH $want" "$script" || fail "the script lacks '#SBATCH $want'"
done
grep -qE '^trap on_term TERM|trap on_term TERM' "$script" || fail "no SIGTERM handler"
# SLURM_CPUS_PER_TASK reaches srun; RETORT_DEVICES=cpu forces the CPU; RETORT_TLS=0 is plain TCP.
out=$(cd "$tmp" && SLURM_CPUS_PER_TASK=6 RETORT_DEVICES=cpu RETORT_TLS=0 RETORT_BIN="$1/tools" \
  "$script" --dry-run job.yaml)
srun_line=$(grep -E '^srun ' <<< "$out")
[[ "$srun_line" == *--cpus-per-task=6* ]] || fail "SLURM_CPUS_PER_TASK does not reach srun: $srun_line"
[[ "$srun_line" == *"certs cpu"* ]] || fail "RETORT_DEVICES=cpu does not force the CPU: $srun_line"
[[ "$srun_line" != *--tls-* ]] || fail "RETORT_TLS=0 still passes certificates: $srun_line"
grep -qE '/retort-coordinator .*--insecure-listen' <<< "$out" || fail "RETORT_TLS=0 without --insecure-listen"
# The flags the script passes exist in the built binaries (help read whole first: grep -q stops
# reading at its match, and under pipefail the binary's SIGPIPE would fail the pipeline).
help=$("$1/tools/retort-coordinator" --help)
for flag in --state-dir --job --listen --insecure-listen --no-check-paths --tls-cert --tls-key --tls-ca; do
  grep -q -- "${flag#--no}" <<< "$help" || fail "retort-coordinator has no $flag"
done
help=$("$1/tools/retort-worker" --help)
for flag in --coordinator --node --local-rank --data-address --device --devices --print-device \
  --tls-ca --tls-cert --tls-key; do
  grep -q -- "$flag" <<< "$help" || fail "retort-worker has no $flag"
done

if "$script" --dry-run "$tmp/missing.yaml" 2> "$tmp/err"; then fail "a missing job spec was accepted"; fi
grep -q "missing.yaml" "$tmp/err" || fail "the error does not name the missing spec: $(cat "$tmp/err")"
if RETORT_DEVICES=tpu "$script" --dry-run "$tmp/job.yaml" 2> "$tmp/err"; then fail "RETORT_DEVICES=tpu was accepted"; fi
grep -q "tpu" "$tmp/err" || fail "the error does not name the bad device kind: $(cat "$tmp/err")"
if RETORT_DATA_INTERFACE='eth0;x' "$script" --dry-run "$tmp/job.yaml" 2> "$tmp/err"; then fail "a bad interface name was accepted"; fi
grep -q "eth0;x" "$tmp/err" || fail "the error does not name the bad interface: $(cat "$tmp/err")"
"$1/tools/retortctl" --help | grep -q "certs --out" || fail "retortctl has no certs command"
echo "check-dry-run: ok"
