#!/usr/bin/env python3
"""Reference for bench/trainer_data: the same pipelines with a PyTorch DataLoader.

Fashion-MNIST: IDX via gzip+numpy; per sample random crop (2-px zero padding) + horizontal flip
on tensors, normalised with (0.2860, 0.3530) -- what torchvision's RandomCrop/RandomHorizontalFlip/
ToTensor/Normalize compose does. ImageFolder: libjpeg-turbo through ctypes (full-size decode, as
PIL does in torchvision's ImageFolder), torchvision's RandomResizedCrop parameters, antialiased bilinear
resize with F.interpolate (PIL's filter), flip, ImageNet normalisation. torchvision/PIL are not installed here, so the
decode goes through the same C library the C++ loader uses (--decoder pil: Pillow, where installed).
Prints one JSON line.
"""
import argparse
import ctypes
import gzip
import json
import math
import os
import random
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

FM_MEAN, FM_STD = 0.2860, 0.3530
IMAGENET_MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
IMAGENET_STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


class FashionMnist(Dataset):
    def __init__(self, root, augment):
        with gzip.open(os.path.join(root, "train-images-idx3-ubyte.gz")) as f:
            images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
        with gzip.open(os.path.join(root, "train-labels-idx1-ubyte.gz")) as f:
            labels = np.frombuffer(f.read(), np.uint8, offset=8)
        self.images = torch.from_numpy(images.copy())
        self.labels = torch.from_numpy(labels.astype(np.int64))
        self.augment = augment

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        x = self.images[i].float().div_(255.0)
        if self.augment:
            rng = random.Random(i * 1000003 + 1)
            x = F.pad(x, (2, 2, 2, 2))
            dy, dx = rng.randint(0, 4), rng.randint(0, 4)
            x = x[dy:dy + 28, dx:dx + 28]
            if rng.random() < 0.5:
                x = x.flip(-1)
        x = (x - FM_MEAN) / FM_STD
        return x.unsqueeze(0), self.labels[i]


class TurboJpeg:
    """Minimal ctypes binding of the TurboJPEG decompression API."""

    def __init__(self):
        lib = ctypes.CDLL("libturbojpeg.so.0")
        lib.tjInitDecompress.restype = ctypes.c_void_p
        lib.tjDecompressHeader3.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulong] + [
            ctypes.POINTER(ctypes.c_int)] * 4
        lib.tjDecompress2.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p,
                                      ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        self.lib = lib
        self.handle = lib.tjInitDecompress()

    def decode(self, data):
        w, h, s, c = (ctypes.c_int() for _ in range(4))
        if self.lib.tjDecompressHeader3(self.handle, data, len(data), ctypes.byref(w), ctypes.byref(h),
                                        ctypes.byref(s), ctypes.byref(c)) != 0:
            raise ValueError("corrupt JPEG header")
        out = np.empty((h.value, w.value, 3), np.uint8)
        # TJPF_RGB = 0, TJFLAG_FASTDCT = 2048
        if self.lib.tjDecompress2(self.handle, data, len(data), out.ctypes.data, w.value, 0, h.value, 0,
                                  2048) != 0:
            raise ValueError("corrupt JPEG data")
        return out


def random_resized_crop_params(rng, width, height, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    area = width * height
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target_area = area * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(*log_ratio))
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, width - w), rng.randint(0, height - h), w, h
    return 0, 0, width, height


class JpegFolder(Dataset):
    def __init__(self, root, image_size, augment, decoder="turbojpeg"):
        classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        self.files = []
        for label, c in enumerate(classes):
            for f in sorted(os.listdir(os.path.join(root, c))):
                self.files.append((os.path.join(root, c, f), label))
        self.image_size = image_size
        self.augment = augment
        self.decoder_name = decoder
        self.decoder = None  # created in the worker process

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        path, label = self.files[i]
        if self.decoder_name == "pil":
            from PIL import Image  # what torchvision's ImageFolder decodes with
            with Image.open(path) as image:
                rgb = np.array(image.convert("RGB"))
        else:
            if self.decoder is None:
                self.decoder = TurboJpeg()
            with open(path, "rb") as f:
                rgb = self.decoder.decode(f.read())
        h, w = rgb.shape[:2]
        rng = random.Random(i * 1000003 + 1)
        if self.augment:
            x0, y0, cw, ch = random_resized_crop_params(rng, w, h)
        else:
            cw, ch = int(round(w * 0.875)), int(round(h * 0.875))
            x0, y0 = (w - cw) // 2, (h - ch) // 2
        crop = torch.from_numpy(rgb[y0:y0 + ch, x0:x0 + cw]).permute(2, 0, 1).float().div_(255.0)
        x = F.interpolate(crop.unsqueeze(0), size=(self.image_size, self.image_size), mode="bilinear",
                          align_corners=False, antialias=True)[0]
        if self.augment and rng.random() < 0.5:
            x = x.flip(-1)
        return (x - IMAGENET_MEAN) / IMAGENET_STD, label


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--dataset", default="fashion_mnist", choices=["fashion_mnist", "image_folder"])
    p.add_argument("--root", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--threads", type=int, default=2, help="DataLoader worker processes")
    p.add_argument("--depth", type=int, default=2, help="prefetch_factor (batches per worker)")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--no-augment", dest="augment", action="store_false")
    p.add_argument("--decoder", default="turbojpeg", choices=["turbojpeg", "pil"],
                   help="JPEG decoder of the ImageFolder pipeline (pil needs Pillow)")
    a = p.parse_args()
    torch.set_num_threads(1)
    if a.dataset == "fashion_mnist":
        ds = FashionMnist(a.root, a.augment)
    else:
        ds = JpegFolder(a.root, a.image_size, a.augment, a.decoder)
    loader = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.threads, prefetch_factor=a.depth,
                        persistent_workers=True, drop_last=True, generator=torch.Generator().manual_seed(1))

    def batches():
        while True:
            for b in loader:
                yield b

    it = batches()
    for _ in range(a.warmup):
        next(it)
    start = time.perf_counter()
    images = 0
    waited = 0.0
    for _ in range(a.steps):
        t = time.perf_counter()
        x, _ = next(it)
        waited += time.perf_counter() - t
        images += x.shape[0]
    seconds = time.perf_counter() - start
    print(json.dumps({"bench": "trainer_data_loader", "impl": "torch_dataloader", "dataset": a.dataset,
                      "decoder": a.decoder if a.dataset == "image_folder" else None,
                      "threads": a.threads, "depth": a.depth, "batch": a.batch, "steps": a.steps,
                      "image_size": a.image_size, "augment": a.augment, "images": images,
                      "seconds": round(seconds, 4), "images_per_s": round(images / seconds, 1),
                      "mean_next_wait_ms": round(1000 * waited / a.steps, 3)}), flush=True)


if __name__ == "__main__":
    main()
