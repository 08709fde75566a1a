"""Reference for the failure-recovery benchmark: what a careful torchrun elastic user runs.

PyTorch DistributedDataParallel + ZeroRedundancyOptimizer(AdamW) on gloo, launched by torchrun
(c10d rendezvous), with the same ViT teacher/student and KD loss as the retort job
(bench/trainer/kd_reference.py; the 7x7-patch presets are added here with the shapes of
trainer/models/vit.cc). Data: Fashion-MNIST training images read from the idx files, normalized
like retort (mean 0.2860, std 0.3530); step s consumes samples [s*B, (s+1)*B) of a permutation
seeded by (seed, epoch), split among the ranks, so a restarted group continues where the
checkpoint left off.

Fault tolerance is the documented torchrun recipe: rank 0 saves a consolidated checkpoint
(model + optimizer + step, torch.save to a temporary file, then rename) every --checkpoint-every
steps, and every start (first or restarted by torchrun) resumes from the latest checkpoint.

Each completed step appends one JSON line to --metrics (rank 0 only): step, time_unix_ms,
restart (TORCHELASTIC_RESTART_COUNT), world_size, loss. When BENCH_PID_FILE is set, the process
writes its pid there at start (the benchmark uses it to kill this node's training process).

Example (one of two "nodes"):
  .venv/bin/python3 -m torch.distributed.run --nnodes=1:2 --nproc_per_node=1 --rdzv_backend=c10d \
      --rdzv_endpoint=127.0.0.1:29500 --rdzv_id=bench --max_restarts=3 \
      bench/elastic/elastic_reference.py --metrics /tmp/m.jsonl --checkpoint /tmp/ckpt.pt
"""
import argparse
import datetime
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "trainer"))
import kd_reference  # noqa: E402


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def global_indices(step, batch, count, seed):
    """Sample indices of global step `step`: [step*B, (step+1)*B) of the per-epoch permutations."""
    out, start = [], step * batch
    while len(out) < batch:
        epoch, pos = divmod(start + len(out), count)
        perm = np.random.default_rng([seed, epoch]).permutation(count)
        out.extend(perm[pos:pos + batch - len(out)].tolist())
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--teacher", default="fm-teacher-p7")
    ap.add_argument("--student", default="fm-student-p7")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--global-batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--checkpoint", required=True, help="checkpoint file (rank 0 writes it)")
    ap.add_argument("--checkpoint-every", type=int, default=5)
    ap.add_argument("--metrics", required=True, help="JSON lines, one per completed step")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()
    if os.environ.get("BENCH_PID_FILE"):
        with open(os.environ["BENCH_PID_FILE"], "w") as f:
            f.write(str(os.getpid()))
    torch.set_num_threads(args.threads)
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    rank, world = dist.get_rank(), dist.get_world_size()

    images = read_idx(os.path.join(args.data, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(args.data, "train-labels-idx1-ubyte.gz"))
    count = images.shape[0]

    torch.manual_seed(0)
    teacher = kd_reference.make_vit(args.teacher).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    student = DDP(kd_reference.make_vit(args.student))
    opt = ZeroRedundancyOptimizer(kd_reference.adamw_param_groups(student, 0.05),
                                  optimizer_class=torch.optim.AdamW, lr=1e-3)
    start_step = 0
    if os.path.exists(args.checkpoint):
        state = torch.load(args.checkpoint, map_location="cpu")
        student.module.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        start_step = state["step"]
    print(json.dumps({"event": "start", "rank": rank, "world_size": world, "restart": restart,
                      "resumed_from_step": start_step, "time_unix_ms": int(time.time() * 1000)}),
          flush=True)

    base, extra = divmod(args.global_batch, world)
    begin = rank * base + min(rank, extra)
    local = base + (1 if rank < extra else 0)
    for step in range(start_step, args.steps):
        idx = global_indices(step, args.global_batch, count, args.seed)[begin:begin + local]
        x = torch.from_numpy(images[idx].astype(np.float32) / 255.0)
        x = ((x - 0.2860) / 0.3530).unsqueeze(1)
        y = torch.from_numpy(labels[idx].astype(np.int64))
        with torch.no_grad():
            t = teacher(x)
        loss = kd_reference.kd_loss(student(x), t, y, 0.5, 4.0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
        opt.step()
        done = step + 1
        if rank == 0:
            line = json.dumps({"step": done, "time_unix_ms": int(time.time() * 1000),
                               "restart": restart, "world_size": world, "loss": loss.item()})
            with open(args.metrics, "a") as f:
                f.write(line + "\n")
        if done % args.checkpoint_every == 0 and done < args.steps:
            opt.consolidate_state_dict(to=0)
            if rank == 0:
                tmp = args.checkpoint + ".tmp"
                torch.save({"model": student.module.state_dict(), "optimizer": opt.state_dict(),
                            "step": done}, tmp)
                os.replace(tmp, args.checkpoint)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
