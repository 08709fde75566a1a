"""Export a teacher as a torch.export / AOTInductor package (.pt2) for retort's workers.

    python -m retort.export --model resnet18 --input-shape 3,224,224 --device cpu --out r18.pt2
    python -m retort.export --model mypkg.models:make_teacher --input-shape 1,28,28 \\
        --normalization fashion-mnist --out teacher.pt2

writes OUT (compiled kernels for the device kind, weights inside, a dynamic batch dimension) and
OUT.json, the sidecar the worker checks before training:

    {"format": "retort.exported/1", "input_shape": [C, H, W],
     "normalization": {"mean": [...], "std": [...]} or null,
     "num_classes": N, "torch_version": "...", "device": "cpu" | "cuda",
     "batch": {"min": 2, "max": 4096}, "model": "..."}

Point the job spec's teacher at OUT (`teacher: {exported_path: OUT}`). The package runs only on
the device kind it was compiled for and only under the PyTorch release that compiled it.
TorchScript stays the format for students (LibTorch trains only those); for teachers it is
deprecated in favour of this export.
"""
from __future__ import annotations

import argparse
import copy
import importlib
import json
import os
import sys
from typing import Any, Sequence, Union

import torch

# A normalisation: a key of NORMALIZATIONS, or (mean, std) per channel.
Normalization = Union[str, "tuple[list[float], list[float]]", None]

FORMAT = "retort.exported/1"
NORMALIZATIONS: dict[str, tuple[list[float], list[float]] | None] = {
    # The mean/std retort's data pipeline normalises each dataset with
    # (trainer/data/image_transforms.cc).
    "imagenet": ([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    "fashion-mnist": ([0.2860], [0.3530]),
    "none": None,
}
MAX_BATCH = 4096


def build_model(name: str, num_classes: int | None = None) -> torch.nn.Module:
    """A torchvision model by name (random weights, nothing downloaded) or `module:factory`."""
    if ":" in name:
        module, factory = name.split(":", 1)
        model: torch.nn.Module = getattr(importlib.import_module(module), factory)()
        return model
    import torchvision  # type: ignore[import-untyped]

    kwargs = {} if num_classes is None else {"num_classes": num_classes}
    built: torch.nn.Module = torchvision.models.get_model(name, weights=None, **kwargs)
    return built


class ChannelsLastInput(torch.nn.Module):
    """`model` with its 4-D weights and its input in channels-last memory format: what oneDNN's
    CPU convolutions run fastest, so an exported convolutional network runs them (and the
    elementwise work fused around them) in that layout. Same logits as `model`."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        # A copy: the caller's model keeps its layout.
        self.model = copy.deepcopy(model).to(memory_format=torch.channels_last)  # type: ignore[call-overload]

    def forward(self, x: torch.Tensor) -> Any:
        return self.model(x.contiguous(memory_format=torch.channels_last))


def has_convolutions(model: torch.nn.Module) -> bool:
    return any(isinstance(m, torch.nn.Conv2d) for m in model.modules())


def sidecar_path(out: str) -> str:
    return out + ".json"


def check_package(out: str, input_shape: Sequence[int], device: str | torch.device = "cpu",
                  batches: Sequence[int] = (2, 64)) -> None:
    """Runs the package at `out` at each batch size of `batches` with its input checks on and
    raises ValueError naming the file when one is refused or returns other than
    [batch, num_classes]: what the workers would refuse. (Seen on PyTorch 2.15: a ResNet-18
    exported with a batch range of [1, 4096] was compiled with [2, 15].)"""
    # Read by each package's kernels once, at their first run: set before loading.
    os.environ.setdefault("AOTI_RUNTIME_CHECK_INPUTS", "1")
    runner = torch._inductor.aoti_load_package(out)
    for n in batches:
        try:
            with torch.no_grad():
                logits = runner(torch.zeros(n, *input_shape, device=device))
        except Exception as e:  # noqa: BLE001 (the loader raises RuntimeError and others)
            first = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise ValueError(f"{out}: the compiled package refuses a batch of {n}: {first}")
        if logits.dim() != 2 or logits.shape[0] != n:
            raise ValueError(f"{out}: returns {tuple(logits.shape)} for a batch of {n}")


def export_teacher(model: torch.nn.Module | str, input_shape: Sequence[int], out: str,
                   device: str | torch.device = "cpu", normalization: Normalization = "imagenet",
                   example_batch: int = 2, max_batch: int = MAX_BATCH,
                   name: str | None = None) -> dict[str, Any]:
    """Exports `model` (an nn.Module, a torchvision name or "module:factory") for inputs
    [batch, *input_shape] on `device` ("cpu" or "cuda") with a dynamic batch dimension, and
    writes the package to `out` and its sidecar to `out`.json. `normalization`: a key of
    NORMALIZATIONS or (mean, std) per channel: what the model expects its inputs normalised with.
    Returns the sidecar as a dict. The model's output must be logits [batch, num_classes]."""
    input_shape = [int(d) for d in input_shape]
    if len(input_shape) != 3 or min(input_shape) <= 0:
        raise ValueError(f"input_shape must be C,H,W with positive sizes, got {input_shape}")
    if isinstance(model, str):
        name = name or model
        model = build_model(model)
    device = torch.device(device)
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be cpu or cuda, got {device}")
    norm = NORMALIZATIONS[normalization] if isinstance(normalization, str) else normalization
    if norm is not None and not (len(norm[0]) == len(norm[1]) == input_shape[0] or
                                 len(norm[0]) == len(norm[1]) == 1):
        raise ValueError(f"normalization needs one mean and std per channel ({input_shape[0]})")
    if norm is not None and len(norm[0]) != input_shape[0]:  # one value for every channel
        norm = (norm[0] * input_shape[0], norm[1] * input_shape[0])
    model = model.eval().to(device)
    example = torch.randn(example_batch, *input_shape, device=device)
    with torch.no_grad():
        logits = model(example)
    if not isinstance(logits, torch.Tensor) or logits.dim() != 2 or \
            logits.shape[0] != example_batch:
        shape = getattr(logits, "shape", type(logits).__name__)
        raise ValueError(f"the model must return logits [batch, num_classes], got {shape}")
    # From 2: torch.export specialises sizes 0 and 1, so a package never takes a batch of 1.
    # On the CPU a convolutional network is exported channels-last (ResNet-18's forward 1.12x
    # faster than the same package in NCHW here; bench/trainer/RESULTS.md). The worker still
    # hands the package NCHW batches: the package converts them.
    exported: torch.nn.Module = model
    if device.type == "cpu" and has_convolutions(model):
        exported = ChannelsLastInput(model)
    batch = torch.export.Dim("batch", min=2, max=max_batch)
    with torch.no_grad():
        program = torch.export.export(exported, (example,), dynamic_shapes=({0: batch},))
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    # On the CPU, ATen's choice of convolution backend depends on the batch (NNPACK and oneDNN
    # are picked from a batch of 16), and Inductor turns that choice into a guard: a ResNet-18
    # exported from an example of 2 came back bounded to batches 2..15. Compiling with both
    # switched off keeps the batch range the sidecar promises; the package's convolutions still
    # call ATen at run time, which picks its backend per call as eager does. Prepacked (oneDNN)
    # weights would bound the batch the same way, so they are off too. Inductor's cache does not
    # key on these settings, so it is off here: an export compiles what it asks for.
    configs: dict[str, Any] = {"force_disable_caches": True}
    if device.type == "cpu":
        configs["cpp.weight_prepack"] = False
        with torch.backends.nnpack.flags(enabled=False), torch.backends.mkldnn.flags(enabled=False):
            torch._inductor.aoti_compile_and_package(program, package_path=out,
                                                     inductor_configs=configs)
    else:
        torch._inductor.aoti_compile_and_package(program, package_path=out,
                                                 inductor_configs=configs)
    check_package(out, input_shape, device, batches=(2, min(64, max_batch)))
    sidecar = {
        "format": FORMAT,
        "input_shape": input_shape,
        "normalization": None if norm is None else {"mean": list(norm[0]), "std": list(norm[1])},
        "num_classes": int(logits.shape[1]),
        "torch_version": torch.__version__,
        "device": device.type,
        "batch": {"min": 2, "max": max_batch},
        "model": name or type(model).__name__,
    }
    with open(sidecar_path(out), "w") as f:
        json.dump(sidecar, f, indent=2)
        f.write("\n")
    return sidecar


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m retort.export", description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True,
                   help="a torchvision model name (e.g. resnet18) or module:factory")
    p.add_argument("--input-shape", required=True, help="C,H,W of one sample, e.g. 3,224,224")
    p.add_argument("--device", default="cpu", help="cpu or cuda (the workers' device kind)")
    p.add_argument("--out", required=True, help="the .pt2 to write (its sidecar: OUT.json)")
    p.add_argument("--normalization", default="imagenet", choices=sorted(NORMALIZATIONS),
                   help="the normalisation the model expects (default: imagenet)")
    p.add_argument("--num-classes", type=int, help="torchvision models: the classifier's width")
    p.add_argument("--state-dict", help="load these weights (torch.save of a state_dict) first")
    p.add_argument("--seed", type=int, default=0, help="seed of a model's random initialisation")
    p.add_argument("--max-batch", type=int, default=MAX_BATCH)
    args = p.parse_args(argv)
    torch.manual_seed(args.seed)
    shape = [int(d) for d in args.input_shape.split(",")]
    model = build_model(args.model, args.num_classes)
    if args.state_dict:
        model.load_state_dict(torch.load(args.state_dict, map_location="cpu", weights_only=True))
    sidecar = export_teacher(model, shape, args.out, device=args.device,
                             normalization=args.normalization, max_batch=args.max_batch,
                             name=args.model)
    print(json.dumps({"package": args.out, "sidecar": sidecar_path(args.out), **sidecar}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
