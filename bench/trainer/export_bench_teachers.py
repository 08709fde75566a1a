#!/usr/bin/env python3
"""Teachers for exported_teacher_bench, each in two formats with the same weights.

  export_bench_teachers.py OUTDIR VIT_CONFIG [--resnet-image N ...] [--device cpu|cuda]

  OUTDIR/vit.safetensors       weights of the reference ViT of kd_reference.py (VIT_CONFIG:
                               IMAGE,CHANNELS,PATCH,DIM,DEPTH,HEADS,CLASSES; seed 0) under the
                               names retort's built-in preset of that shape loads
  OUTDIR/vit.pt2, vit.pt       the same ViT as an AOTInductor package and as TorchScript
  OUTDIR/resnet18_Npx.pt2, resnet18_Npx.pt   torchvision ResNet-18 (random init, seed 0),
                               input 3xNxN, 1000 classes, for each N of --resnet-image
  OUTDIR/resnet_student_Npx.pt a small TorchScript CNN student for that input (3xNxN -> 1000)
A file already in OUTDIR is kept.
"""
import argparse
import importlib.util
import os
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
import kd_reference  # noqa: E402
from make_trainer_fixtures import write_safetensors  # noqa: E402


def load_export_module():
    path = os.path.join(HERE, "..", "..", "python", "retort", "export.py")
    spec = importlib.util.spec_from_file_location("retort_export", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, stride=2, padding=1)
        self.fc = nn.Linear(32, 1000)

    def forward(self, x):
        x = torch.relu(self.conv2(torch.relu(self.conv1(x))))
        return self.fc(x.mean((2, 3)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("outdir")
    p.add_argument("vit_config")
    p.add_argument("--resnet-image", type=int, nargs="+", default=[224])
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    export = load_export_module()
    os.makedirs(args.outdir, exist_ok=True)
    out = lambda name: os.path.join(args.outdir, name)  # noqa: E731
    config = [int(v) for v in args.vit_config.split(",")]
    image, channels = config[0], config[1]
    torch.manual_seed(0)
    vit = kd_reference.VisionTransformer(*config).eval()
    if not os.path.exists(out("vit.pt2")):
        write_safetensors(out("vit.safetensors"),
                          {k: v.detach().clone() for k, v in vit.state_dict().items()})
        export.export_teacher(vit, [channels, image, image], out("vit.pt2"), device=args.device,
                              normalization="none", name="vit")
        torch.jit.trace(vit, torch.randn(2, channels, image, image)).save(out("vit.pt"))

    import torchvision

    torch.manual_seed(0)
    r18 = torchvision.models.resnet18(weights=None).eval()
    for n in args.resnet_image:
        if not os.path.exists(out(f"resnet18_{n}px.pt2")):
            export.export_teacher(r18, [3, n, n], out(f"resnet18_{n}px.pt2"), device=args.device,
                                  name="resnet18")
            torch.jit.trace(r18, torch.randn(2, 3, n, n)).save(out(f"resnet18_{n}px.pt"))
        torch.jit.trace(Student(), torch.randn(2, 3, n, n)).save(out(f"resnet_student_{n}px.pt"))


if __name__ == "__main__":
    main()
