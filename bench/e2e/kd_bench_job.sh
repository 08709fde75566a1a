# Shared by the 2-worker end-to-end benchmarks (source it after scripts/python-env.sh): the job
# they run and how they read its steady-state throughput.

# Prints the job spec: fm-teacher -> fm-student, global batch 128, synthetic 28x28x1 data,
# 1 thread per worker. $1 = name, $2 = steps (warm-up included), $3 = extra YAML lines.
kd_bench_job() {
  cat <<JOB
name: $1
teacher: {preset: fm-teacher}
student: {preset: fm-student}
dataset: {kind: synthetic, image_size: 28, num_classes: 10, synthetic_samples: 60000}
global_batch: 128
steps: $2
optimizer: {lr: 0.001, weight_decay: 0.05, clip_grad_norm: 1.0}
distillation: {temperature: 4.0, alpha: 0.5}
threads_per_worker: 1
evaluate: false
${3:-}
JOB
}

# Prints batch / median step time over the metrics lines after the first $2 (warm-up) steps.
# $1 = metrics.jsonl written by retort-run's rank 0.
median_samples_per_s() {
  "$retort_python" - "$1" "$2" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])][int(sys.argv[2]):]
step_s = statistics.median(128 / r["samples_per_second"] for r in rows)
print(round(128 / step_s, 2))
PY
}
