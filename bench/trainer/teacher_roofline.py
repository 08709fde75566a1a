#!/usr/bin/env python3
"""How close a teacher's forward comes to what this CPU can compute: the ceiling on any
speed-up of one teacher format over another.

  teacher_roofline.py RESULTS_JSONL [--threads 2] [--label resnet18_torchscript ...]

Counts the forward's FLOPs of torchvision ResNet-18 at the bench's input (the rows' input_shape
and batch; torch.utils.flop_counter), measures this machine's achievable fp32 matrix-multiply
rate with the same thread count (torch.mm, 4096^2, best of several), and prints one JSON line:
for each labelled row its achieved GFLOP/s and fraction of that rate, and the largest speed-up
over the slowest row that reaching the rate would give. Convolutions run as GEMM-like oneDNN
kernels, so the matrix-multiply rate stands for the compute ceiling (not a proof: a format may
also beat it by doing less work, e.g. skipping layers, which an exported teacher does not).
"""
import argparse
import json
import sys
import time

import torch
import torchvision
from torch.utils.flop_counter import FlopCounterMode


def forward_flops(image: int, batch: int) -> int:
    model = torchvision.models.resnet18().eval()
    x = torch.randn(batch, 3, image, image)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(x)
    return counter.get_total_flops()


def gemm_gflops(threads: int, n: int = 4096, reps: int = 5) -> float:
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    torch.mm(a, b)  # warm-up
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        torch.mm(a, b)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="exported_teacher_bench JSON lines (latest rows win)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--label", action="append",
                        default=None, help="rows to place (default: the resnet18 ones)")
    args = parser.parse_args()
    labels = args.label or ["resnet18_torchscript", "resnet18_exported"]
    rows = {}
    for line in open(args.results):
        row = json.loads(line)
        if row.get("label") in labels:
            rows[row["label"]] = row  # the file is appended to: the last row is the newest
    missing = [label for label in labels if label not in rows]
    if missing:
        print(f"teacher_roofline: no rows for {missing} in {args.results}", file=sys.stderr)
        return 2
    first = rows[labels[0]]
    _, image, _ = (int(d) for d in first["input_shape"].split(","))
    flops = forward_flops(image, int(first["batch"]))
    peak = gemm_gflops(args.threads)
    placed = {}
    for label in labels:
        achieved = flops / rows[label]["forward_median_s"] / 1e9
        placed[label] = {"forward_median_s": rows[label]["forward_median_s"],
                         "gflops": round(achieved, 1), "fraction_of_gemm": round(achieved / peak, 3),
                         "commit": rows[label].get("commit")}
    slowest = max(rows[label]["forward_median_s"] for label in labels)
    print(json.dumps({
        "bench": "teacher_roofline", "forward_gflop": round(flops / 1e9, 2),
        "input_shape": first["input_shape"], "batch": first["batch"], "threads": args.threads,
        "gemm_gflops": round(peak, 1), "rows": placed,
        "max_speedup_over_slowest_at_gemm_rate": round(slowest * peak * 1e9 / flops, 3),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
