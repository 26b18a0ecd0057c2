"""Shared helpers of the fault tests: real checkpoint files and a bit-exact comparison of their content."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rlearn.checkpoint import files as ckpt
from rlearn.fileio import atomic_write_bytes


def checkpoint_dict(train_iter: int, seed: int = 0) -> dict:
    """A checkpoint as the learner writes one: every required section, networks and Adam moments
    (tensors), numpy arrays and a deque in a registered state, RNG states."""
    generator = torch.Generator().manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    with torch.no_grad():
        for parameter in net.parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator))
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-3)
    net(torch.randn(8, 4, generator=generator)).square().mean().backward()
    optimizer.step()
    rng = np.random.default_rng(seed)
    return {
        "format": ckpt.FORMAT_TAG,
        "format_version": ckpt.FORMAT_VERSION,
        "rlearn_version": "test",
        "policy_class": "TinyPolicy",
        "train_iter": train_iter,
        "envstep": train_iter * 8,
        "learner": {"monitor": {"loss": collections.deque([0.5, 0.25], maxlen=20)}, "tb_points": {"a/b": [train_iter, 1]}},
        "policy": {"modules": {"net": net.state_dict()}, "optimizers": {"opt": optimizer.state_dict()}},
        "hooks": {"LogShowHook": {"logs": train_iter // 5}},
        "states": {"buffer": {"obs": rng.standard_normal((32, 4)).astype(np.float32), "size": np.int64(32)}},
        "rng": ckpt.capture_rng_state(),
        "config": {"exp_name": "faults", "seed": seed},
    }


def write_checkpoint(path: Path, train_iter: int, seed: int = 0) -> Path:
    """Write a real checkpoint of iteration ``train_iter`` to ``path`` (as the learner does)."""
    return atomic_write_bytes(path, ckpt.serialize_checkpoint(checkpoint_dict(train_iter, seed)))


def same(a: Any, b: Any) -> bool:
    """Bit-exact equality of decoded checkpoint content (tensors and arrays compared byte for byte)."""
    if isinstance(a, torch.Tensor):
        return (
            isinstance(b, torch.Tensor)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and a.contiguous().view(-1).view(torch.uint8).tolist() == b.contiguous().view(-1).view(torch.uint8).tolist()
        )
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, collections.deque) and (not isinstance(b, collections.deque) or a.maxlen != b.maxlen):
        return False
    if isinstance(a, (list, tuple, collections.deque)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and a != a:
        return isinstance(b, float) and b != b
    return type(a) is type(b) and a == b
