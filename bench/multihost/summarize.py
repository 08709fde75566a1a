#!/usr/bin/env python3
"""Hierarchical vs flat busbw table from shaped_links_bench JSON lines: per link setting and
operation, the median busbw (GB/s) of the rounds at every size, flat ring / hierarchical, and
the ratio's range. Usage: summarize.py RESULTS.jsonl [--json]"""
import argparse
import json
import statistics
import sys

from link_settings import describe, setting


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results")
    p.add_argument("--json", action="store_true", help="JSON lines instead of markdown")
    args = p.parse_args()
    samples = {}
    with open(args.results) as f:
        for line in f:
            if not line.startswith('{"impl"'):
                continue
            r = json.loads(line)
            key = (setting(r), r["op"], r["bytes"], r["impl"])
            samples.setdefault(key, []).append(r["busbw_GBps"])
    if not samples:
        sys.exit(f"summarize: no result lines in {args.results}")
    median = {k: statistics.median(v) for k, v in samples.items()}
    sizes = sorted({k[2] for k in median})
    # By operation, then the unlimited link first and slower rates after, then latency, loss.
    rows = sorted({(k[0], k[1]) for k in median},
                  key=lambda x: (x[1], x[0][0] != 0, -x[0][0], x[0][1], x[0][2]))
    out = []
    for link, op in rows:
        cells, ratios = [], []
        for size in sizes:
            flat = median.get((link, op, size, "retort-ucx"))
            hier = median.get((link, op, size, "retort-hierarchical"))
            cells.append((flat, hier))
            if flat and hier:
                ratios.append(hier / flat)
        out.append({"link": describe(link), "op": op, "sizes": sizes, "flat_GBps":
                    [c[0] for c in cells], "hierarchical_GBps": [c[1] for c in cells],
                    "ratio_min": min(ratios) if ratios else None,
                    "ratio_max": max(ratios) if ratios else None})
    if args.json:
        for o in out:
            print(json.dumps(o))
        return

    def size_name(b):
        return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"

    def cell(v):
        return "-" if v is None else f"{v:.3f}"

    print("| link | op | " + " | ".join(size_name(s) for s in sizes) + " | hier / flat |")
    print("| --- | --- | " + " | ".join("---" for _ in sizes) + " | --- |")
    for o in out:
        pairs = " | ".join(f"{cell(f)} / {cell(h)}"
                           for f, h in zip(o["flat_GBps"], o["hierarchical_GBps"]))
        ratio = ("-" if o["ratio_min"] is None else
                 f"{o['ratio_min']:.2f}-{o['ratio_max']:.2f}x")
        print(f"| {o['link']} | {o['op']} | {pairs} | {ratio} |")


if __name__ == "__main__":
    main()
