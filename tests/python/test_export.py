"""The export helper's CPU layout: a convolutional teacher is exported channels-last (the
package itself is compiled and checked by the C++ tests' fixtures, tests/trainer)."""
from __future__ import annotations

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
