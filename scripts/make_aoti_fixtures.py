#!/usr/bin/env python3
"""Exported-teacher fixtures (AOTInductor .pt2 packages), made once per build.

  make_aoti_fixtures.py ROOT [--force] [--fashion-mnist DIR]
      ROOT/aoti/, built in a temporary folder and renamed into place with a .complete marker
      (tests running side by side never read half of it); kept when complete unless --force
      (the ctest fixture `aoti_fixtures` remakes it once per test run). Packages are CPU ones,
      written by retort.export (python/retort/export.py) with their .json sidecars:
        resnet18.pt2        torchvision ResNet-18, random init (seed 0), 1000 classes, 3x64x64
        resnet18.pt         the same weights as TorchScript (torch.jit.trace)
        resnet18_io.safetensors  "images" [64,3,64,64] and PyTorch eager "logits" on them
        fm_teacher.pt2      Fashion-MNIST CNN (1x28x28 -> 10) trained briefly (top-1 ~0.8)
        fm_teacher.pt       the same weights as TorchScript (torch.jit.script)
        fm_untrained.pt2    a linear Fashion-MNIST model with zero weights (chance level)
        fm_fixed_batch.pt2  the linear model exported with a fixed batch of 4 (sidecar as usual)
        fm_bad_output.pt2   the linear model returning [batch, 10, 1]; sidecar as for logits
        fm_cuda_kind.pt2    fm_untrained.pt2 whose metadata says it was compiled for cuda
"""
import argparse
import gzip
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import zipfile

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_trainer_fixtures import FashionCnn, write_safetensors  # noqa: E402


def load_export_module():
    # By file: the checkout's python/retort/export.py, whatever `retort` package an environment
    # has installed.
    path = os.path.join(HERE, "..", "python", "retort", "export.py")
    spec = importlib.util.spec_from_file_location("retort_export", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


export = load_export_module()


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def fashion_mnist(root, split):
    images = read_idx(os.path.join(root, f"{split}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(root, f"{split}-labels-idx1-ubyte.gz"))
    mean, std = export.NORMALIZATIONS["fashion-mnist"]
    x = (torch.from_numpy(images.astype(np.float32) / 255.0) - mean[0]) / std[0]
    return x.unsqueeze(1), torch.from_numpy(labels.astype(np.int64))


def train_fm_teacher(root):
    torch.manual_seed(0)
    x, y = fashion_mnist(root, "train")
    net = FashionCnn()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    net.train()
    g = torch.Generator().manual_seed(0)
    for _ in range(300):  # ~0.8 top-1 in seconds: a teacher well past chance, not a good one
        idx = torch.randint(0, x.shape[0], (64,), generator=g)
        loss = nn.functional.cross_entropy(net(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net.eval()


class Linear(nn.Module):
    def __init__(self, unsqueeze=False):
        super().__init__()
        self.fc = nn.Linear(28 * 28, 10)
        self.unsqueeze = unsqueeze

    def forward(self, x):
        y = self.fc(x.flatten(1))
        return y.unsqueeze(2) if self.unsqueeze else y


def export_fixed_batch(model, out, batch):
    program = torch.export.export(model.eval(), (torch.randn(batch, 1, 28, 28),))
    torch._inductor.aoti_compile_and_package(program, package_path=out)


def with_device_kind(src, dst, kind):
    """Copies package `src` to `dst` with AOTI_DEVICE_KEY in its metadata set to `kind`."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename.endswith("_metadata.json"):
                meta = json.loads(data)
                meta["AOTI_DEVICE_KEY"] = kind
                data = json.dumps(meta).encode()
            zout.writestr(item, data)


def make(out, fm_root):
    torch.manual_seed(0)
    import torchvision

    r18 = torchvision.models.resnet18(weights=None).eval()
    export.export_teacher(r18, [3, 64, 64], os.path.join(out, "resnet18.pt2"),
                          normalization="imagenet", name="resnet18")
    images = torch.randn(64, 3, 64, 64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.jit.trace(r18, images[:2]).save(os.path.join(out, "resnet18.pt"))
        write_safetensors(os.path.join(out, "resnet18_io.safetensors"),
                          {"images": images, "logits": r18(images)})

    teacher = train_fm_teacher(fm_root)
    export.export_teacher(teacher, [1, 28, 28], os.path.join(out, "fm_teacher.pt2"),
                          normalization="fashion-mnist", name="fm-cnn")
    torch.jit.script(teacher).save(os.path.join(out, "fm_teacher.pt"))

    torch.manual_seed(0)
    linear = Linear()
    with torch.no_grad():  # equal logits for every image: top-1 exactly chance (1/10)
        linear.fc.weight.zero_()
        linear.fc.bias.zero_()
    sidecar = export.export_teacher(linear, [1, 28, 28], os.path.join(out, "fm_untrained.pt2"),
                                    normalization="fashion-mnist", name="fm-linear")
    export_fixed_batch(linear, os.path.join(out, "fm_fixed_batch.pt2"), 4)
    program = torch.export.export(
        Linear(unsqueeze=True).eval(), (torch.randn(2, 1, 28, 28),),
        dynamic_shapes=({0: torch.export.Dim("batch", min=2, max=export.MAX_BATCH)},))
    torch._inductor.aoti_compile_and_package(program,
                                             package_path=os.path.join(out, "fm_bad_output.pt2"))
    with_device_kind(os.path.join(out, "fm_untrained.pt2"), os.path.join(out, "fm_cuda_kind.pt2"),
                     "cuda")
    for name in ("fm_fixed_batch", "fm_bad_output", "fm_cuda_kind"):
        with open(os.path.join(out, name + ".pt2.json"), "w") as f:
            json.dump(dict(sidecar, model=name), f, indent=2)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("--force", action="store_true")
    p.add_argument("--fashion-mnist", default="/usr/share/datasets/fashion-mnist")
    args = p.parse_args()
    final = os.path.join(args.root, "aoti")
    if os.path.exists(os.path.join(final, ".complete")) and not args.force:
        return 0
    os.makedirs(args.root, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".aoti.", dir=args.root)
    try:
        make(tmp, args.fashion_mnist)
        open(os.path.join(tmp, ".complete"), "w").close()
        if os.path.exists(final):
            shutil.rmtree(final)
        os.rename(tmp, final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
