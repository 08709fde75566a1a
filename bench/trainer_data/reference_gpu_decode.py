#!/usr/bin/env python3
"""Reference for the GPU decode benchmark: torchvision's batched nvJPEG decode on the GPU.

A DataLoader's worker processes read the JPEG files' bytes; the main process decodes each batch
with torchvision.io.decode_jpeg(list, device=DEVICE) and applies torchvision's GPU transforms
per image: RandomResizedCrop (the parameters reference_loader.py draws, from the same seeds),
antialiased bilinear resize to --image-size, horizontal flip, ImageNet normalisation, into one
batch tensor on the device. Counted when the batch is ready on the device (synchronised).
Prints one JSON line like reference_loader.py. --device cpu runs the same code without a GPU.
"""
import argparse
import json
import os
import random
import time

import torch
from torch.utils.data import DataLoader, Dataset

from reference_loader import IMAGENET_MEAN, IMAGENET_STD, random_resized_crop_params


class JpegBytes(Dataset):
    """(file bytes as a uint8 tensor, label, index) per image of an ImageFolder tree."""

    def __init__(self, root):
        classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        self.files = [(os.path.join(root, c, f), label) for label, c in enumerate(classes)
                      for f in sorted(os.listdir(os.path.join(root, c)))]

    def __len__(self):
        return len(self.files)

    def __getitem__(self, i):
        path, label = self.files[i]
        with open(path, "rb") as f:
            data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
        return data, label, i


def as_lists(samples):
    return [s[0] for s in samples], torch.tensor([s[1] for s in samples]), [s[2] for s in samples]


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--root", required=True, help="ImageFolder tree of JPEG files")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--threads", type=int, default=4, help="DataLoader worker processes (file reads)")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    import torchvision
    from torchvision.io import ImageReadMode, decode_jpeg
    from torchvision.transforms.v2 import functional as TF

    device = torch.device(a.device)
    mean, std = IMAGENET_MEAN.to(device), IMAGENET_STD.to(device)
    loader = DataLoader(JpegBytes(a.root), batch_size=a.batch, shuffle=True, num_workers=a.threads,
                        persistent_workers=a.threads > 0, drop_last=True, collate_fn=as_lists,
                        generator=torch.Generator().manual_seed(1))

    def batches():
        while True:
            yield from loader

    def prepare(datas, indices):
        images = decode_jpeg(datas, mode=ImageReadMode.RGB, device=device)
        out = torch.empty(len(images), 3, a.image_size, a.image_size, device=device)
        for k, (image, i) in enumerate(zip(images, indices)):
            rng = random.Random(i * 1000003 + 1)
            x0, y0, w, h = random_resized_crop_params(rng, image.shape[2], image.shape[1])
            x = TF.resized_crop(image, y0, x0, h, w, [a.image_size, a.image_size], antialias=True)
            if rng.random() < 0.5:
                x = TF.horizontal_flip(x)
            out[k] = x.float().div_(255.0)
        out.sub_(mean).div_(std)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        return out

    it = batches()
    for _ in range(a.warmup):
        datas, _, indices = next(it)
        prepare(datas, indices)
    start = time.perf_counter()
    images = 0
    waited = 0.0
    for _ in range(a.steps):
        t = time.perf_counter()
        datas, _, indices = next(it)
        waited += time.perf_counter() - t
        images += prepare(datas, indices).shape[0]
    seconds = time.perf_counter() - start
    print(json.dumps({"bench": "trainer_data_loader", "impl": "torchvision_decode_jpeg",
                      "device": a.device, "torchvision": torchvision.__version__,
                      "dataset": "image_folder", "threads": a.threads, "batch": a.batch,
                      "steps": a.steps, "image_size": a.image_size, "images": images,
                      "seconds": round(seconds, 4), "images_per_s": round(images / seconds, 1),
                      "mean_next_wait_ms": round(1000 * waited / a.steps, 3)}), flush=True)


if __name__ == "__main__":
    main()
