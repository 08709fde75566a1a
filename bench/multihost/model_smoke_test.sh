#!/usr/bin/env bash
# End to end on a tiny scale: shaped_links_bench on test hosts (2 hosts x 2 ranks, one emulated
# 1000 Mbit/s link setting, 64-256 KiB, 2 rounds, every backend the model reads) feeds
# scaling_model.py, whose JSON must hold the calibration of both levels, a prediction for both
# schedules at every size, the projection, and two well-formed SVG figures. Exits 77 (ctest:
# skipped) where test hosts cannot be made (not root, no namespaces).
# Usage: model_smoke_test.sh BUILD_DIR PYTHON
set -euo pipefail
build=$1
python=$2
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d /tmp/retort_model_smoke.XXXXXX)
trap 'rm -rf "$work"' EXIT

if ! "$build/bench/multihost/shaped_links_bench" --shaper=emulator --rates_mbit=1000 \
  --backends=ucx,hierarchical,intra,cross --min_bytes=65536 --max_bytes=262144 \
  --ops=reduce_scatter --rounds=2 >"$work/results.jsonl" 2>"$work/bench.err"; then
  if grep -q "cannot make test hosts" "$work/bench.err"; then
    echo "SKIP: $(cat "$work/bench.err")"
    exit 77
  fi
  cat "$work/bench.err"
  exit 1
fi
"$python" "$here/scaling_model.py" "$work/results.jsonl" --project --json \
  --svg-dir "$work/svg" >"$work/model.jsonl"
"$python" - "$work" <<'PY'
import json, sys, xml.etree.ElementTree as ET
work = sys.argv[1]
rows = [json.loads(l) for l in open(f"{work}/model.jsonl")]
levels = {r["level"] for r in rows if r["kind"] == "calibration"}
assert levels == {"intra-host", "cross-host"}, levels
for r in rows:
    if r["kind"] == "calibration":
        assert r["beta_GBps"] and r["beta_GBps"] > 0, r
validation = [r for r in rows if r["kind"] == "validation"]
for schedule in ("hierarchical", "flat ring"):
    sizes = sorted(r["bytes"] for r in validation if r["schedule"] == schedule)
    assert sizes == [65536, 262144], (schedule, sizes)
for r in validation:
    assert r["rounds"] == 2 and r["predicted_ms"] > 0 and r["measured_ms"] > 0, r
    lo, hi = r["measured_ms_range"]
    assert lo <= r["measured_ms"] <= hi, r
projection = [r for r in rows if r["kind"] == "projection"]
assert len(projection) == 14, len(projection)  # 7 (GPUs, link) rows x 2 step times
for name in ("validation", "projection"):
    root = ET.parse(f"{work}/svg/{name}.svg").getroot()
    assert root.tag.endswith("svg") and len(root) > 10, name
print(f"model smoke test: {len(validation)} predictions, errors "
      + ", ".join(f"{r['error_pct']:+.0f}%" for r in validation))
PY
