#!/usr/bin/python3
"""Reads the JSON lines of run_bench.sh and prints a markdown table of busbw (GB/s) per op and
size, one column per implementation, plus the target checks (2 ranks, 16 and 64 MiB)."""
import collections
import json
import sys

rows = collections.defaultdict(dict)
impls = []
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    key = (r["op"], r["bytes"])
    rows[key][r["impl"]] = r["busbw_GBps"]
    if r["impl"] not in impls:
        impls.append(r["impl"])

def size_text(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return f"{b / div:.4g} {unit}"
    return f"{b} B"

print("| op | size | " + " | ".join(impls) + " |")
print("|---|---|" + "---|" * len(impls))
for (op, nbytes) in sorted(rows, key=lambda k: (k[0], k[1])):
    cells = [f"{rows[(op, nbytes)][i]:.3f}" if i in rows[(op, nbytes)] else "" for i in impls]
    print(f"| {op} | {size_text(nbytes)} | " + " | ".join(cells) + " |")

print()
print("Targets (2 ranks, busbw, ours vs reference):")
def near(op, target):
    best = None
    for (o, b) in rows:
        if o == op and (best is None or abs(b - target) < abs(best - target)):
            best = b
    return best
for op, ref in (("all_reduce", "openmpi"), ("all_gather", "openmpi")):
    for mib in (16, 64):
        b = near(op, mib << 20)
        if b is None:
            continue
        ours = rows[(op, b)].get("retort-ucx")
        theirs = rows[(op, b)].get(ref)
        if ours is not None and theirs is not None:
            verdict = "OK" if ours >= theirs else "BELOW"
            print(f"- {op} {size_text(b)}: retort {ours:.3f} vs {ref} {theirs:.3f} GB/s -> {verdict}")
for mib in (16, 64):
    b = near("send_recv", mib << 20)
    if b is None:
        continue
    ours = rows[("send_recv", b)].get("retort-ucx")
    ceiling = rows[("send_recv", b)].get("ucx_perftest")
    if ours is not None and ceiling:
        ratio = ours / ceiling
        verdict = "OK" if ratio >= 0.8 else "BELOW"
        print(f"- send_recv {size_text(b)}: retort {ours:.3f} vs ucx_perftest tag_bw {ceiling:.3f}"
              f" GB/s = {ratio:.0%} -> {verdict}")
