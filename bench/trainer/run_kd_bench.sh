#!/usr/bin/env bash
# Side-by-side KD step throughput: retort (C++) vs the PyTorch reference, same models, batch,
# threads, AdamW and KD loss. Prints JSON lines, then one comparison line.
# Usage: bench/trainer/run_kd_bench.sh [build_dir] [steps]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
steps=${2:-20}
load=$(cut -d' ' -f1-3 /proc/loadavg)
echo "{\"host_load_avg\":\"$load\",\"nproc\":$(nproc)}"
ours=$("$build/bench/trainer/kd_step_bench" --batch 128 --threads 2 --steps "$steps")
ref=$(/usr/bin/python3 "$root/bench/trainer/kd_reference.py" --batch 128 --threads 2 --steps "$steps")
echo "$ours"
echo "$ref"
/usr/bin/python3 - "$ours" "$ref" <<'PY'
import json, sys
ours = [json.loads(l) for l in sys.argv[1].splitlines() if '"impl"' in l]
ref = json.loads(sys.argv[2])
by = {o["impl"]: o for o in ours}
print(json.dumps({"comparison": "kd_step_cpu", "pytorch_samples_per_s": ref["samples_per_s"],
                  "retort_samples_per_s": by["retort"]["samples_per_s"],
                  "speedup": round(by["retort"]["samples_per_s"] / ref["samples_per_s"], 3),
                  "retort_cached_samples_per_s": by["retort_cached"]["samples_per_s"],
                  "speedup_cached": round(by["retort_cached"]["samples_per_s"] / ref["samples_per_s"], 3)}))
PY
echo "{\"host_load_avg_after\":\"$(cut -d' ' -f1-3 /proc/loadavg)\"}"
