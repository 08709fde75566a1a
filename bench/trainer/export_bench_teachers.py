#!/usr/bin/env python3
"""Teachers for exported_teacher_bench, each in two formats with the same weights.

  export_bench_teachers.py OUTDIR VIT_WEIGHTS VIT_CONFIG [--resnet-image N] [--device cpu|cuda]

  OUTDIR/vit.pt2, vit.pt       the built-in ViT preset whose weights exported_teacher_bench
                               wrote to VIT_WEIGHTS, in the reference module of
                               kd_reference.py (VIT_CONFIG: IMAGE,CHANNELS,PATCH,DIM,DEPTH,HEADS,
                               CLASSES), as an AOTInductor package and as TorchScript
  OUTDIR/resnet18.pt2, resnet18.pt   torchvision ResNet-18 (random init, seed 0), input
                               3xNxN, 1000 classes
  OUTDIR/resnet_student.pt     a small TorchScript CNN student for the ResNet-18 input (3xNxN
                               -> 1000)
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
from make_trainer_fixtures import read_safetensors  # noqa: E402


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
    p.add_argument("vit_weights")
    p.add_argument("vit_config")
    p.add_argument("--resnet-image", type=int, default=64)
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    export = load_export_module()
    os.makedirs(args.outdir, exist_ok=True)
    config = [int(v) for v in args.vit_config.split(",")]
    vit = kd_reference.VisionTransformer(*config)
    vit.load_state_dict(read_safetensors(args.vit_weights), strict=True)
    vit.eval()
    image, channels = config[0], config[1]
    export.export_teacher(vit, [channels, image, image], os.path.join(args.outdir, "vit.pt2"),
                          device=args.device, normalization="none", name="vit")
    example = torch.randn(2, channels, image, image)
    torch.jit.trace(vit, example).save(os.path.join(args.outdir, "vit.pt"))

    import torchvision

    torch.manual_seed(0)
    r18 = torchvision.models.resnet18(weights=None).eval()
    n = args.resnet_image
    export.export_teacher(r18, [3, n, n], os.path.join(args.outdir, "resnet18.pt2"),
                          device=args.device, name="resnet18")
    torch.jit.trace(r18, torch.randn(2, 3, n, n)).save(os.path.join(args.outdir, "resnet18.pt"))
    torch.jit.trace(Student(), torch.randn(2, 3, n, n)).save(
        os.path.join(args.outdir, "resnet_student.pt"))


if __name__ == "__main__":
    main()
