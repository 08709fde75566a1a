# Sourced by the collectives benchmark scripts: the machine's context as JSON lines, so that a
# result file holds only JSON objects (results carry "impl"; context lines carry "context").
# load_context WHEN OUT: the 1, 5 and 15 minute load averages.
load_context() {
  echo "{\"context\":\"load\",\"when\":\"$1\",\"loadavg\":[$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' ,)]}" |
    tee -a "$2"
}
