#!/usr/bin/env bash
# Side-by-side collectives benchmark on this host, 2 ranks (or $RANKS), in one run:
# retort (collectives_bench), OpenMPI (mpi_reference under mpirun), gloo (torch.distributed)
# and ucx_perftest tag bandwidth (the point-to-point ceiling). Prints JSON lines to
# $OUT (default bench/collectives/results.jsonl; every line a JSON object: results carry "impl",
# the machine's context "context") and a markdown summary to stdout; the UCX transports each rank
# chose go to the text file beside it (results.transports.txt).
# Usage: bench/collectives/run_bench.sh [build_dir]   (env: RANKS, MIN_BYTES, MAX_BYTES)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../../scripts/python-env.sh"
source "$here/../context.sh"
build=${1:-$here/../../build}
ranks=${RANKS:-2}
min_bytes=${MIN_BYTES:-1024}
max_bytes=${MAX_BYTES:-$((256 << 20))}
out=${OUT:-$here/results.jsonl}
transports=${out%.jsonl}.transports.txt
: > "$out"
probe() {  # the vCPUs' placement (cache-line latency, FIFO hand-over bandwidth): see RESULTS.md
  [[ -x "$build/bench/collectives/core_to_core_probe" ]] &&
    "$build/bench/collectives/core_to_core_probe" |
    sed "s/^{/{\"context\":\"probe\",\"when\":\"$1\",/" | stamp | tee -a "$out"
  return 0
}
load_context before "$out"
probe before
# The transports every rank chose (UCX lanes per peer, CMA threshold).
"$build/bench/collectives/collectives_bench" --ranks="$ranks" --min-bytes=1024 --max-bytes=1024 \
  --ops=all_reduce --print-transports 2>"$transports" >/dev/null

# retort in both progress modes: background executor thread (what training uses to overlap
# communication with backward) and caller-driven (operations run inside Work::Wait).
for mode in thread caller; do
  label=retort-ucx; [[ $mode == caller ]] && label=retort-ucx-caller
  "$build/bench/collectives/collectives_bench" --ranks="$ranks" --min-bytes="$min_bytes" \
    --max-bytes="$max_bytes" --progress=$mode --label=$label | stamp | tee -a "$out"
done

if [[ -x "$build/bench/collectives/mpi_reference" ]]; then
  mpirun --allow-run-as-root --oversubscribe -np "$ranks" \
    "$build/bench/collectives/mpi_reference" "$min_bytes" "$max_bytes" 2>/dev/null | stamp | tee -a "$out"
fi

"$retort_python" "$here/gloo_reference.py" --ranks "$ranks" --min-bytes "$min_bytes" \
  --max-bytes "$max_bytes" | stamp | tee -a "$out"

# Point-to-point ceiling: ucx_perftest tag bandwidth between two processes on loopback, with
# UCX's default transports and with shared memory + CMA only; the better of the two counts.
perftest() {  # perftest BYTES TLS
  local port=$((20000 + RANDOM % 20000)) iters=$(($1 >= (64 << 20) ? 10 : 50))
  UCX_TLS=$2 ucx_perftest -p "$port" > /dev/null 2>&1 &
  local server=$!
  sleep 0.3
  UCX_TLS=$2 timeout 120 ucx_perftest 127.0.0.1 -p "$port" -t tag_bw -s "$1" -n "$iters" \
    2>/dev/null | awk '/Final:/ {print $(NF-2)}'
  wait "$server" 2>/dev/null || true
}
for ((bytes = min_bytes; bytes <= max_bytes; bytes *= 4)); do
  ((bytes < (1 << 20))) && continue
  for tls in all posix,cma,self; do
    mbps=$(perftest "$bytes" "$tls")
    [[ -z "$mbps" ]] && continue
    # ucx_perftest reports MB/s with MB = 2^20 bytes.
    awk -v b="$bytes" -v m="$mbps" -v t="$tls" 'BEGIN {
      printf "{\"impl\":\"ucx_perftest\",\"tls\":\"%s\",\"op\":\"send_recv\",\"ranks\":2,\"bytes\":%d,\"algbw_GBps\":%.3f,\"busbw_GBps\":%.3f}\n",
             t, b, m * 1048576 / 1e9, m * 1048576 / 1e9 }' | stamp | tee -a "$out"
  done
done

# The machine is shared: repeat the target sizes (16 and 64 MiB) in alternating rounds so that
# every implementation sees the same load; the summary takes the median per implementation.
# retort-ucx-fifo is retort with the single-copy CMA path off (every message through UCX's
# shared-memory FIFO), for comparison.
for round in 1 2 3 4 5 6; do
  probe "round $round"
  for mode in thread caller fifo; do
    label=retort-ucx; [[ $mode == caller ]] && label=retort-ucx-caller
    extra=(--progress=$mode)
    [[ $mode == fifo ]] && label=retort-ucx-fifo && extra=(--progress=thread --cma-min-bytes=0)
    "$build/bench/collectives/collectives_bench" --ranks="$ranks" --min-bytes=$((16 << 20)) \
      --max-bytes=$((64 << 20)) --ops=all_reduce,all_gather,send_recv "${extra[@]}" \
      --label=$label | stamp | tee -a "$out"
  done
  if [[ -x "$build/bench/collectives/mpi_reference" ]]; then
    mpirun --allow-run-as-root --oversubscribe -np "$ranks" \
      "$build/bench/collectives/mpi_reference" $((16 << 20)) $((64 << 20)) 2>/dev/null |
      grep -v reduce_scatter | stamp | tee -a "$out"
  fi
  for bytes in $((16 << 20)) $((64 << 20)); do
    for tls in all posix,cma,self; do
      mbps=$(perftest "$bytes" "$tls")
      [[ -z "$mbps" ]] && continue
      awk -v b="$bytes" -v m="$mbps" -v t="$tls" 'BEGIN {
        printf "{\"impl\":\"ucx_perftest\",\"tls\":\"%s\",\"op\":\"send_recv\",\"ranks\":2,\"bytes\":%d,\"algbw_GBps\":%.3f,\"busbw_GBps\":%.3f}\n",
               t, b, m * 1048576 / 1e9, m * 1048576 / 1e9 }' | stamp | tee -a "$out"
    done
  done
done
load_context after "$out"
probe after
"$retort_python" "$here/summarize.py" "$out"
