#!/usr/bin/env bash
# Side-by-side KD step throughput: retort (C++) vs the PyTorch reference, same models
# (fm-teacher -> fm-student), batch 128, 2 threads, AdamW, KD loss and grad clipping.
# The two programs run alternately for several rounds (the host may be shared; alternating
# exposes both to the same load) and each side's best round is compared.
# Usage: bench/trainer/run_kd_bench.sh [build_dir] [steps_per_round] [rounds]
# Prints JSON lines: each run's line, then one comparison line.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
source "$root/scripts/python-env.sh"
build=${1:-$root/build}
steps=${2:-10}
rounds=${3:-3}
echo "{\"host_load_avg_before\":\"$(cut -d' ' -f1-3 /proc/loadavg)\",\"nproc\":$(nproc)}"
all=""
for ((r = 1; r <= rounds; r++)); do
  ours=$("$build/bench/trainer/kd_step_bench" --batch 128 --threads 2 --warmup 2 --steps "$steps")
  ref=$("$retort_python" "$root/bench/trainer/kd_reference.py" --batch 128 --threads 2 --warmup 2 \
        --steps "$steps")
  echo "$ours"
  echo "$ref"
  all+="$ours"$'\n'"$ref"$'\n'
done
"$retort_python" - "$all" <<'PY'
import json, sys
lines = [json.loads(l) for l in sys.argv[1].splitlines() if '"impl"' in l]
# Per-round ratios (each round's programs ran back to back under similar load).
rounds, cur = [], {}
for l in lines:
    cur[l["impl"]] = l["samples_per_s"]
    if l["impl"] == "pytorch":
        rounds.append(cur)
        cur = {}
def median(v):
    v = sorted(v)
    return v[len(v) // 2]
per_round = [round(r["retort"] / r["pytorch"], 3) for r in rounds]
per_round_cached = [round(r["retort_cached"] / r["pytorch"], 3) for r in rounds]
best = {}
for l in lines:
    best[l["impl"]] = max(best.get(l["impl"], 0), l["samples_per_s"])
ref = best["pytorch"]
print(json.dumps({"comparison": "kd_step_cpu_best_of_rounds", "pytorch_samples_per_s": ref,
                  "retort_samples_per_s": best["retort"],
                  "retort_intraop_samples_per_s": best["retort_intraop"],
                  "speedup": round(best["retort"] / ref, 3),
                  "retort_cached_samples_per_s": best["retort_cached"],
                  "speedup_cached": round(best["retort_cached"] / ref, 3),
                  "per_round_speedup": per_round, "median_round_speedup": median(per_round),
                  "per_round_speedup_cached": per_round_cached,
                  "median_round_speedup_cached": median(per_round_cached)}))
PY
echo "{\"host_load_avg_after\":\"$(cut -d' ' -f1-3 /proc/loadavg)\"}"
