#!/usr/bin/env bash
# Side-by-side collectives benchmark on this host, 2 ranks (or $RANKS), in one run:
# retort (collectives_bench), OpenMPI (mpi_reference under mpirun), gloo (torch.distributed)
# and ucx_perftest tag bandwidth (the point-to-point ceiling). Prints JSON lines to
# $OUT (default bench/collectives/results.jsonl) and a markdown summary to stdout.
# Usage: bench/collectives/run_bench.sh [build_dir]   (env: RANKS, MIN_BYTES, MAX_BYTES)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build}
ranks=${RANKS:-2}
min_bytes=${MIN_BYTES:-1024}
max_bytes=${MAX_BYTES:-$((256 << 20))}
out=${OUT:-$here/results.jsonl}
: > "$out"
echo "# load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out"

"$build/bench/collectives/collectives_bench" --ranks="$ranks" --min_bytes="$min_bytes" \
  --max_bytes="$max_bytes" | tee -a "$out"

if [[ -x "$build/bench/collectives/mpi_reference" ]]; then
  mpirun --allow-run-as-root --oversubscribe -np "$ranks" \
    "$build/bench/collectives/mpi_reference" "$min_bytes" "$max_bytes" 2>/dev/null | tee -a "$out"
fi

/usr/bin/python3 "$here/gloo_reference.py" --ranks "$ranks" --min-bytes "$min_bytes" \
  --max-bytes "$max_bytes" | tee -a "$out"

# Point-to-point ceiling: ucx_perftest tag bandwidth between two processes on loopback.
for ((bytes = min_bytes; bytes <= max_bytes; bytes *= 4)); do
  ((bytes < (1 << 20))) && continue
  port=$((20000 + RANDOM % 20000))
  ucx_perftest -p "$port" > /dev/null 2>&1 &
  server=$!
  sleep 0.3
  iters=$((bytes >= (64 << 20) ? 10 : 50))
  mbps=$(timeout 120 ucx_perftest 127.0.0.1 -p "$port" -t tag_bw -s "$bytes" -n "$iters" 2>/dev/null |
         awk '/Final:/ {print $(NF-2)}')
  wait "$server" 2>/dev/null || true
  [[ -z "$mbps" ]] && continue
  awk -v b="$bytes" -v m="$mbps" 'BEGIN {
    printf "{\"impl\":\"ucx_perftest\",\"op\":\"send_recv\",\"ranks\":2,\"bytes\":%d,\"algbw_GBps\":%.3f,\"busbw_GBps\":%.3f}\n",
           b, m * 1048576 / 1e9, m * 1048576 / 1e9 }' | tee -a "$out"
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out"
/usr/bin/python3 "$here/summarize.py" "$out"
