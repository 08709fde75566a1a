#!/usr/bin/env bash
# One-GPU KD step: retort (kd_step_gpu_bench) against PyTorch eager and torch.compile
# (kd_reference_gpu.py), same GPU, same models, batch and precision, in one run; then retort
# again on real input: an ImageNet-like JPEG folder (500x375, quality 90) decoded by nvJPEG
# with 4 CPU threads, reporting how much of the step waited for data (target < 5%). Prints one
# JSON object with the four results and the ratios.
# Usage: bench/trainer/run_kd_gpu_bench.sh BUILD_DIR [PYTHON] [extra flags for all three]
# KD_GPU_PARTS=LIST runs only those of retort,eager,compile,jpeg (default all; the others read
# {"skipped": "not asked for"}); KD_GPU_PART_TIMEOUTS="retort=30 compile=70 ..." bounds parts
# in seconds (scripts/gpu-check's kd and jpeg steps), a part over its bound reads as failed.
set -euo pipefail
if [[ "${1:-}" == "--help" || "${1:-}" == "-h" || $# -lt 1 ]]; then
  sed -n '2,5p' "$0" | sed 's/^# //'
  [[ $# -ge 1 ]] && exit 0 || exit 2
fi
build=$1
python=${2:-python3}
shift $(($# >= 2 ? 2 : 1))
here=$(cd "$(dirname "$0")" && pwd)
# Each part runs on its own: one that fails (a torch.compile error, a build without nvJPEG)
# leaves {"error": ...} in its place and the others' figures stand. The exit status is that of
# retort's synthetic run, the figure everything else is compared with.
parts=${KD_GPU_PARTS:-retort,eager,compile,jpeg}
run_part() {  # PART COMMAND...: the command's JSON line, or an error (or skipped) object
  local part=$1 out bound
  shift
  if [[ ",$parts," != *",$part,"* ]]; then
    echo '{"skipped": "not asked for"}'
    return 0
  fi
  bound=$(sed -nE "s/.*(^| )$part=([0-9]+).*/\2/p" <<<"${KD_GPU_PART_TIMEOUTS:-}")
  if out=$(${bound:+timeout -k 5 "$bound"} "$@") && [[ "$out" == "{"* ]]; then
    echo "$out"
  else
    echo "kd gpu bench: $part part failed${bound:+ or ran past its $bound s}" >&2
    echo "{\"error\": \"failed${bound:+ or ran past $bound s}; see the log\"}"
    return 1
  fi
}
ours_rc=0
ours=$(run_part retort "$build/bench/trainer/kd_step_gpu_bench" "$@") || ours_rc=1
# The references' FLOPs per sample: retort's model and computed FLOPs (trainer/model_flops.h),
# so that both sides' MFU divide the same work (none when retort's part did not run). The
# references run retort's class-token last block (kd_reference_gpu.py --last-block, default):
# the speedups compare equal work.
flops_of() { "$python" -c 'import json, sys; print(json.loads(sys.argv[1]).get(sys.argv[2], ""))' "$ours" "$1" 2>/dev/null; }
gflop=$(flops_of gflop_per_sample_model) || gflop=""
gflop_computed=$(flops_of gflop_per_sample_computed) || gflop_computed=""
gflop_flag=()
[[ -n "$gflop" ]] && gflop_flag=(--gflop-per-sample "$gflop")
[[ -n "$gflop_computed" ]] && gflop_flag+=(--gflop-per-sample-computed "$gflop_computed")
eager=$(run_part eager "$python" "$here/kd_reference_gpu.py" --mode eager "${gflop_flag[@]}" "$@") || true
compiled=$(run_part compile "$python" "$here/kd_reference_gpu.py" --mode compile "${gflop_flag[@]}" "$@") || true
# The JPEG folder: the caller's (JPEG_FOLDER, shared with the decode benchmark), else a new one.
folder=${JPEG_FOLDER:-}
if [[ -z "$folder" && ",$parts," == *",jpeg,"* ]]; then
  folder=$(mktemp -d /tmp/retort_kd_jpeg.XXXXXX)
  trap 'rm -rf "$folder"' EXIT
  "$here/../trainer_data/make_imagenet_like_jpegs.sh" "$build" "$folder"
fi
jpeg_rc=0
jpeg=$(run_part jpeg "$build/bench/trainer/kd_step_gpu_bench" --jpeg-folder "$folder" \
  --decode gpu --decode-threads 4 "$@") || jpeg_rc=1
# Alone, the JPEG part's status is the run's.
[[ "$parts" == jpeg ]] && ours_rc=$jpeg_rc
"$python" - "$ours" "$eager" "$compiled" "$jpeg" <<'PY'
import json, sys
ours, eager, compiled, jpeg = (json.loads(a) for a in sys.argv[1:])


def ratio(a, b, key="samples_per_s"):
    return round(a[key] / b[key], 3) if key in a and key in b and b[key] else None


print(json.dumps({
    # Same work on both sides: a frozen pure-bf16 teacher each, the class-token last block each
    # (the references' "last_block"); "mfu" on model FLOPs for all, "mfu_computed" on the FLOPs
    # each side computes.
    "comparison": "kd_step_gpu", "retort": ours, "pytorch_eager": eager,
    "pytorch_compile": compiled, "retort_jpeg_input": jpeg,
    "speedup_vs_eager": ratio(ours, eager),
    "speedup_vs_compile": ratio(ours, compiled),
    "speedup_basis": "equal work (" + str(eager.get("last_block") or compiled.get("last_block"))
                     + " last block on both sides)",
    "mfu": {"retort": ours.get("mfu"), "pytorch_eager": eager.get("mfu"),
            "pytorch_compile": compiled.get("mfu")},
    "mfu_computed": {"retort": ours.get("mfu_computed"),
                     "pytorch_eager": eager.get("mfu_computed"),
                     "pytorch_compile": compiled.get("mfu_computed")},
    "jpeg_vs_synthetic": ratio(jpeg, ours),
    "jpeg_data_wait_fraction": jpeg.get("data_wait_fraction"),
}))
PY
exit "$ours_rc"
