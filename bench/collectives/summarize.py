#!/usr/bin/env python3
"""Reads the JSON lines of run_bench.sh and prints a markdown table of busbw (GB/s) per op and
size, one column per implementation (the median when a size was measured several times; for
ucx_perftest the better transport setting), then the target checks (2 ranks, 16/64 MiB)."""
import collections
import json
import statistics
import sys

samples = collections.defaultdict(list)  # (impl, op, bytes) -> [busbw]
impls = []
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("{"):
        continue
    r = json.loads(line)
    if "impl" not in r:  # the machine's context (load, core-to-core probe)
        continue
    impl = r["impl"]
    if "tls" in r:  # keep ucx_perftest settings apart, pick the better one below
        impl = impl + ":" + r["tls"]
    samples[(impl, r["op"], r["bytes"])].append(r["busbw_GBps"])
    if r["impl"] not in impls:
        impls.append(r["impl"])

value = {}
counts = {}
for (impl, op, nbytes), v in samples.items():
    base = impl.split(":")[0]
    m = statistics.median(v)
    key = (base, op, nbytes)
    if key not in value or m > value[key]:
        value[key] = m
        counts[key] = len(v)


def size_text(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div:
            return f"{b / div:.4g} {unit}"
    return f"{b} B"


keys = sorted({(op, b) for (_, op, b) in value})
print("| op | size | " + " | ".join(impls) + " |")
print("|---|---|" + "---|" * len(impls))
for op, nbytes in keys:
    cells = []
    for i in impls:
        k = (i, op, nbytes)
        if k in value:
            n = counts[k]
            cells.append(f"{value[k]:.3f}" + (f" (median of {n})" if n > 1 else ""))
        else:
            cells.append("")
    print(f"| {op} | {size_text(nbytes)} | " + " | ".join(cells) + " |")

print()
print("Targets (2 ranks, busbw GB/s):")
for mine in ("retort-ucx", "retort-ucx-caller"):
    for op, ref in (("all_reduce", "openmpi"), ("all_gather", "openmpi"), ("all_reduce", "gloo")):
        for mib in (16, 64):
            b = mib << 20
            ours = value.get((mine, op, b))
            theirs = value.get((ref, op, b))
            if ours is not None and theirs is not None:
                verdict = "OK" if ours >= theirs else "BELOW"
                print(f"- {mine} {op} {mib} MiB: {ours:.3f} vs {ref} {theirs:.3f} -> {verdict}")
    for mib in (16, 64):
        b = mib << 20
        ours = value.get((mine, "send_recv", b))
        ceiling = value.get(("ucx_perftest", "send_recv", b))
        if ours is not None and ceiling:
            ratio = ours / ceiling
            verdict = "OK" if ratio >= 0.8 else "BELOW"
            print(f"- {mine} send_recv {mib} MiB: {ours:.3f} vs ucx_perftest tag_bw"
                  f" {ceiling:.3f} = {ratio:.0%} -> {verdict}")
