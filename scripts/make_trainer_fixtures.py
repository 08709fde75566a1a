#!/usr/bin/env python3
"""Fixtures for the trainer tests (run with the project's Python, .venv/bin/python3).

  make_trainer_fixtures.py torchscript OUTDIR
      OUTDIR/student.pt  traced small conv net (8x8x1 -> 10), trainable from C++
      OUTDIR/teacher.pt  traced ViT (the reference module of bench/trainer/kd_reference.py)
      OUTDIR/io.safetensors  "images" [4,1,8,8] and the expected "student_logits",
                             "teacher_logits" of both modules on them
  make_trainer_fixtures.py vit-forward WEIGHTS INPUT OUT IMAGE,CHANNELS,PATCH,DIM,DEPTH,HEADS,CLASSES
      Loads retort-exported safetensors WEIGHTS strictly (every name and shape must match) into
      the reference ViT, runs it on INPUT's "images" and writes OUT with "logits".

safetensors are read and written here with json + torch.frombuffer (no package needed):
8-byte little-endian header length, JSON header, raw data.
"""
import json
import os
import struct
import sys

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "bench", "trainer"))
import kd_reference  # noqa: E402

DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64, "I32": torch.int32,
          "F16": torch.float16, "BF16": torch.bfloat16}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        begin, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(body[begin:end]), dtype=DTYPES[e["dtype"]])
        out[name] = t.reshape(e["shape"]).clone()
    return out


def write_safetensors(path, tensors):
    header, chunks, offset = {}, [], 0
    for name, t in tensors.items():
        assert t.dtype == torch.float32
        raw = t.detach().contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


class SmallConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


def torchscript(outdir):
    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(0)
    images = torch.randn(4, 1, 8, 8)
    student = SmallConvNet()
    teacher = kd_reference.VisionTransformer(8, 1, 4, 24, 1, 2, 10).eval()
    traced_student = torch.jit.trace(student, images)
    traced_teacher = torch.jit.trace(teacher, images)
    traced_student.save(os.path.join(outdir, "student.pt"))
    traced_teacher.save(os.path.join(outdir, "teacher.pt"))
    with torch.no_grad():
        write_safetensors(os.path.join(outdir, "io.safetensors"),
                          {"images": images, "student_logits": student(images),
                           "teacher_logits": teacher(images)})


def vit_forward(weights, inputs, out, config):
    model = kd_reference.VisionTransformer(*[int(v) for v in config.split(",")])
    model.load_state_dict(read_safetensors(weights), strict=True)
    model.eval()
    with torch.no_grad():
        logits = model(read_safetensors(inputs)["images"])
    write_safetensors(out, {"logits": logits})


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "torchscript":
        torchscript(sys.argv[2])
    elif len(sys.argv) == 6 and sys.argv[1] == "vit-forward":
        vit_forward(*sys.argv[2:])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
