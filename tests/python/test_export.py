"""The export helper: its CPU layout (a convolutional teacher is exported channels-last) and its
command line as the README gives it (the packages the C++ tests load are compiled by their
fixtures, scripts/make_aoti_fixtures.py)."""
from __future__ import annotations

import json
import pathlib
import shlex
import subprocess

import torch

from retort import export


def small_cnn() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                               torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
                               torch.nn.Flatten(), torch.nn.Linear(8, 5)).eval()


def test_channels_last_gives_the_same_logits_and_leaves_the_callers_model_alone() -> None:
    model = small_cnn()
    x = torch.randn(4, 3, 16, 16)
    wrapped = export.ChannelsLastInput(model).eval()
    conv = wrapped.model[0]
    assert isinstance(conv, torch.nn.Conv2d)
    assert conv.weight.is_contiguous(memory_format=torch.channels_last)
    assert not conv.weight.is_contiguous()
    original = model[0]
    assert isinstance(original, torch.nn.Conv2d)
    assert original.weight.is_contiguous()  # the caller's copy keeps its layout
    with torch.no_grad():
        torch.testing.assert_close(wrapped(x), model(x), rtol=1e-5, atol=1e-5)


def test_only_models_with_convolutions_are_exported_channels_last() -> None:
    assert export.has_convolutions(small_cnn())
    assert not export.has_convolutions(torch.nn.Sequential(torch.nn.Flatten(),
                                                           torch.nn.Linear(12, 3)))


REPO = pathlib.Path(__file__).resolve().parents[2]


def readme_export_command() -> str:
    """Step 1 of the README's "Bring your own teacher": the first command in backquotes."""
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Bring your own teacher", 1)[1]
    step = next(line for line in section.splitlines() if line.startswith("1. Export it:"))
    return step.split("`")[1]


def test_the_readmes_export_command_writes_a_package_and_its_sidecar(
        tmp_path: pathlib.Path) -> None:
    command = readme_export_command()
    # The README's command as written, with a small model of this folder (on PYTHONPATH), a
    # small input and an output in tmp_path: each substitution must find its text.
    for old, new in (("--model resnet18", "--model test_export:small_cnn"),
                     ("--input-shape 3,224,224", "--input-shape 3,16,16"),
                     ("--out teacher.pt2", f"--out {tmp_path / 'teacher.pt2'}")):
        assert old in command, f"the README's export command no longer says {old!r}: {command}"
        command = command.replace(old, new)
    done = subprocess.run(shlex.split(command), cwd=REPO, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    printed = json.loads(done.stdout.strip().splitlines()[-1])
    assert printed["package"] == str(tmp_path / "teacher.pt2")
    assert (tmp_path / "teacher.pt2").stat().st_size > 0
    sidecar = json.loads((tmp_path / "teacher.pt2.json").read_text())
    assert sidecar["input_shape"] == [3, 16, 16]
    assert sidecar["num_classes"] == 5
    assert sidecar["device"] == "cpu"
