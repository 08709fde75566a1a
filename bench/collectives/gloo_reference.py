#!/usr/bin/env python3
"""gloo reference for collectives_bench: torch.distributed (backend gloo) all_reduce and
all_gather over the same sizes, printing the same JSON lines (algbw/busbw as nccl-tests).

Usage: /usr/bin/python3 gloo_reference.py [--ranks 2] [--min-bytes N] [--max-bytes N]
"""
import argparse
import json
import os
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def iters_for(nbytes):
    if nbytes <= 64 << 10:
        return 2000
    if nbytes <= 1 << 20:
        return 200
    if nbytes <= 16 << 20:
        return 30
    return 8


def run(rank, world, init_file, min_bytes, max_bytes):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="file://" + init_file, rank=rank,
                            world_size=world)
    for op in ("all_reduce", "all_gather"):
        nbytes = min_bytes
        while nbytes <= max_bytes:
            unit = 4 if op == "all_reduce" else 4 * world
            size = nbytes // unit * unit
            count = size // 4
            if op == "all_reduce":
                data = torch.ones(count, dtype=torch.float32)
                fn = lambda: dist.all_reduce(data)
            else:
                mine = torch.ones(count // world, dtype=torch.float32)
                outs = [torch.empty(count // world, dtype=torch.float32) for _ in range(world)]
                fn = lambda: dist.all_gather(outs, mine)
            fn()
            fn()
            dist.barrier()
            iters = iters_for(size)
            start = time.perf_counter()
            for _ in range(iters):
                fn()
            t = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64)
            dist.all_reduce(t)
            t = t.item() / world
            if rank == 0:
                algbw = size / t / 1e9
                factor = 2.0 * (world - 1) / world if op == "all_reduce" else (world - 1) / world
                print(json.dumps({"impl": "gloo", "op": op, "ranks": world, "bytes": size,
                                  "time_us": round(t * 1e6, 1), "algbw_GBps": round(algbw, 3),
                                  "busbw_GBps": round(algbw * factor, 3),
                                  "torch": torch.__version__}), flush=True)
            nbytes *= 4
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--min-bytes", type=int, default=1024)
    parser.add_argument("--max-bytes", type=int, default=256 << 20)
    args = parser.parse_args()
    init_file = os.path.join(tempfile.mkdtemp(prefix="retort_gloo_"), "init")
    mp.spawn(run, args=(args.ranks, init_file, args.min_bytes, args.max_bytes),
             nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
