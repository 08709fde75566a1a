# shellcheck shell=bash
# Sourced by the benchmark run scripts: every line they append to a result file carries the
# run's stamp (bench/bench_context.py: commit, machine, load at start, UTC date).
# On sourcing: RETORT_BENCH_STAMP (exported) is taken once, so all lines of a run share it.
# stamp: filter, stdin -> stdout, adding the stamp to each JSON object line (stamp_lines.py).
# load_context WHEN OUT: a context line with the 1, 5 and 15 minute load averages, appended to
#   OUT and echoed, so that a result file holds only JSON objects (results carry "impl"; context
#   lines carry "context").
retort_bench_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RETORT_BENCH_STAMP=$(python3 "$retort_bench_dir/bench_context.py")
export RETORT_BENCH_STAMP
stamp() {
  python3 "$retort_bench_dir/stamp_lines.py"
}
load_context() {
  echo "{\"context\":\"load\",\"when\":\"$1\",\"loadavg\":[$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' ,)]}" |
    stamp | tee -a "$2"
}
