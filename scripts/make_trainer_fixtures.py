#!/usr/bin/env python3
"""Fixtures for the trainer tests (run with the project's Python, .venv/bin/python3).

  make_trainer_fixtures.py torchscript OUTDIR
      OUTDIR/student.pt  traced small conv net (8x8x1 -> 10), trainable from C++
      OUTDIR/teacher.pt  traced ViT (the reference module of bench/trainer/kd_reference.py)
      OUTDIR/io.safetensors  "images" [4,1,8,8] and the expected "student_logits",
                             "teacher_logits" of both modules on them
  make_trainer_fixtures.py batchnorm OUTDIR
      OUTDIR/fresh.pt  scripted conv net with BatchNorm and dropout (8x8x1 -> 10), freshly
                       initialised (running statistics at their defaults)
      OUTDIR/state.safetensors  state_dict() of the same net after training steps (parameters
                       and buffers: running_mean, running_var, num_batches_tracked)
      OUTDIR/missing_buffer.safetensors, extra_tensor.safetensors  the state without
                       "bn.running_var", and with an extra "bn.surplus"
      OUTDIR/io.safetensors  "images" [4,1,8,8] and the trained net's eval-mode "logits"
  make_trainer_fixtures.py batchnorm-fm OUTDIR
      OUTDIR/cnn.pt  scripted Fashion-MNIST CNN (1x28x28 -> 10) with two BatchNorm layers and
                     dropout, freshly initialised: a bring-your-own student or teacher
      OUTDIR/untrained.safetensors  its initial state_dict(): a teacher at chance level
  make_trainer_fixtures.py shared ROOT [--force] [KIND...]
      The fixtures above that need no input (KIND: torchscript, batchnorm, batchnorm-fm; all
      three by default), made once for many tests: each into ROOT/KIND, built in a temporary
      folder and renamed into place with a ROOT/KIND/.complete marker, so tests running side by
      side never read half a fixture. A kind already complete is kept unless --force (the ctest
      fixture `python_fixtures` remakes all of them once per test run).
  make_trainer_fixtures.py torchscript-forward MODEL WEIGHTS INPUT OUT
      Loads the TorchScript MODEL, loads safetensors WEIGHTS into it strictly (parameters and
      buffers, as retort exports them), runs it in eval mode on INPUT's "images" and writes OUT
      with "logits".
  make_trainer_fixtures.py vit-forward WEIGHTS INPUT OUT IMAGE,CHANNELS,PATCH,DIM,DEPTH,HEADS,CLASSES
      Loads retort-exported safetensors WEIGHTS strictly (every name and shape must match) into
      the reference ViT, runs it on INPUT's "images" and writes OUT with "logits".

safetensors are read and written here with json + torch.frombuffer (no package needed):
8-byte little-endian header length, JSON header, raw data.
"""
import json
import os
import shutil
import struct
import sys
import tempfile

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
    names = {torch.float32: "F32", torch.int64: "I64"}
    for name, t in tensors.items():
        assert t.dtype in names, (name, t.dtype)
        raw = t.detach().contiguous().numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
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


class BatchNormNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.drop = nn.Dropout(0.5)
        self.fc = nn.Linear(4 * 8 * 8, 10)

    def forward(self, x):
        return self.fc(self.drop(torch.relu(self.bn(self.conv(x))).flatten(1)))


def batchnorm(outdir):
    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(0)
    fresh = BatchNormNet()
    trained = BatchNormNet()
    trained.load_state_dict(fresh.state_dict())
    opt = torch.optim.SGD(trained.parameters(), lr=0.1)
    trained.train()
    for _ in range(20):  # moves the weights and the running statistics away from their defaults
        x = torch.randn(16, 1, 8, 8) * 3 + 1
        loss = trained(x).logsumexp(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.jit.script(fresh).save(os.path.join(outdir, "fresh.pt"))
    state = {k: v.detach().clone() for k, v in trained.state_dict().items()}
    write_safetensors(os.path.join(outdir, "state.safetensors"), state)
    write_safetensors(os.path.join(outdir, "missing_buffer.safetensors"),
                      {k: v for k, v in state.items() if k != "bn.running_var"})
    write_safetensors(os.path.join(outdir, "extra_tensor.safetensors"),
                      dict(state, **{"bn.surplus": torch.zeros(4)}))
    images = torch.randn(4, 1, 8, 8) * 3 + 1
    trained.eval()
    with torch.no_grad():
        write_safetensors(os.path.join(outdir, "io.safetensors"),
                          {"images": images, "logits": trained(images)})


class FashionCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, stride=2, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.relu(self.bn2(self.conv2(x)))
        return self.fc(self.drop(x.flatten(1)))


def batchnorm_fm(outdir):
    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(0)
    net = FashionCnn()
    torch.jit.script(net).save(os.path.join(outdir, "cnn.pt"))
    write_safetensors(os.path.join(outdir, "untrained.safetensors"),
                      {k: v.detach().clone() for k, v in net.state_dict().items()})


def torchscript_forward(model_path, weights, inputs, out):
    model = torch.jit.load(model_path)
    model.load_state_dict(read_safetensors(weights), strict=True)
    model.eval()
    with torch.no_grad():
        logits = model(read_safetensors(inputs)["images"])
    write_safetensors(out, {"logits": logits})


def vit_forward(weights, inputs, out, config):
    model = kd_reference.VisionTransformer(*[int(v) for v in config.split(",")])
    model.load_state_dict(read_safetensors(weights), strict=True)
    model.eval()
    with torch.no_grad():
        logits = model(read_safetensors(inputs)["images"])
    write_safetensors(out, {"logits": logits})


SHARED_KINDS = {"torchscript": torchscript, "batchnorm": batchnorm, "batchnorm-fm": batchnorm_fm}


def shared(root, args):
    force = "--force" in args
    kinds = [a for a in args if a != "--force"] or list(SHARED_KINDS)
    unknown = [k for k in kinds if k not in SHARED_KINDS]
    if unknown:
        sys.exit(f"make_trainer_fixtures: unknown shared fixture(s) {unknown}; "
                 f"known: {list(SHARED_KINDS)}")
    os.makedirs(root, exist_ok=True)
    for kind in kinds:
        final = os.path.join(root, kind)
        if not force and os.path.exists(os.path.join(final, ".complete")):
            continue
        staging = tempfile.mkdtemp(prefix=f".{kind}.", dir=root)
        os.chmod(staging, 0o755)
        SHARED_KINDS[kind](staging)
        open(os.path.join(staging, ".complete"), "w").close()
        old = None
        if os.path.exists(final):
            old = tempfile.mkdtemp(prefix=f".{kind}.old.", dir=root)
            os.rename(final, os.path.join(old, "x"))
        try:
            os.rename(staging, final)
        except OSError:  # another process put it in place first: theirs is as good
            shutil.rmtree(staging, ignore_errors=True)
        if old:
            shutil.rmtree(old, ignore_errors=True)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "shared":
        shared(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 3 and sys.argv[1] == "torchscript":
        torchscript(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "batchnorm":
        batchnorm(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "batchnorm-fm":
        batchnorm_fm(sys.argv[2])
    elif len(sys.argv) == 6 and sys.argv[1] == "torchscript-forward":
        torchscript_forward(*sys.argv[2:])
    elif len(sys.argv) == 6 and sys.argv[1] == "vit-forward":
        vit_forward(*sys.argv[2:])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
