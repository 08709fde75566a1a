"""Reference for the end-to-end benchmark: PyTorch DistributedDataParallel + ZeroRedundancyOptimizer
(AdamW) on gloo, launched by torchrun, with the same ViT teacher/student (bench/trainer/kd_reference.py),
global batch, thread count and KD loss as the retort job. Prints one JSON line (rank 0).

Run through torchrun (torch.distributed.run), e.g.
  .venv/bin/python3 -m torch.distributed.run --nproc_per_node=2 bench/e2e/ddp_reference.py --steps 60
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "trainer"))
from kd_reference import adamw_param_groups, kd_loss, make_vit  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--teacher", default="fm-teacher")
    ap.add_argument("--student", default="fm-student")
    ap.add_argument("--global-batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--alpha", type=float, default=0.5)
    ap.add_argument("--temperature", type=float, default=4.0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    teacher = make_vit(args.teacher).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    student = DDP(make_vit(args.student))
    opt = ZeroRedundancyOptimizer(adamw_param_groups(student, 0.05),
                                  optimizer_class=torch.optim.AdamW, lr=1e-3)
    local = args.global_batch // world + (1 if rank < args.global_batch % world else 0)
    gen = torch.Generator().manual_seed(1234 + rank)
    times = []
    for step in range(args.warmup + args.steps):
        start = time.perf_counter()
        images = torch.randn(local, 1, 28, 28, generator=gen)
        labels = torch.randint(0, 10, (local,), generator=gen)
        with torch.no_grad():
            t = teacher(images)
        s = student(images)
        loss = kd_loss(s, t, labels, args.alpha, args.temperature)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
        opt.step()
        if step >= args.warmup:
            times.append(time.perf_counter() - start)
    times.sort()
    median = times[len(times) // 2]
    if rank == 0:
        print(json.dumps({"impl": "torchrun_ddp_zero", "workers": world, "threads": args.threads,
                          "global_batch": args.global_batch, "teacher": args.teacher,
                          "student": args.student, "steps": args.steps,
                          "median_step_s": round(median, 5),
                          "samples_per_s": round(args.global_batch / median, 2)}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
