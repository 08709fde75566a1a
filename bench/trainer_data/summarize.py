#!/usr/bin/env python3
"""Median images/s per (impl, dataset, threads, dct_scaling) from run.sh's JSON lines on stdin."""
import collections
import json
import statistics
import sys

groups = collections.defaultdict(list)
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    key = (r["dataset"], r["threads"], r["impl"], r.get("dct_scaling", ""))
    groups[key].append(r["images_per_s"])
for key in sorted(groups):
    values = groups[key]
    print(json.dumps({"dataset": key[0], "threads": key[1], "impl": key[2], "dct_scaling": key[3],
                      "runs": len(values), "median_images_per_s": round(statistics.median(values), 1),
                      "min": min(values), "max": max(values)}))
