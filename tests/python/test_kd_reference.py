"""The PyTorch references of the KD benchmarks (bench/trainer/kd_reference.py): the class-token
last block that gives them retort's work (--last-block class-token) computes the same logits and
gradients as timm's every-token last block."""
from __future__ import annotations

import pathlib
import sys

import torch

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "bench" / "trainer"))
import kd_reference  # noqa: E402


def test_the_class_token_last_block_computes_what_the_full_block_does() -> None:
    torch.manual_seed(0)
    full = kd_reference.make_vit("fm-student", "full")
    cls = kd_reference.make_vit("fm-student", "class-token")
    cls.load_state_dict(full.state_dict())
    x = torch.randn(5, 1, 28, 28)
    out_full, out_cls = full(x), cls(x)
    torch.testing.assert_close(out_cls, out_full, rtol=1e-5, atol=1e-5)
    out_full.square().sum().backward()
    out_cls.square().sum().backward()
    grads = dict(cls.named_parameters())
    for name, p in full.named_parameters():
        assert grads[name].grad is not None, name
        # Float reassociation only (the class-token block sums fewer terms): within 1e-5 of
        # the gradient's largest element (seen: 7e-7).
        worst = (grads[name].grad - p.grad).abs().max().item()
        assert worst <= 1e-5 * p.grad.abs().max().item(), (name, worst)


def test_the_reference_defaults_to_equal_work() -> None:
    assert kd_reference.LAST_BLOCKS[0] == "class-token"
    assert kd_reference.make_vit("fm-student", "class-token").class_token_last_block
    assert not kd_reference.make_vit("fm-student").class_token_last_block
