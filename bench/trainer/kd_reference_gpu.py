#!/usr/bin/env python3
"""PyTorch reference for the one-GPU KD step benchmark (kd_step_gpu_bench): the same ViT
teacher and student (kd_reference.py: timm-like modules, scaled-dot-product attention on CUDA),
with --bf16 the teacher frozen in bf16 as retort's is (its weights cast once, its input cast each
step, run under torch.no_grad() in eval mode: no per-step autocast re-cast of fp32 weights) and
bf16 autocast for the student's forward and backward, AdamW(fused=True) with timm's
weight-decay groups, clip_grad_norm_, synthetic data on the device. --mode eager or compile
(torch.compile of the teacher and of the student). Prints one JSON line. Equal work: by default
(--last-block class-token) both models' last block computes the class token's row alone, as
retort's does, so the speedups run_kd_gpu_bench.sh reports compare the same FLOPs; "full" runs
timm's every-token last block. "mfu" divides model FLOPs (--gflop-per-sample, every token:
run_kd_gpu_bench.sh passes retort's figure), "mfu_computed" the FLOPs this run computes
(--gflop-per-sample-computed for class-token, the model FLOPs for full).

Usage: kd_reference_gpu.py [--mode eager|compile] [--teacher vit-b16] [--student vit-s16]
                           [--batch 256] [--warmup 5] [--steps 30] [--device cuda:0] [--no-bf16]
                           [--last-block class-token|full] [--gflop-per-sample G]
                           [--gflop-per-sample-computed G]
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kd_reference import LAST_BLOCKS, PRESETS, adamw_param_groups, kd_loss, make_vit  # noqa: E402

# Dense bf16 peaks, most specific names first: the same table as trainer/model_flops.cc's
# PeakBf16FlopsForDevice, so both sides of the comparison report the same MFU basis.
PEAK_BF16_TFLOPS = {"H100 PCIe": 756.0, "H100 NVL": 835.0, "H100": 989.4, "H200 NVL": 835.0, "H200": 989.4,
                    "A100": 312.0, "L40S": 362.05, "L4": 121.0, "A10": 125.0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["eager", "compile"], default="eager")
    ap.add_argument("--teacher", default="vit-b16")
    ap.add_argument("--student", default="vit-s16")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--gflop-per-sample", type=float, default=62.72,
                    help="model GFLOPs per sample (62.72: vit-b16 -> vit-s16 at 224x224, "
                         "as trainer/model_flops.h counts them)")
    ap.add_argument("--gflop-per-sample-computed", type=float, default=None,
                    help="GFLOPs per sample this run computes with --last-block class-token "
                         "(run_kd_gpu_bench.sh passes retort's); default: the model FLOPs")
    ap.add_argument("--last-block", choices=LAST_BLOCKS, default="class-token",
                    help="class-token: retort's last block, equal work (default); full: timm's")
    args = ap.parse_args()
    computed = args.gflop_per_sample
    if args.last_block == "class-token" and args.gflop_per_sample_computed:
        computed = args.gflop_per_sample_computed
    device = torch.device(args.device)
    torch.manual_seed(0)
    teacher = make_vit(args.teacher, args.last_block).to(device).eval()
    student = make_vit(args.student, args.last_block).to(device).train()
    for p in teacher.parameters():
        p.requires_grad_(False)
    teacher_dtype = torch.bfloat16 if args.bf16 else torch.float32
    teacher = teacher.to(teacher_dtype)
    fused = device.type == "cuda"
    opt = torch.optim.AdamW(adamw_param_groups(student, 0.05), lr=1e-3, fused=fused)
    image, channels, classes = PRESETS[args.student][0], PRESETS[args.student][1], PRESETS[args.student][6]
    x = torch.randn(args.batch, channels, image, image, device=device)
    y = torch.randint(classes, (args.batch,), device=device)
    run_teacher, run_student = teacher, student
    if args.mode == "compile":
        run_teacher, run_student = torch.compile(teacher), torch.compile(student)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.bf16)

    def step():
        with torch.no_grad():
            t = run_teacher(x.to(teacher_dtype))
        with autocast:
            loss = kd_loss(run_student(x).float(), t.float(), y, 0.5, 4.0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0, foreach=True)
        opt.step()
        return loss

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for _ in range(args.warmup):
        step()
    sync()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    times = []
    loss = None
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loss = step().item()  # a host read, as retort's step ends with one
        times.append(time.perf_counter() - t0)
    times.sort()
    median = times[len(times) // 2]
    p99 = times[min(len(times) - 1, int(0.99 * (len(times) - 1) + 0.5))]
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    samples_per_s = args.batch / median
    out = {
        "impl": "pytorch_" + args.mode, "device": name, "teacher": args.teacher,
        "student": args.student, "batch": args.batch, "bf16": args.bf16, "steps": args.steps,
        "samples_per_s": round(samples_per_s, 2), "step_ms_median": round(median * 1e3, 3),
        "step_ms_p99": round(p99 * 1e3, 3), "final_loss": loss, "torch": torch.__version__,
        "teacher_dtype": str(teacher_dtype).replace("torch.", ""),
        "gflop_per_sample_model": args.gflop_per_sample,
        "gflop_per_sample_computed": computed, "last_block": args.last_block,
    }
    if device.type == "cuda":
        out["peak_memory_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 3)
    peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)
    if peak:
        out["mfu"] = round(samples_per_s * args.gflop_per_sample * 1e9 / (peak * 1e12), 4)
        out["mfu_computed"] = round(samples_per_s * computed * 1e9 / (peak * 1e12), 4)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
