#!/usr/bin/env python3
"""PyTorch reference for the KD step benchmark, and the ViT module that retort's exported
weights load into (same architecture and parameter names as trainer/models/vit.cc, which
follow timm's VisionTransformer).

Usage: kd_reference.py [--teacher fm-teacher] [--student fm-student] [--batch 128]
                       [--threads 2] [--warmup 3] [--steps 20] [--last-block class-token|full]
--last-block class-token (the default) gives both models retort's last block, which computes the
class token's row alone (the only one the head reads), so the comparison is of equal work.
Prints one JSON line: {"impl": "pytorch", "samples_per_s": ..., ...}.
"""
import argparse
import json
import math
import os
import re
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

# retort's built-in ViT presets, read from their one list (models/vit_presets.inc):
# name -> (image, channels, patch, dim, depth, heads, classes).
PRESET_TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models",
                            "vit_presets.inc")


def read_presets(path=PRESET_TABLE):
    row = re.compile(r'^RETORT_VIT_PRESET\("([^"]+)",((?:\s*\d+\s*,){6}\s*\d+\s*)\)\s*$')
    presets = {}
    with open(path) as f:
        for line in f:
            m = row.match(line.strip())
            if m:
                presets[m.group(1)] = tuple(int(v) for v in m.group(2).split(","))
    if not presets:
        raise SystemExit(f"no RETORT_VIT_PRESET rows in {path}")
    return presets


PRESETS = read_presets()


NO_DECAY_NAMES = ("cls_token", "dist_token", "reg_token", "pos_embed")


def adamw_param_groups(model, weight_decay):
    """AdamW parameter groups as retort forms them (trainer/weight_decay.h, timm's and DeiT's
    rule): no weight decay for parameters with at most one dimension, '*.bias', and the
    class/distillation/register tokens and position embeddings."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        exempt = p.ndim <= 1 or name.endswith(".bias") or name.split(".")[-1] in NO_DECAY_NAMES
        (no_decay if exempt else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay},
            {"params": no_decay, "weight_decay": 0.0}]


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        qkv = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        if x.is_cuda:  # timm's fused attention (flash / memory-efficient kernels)
            out = F.scaled_dot_product_attention(q, k, v)
        else:
            out = ((q * (d // self.heads) ** -0.5) @ k.transpose(-2, -1)).softmax(-1) @ v
        return self.proj(out.transpose(1, 2).reshape(b, n, d))


class Mlp(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, 4 * dim)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))

    def forward_class_token(self, x):
        """The class-token row of forward(x), [b, 1, d], as retort's last block computes it
        (trainer/models/vit.cc): keys and values for every token, the query, attention,
        projection and MLP for the class token alone. Same math as forward(x)[:, :1]."""
        b, n, d = x.shape
        heads = self.attn.heads
        h = self.norm1(x)
        w, bias = self.attn.qkv.weight, self.attn.qkv.bias
        q = F.linear(h[:, :1], w[:d], bias[:d]).reshape(b, 1, heads, d // heads).transpose(1, 2)
        kv = F.linear(h, w[d:], bias[d:]).reshape(b, n, 2, heads, d // heads).permute(2, 0, 3, 1, 4)
        k, v = kv[0], kv[1]
        if x.is_cuda:
            out = F.scaled_dot_product_attention(q, k, v)
        else:
            out = ((q * (d // heads) ** -0.5) @ k.transpose(-2, -1)).softmax(-1) @ v
        y = x[:, :1] + self.attn.proj(out.transpose(1, 2).reshape(b, 1, d))
        return y + self.mlp(self.norm2(y))


class PatchEmbed(nn.Module):
    def __init__(self, channels, patch, dim):
        super().__init__()
        self.proj = nn.Conv2d(channels, dim, patch, stride=patch)

    def forward(self, x):
        return self.proj(x).flatten(2).transpose(1, 2)


class VisionTransformer(nn.Module):
    def __init__(self, image, channels, patch, dim, depth, heads, classes,
                 class_token_last_block=False):
        super().__init__()
        # True: the last block computes only the class token's row, the one the head reads (the
        # work retort's ViT does); False: every token, as timm's VisionTransformer.
        self.class_token_last_block = class_token_last_block
        n = (image // patch) ** 2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.patch_embed = PatchEmbed(channels, patch, dim)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch_embed(x)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos_embed
        last = len(self.blocks) - 1 if self.class_token_last_block else len(self.blocks)
        for block in self.blocks[:last]:
            x = block(x)
        if self.class_token_last_block:
            x = self.blocks[last].forward_class_token(x)
        return self.head(self.norm(x)[:, 0])


# --last-block of the references: "class-token" gives them retort's last block (equal work, the
# basis of every speedup they report); "full" runs every token as timm does.
LAST_BLOCKS = ("class-token", "full")


def make_vit(preset, last_block="full"):
    return VisionTransformer(*PRESETS[preset], class_token_last_block=last_block == "class-token")


def kd_loss(s, t, y, alpha, temperature):
    log_q = F.log_softmax(s / temperature, -1)
    log_p = F.log_softmax(t / temperature, -1)
    kl = (log_p.exp() * (log_p - log_q)).sum() / s.shape[0]
    return alpha * temperature**2 * kl + (1 - alpha) * F.cross_entropy(s, y)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--teacher", default="fm-teacher")
    ap.add_argument("--student", default="fm-student")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--last-block", choices=LAST_BLOCKS, default="class-token",
                    help="class-token: retort's last block, equal work (default); full: timm's")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    teacher = make_vit(args.teacher, args.last_block).eval()
    student = make_vit(args.student, args.last_block).train()
    for p in teacher.parameters():
        p.requires_grad_(False)
    opt = torch.optim.AdamW(adamw_param_groups(student, 0.05), lr=1e-3)
    image, channels = PRESETS[args.student][0], PRESETS[args.student][1]
    x = torch.randn(args.batch, channels, image, image)
    y = torch.randint(PRESETS[args.student][6], (args.batch,))

    def step():
        with torch.no_grad():
            t = teacher(x)
        loss = kd_loss(student(x), t, y, 0.5, 4.0)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    times.sort()
    median = times[len(times) // 2]
    print(json.dumps({
        "impl": "pytorch", "teacher": args.teacher, "student": args.student,
        "batch": args.batch, "threads": args.threads, "steps": args.steps,
        "last_block": args.last_block,
        "median_step_s": round(median, 5), "samples_per_s": round(args.batch / median, 2),
        "mean_samples_per_s": round(args.batch * len(times) / sum(times), 2),
        "torch": torch.__version__}))


if __name__ == "__main__":
    main()
