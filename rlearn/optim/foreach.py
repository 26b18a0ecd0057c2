"""Multi-tensor ("foreach") kernels: the private ``torch._foreach_*`` ops do one operation over a list of tensors
in one dispatch. A torch release may rename or change them, so :func:`available` compares each bit for bit with
the public per-tensor loop once per process; if anything is missing, raises or differs, the loops run instead.
"""

from __future__ import annotations

import functools
from typing import List, Sequence

import torch

__all__ = ["available", "lerp_", "copy_", "norms", "mul_"]

_NAMES = ("_foreach_lerp_", "_foreach_copy_", "_foreach_norm", "_foreach_mul_")


@functools.lru_cache(maxsize=None)
def available() -> bool:
    """Once per process: do the private foreach kernels exist and equal the public loops bit for bit?"""
    if not all(hasattr(torch, name) for name in _NAMES):
        return False
    try:
        gen = torch.Generator().manual_seed(0)
        shapes = [(64, 4), (64,), (3, 64, 5), (1,)]
        a = [torch.randn(shape, generator=gen) for shape in shapes]
        b = [torch.randn(shape, generator=gen) for shape in shapes]

        def same(xs: Sequence[torch.Tensor], ys: Sequence[torch.Tensor]) -> bool:
            return len(xs) == len(ys) and all(torch.equal(x, y) for x, y in zip(xs, ys))

        fast = [t.clone() for t in a]
        torch._foreach_lerp_(fast, b, 0.005)
        ok = same(fast, [t.clone().lerp_(s, 0.005) for t, s in zip(a, b)])
        torch._foreach_copy_(fast, a)
        ok = ok and same(fast, a)
        ok = ok and same(torch._foreach_norm(a, 2.0), [torch.linalg.vector_norm(t, 2.0) for t in a])
        factor = torch.tensor(0.37)
        torch._foreach_mul_(fast, factor)
        return ok and same(fast, [t.clone().mul_(factor) for t in a])
    except Exception:  # any failure of the private path means: use the public loops
        return False


def lerp_(targets: Sequence[torch.Tensor], sources: Sequence[torch.Tensor], weight: float) -> None:
    """``target.lerp_(source, weight)`` for every pair, in place."""
    if available():
        torch._foreach_lerp_(list(targets), list(sources), weight)
        return
    for target, source in zip(targets, sources):
        target.lerp_(source, weight)


def copy_(targets: Sequence[torch.Tensor], sources: Sequence[torch.Tensor]) -> None:
    """``target.copy_(source)`` for every pair, in place."""
    if available():
        torch._foreach_copy_(list(targets), list(sources))
        return
    for target, source in zip(targets, sources):
        target.copy_(source)


def norms(tensors: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """The L2 norm of every tensor (0-d tensors, on the tensors' device)."""
    if available():
        return list(torch._foreach_norm(list(tensors), 2.0))
    return [torch.linalg.vector_norm(t, 2.0) for t in tensors]


def mul_(tensors: Sequence[torch.Tensor], factor: torch.Tensor) -> None:
    """``tensor.mul_(factor)`` for every tensor, in place (``factor`` a 0-d tensor)."""
    if available():
        torch._foreach_mul_(list(tensors), factor)
        return
    for tensor in tensors:
        tensor.mul_(factor)
